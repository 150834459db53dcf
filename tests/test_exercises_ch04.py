"""Checkers of chapter 4: the reference solutions pass, typical wrong answers get their own hint, and what the
tasks forbid is refused. Every wrong answer here is written out by hand, independently of the checker code."""
from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F
from torch import nn

from attnbook.exercises import check

# ---------------------------------------------------------------------------------------------------------
# 4.1 LayerNorm from scratch
# ---------------------------------------------------------------------------------------------------------


def test_4_1_reference_passes(solutions):
    result = check("4.1", solutions(4)["layer_norm"])
    assert result.passed, result.message


def test_4_1_other_correct_answers_pass():
    def with_var_mean(x, gamma, beta, eps=1e-5):
        var, mean = torch.var_mean(x, dim=-1, keepdim=True, unbiased=False)
        return (x - mean) * torch.rsqrt(var + eps) * gamma + beta

    def with_moments(x, gamma, beta, eps=1e-5):  # E[x^2] - E[x]^2: fine for these inputs
        mean = x.mean(-1, keepdim=True)
        var = (x * x).mean(-1, keepdim=True) - mean ** 2
        return gamma * (x - mean) / (var + eps) ** 0.5 + beta

    assert check("4.1", with_var_mean).passed
    assert check("4.1", with_moments).passed


def make_layer_norm(var="biased", dims=-1, eps_where="inside", fixed_eps=None, affine="both", keepdim=True,
                    centre=True, power=0.5):
    """A layer_norm with one deliberate mistake (the defaults give a correct one)."""

    def layer_norm(x, gamma, beta, eps=1e-5):
        eps = fixed_eps if fixed_eps is not None else eps
        mean = x.mean(dim=dims, keepdim=keepdim)
        v = x.var(dim=dims, keepdim=keepdim, unbiased=(var == "unbiased"))
        num = x - mean if centre else x
        if eps_where == "inside":
            x_hat = num / (v + eps) ** power
        elif eps_where == "outside":
            x_hat = num / (v ** 0.5 + eps)
        else:  # no eps at all
            x_hat = num / v ** 0.5
        return {"both": x_hat * gamma + beta, "none": x_hat, "no_gamma": x_hat + beta, "no_beta": x_hat * gamma,
                "swapped": x_hat * beta + gamma}[affine]

    return layer_norm


def test_4_1_the_correct_variant_passes():
    assert check("4.1", make_layer_norm()).passed


@pytest.mark.parametrize("kwargs, hint", [
    ({"var": "unbiased"}, "unbiased variance"),
    ({"dims": 0}, "normalised over the wrong dimension (dim=0 here)"),
    ({"dims": 1}, "normalised over the wrong dimension (dim=1 here, the positions)"),
    ({"dims": None}, "normalised over all dimensions at once"),
    ({"eps_where": "outside"}, "eps goes inside the square root"),
    ({"eps_where": "none"}, "you left out eps"),
    ({"fixed_eps": 1e-5}, "use the eps argument"),
    ({"affine": "none"}, "forgot gamma and beta"),
    ({"affine": "no_gamma"}, "forgot to multiply by gamma"),
    ({"affine": "no_beta"}, "forgot to add beta"),
    ({"affine": "swapped"}, "gamma and beta are swapped"),
    ({"keepdim": False}, "keepdim=True"),
    ({"centre": False}, "subtract the mean"),
    ({"power": 1.0}, "not by the variance"),
], ids=lambda x: str(x) if isinstance(x, dict) else "")
def test_4_1_wrong_answers_get_hints(kwargs, hint):
    if kwargs.get("dims", -1) is None:  # x.mean(dim=None) reduces everything; var needs the dims spelled out
        def layer_norm(x, gamma, beta, eps=1e-5):
            mean, var = x.mean(), x.var(unbiased=False)
            return (x - mean) / torch.sqrt(var + eps) * gamma + beta
        answer = layer_norm
    else:
        answer = make_layer_norm(**kwargs)
    result = check("4.1", answer)
    assert not result.passed, kwargs
    assert hint in result.message, (kwargs, result.message)


def test_4_1_std_plus_eps_gets_its_own_hint():
    def layer_norm(x, gamma, beta, eps=1e-5):
        return (x - x.mean(-1, keepdim=True)) / (x.std(-1, keepdim=True) + eps) * gamma + beta

    result = check("4.1", layer_norm)
    assert not result.passed and "unbiased standard deviation plus eps" in result.message, result.message


def test_4_1_messages_name_the_input_and_the_section():
    result = check("4.1", make_layer_norm(eps_where="outside"))
    assert "x of shape (4, 6)" in result.message and 'Re-read "Normalise each token over its features"' in (
        result.message)
    result = check("4.1", make_layer_norm(fixed_eps=1e-5))
    assert "eps=0.1" in result.message, result.message


def test_4_1_a_float32_result_for_float64_input_gets_a_dtype_message():
    def layer_norm(x, gamma, beta, eps=1e-5):
        return make_layer_norm()(x.float(), gamma.float(), beta.float(), eps)

    result = check("4.1", layer_norm)
    assert not result.passed and "dtype torch.float32" in result.message, result.message


@pytest.mark.parametrize("shortcut", [
    lambda x, gamma, beta, eps=1e-5: F.layer_norm(x, x.shape[-1:], gamma, beta, eps),
    lambda x, gamma, beta, eps=1e-5: torch.layer_norm(x, x.shape[-1:], gamma, beta, eps),
    lambda x, gamma, beta, eps=1e-5: nn.LayerNorm(x.shape[-1], eps=eps).to(x.dtype)(x) * gamma + beta,
])
def test_4_1_library_layer_norms_are_refused(shortcut):
    result = check("4.1", shortcut)
    assert not result.passed and "the task asks you to write this without" in result.message, result.message


def test_4_1_package_layer_norm_is_refused():
    def layer_norm(x, gamma, beta, eps=1e-5):
        from attnbook.layers import LayerNorm

        return LayerNorm(x.shape[-1], eps).to(x.dtype)(x) * gamma + beta

    result = check("4.1", layer_norm)
    assert not result.passed and "without attnbook.layers.LayerNorm" in result.message, result.message


def test_4_1_in_place_change_is_reported():
    def layer_norm(x, gamma, beta, eps=1e-5):
        x -= x.mean(-1, keepdim=True)
        return x / torch.sqrt((x ** 2).mean(-1, keepdim=True) + eps) * gamma + beta

    result = check("4.1", layer_norm)
    assert not result.passed and "in place" in result.message


def test_4_1_not_attempted():
    def layer_norm(x, gamma, beta, eps=1e-5):
        raise NotImplementedError

    assert check("4.1", layer_norm).status == "not attempted"


# ---------------------------------------------------------------------------------------------------------
# 4.2 feed-forward network
# ---------------------------------------------------------------------------------------------------------


def test_4_2_reference_passes(solutions):
    result = check("4.2", solutions(4)["feed_forward"])
    assert result.passed, result.message


def test_4_2_other_correct_answers_pass():
    assert check("4.2", lambda x, W1, b1, W2, b2: (x @ W1 + b1).clamp(min=0) @ W2 + b2).passed
    assert check("4.2", lambda x, W1, b1, W2, b2: torch.matmul(F.relu(torch.matmul(x, W1) + b1), W2) + b2).passed


@pytest.mark.parametrize("answer, hint", [
    (lambda x, W1, b1, W2, b2: F.gelu(x @ W1 + b1) @ W2 + b2, "that is GELU"),
    (lambda x, W1, b1, W2, b2: F.gelu(x @ W1 + b1, approximate="tanh") @ W2 + b2, "tanh approximation of GELU"),
    (lambda x, W1, b1, W2, b2: torch.relu(torch.relu(x @ W1 + b1) @ W2 + b2), "no activation after it"),
    (lambda x, W1, b1, W2, b2: (x @ W1 + b1) @ W2 + b2, "left out the activation"),
    (lambda x, W1, b1, W2, b2: torch.relu(x @ W1) @ W2 + b2, "forgot the first bias"),
    (lambda x, W1, b1, W2, b2: torch.relu(x @ W1 + b1) @ W2, "forgot the second bias"),
    (lambda x, W1, b1, W2, b2: torch.relu(x @ W1) @ W2, "forgot both biases"),
    (lambda x, W1, b1, W2, b2: (torch.relu(x @ W1) + b1) @ W2 + b2, "add b1 before the ReLU"),
    (lambda x, W1, b1, W2, b2: torch.relu(x @ W1.T + b1) @ W2.T + b2, "no transpose is needed"),
])
def test_4_2_wrong_answers_get_hints(answer, hint):
    result = check("4.2", answer)
    assert not result.passed
    assert hint in result.message, result.message


def test_4_2_transpose_is_named_where_it_runs():
    def transposed_if_square(x, W1, b1, W2, b2):
        if W1.shape[0] != W1.shape[1]:
            return torch.relu(x @ W1 + b1) @ W2 + b2
        return torch.relu(x @ W1.T + b1) @ W2 + b2

    result = check("4.2", transposed_if_square)
    assert not result.passed and "square weights" in result.message and "you transposed W1" in result.message


@pytest.mark.parametrize("answer", [
    lambda x, W1, b1, W2, b2: F.linear(torch.relu(F.linear(x, W1.T, b1)), W2.T, b2),
    lambda x, W1, b1, W2, b2: nn.Linear(W1.shape[0], W1.shape[1])(x),
])
def test_4_2_linear_layers_are_refused(answer):
    result = check("4.2", answer)
    assert not result.passed and "the task asks you to write this without" in result.message, result.message


def test_4_2_package_feed_forward_is_refused():
    def feed_forward(x, W1, b1, W2, b2):
        from attnbook.layers import FeedForward

        return FeedForward(W1.shape[0], W1.shape[1]).to(x.dtype)(x)

    result = check("4.2", feed_forward)
    assert not result.passed and "without attnbook.layers.FeedForward" in result.message


# ---------------------------------------------------------------------------------------------------------
# 4.3 pre-norm block
# ---------------------------------------------------------------------------------------------------------


def test_4_3_reference_passes(solutions):
    result = check("4.3", solutions(4)["pre_norm_block"])
    assert result.passed, result.message


def stale_norm_input(x, attn, ffn, norm1, norm2):
    h = x + attn(norm1(x))
    return h + ffn(norm2(x))


def residual_from_x(x, attn, ffn, norm1, norm2):
    h = x + attn(norm1(x))
    return x + ffn(norm2(h))


def post_norm(x, attn, ffn, norm1, norm2):
    h = norm1(x + attn(x))
    return norm2(h + ffn(h))


def no_first_residual(x, attn, ffn, norm1, norm2):
    h = attn(norm1(x))
    return h + ffn(norm2(h))


def no_second_residual(x, attn, ffn, norm1, norm2):
    h = x + attn(norm1(x))
    return ffn(norm2(h))


def norm_on_outputs(x, attn, ffn, norm1, norm2):
    h = x + norm1(attn(x))
    return h + norm2(ffn(h))


def normalised_residual(x, attn, ffn, norm1, norm2):
    x = norm1(x)
    h = x + attn(x)
    h = norm2(h)
    return h + ffn(h)


def norm1_twice(x, attn, ffn, norm1, norm2):
    h = x + attn(norm1(x))
    return h + ffn(norm1(h))


def norms_swapped(x, attn, ffn, norm1, norm2):
    h = x + attn(norm2(x))
    return h + ffn(norm1(h))


def ffn_first(x, attn, ffn, norm1, norm2):
    h = x + ffn(norm1(x))
    return h + attn(norm2(h))


def attention_only(x, attn, ffn, norm1, norm2):
    return x + attn(norm1(x))


@pytest.mark.parametrize("answer, hint", [
    (stale_norm_input, "reads the block's input x instead of h"),
    (residual_from_x, "second residual starts from x instead of h"),
    (post_norm, "that is a post-norm block"),
    (no_first_residual, "forgot the first residual connection"),
    (no_second_residual, "forgot the second residual connection"),
    (norm_on_outputs, "applied the norms to the sublayer outputs"),
    (normalised_residual, "the residual must carry the un-normalised x and h"),
    (norm1_twice, "you used norm1 twice"),
    (norms_swapped, "norm1 and norm2 are swapped"),
    (ffn_first, "the sublayers come in the other order"),
    (attention_only, "you stopped after the attention sublayer"),
], ids=lambda x: getattr(x, "__name__", ""))
def test_4_3_wrong_answers_get_hints(answer, hint):
    result = check("4.3", answer)
    assert not result.passed, answer.__name__
    assert hint in result.message, (answer.__name__, result.message)
    assert "(2, 5, 8)" in result.message  # each mistake is named on the first input


def test_4_3_calling_attn_with_three_tensors_gets_a_hint():
    def pre_norm_block(x, attn, ffn, norm1, norm2):
        y = norm1(x)
        h = x + attn(y, y, y)
        return h + ffn(norm2(h))

    result = check("4.3", pre_norm_block)
    assert not result.passed and "takes one tensor" in result.message, result.message


def test_4_3_encoder_block_is_refused():
    def pre_norm_block(x, attn, ffn, norm1, norm2):
        from attnbook.layers import EncoderBlock

        return EncoderBlock(x.shape[-1], 1, 4, norm_first=True).to(x.dtype)(x)

    result = check("4.3", pre_norm_block)
    assert not result.passed and "without attnbook.layers.EncoderBlock" in result.message, result.message


def test_4_3_in_place_residual_is_reported():
    def pre_norm_block(x, attn, ffn, norm1, norm2):
        x += attn(norm1(x))  # changes the caller's tensor
        return x + ffn(norm2(x))

    result = check("4.3", pre_norm_block)
    assert not result.passed and "in place" in result.message


# ---------------------------------------------------------------------------------------------------------
# 4.4 parameter count
# ---------------------------------------------------------------------------------------------------------


def test_4_4_reference_passes(solutions):
    result = check("4.4", solutions(4)["encoder_param_count"])
    assert result.passed, result.message
    assert "108,094,464" in result.message


def count(V, d, h, f, L, *, attn_bias=True, ffn_bias=True, norms=2, norm_size=2, matrices=4, heads_times=False,
          positions=0, d_ff=None, embedding=True, per_layer=True):
    """A parameter count with deliberate mistakes (the defaults give the right count)."""
    f = f if d_ff is None else d_ff(d)
    attention = matrices * (d * d + (d if attn_bias else 0)) * (h if heads_times else 1)
    ffn = 2 * d * f + ((f + d) if ffn_bias else 0)
    block = attention + ffn + norms * norm_size * d
    return (V * d if embedding else 0) + (L if per_layer else 1) * block + positions * d


@pytest.mark.parametrize("kwargs, hint", [
    ({"attn_bias": False, "ffn_bias": False}, "you left out the biases"),
    ({"attn_bias": False}, "either the attention biases are missing"),
    ({"ffn_bias": False}, "left out the feed-forward biases"),
    ({"norms": 0}, "or the LayerNorms are"),
    ({"norms": 1}, "each block has two LayerNorms"),
    ({"norm_size": 1}, "each block has two LayerNorms"),
    ({"matrices": 3}, "attention has four matrices"),
    ({"heads_times": True}, "the number of heads does not multiply the count"),
    ({"positions": 512}, "sinusoidal positions"),
    ({"d_ff": lambda d: 4 * d}, "use the d_ff argument"),
    ({"embedding": False}, "left out the token embedding"),
    ({"per_layer": False}, "multiply the per-block count by n_layers"),
], ids=lambda x: str(x) if isinstance(x, dict) else "")
def test_4_4_wrong_answers_get_hints(kwargs, hint):
    result = check("4.4", lambda V, d, h, f, L: count(V, d, h, f, L, **kwargs))
    assert not result.passed, kwargs
    assert hint in result.message, (kwargs, result.message)


def test_4_4_weights_only_gets_a_hint():
    result = check("4.4", lambda V, d, h, f, L: V * d + L * (4 * d * d + 2 * d * f))
    assert not result.passed and "you counted only the weight matrices" in result.message, result.message


def test_4_4_bert_count_and_an_output_layer_get_hints():
    def bert_like(V, d, h, f, L):
        return count(V, d, h, f, L) + 512 * d + 2 * d + 2 * d + d * d + d

    def with_head(V, d, h, f, L):
        return count(V, d, h, f, L) + V * d

    assert "close to BERT's count" in check("4.4", bert_like).message
    assert "no output layer" in check("4.4", with_head).message


@pytest.mark.parametrize("answer", [lambda *args: 110_100_000, lambda *args: 110_000_000])
def test_4_4_the_tutorials_number_gets_its_hint(answer):
    result = check("4.4", answer)
    assert not result.passed and "110.1M is the popular tutorial's number" in result.message, result.message


def test_4_4_a_float_gets_a_type_hint():
    result = check("4.4", lambda V, d, h, f, L: float(count(V, d, h, f, L)))
    assert not result.passed and "whole number" in result.message


def test_4_4_numpy_integers_are_accepted():
    import numpy as np

    assert check("4.4", lambda V, d, h, f, L: np.int64(count(V, d, h, f, L))).passed


def test_4_4_counting_a_built_model_is_refused():
    def by_building(V, d, h, f, L):
        layer = nn.TransformerEncoderLayer(d, h, f)
        return V * d + L * sum(p.numel() for p in layer.parameters())

    def by_package(V, d, h, f, L):
        from attnbook.models.params import encoder_param_count

        return encoder_param_count(V, d, h, f, L)

    for answer in (by_building, by_package):
        result = check("4.4", answer)
        assert not result.passed and "the task asks you to write this without" in result.message, result.message
    assert sum(p.numel() for p in nn.Linear(2, 2).parameters()) == 6  # parameters() is restored afterwards


def test_4_4_messages_give_the_configuration():
    result = check("4.4", lambda V, d, h, f, L: count(V, d, h, f, L, matrices=3))
    assert "encoder_param_count(100, 8, 2, 20, 3)" in result.message
    assert 'Re-read "The whole encoder"' in result.message


def test_4_3_normalised_first_residual_gets_its_hint():
    def pre_norm_block(x, attn, ffn, norm1, norm2):
        x = norm1(x)              # overwrites x, so the residual carries the normalised input
        h = x + attn(x)
        return h + ffn(norm2(h))

    result = check("4.3", pre_norm_block)
    assert not result.passed and "the residual must carry the un-normalised x:" in result.message, result.message


def test_4_3_indexing_the_attention_output_gets_a_hint():
    def pre_norm_block(x, attn, ffn, norm1, norm2):
        h = x + attn(norm1(x))[0]  # as if attn returned (output, weights): takes batch element 0 instead
        return h + ffn(norm2(h))

    result = check("4.3", pre_norm_block)
    assert not result.passed and "without [0]" in result.message, result.message
