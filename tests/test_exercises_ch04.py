"""Checkers of chapter 4, what the mutant catalogue (tests/mutants/ch04.py, the home of "this answer gets this
verdict and hint") cannot say: the notebook's reference solutions pass, messages name the input and the section
to re-read, print enough digits, and show neither solution code, another exercise's wording nor the expected
count, every built-in normalisation and every counting helper or built model (lists too long for the catalogue)
is refused by name and leaves the package working, a renamed eps is told how the check passes it (its Chinese
message keeps the signature as code, which the catalogue's check of Chinese messages reads as English), the tasks
say what they forbid, and 4.4's drawn configuration varies with the seed. Answers come from the catalogue's
learner templates (ln, ff, pnb) or are written out here, independently of the checkers."""
from __future__ import annotations

import re

import nbformat
import pytest
import torch
import torch.nn.functional as F
from conftest import chapter_path
from seed_offsets import OFFSETS, catalogue_over_offsets
from torch import nn

from attnbook.exercises import check, compare
from mutants.ch04 import ff, ln, pnb


@pytest.mark.parametrize("exercise_id, name", [("4.1", "layer_norm"), ("4.2", "feed_forward"),
                                               ("4.3", "pre_norm_block"), ("4.4", "encoder_param_count")])
def test_reference_passes(solutions, exercise_id, name):
    result = check(exercise_id, solutions(4)[name])
    assert result.passed, result.message
    assert exercise_id != "4.4" or "108,094,464" in result.message


def test_the_tasks_say_what_they_forbid():  # F1, F2, F3
    nb = nbformat.read(chapter_path(4), as_version=4)
    task = {n: next(c.source for c in nb.cells if f":label: ex-4-{n}" in c.source) for n in (1, 4)}
    assert "no built-in normalisation routine" in task[1] and "a NumPy integer is fine too" in task[4]
    for helper in ("count_parameters", "mha_param_count", "ffn_param_count", "layer_norm_param_count",
                   "encoder_block_param_count", "encoder_param_count", "bert_param_count", "gpt_param_count"):
        assert f"`{helper}`" in task[4], helper


def test_4_3_the_chapter_does_not_show_the_solution_before_the_exercise():  # D1
    for cell in nbformat.read(chapter_path(4), as_version=4).cells:
        if "solution" not in cell.metadata.get("tags", []):
            for text in [cell.source] + [str(o.get("text", "")) + str(o.get("data", {}).get("text/plain", ""))
                                         for o in cell.get("outputs", [])]:
                assert "h + ffn(norm2(h))" not in text and "+ pre.ffn(pre.norm2(" not in text, text


# ---------------------------------------------------------------------------------------------------------
# What messages say, and what they do not: the input, the section, enough digits; no solution code, no other
# exercise's wording, no expected count
# ---------------------------------------------------------------------------------------------------------


def test_4_1_messages_name_the_input_and_the_section_with_a_full_stop_before_the_hint():  # E5, E6
    message = check("4.1", ln(eps_at="outside")).message
    assert "x of shape (4, 6)" in message and "(6,)). Hint: eps goes inside" in message, message
    assert 'Re-read "Normalise each token over its features"' in message, message
    assert "eps=0.1" in check("4.1", ln(fixed_eps=1e-5)).message
    result = check("Exercise 4.1", ln())
    assert result.passed and result.exercise_id == "4.1" and "Exercise Exercise" not in str(result)


def test_4_1_a_renamed_eps_is_told_that_eps_is_passed_by_name():  # C4
    result = check("4.1", lambda x, gamma, beta, epsilon=1e-5: ln()(x, gamma, beta, epsilon))
    assert not result.passed and "the check passes eps by name, eps=0.1" in result.message, result.message


def test_4_1_a_single_token_bug_is_not_blamed_on_eps():  # the eps diagnosis asks on the failing input's shape
    def layer_norm(x, gamma, beta, eps=1e-5):
        rows = x.reshape(-1, x.shape[-1]) if x.dim() == 1 else x  # a (d,) token comes back as (1, d)
        return ln()(rows, gamma, beta, eps)

    message = check("4.1", layer_norm).message
    assert "x of shape (8,)" in message and "eps" not in message.split("Hint:")[-1], message


def test_close_wrong_values_print_different_numbers():  # E1 (the core prints enough digits)
    for exercise_id, answer in [
        ("4.1", lambda x, gamma, beta, eps=1e-5: (x - x.mean(-1, keepdim=True) + eps) / torch.sqrt(
            x.var(-1, keepdim=True, unbiased=False) + eps) * gamma + beta),
        ("4.2", ff(act=lambda z: F.leaky_relu(z, 1e-6))),
    ]:
        message = check(exercise_id, answer).message
        found = re.search(r"expected (\S+), got ([-+.e\d]+?)\.?[ (]", message)
        assert found and found.group(1) != found.group(2), message


def test_4_1_messages_show_no_solution_code():
    for answer in (ln(var="unbiased"), ln(affine="no gamma"),
                   lambda x, gamma, beta, eps=1e-5: F.layer_norm(x, x.shape[-1:], gamma, beta, eps)):
        message = check("4.1", answer).message
        for code in ("unbiased=False", "(x - mean) / sqrt(var + eps) * gamma + beta", "x_hat * gamma + beta"):
            assert code not in message, message


def test_4_2_messages_show_no_solution_code_and_no_layer_norm_wording():  # C5
    message = check("4.2", lambda x, W1, b1, W2, b2: F.linear(x, W1.T, b1)).message
    assert "torch.relu(x @ W1 + b1)" not in message and "@ W2 + b2" not in message, message

    def feed_forward(x, W1, b1, W2, b2):
        W1.mul_(2.0)
        return torch.relu(x @ W1 / 2 + b1) @ W2 + b2

    message = check("4.2", feed_forward).message
    assert "`W1` in place" in message and "x -= m" not in message, message


@pytest.mark.parametrize("answer", [
    pnb(second_reads="x"), pnb(skip2="x"), pnb(norm_at="sum"), pnb(skip1=None), pnb(skip2=None),
    pnb(norm_at="output"), pnb(skip1="normalised", skip2="normalised"), pnb(norms=("norm1", "norm1")),
    pnb(norms=("norm2", "norm1")), pnb(order=("ffn", "attn")), lambda x, attn, ffn, norm1, norm2: x + attn(norm1(x)),
], ids=["stale-input", "residual-from-x", "post-norm", "no-first-residual", "no-second-residual",
        "norm-on-outputs", "normalised-residual", "norm1-twice", "norms-swapped", "ffn-first", "attention-only"])
def test_4_3_mistakes_are_named_on_the_first_input_without_the_solution(answer):  # D1
    message = check("4.3", answer).message
    assert "(2, 5, 8)" in message and "Hint:" in message, message  # each mistake is named on the first input
    assert "x + attn(norm1(x))" not in message and "h + ffn(norm2(h))" not in message, message


def test_4_4_messages_give_the_configuration_and_the_section_but_not_the_right_count():
    def right(V, d, h, f, L):
        return V * d + L * (4 * d * d + 4 * d + 2 * d * f + f + d + 4 * d)

    message = check("4.4", lambda V, d, h, f, L: right(V, d, h, f, L) + 7).message
    assert "encoder_param_count(100, 8, 2, 20, 3)" in message and 'Re-read "The whole encoder"' in message
    count = right(100, 8, 2, 20, 3)
    assert f"{count:,}" not in message and str(count) not in message and "off by" not in message, message


# ---------------------------------------------------------------------------------------------------------
# Refusals: every built-in normalisation (4.1) and every counting helper or built model (4.4), by name, leaving
# the package working
# ---------------------------------------------------------------------------------------------------------


def _rows(x):
    return x.reshape(-1, x.shape[-1])  # (tokens, d)


@pytest.mark.parametrize("shortcut", [  # A1, F1: every built-in normalisation, by every route
    lambda x, g, b, eps=1e-5: torch.ops.aten.layer_norm(x, [x.shape[-1]], g, b, eps),
    lambda x, g, b, eps=1e-5: torch.ops.aten.native_layer_norm(x, [x.shape[-1]], g, b, eps)[0],
    lambda x, g, b, eps=1e-5: torch.native_layer_norm(x, [x.shape[-1]], g, b, eps)[0],
    lambda x, g, b, eps=1e-5: torch._VF.layer_norm(x, [x.shape[-1]], g, b, eps, False),
    lambda x, g, b, eps=1e-5: torch._refs.native_layer_norm(x, [x.shape[-1]], g, b, eps)[0],
    lambda x, g, b, eps=1e-5: torch._refs.nn.functional.layer_norm(x, [x.shape[-1]], g, b, eps),
    lambda x, g, b, eps=1e-5: torch.group_norm(_rows(x), 1, g, b, eps).reshape(x.shape),
    lambda x, g, b, eps=1e-5: torch.ops.aten.group_norm(_rows(x), 1, g, b, eps).reshape(x.shape),
    lambda x, g, b, eps=1e-5: F.group_norm(_rows(x), 1, g, b, eps).reshape(x.shape),
    lambda x, g, b, eps=1e-5: nn.GroupNorm(1, x.shape[-1], eps=eps, affine=False)(_rows(x)).reshape(x.shape) * g + b,
    lambda x, g, b, eps=1e-5: torch.instance_norm(_rows(x)[:, None], None, None, None, None, True, 0.0, eps,
                                                  False).reshape(x.shape) * g + b,
    lambda x, g, b, eps=1e-5: torch.batch_norm(_rows(x).T, None, None, None, None, True, 0.0, eps,
                                               False).T.reshape(x.shape) * g + b,
    lambda x, g, b, eps=1e-5: F.rms_norm(x - x.mean(-1, keepdim=True), x.shape[-1:], g, eps) + b,
    lambda x, g, b, eps=1e-5: torch.rms_norm(x - x.mean(-1, keepdim=True), x.shape[-1:], g, eps) + b,
    lambda x, g, b, eps=1e-5: nn.RMSNorm(x.shape[-1], eps=eps, elementwise_affine=False)(
        x - x.mean(-1, keepdim=True)) * g + b,
    lambda x, g, b, eps=1e-5: F.normalize(x - x.mean(-1, keepdim=True), dim=-1) * x.shape[-1] ** 0.5 * g + b,
])
def test_4_1_every_built_in_normalisation_is_refused(shortcut):
    message = check("4.1", shortcut).message
    assert "the task asks you to write this without" in message and "no built-in normalisation routine" in message


def _with_helpers(V, d, h, f, L):
    from attnbook.models import ffn_param_count, layer_norm_param_count, mha_param_count

    return V * d + L * (mha_param_count(d, h) + ffn_param_count(d, f) + 2 * layer_norm_param_count(d))


def _with_linear(V, d, h, f, L):
    from attnbook.models.params import _linear

    return V * d + L * (4 * _linear(d, d) + _linear(d, f) + _linear(f, d) + 4 * d)


def _by_modules(V, d, h, f, L):
    with torch.device("meta"):
        layer = nn.TransformerEncoderLayer(d, h, f)
    return V * d + L * sum(p.numel() for m in layer.modules() for p in m._parameters.values() if p is not None)


def _by_package_block(V, d, h, f, L):
    from attnbook.layers import EncoderBlock

    with torch.device("meta"):
        block = EncoderBlock(d, h, f)
    return V * d + L * sum(t.numel() for t in block.state_dict().values())


@pytest.mark.parametrize("answer, phrase", [  # A5: the package's helpers and every way of counting a model
    (_with_helpers, "without attnbook.models.params.mha_param_count"),
    (_with_linear, "without attnbook.models.params._linear"),
    (lambda V, d, h, f, L: V * d + L * sum(t.numel() for t in nn.TransformerEncoderLayer(
        d, h, f, device="meta").state_dict().values()), "without building a model"),
    (_by_modules, "without building a model"),
    (_by_package_block, "without building a model"),
    (lambda V, d, h, f, L: V * d + L * (4 * (lambda p: p.weight.numel() + p.bias.numel())(nn.Linear(
        d, d, device="meta")) + 2 * d * f + f + d + 4 * d), "without building a model"),
], ids=["helpers", "_linear", "state_dict", "modules", "package-block", "linear-weights"])
def test_4_4_helpers_and_built_models_are_refused(answer, phrase):
    result = check("4.4", answer)
    assert not result.passed and phrase in result.message, result.message
    from attnbook.models import count_parameters, mha_param_count  # the package still works

    assert count_parameters(nn.Linear(3, 2)) == 8 and mha_param_count(8, 2) == 4 * 72


# ---------------------------------------------------------------------------------------------------------
# Issue 23: 4.4 draws one configuration from the run's seed, so a table of known ones does not pass
# ---------------------------------------------------------------------------------------------------------


def test_4_4_drawn_configuration_varies_and_keeps_the_fixed_ones(monkeypatch):
    from attnbook.exercises.ch04.param_count import encoder_configs

    seen = set()
    for o in OFFSETS:
        monkeypatch.setattr(compare, "SEED_OFFSET", o)
        configs = encoder_configs()
        assert configs[1] == (50257, 12288, 96, 49152, 96) and configs[-1] == (30000, 768, 12, 3072, 12)
        vocab, d, h, d_ff, layers = configs[-2]
        assert 2 <= vocab <= 60000 and d % h == 0 and 1 <= h <= 16 and 1 <= d_ff <= 4096 and 1 <= layers <= 48
        seen.add(configs[-2])
    assert len(seen) == len(OFFSETS)


def test_4_4_drawn_configuration_gives_every_catalogue_entry_its_verdict(monkeypatch):
    catalogue_over_offsets("4.4", OFFSETS[:3], monkeypatch)
