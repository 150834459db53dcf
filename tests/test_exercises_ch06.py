"""Chapter 6 checkers: the book's reference solutions pass; plausible wrong answers fail with the right hint;
the forbidden shortcuts are refused."""
import pytest
import torch
from torch import nn

import attnbook
from attnbook.exercises import check

# ---------------------------------------------------------------------------------------------------------
# 6.1 causal mask
# ---------------------------------------------------------------------------------------------------------


def test_6_1_reference_passes(solutions):
    result = check("6.1", solutions(6)["causal_mask"])
    assert result.passed, result.message


def test_6_1_other_correct_answers_pass():
    def by_arange(n):
        i = torch.arange(n)
        return i[None, :] <= i[:, None]

    def by_loops(n):
        m = torch.zeros(n, n, dtype=torch.bool)
        for i in range(n):
            m[i, : i + 1] = True
        return m

    for answer in (by_arange, by_loops, lambda n: torch.tril(torch.ones(n, n)).bool()):
        result = check("6.1", answer)
        assert result.passed, result.message


@pytest.mark.parametrize(
    "wrong, hint",
    [
        (lambda n: torch.ones(n, n, dtype=torch.bool).triu(1), "inverted"),
        (lambda n: torch.ones(n, n, dtype=torch.bool).tril(-1), "keep the diagonal"),
        (lambda n: torch.ones(n, n, dtype=torch.bool).triu(), "use tril, not triu"),
        (lambda n: torch.ones(n, n).tril(), "call .bool()"),
        (lambda n: torch.zeros(n, n).masked_fill(torch.ones(n, n, dtype=torch.bool).triu(1), float("-inf")),
         "additive form"),
        (lambda n: torch.ones(n, n, dtype=torch.bool), "nothing is masked"),
        (lambda n: torch.ones(n, n, dtype=torch.bool).tril()[None, None], "plain 2-D"),
    ],
    ids=["inverted", "strict-lower", "triu", "float", "additive", "all-true", "4-D"],
)
def test_6_1_wrong_answers_get_hints(wrong, hint):
    result = check("6.1", wrong)
    assert not result.passed
    assert hint in result.message, result.message
    assert '(Re-read "The causal mask".)' in result.message


def test_6_1_wrong_values_name_the_input_and_show_the_matrix():
    def wrong(n):  # right except that the last query may not see the first key
        m = torch.ones(n, n, dtype=torch.bool).tril()
        if n > 2:
            m[-1, 0] = False
        return m

    result = check("6.1", wrong)
    assert not result.passed and "n=4" in result.message and "[1 1 1 1]" in result.message, result.message


@pytest.mark.parametrize("name", ["masks.causal_mask", "transformer"])
def test_6_1_forbidden_shortcuts_are_refused(name):
    if name == "transformer":
        answer = lambda n: nn.Transformer.generate_square_subsequent_mask(n) == 0  # noqa: E731
        forbidden = "torch.nn.Transformer.generate_square_subsequent_mask"
    else:
        answer = lambda n: attnbook.masks.causal_mask(n)  # noqa: E731
        forbidden = "attnbook.masks.causal_mask"
    result = check("6.1", answer)
    assert not result.passed and f"without {forbidden}" in result.message, result.message
    assert check("6.1", attnbook.causal_mask).passed is False  # the function itself, passed directly


# ---------------------------------------------------------------------------------------------------------
# 6.2 padding and causal combined
# ---------------------------------------------------------------------------------------------------------


def test_6_2_reference_passes(solutions):
    result = check("6.2", solutions(6)["decoder_self_mask"])
    assert result.passed, result.message


def make_self_mask(*, causal=True, padding=True, axis="keys", combine="and", head_axis=True, invert=False,
                   off_by_one=False, transpose=False):
    """decoder_self_mask with one deliberate mistake (the defaults give a correct one)."""

    def decoder_self_mask(lengths, n):
        pos = torch.arange(n)
        tri = torch.tril(torch.ones(n, n)).bool()  # (n, n)
        real = (pos[None, :] <= lengths[:, None]) if off_by_one else (pos[None, :] < lengths[:, None])  # (B, n)
        if axis == "keys":
            pad = real[:, None, :].expand(-1, n, -1)  # (B, n_q, n_k): the key axis
        else:
            pad = real[:, :, None].expand(-1, -1, n)  # the query axis
        if not causal:
            mask = pad
        elif not padding:
            mask = tri.expand(len(lengths), n, n)
        else:
            mask = (tri & pad) if combine == "and" else (tri | pad)
        if transpose:
            mask = mask.transpose(-2, -1)
        if invert:
            mask = ~mask
        return mask[:, None] if head_axis else mask

    return decoder_self_mask


def test_6_2_a_correct_variant_passes():
    assert check("6.2", make_self_mask()).passed


@pytest.mark.parametrize(
    "kwargs, hint",
    [
        ({"axis": "queries"}, "padding is on the wrong axis"),
        ({"combine": "or"}, "with AND (&)"),
        ({"head_axis": False}, "add the head axis"),
        ({"causal": False}, "causal part is missing"),
        ({"padding": False}, "padding part is missing"),
        ({"invert": True}, "inverted"),
        ({"off_by_one": True}, "off by one"),
        ({"transpose": True}, "transposed"),
    ],
    ids=lambda x: str(x) if isinstance(x, dict) else "",
)
def test_6_2_wrong_answers_get_hints(kwargs, hint):
    result = check("6.2", make_self_mask(**kwargs))
    assert not result.passed, kwargs
    assert hint in result.message, (kwargs, result.message)
    assert '(Re-read "Padding and causal together".)' in result.message


def test_6_2_returning_one_half_gets_a_shape_hint():
    def only_padding(lengths, n):
        return (torch.arange(n)[None, :] < lengths[:, None])[:, None, None, :]  # (B, 1, 1, n)

    def only_causal(lengths, n):
        return torch.ones(n, n, dtype=torch.bool).tril()

    result = check("6.2", only_padding)
    assert not result.passed and "only the padding part" in result.message, result.message
    result = check("6.2", only_causal)
    assert not result.passed and "only the causal part" in result.message, result.message


def test_6_2_float_mask_and_forbidden_helpers():
    def float_mask(lengths, n):
        return make_self_mask()(lengths, n).float()

    result = check("6.2", float_mask)
    assert not result.passed and "expected torch.bool" in result.message, result.message

    def with_package(lengths, n):
        return attnbook.masks.combine_masks(attnbook.masks.causal_mask(n),
                                            attnbook.masks.padding_mask(lengths, n)[:, None, None, :])

    result = check("6.2", with_package)
    assert not result.passed and "without attnbook.masks." in result.message, result.message


def test_6_2_wrong_values_name_the_sequence():
    def wrong(lengths, n):  # blocks the first key of every sequence
        m = make_self_mask()(lengths, n).clone()
        m[..., 0] = False
        return m

    result = check("6.2", wrong)
    assert not result.passed and "sequence 0 (length 3)" in result.message, result.message


# ---------------------------------------------------------------------------------------------------------
# 6.3 greedy decoding
# ---------------------------------------------------------------------------------------------------------


def test_6_3_reference_passes(solutions):
    result = check("6.3", solutions(6)["greedy_decode"])
    assert result.passed, result.message


def make_greedy(*, eval_mode=True, feed="prediction", pick="argmax", stop="all", fill="pad", bos=True,
                extra=False, memory_mask=True, use_forward=False):
    """A greedy decoder with one deliberate mistake (the defaults give a correct one), written against the
    model's public API like a learner's."""

    def greedy_decode(model, src, max_len, bos_id, eos_id):
        if eval_mode:
            model.eval()
        B = src.size(0)
        src_mask = model.make_src_mask(src) if memory_mask else None
        memory = model.encode(src, model.make_src_mask(src))
        ys = torch.full((B, 1), bos_id, dtype=torch.long)
        finished = torch.zeros(B, dtype=torch.bool)
        for step in range(max_len if extra else max_len - 1):
            inp = ys if feed == "prediction" else ys[:, :1]
            with torch.no_grad():
                logits = model(src, inp) if use_forward else model.decode(inp, memory, src_mask)
            last = logits[:, -1]  # (B, V)
            if pick == "argmax":
                nxt = last.argmax(dim=-1)
            elif pick == "positions":
                nxt = logits.argmax(dim=1)[:, -1]
            else:  # sample
                nxt = torch.multinomial(torch.softmax(last, dim=-1), 1)[:, 0]
            if fill == "pad":
                nxt = torch.where(finished, torch.zeros_like(nxt), nxt)
            elif fill == "eos":
                nxt = torch.where(finished, torch.full_like(nxt, eos_id), nxt)
            ys = torch.cat([ys, nxt[:, None]], dim=1)
            finished = finished | (nxt == eos_id)
            if stop == "all" and finished.all():
                break
            if stop == "any" and finished.any():
                break
        return ys if bos else ys[:, 1:]

    return greedy_decode


def test_6_3_correct_variants_pass():
    assert check("6.3", make_greedy()).passed
    assert check("6.3", make_greedy(use_forward=True)).passed  # model(src, ys) builds the masks itself


@pytest.mark.parametrize(
    "kwargs, hint",
    [
        ({"eval_mode": False}, "call model.eval()"),
        ({"pick": "sample"}, "do not sample"),
        ({"feed": "bos"}, "predicted from BOS alone"),
        ({"pick": "positions"}, "over the vocabulary (dim=-1)"),
        ({"fill": "none"}, "fill its remaining positions with PAD"),
        ({"fill": "eos"}, "not EOS"),
        ({"stop": "any"}, "not as soon as one row has"),
        ({"stop": "never"}, "stop as soon as every row has produced EOS"),
        ({"bos": False}, "start with bos_id"),
        ({"extra": True}, "generate at most max_len - 1 tokens"),
        ({"memory_mask": False}, "source padding"),
    ],
    ids=lambda x: str(x) if isinstance(x, dict) else "",
)
def test_6_3_wrong_answers_get_hints(kwargs, hint):
    result = check("6.3", make_greedy(**kwargs))
    assert not result.passed, kwargs
    assert hint in result.message, (kwargs, result.message)
    assert '(Re-read "Greedy decoding".)' in result.message


def test_6_3_batch_of_one_code_and_teacher_forcing_with_the_source():
    def one_row_at_a_time(model, src, max_len, bos_id, eos_id):  # `if next_id == eos_id` on a whole batch
        model.eval()
        ys = torch.full((src.size(0), 1), bos_id)
        for _ in range(max_len - 1):
            next_id = model(src, ys)[:, -1].argmax(dim=-1)
            ys = torch.cat([ys, next_id[:, None]], dim=1)
            if next_id == eos_id:
                break
        return ys

    result = check("6.3", one_row_at_a_time)
    assert not result.passed and "done.all()" in result.message, result.message

    def source_as_input(model, src, max_len, bos_id, eos_id):  # teacher forcing with the source tokens
        model.eval()
        ys = torch.full((src.size(0), 1), bos_id)
        done = torch.zeros(src.size(0), dtype=torch.bool)
        for t in range(max_len - 1):
            inp = torch.cat([ys[:, :1], src[:, :t]], dim=1)
            next_id = model(src, inp)[:, -1].argmax(dim=-1).masked_fill(done, 0)
            ys = torch.cat([ys, next_id[:, None]], dim=1)
            done = done | (next_id == eos_id)
            if done.all():
                break
        return ys

    result = check("6.3", source_as_input)
    assert not result.passed and "not the source tokens" in result.message, result.message


def test_6_3_float_ids_list_and_forbidden_function():
    def float_ids(model, src, max_len, bos_id, eos_id):
        return make_greedy()(model, src, max_len, bos_id, eos_id).float()

    result = check("6.3", float_ids)
    assert not result.passed and "integer token ids" in result.message, result.message

    result = check("6.3", lambda model, src, max_len, bos_id, eos_id: [[bos_id]])
    assert not result.passed and "expected a (batch, length) tensor" in result.message, result.message

    def with_package(model, src, max_len, bos_id, eos_id):
        return attnbook.models.greedy_decode(model, src, max_len, bos_id, eos_id)

    result = check("6.3", with_package)
    assert not result.passed and "without attnbook.models.transformer.greedy_decode" in result.message, result.message


def test_6_3_cases_show_every_mistake():
    """The checker's model and cases are chosen so that each mistake changes the output somewhere; guard that
    choice against changes in the model or in torch."""
    from attnbook.exercises import ch06

    seen = set()
    for _, src, max_len in ch06._decode_cases():
        model = ch06._fresh_model().eval()
        ref = ch06._greedy(model, src, max_len)
        for hint, wrong in ch06._decode_mistakes(model, src, max_len).items():
            if wrong.shape != ref.shape or not torch.equal(wrong, ref):
                seen.add(hint)
    assert len(seen) == len(ch06._decode_mistakes(model, src, max_len))
    first_src, first_max = ch06._decode_cases()[0][1:]
    ref = ch06._greedy(ch06._fresh_model().eval(), first_src, first_max)
    ends = [(row == 2).nonzero()[0].item() for row in ref]  # every row ends ...
    assert len(set(ends)) > 1 and ref.size(1) < first_max  # ... at different steps, before max_len
    assert 1 not in ref[:, 1:].tolist()  # no BOS generated, like a trained model


# ---------------------------------------------------------------------------------------------------------
# 6.4 converting masks
# ---------------------------------------------------------------------------------------------------------


def test_6_4_reference_passes(solutions):
    result = check("6.4", solutions(6)["to_allow_mask"])
    assert result.passed, result.message


def test_6_4_other_correct_answers_pass():
    def by_equality(mask):
        return mask == 0  # for a bool mask, mask == 0 is ~mask

    def by_where(mask):
        if mask.dtype == torch.bool:
            return mask.logical_not()
        return torch.where(mask < -1.0, False, True)

    for answer in (by_equality, by_where):
        result = check("6.4", answer)
        assert result.passed, result.message


@pytest.mark.parametrize(
    "wrong, hint",
    [
        (lambda m: m if m.dtype == torch.bool else m == 0, "invert a boolean mask"),
        (lambda m: ~m if m.dtype == torch.bool else m != 0, "0 means 'allowed'"),
        (lambda m: ~m if m.dtype == torch.bool else (m == 0).float(), "expected torch.bool"),
        (lambda m: ~m if m.dtype == torch.bool else torch.isfinite(m), "-1e9 or -10000 blocks attention"),
        (lambda m: ~m if m.dtype == torch.bool else m > -1e9, "-1e9 or -10000 blocks attention"),
        (lambda m: ~m, "compare it instead"),
        (lambda m: m > -1e4, "you treated it like an additive mask"),
        (lambda m: ~m if m.dtype == torch.bool else m, "returned the additive mask unchanged"),
    ],
    ids=["bool-not-inverted", "zero-blocked", "float-result", "isfinite", "threshold-1e9", "only-bool",
         "only-additive", "float-unchanged"],
)
def test_6_4_wrong_answers_get_hints(wrong, hint):
    result = check("6.4", wrong)
    assert not result.passed
    assert hint in result.message, result.message
    assert '(Re-read "Three mask conventions".)' in result.message


def test_6_4_shape_change_and_forbidden_function():
    def broadcastable(mask):  # tries to make a key padding mask broadcastable: changes the shape
        allow = ~mask if mask.dtype == torch.bool else mask == 0
        return allow[:, None, None, :] if allow.dim() == 2 else allow

    result = check("6.4", broadcastable)
    assert not result.passed and "keep the shape of the input" in result.message, result.message

    def with_package(mask):
        return attnbook.masks.convert_mask(mask, "block" if mask.dtype == torch.bool else "additive", "allow")

    result = check("6.4", with_package)
    assert not result.passed and "without attnbook.masks.convert_mask" in result.message, result.message


# Learner trial: hints that named the wrong mistake in 6.3


def _loop(feed_last=False, first_position=False, overwrite_eos=False):
    def greedy_decode(model, src, max_len, bos_id, eos_id):
        model.eval()
        m = model.make_src_mask(src)
        mem = model.encode(src, m)
        ys = torch.full((src.size(0), 1), bos_id)
        done = torch.zeros(src.size(0), dtype=torch.bool)
        with torch.no_grad():
            while ys.size(1) < max_len and not done.all():
                logits = model.decode(ys[:, -1:] if feed_last else ys, mem, m)
                nxt = (logits[:, 0] if first_position else logits[:, -1]).argmax(-1)
                if overwrite_eos:
                    done |= nxt == eos_id
                    nxt = torch.where(done, 0, nxt)
                else:
                    nxt = torch.where(done, 0, nxt)
                    done |= nxt == eos_id
                ys = torch.cat([ys, nxt[:, None]], 1)
        return ys
    return greedy_decode


@pytest.mark.parametrize("kwargs, hint", [
    ({"feed_last": True}, "not only the latest token"),
    ({"first_position": True}, "read the LAST position's logits"),
    ({"overwrite_eos": True}, "keep the EOS token itself"),
])
def test_6_3_learner_trial_mistakes_get_their_own_hint(kwargs, hint):
    assert check("6.3", _loop()).passed
    result = check("6.3", _loop(**kwargs))
    assert not result.passed and hint in result.message, result.message
