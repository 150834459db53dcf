"""Checker for exercise 4.4, the encoder's parameter count."""
from __future__ import annotations

import itertools

import torch
from torch import nn

from ..compare import expect_int, generator
from ..guard import call
from ..registry import exercise, Wrong
from ...i18n import N_, _


COUNT_HELPERS = ("count_parameters", "mha_param_count", "ffn_param_count", "layer_norm_param_count",
                 "encoder_block_param_count", "encoder_param_count", "bert_param_count", "gpt_param_count", "_linear")
COUNT_FORBIDDEN = [
    (name, N_("count with a formula, piece by piece: the weights and biases of each piece, from the arguments"))
    for name in (*(f"attnbook.models.params.{helper}" for helper in COUNT_HELPERS),
                 "torch.nn.Module.__init__",  # building any module, which is how a model is counted
                 "torch.nn.Module.parameters", "torch.nn.Module.named_parameters", "torch.nn.Module.state_dict",
                 "torch.nn.Module.modules", "torch.nn.Module.named_modules", "torch.nn.Module.children",
                 "torch.nn.Module.named_children")
]
ARGUMENTS = ("vocab_size", "d_model", "n_heads", "d_ff", "n_layers")


def _reference_count(vocab_size: int, d_model: int, n_heads: int, d_ff: int, n_layers: int) -> int:
    """Count a real stack: nn.Embedding and n_layers nn.TransformerEncoderLayer (on the meta device: no memory)."""
    with torch.device("meta"):
        embedding = nn.Embedding(vocab_size, d_model)
        layer = nn.TransformerEncoderLayer(d_model, n_heads, d_ff, batch_first=True)
    return embedding.weight.numel() + n_layers * sum(p.numel() for p in layer.parameters())


def _formula(V: int, d: int, h: int, f: int, L: int) -> int:
    """The right count, for reading the learner's arguments in another order (see _count_mistakes)."""
    return V * d + L * (4 * d * d + 4 * d + 2 * d * f + f + d + 4 * d)


def _count_mistakes(V: int, d: int, h: int, f: int, L: int) -> dict[str, int]:
    """What common counting mistakes give, keyed by the hint for each (first match wins)."""
    emb, attn, ffn, norms = V * d, 4 * d * d + 4 * d, 2 * d * f + f + d, 4 * d
    block = attn + ffn + norms
    right, dh = emb + L * block, d // h
    heads = (_("; the number of heads does not change the count: the heads are slices of the same four d_model x "
               "d_model projections"))
    ffn_b = N_("the feed-forward biases are d_ff for the first layer and d_model for the second, not 2 * {size}")
    rule = (_("12 * n_layers * d_model^2 is a rule of thumb for large models with d_ff = 4 * d_model: it leaves out "
              "the biases and the LayerNorms. Count each piece exactly, with the d_ff argument"))
    out = _("the encoder has no output layer: count the token embedding once, and no vocab_size x d_model head")
    blocks = {  # what one block counts, for the mistakes inside a block
        _("you left out the biases: every Linear layer from a to b features has a*b weights and b biases"):
            4 * d * d + 2 * d * f + norms,
        _("you counted only the weight matrices: add the biases (one per output feature of every Linear layer) and "
          "the two LayerNorms of each block (d_model scales gamma and d_model shifts beta each)"):
            4 * d * d + 2 * d * f,
        _("your count is 4 * d_model short in every block: either the attention biases are missing (W_q, W_k, W_v "
          "and W_o each have d_model) or the LayerNorms are (two per block, gamma and beta of d_model each)"):
            4 * d * d + ffn + norms,
        _("you left out the feed-forward biases: d_ff for the first layer and d_model for the second"):
            attn + 2 * d * f + norms,
        _(ffn_b, size="d_model"): attn + 2 * d * f + 2 * d + norms,
        _(ffn_b, size="d_ff"): attn + 2 * d * f + 2 * f + norms,
        _("each block has two LayerNorms, each with 2 * d_model parameters (gamma and beta): 4 * d_model per block"):
            attn + ffn + 2 * d,
        _("each block has two LayerNorms, not three: 4 * d_model per block"): attn + ffn + 6 * d,
        _("attention has four matrices, W_q, W_k, W_v and the output projection W_o, each d_model x d_model with "
          "d_model biases"): 3 * d * d + 3 * d + ffn + norms,
        _("you multiplied the attention by n_heads") + heads: h * attn + ffn + norms,
        _("you multiplied W_q, W_k and W_v by n_heads") + heads: h * (3 * d * d + 3 * d) + d * d + d + ffn + norms,
        _("you multiplied the attention weights by n_heads") + heads: 4 * (h * d * d + d) + ffn + norms,
        _("you counted the projections of one head only") + heads: 4 * (d * dh + dh) + ffn + norms,
        _("you counted the weights of one head only") + heads: 4 * (d * dh + d) + ffn + norms,
        _("you counted W_q, W_k and W_v of one head only") + heads: 3 * (d * dh + dh) + d * d + d + ffn + norms,
        _("use the d_ff argument for the feed-forward width, not 4 * d_model"): attn + 8 * d * d + 5 * d + norms,
        _("the feed-forward network has two layers, d_model -> d_ff and d_ff -> d_model"): attn + d * f + f + norms,
        _("the feed-forward network has two layers, d_model -> d_ff and d_ff -> d_model, each with its own weights"):
            attn + d * f + f + d + norms,
        _("W_q, W_k, W_v and W_o each have d_model biases: 4 * d_model attention biases per block, not d_model"):
            4 * d * d + d + ffn + norms,
        _("W_q, W_k, W_v and W_o each have d_model biases, the output projection W_o too"):
            4 * d * d + 3 * d + ffn + norms,
    }
    mistakes = {hint: emb + L * count for hint, count in blocks.items()}
    mistakes.update({
        _("this encoder uses sinusoidal positions, which have no parameters: no learned positions"): right + 512 * d,
        _("that is close to BERT's count: this encoder has no learned positions, token types, embedding LayerNorm "
          "or pooler"): right + 512 * d + 4 * d + d * d + d,
        _("this encoder has no pooler (BERT's d_model x d_model layer with biases on top)"): right + d * d + d,
        _("this encoder has no final LayerNorm (pre-norm models add one after the last block) and no token-type "
          "embeddings: 2 * d_model too many"): right + 2 * d,
        out: right + V * d, out + _(" (nor its vocab_size biases)"): right + V * d + V,
        _("you left out the token embedding"): right - emb,
        _("count the token embedding once, not once per layer"): L * (emb + block),
        _("multiply the per-block count by n_layers: every block has its own weights"): emb + block,
        _("you returned one block's count: the encoder is the token embedding plus n_layers blocks"): block,
        _("count n_layers blocks, not n_layers - 1"): emb + (L - 1) * block,
        rule: emb + 12 * L * d * d, rule + _(", and add the token embedding"): 12 * L * d * d,
        _("use the vocab_size argument: you counted a vocabulary of 30,000 whatever vocab_size is"):
            30000 * d + L * block,
        _("use the n_layers argument: you counted 12 blocks whatever n_layers is"): emb + 12 * block,
        _("you return the chapter encoder's count whatever the arguments: compute it from vocab_size, d_model, d_ff "
          "and n_layers"): 108_094_464,
        _("the count overflowed a 32-bit integer (at most 2,147,483,647): count with Python ints or 64-bit integers, "
          "not np.int32 or torch.int32"): (right + 2**31) % 2**32 - 2**31,
    })
    args = (V, d, h, f, L)
    for order in list(itertools.permutations(range(5)))[1:]:  # the arguments read in another order
        names = [ARGUMENTS[order.index(k)] for k in range(5)]
        mistakes.setdefault(
            _("your count is right for the arguments in another order: the check calls "
              "encoder_param_count({join_arguments}) in this order, and your function reads them as "
              "({join_names})", join_arguments=', '.join(ARGUMENTS), join_names=', '.join(names)),
            _formula(*(args[i] for i in order)))
    return mistakes


def _call_count(encoder_param_count, config: tuple, on: str) -> int:
    try:
        got = call(encoder_param_count, *config, what="encoder_param_count", on=on, forbid=COUNT_FORBIDDEN)
    except Wrong as e:
        if "torch.nn.Module.__init__" in e.message:  # say it in the task's words
            raise Wrong(_("encoder_param_count built a torch.nn.Module on {on}: the task asks you to count with "
                          "a formula, without building a model", on=on), COUNT_FORBIDDEN[0][1]) from None
        raise
    return expect_int(got, what="encoder_param_count", on=on, numpy_ok=True,
                      hint=_("a count is a whole number: use integer arithmetic (// instead of /, no ** 0.5, no 1e6)"))


def encoder_configs() -> list[tuple[int, int, int, int, int]]:
    """(vocab_size, d_model, n_heads, d_ff, n_layers) for 4.4: fixed ones (GPT-3's size among them, the chapter's
    encoder last: the message names its count) and one drawn anew on every run (a table of known ones does not
    do)."""
    g = generator(44)

    def draw(low: int, high: int) -> int:
        return int(torch.randint(low, high + 1, (), generator=g))

    n_heads = draw(1, 16)
    return [
        (100, 8, 2, 20, 3),
        (50257, 12288, 96, 49152, 96),  # GPT-3's size: about 175 billion, beyond a 32-bit integer
        (1000, 16, 4, 40, 1),
        (37, 12, 1, 20, 2),
        (500, 12, 12, 7, 4),
        (draw(2, 60000), n_heads * draw(1, 64), n_heads, draw(1, 4096), draw(1, 48)),
        (30000, 768, 12, 3072, 12),
    ]


@exercise("4.4", "The encoder's parameter count", answer_name="encoder_param_count", section="The whole encoder",
          references=("attnbook.models.params.encoder_param_count",))
def check_encoder_param_count(encoder_param_count) -> str:
    """encoder_param_count(vocab_size, d_model, n_heads, d_ff, n_layers) must equal a real stack's count."""
    configs = encoder_configs()
    answers = []  # (configuration, the learner's count, the right count)
    for config in configs:
        on = ", ".join(f"{name}={value}" for name, value in zip(ARGUMENTS, config))
        try:
            got = _call_count(encoder_param_count, config, on)
        except Wrong:
            if any(g != e for _unused, g, e in answers):  # an earlier configuration was already wrong: report that
                break
            raise
        answers.append((config, got, _reference_count(*config)))
    wrong = [(config, got, expected) for config, got, expected in answers if got != expected]
    if not wrong:
        return (_("right on {len_configs} configurations, including the chapter's encoder "
                  "({reference_count_configs:,} parameters)",
                  len_configs=len(configs), reference_count_configs=_reference_count(*configs[-1])))
    config, got, expected = wrong[0]
    if got in (110_100_000, 110_000_000):
        hint = (_("110.1M is the popular tutorial's number for the big model, not a count of this model's "
                  "parameters: add up the pieces"))
    else:  # a mistake is named only if it explains the count on every configuration tried
        tables = [_count_mistakes(*c) for c, _unused, _unused in answers]
        hint = next((hint for hint in tables[0]
                     if all(t.get(hint) == g for t, (_unused, g, _unused) in zip(tables, answers))),
                    _("count each piece of every block from the arguments: the attention projections, the two "
                      "feed-forward layers and the two LayerNorms, each with its weights and biases"))
    raise Wrong(_("encoder_param_count({join_map_str_config}) returned {got:,}, which is not the number of "
                  "parameters of this encoder", join_map_str_config=', '.join(map(str, config)), got=got), hint)
