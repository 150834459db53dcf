"""Chapter 3 checkers, beyond the mutant catalogue (tests/mutants/ch03.py, the home of every "this answer gets this
verdict and hint" fact): the book's reference solutions pass and agree with PyTorch, stubs are not attempted, and what a
verdict alone cannot say: what messages show (the input, the section to re-read, the route a refusal names) and do not
show (solution code, the expected count, the steps a refused shortcut skips), that every refused shortcut of the
catalogue works outside the check, the inputs the checks use or draw from the run's seed, and the chapter's text.
Answers come from the catalogue (its learner templates sh, mhf, mh, or an entry by name) or are written out here."""
import ast
import math
import re
import warnings

import nbformat
import pytest
import torch
from torch import nn

import mutants
from attnbook.exercises import check, compare
from conftest import chapter_path
from mutants.ch03 import merge_via_as_strided, merge_via_flat_view, mh, mhf, sh
from seed_offsets import OFFSETS, catalogue_over_offsets  # OFFSETS: 200 values of compare.SEED_OFFSET


# ---------------------------------------------------------------------------------------------------------
# Reference solutions and stubs
# ---------------------------------------------------------------------------------------------------------


@pytest.mark.parametrize("exercise_id, name", [("3.1", "split_heads"), ("3.2", "multi_head_forward"),
                                               ("3.3", "mha_param_count"), ("3.4", "merge_heads")])
def test_reference_passes(solutions, exercise_id, name):
    result = check(exercise_id, solutions(3)[name])
    assert result.passed, result.message


def test_stubs_are_not_attempted():
    def stub(*args, **kwargs):
        raise NotImplementedError("replace this line with your code")

    for exercise_id in ("3.1", "3.2", "3.3", "3.4"):
        assert check(exercise_id, stub).status == "not attempted", exercise_id


def test_3_1_reference_matches_explicit_indexing(solutions):
    split_heads = solutions(3)["split_heads"]
    x = torch.randn(2, 5, 12, generator=torch.Generator().manual_seed(0))
    out = split_heads(x, 3)
    for i in range(3):  # head i: features 4 i to 4 i + 3 of every position, in order
        assert torch.equal(out[:, i], x[:, :, 4 * i:4 * i + 4])


def test_3_2_reference_matches_nn_multihead_attention(solutions):
    """The book's answer equals PyTorch's layer (bias=False) with W = the transposed slices of in_proj_weight."""
    multi_head_forward = solutions(3)["multi_head_forward"]
    for d, h, n in [(12, 3, 5), (16, 4, 1), (8, 1, 3), (8, 8, 4)]:
        torch.manual_seed(d + h + n)
        ref = nn.MultiheadAttention(d, h, bias=False, batch_first=True).double().eval()
        x = torch.randn(2, n, d, dtype=torch.float64)
        W_q, W_k, W_v = (w.T for w in ref.in_proj_weight.detach().chunk(3, dim=0))
        W_o = ref.out_proj.weight.detach().T
        with torch.no_grad():
            expected, _ = ref(x, x, x, need_weights=False)
        torch.testing.assert_close(multi_head_forward(x, W_q, W_k, W_v, W_o, h), expected, atol=1e-12, rtol=1e-10)


@pytest.mark.parametrize("d_model, n_heads, bias", [
    (512, 8, True), (768, 12, True), (768, 12, False), (64, 1, True), (1024, 16, False), (6, 3, True), (6, 3, False),
])
def test_3_3_reference_equals_the_parameters_of_nn_multihead_attention(solutions, d_model, n_heads, bias):
    mha_param_count = solutions(3)["mha_param_count"]
    layer = nn.MultiheadAttention(d_model, n_heads, bias=bias)
    assert mha_param_count(d_model, n_heads, bias=bias) == sum(p.numel() for p in layer.parameters())


def test_3_4_reference_inverts_the_reference_split(solutions):
    split_heads, merge_heads = solutions(3)["split_heads"], solutions(3)["merge_heads"]
    for B, n, d, h in [(2, 5, 12, 3), (1, 1, 8, 8), (3, 4, 6, 1)]:
        x = torch.randn(B, n, d, generator=torch.Generator().manual_seed(B + n + d + h))
        assert torch.equal(merge_heads(split_heads(x, h)), x)


# ---------------------------------------------------------------------------------------------------------
# The chapter's text
# ---------------------------------------------------------------------------------------------------------


def _names_loaded(source: str) -> set[str]:
    return {node.id for node in ast.walk(ast.parse(source)) if isinstance(node, ast.Name)}


def test_chapter_cells_do_not_use_the_names_the_exercise_stubs_replace():
    """The chapter calls multihead.split_heads / multihead.merge_heads, so that re-running its cells after the
    exercise stubs (def split_heads: raise NotImplementedError) have run still works; and it does not import the
    bare names, which would let a learner who skips the answer cell check the package's function."""
    nb = nbformat.read(chapter_path(3), as_version=4)
    exercises = next(i for i, c in enumerate(nb.cells)
                     if c.cell_type == "markdown" and c.source.startswith("## Exercises"))
    for i, cell in enumerate(nb.cells[:exercises]):
        if cell.cell_type != "code":
            continue
        source = "\n".join(line[:len(line) - len(line.lstrip())] + "pass" if line.lstrip().startswith(("%", "!"))
                           else line for line in cell.source.splitlines())  # IPython magics: not Python
        assert not {"split_heads", "merge_heads"} & _names_loaded(source), (i, cell.source)
    assert any("multihead.split_heads(" in c.source for c in nb.cells[:exercises])
    assert any("multihead.merge_heads(" in c.source for c in nb.cells[:exercises])


def _task(number):
    nb = nbformat.read(chapter_path(3), as_version=4)
    (task,) = [c.source for c in nb.cells if c.cell_type == "markdown" and f":label: ex-3-{number}" in c.source]
    return task


def test_3_2_task_text_says_the_check_backpropagates():
    task = _task(2)
    assert "backpropagates" in task and "`.detach()`" in task and "scores above 1000" in task


def test_3_3_task_text_says_what_the_check_accepts():
    task = _task(3)
    assert "Return an `int` (a NumPy integer is fine too), not a float or a tensor" in task
    assert "`attnbook.models.params`" in task and "`nn.TransformerEncoderLayer`" in task


# ---------------------------------------------------------------------------------------------------------
# What messages show (the input, the section, the route a refusal names) and do not show (solution code, the
# expected count, the steps a refused shortcut skips)
# ---------------------------------------------------------------------------------------------------------

CATALOGUE = [m for m in mutants.load(3) if m.exercise_id.startswith("3.") and "(generated)" not in m.name]


def entry(exercise_id, name):
    """The catalogue's answer called `name`."""
    (answer,) = [m.answer for m in CATALOGUE if (m.exercise_id, m.name) == (exercise_id, name)]
    return answer


NO_SPLIT_CODE = ("x.view(", ".transpose(1, 2)", "view(B, n, n_heads, d_head)", "View as")


@pytest.mark.parametrize("exercise_id, answer, shown, not_shown", [
    ("3.1", sh(method="view", shape="B, h, n, d_head", move=None),
     ("x of shape (2, 5, 12) with n_heads=3", '(Re-read "Splitting a tensor into heads".)'), NO_SPLIT_CODE),
    ("3.1", sh(method="view", shape="B, n, d_head, h", move=(0, 3, 1, 2)), (), NO_SPLIT_CODE),
    ("3.1", sh(method="view", move=None), (), NO_SPLIT_CODE),
    ("3.2", mhf(w_o=False), ("x of shape (2, 5, 12), weights of shape (12, 12), n_heads=3",
                             '(Re-read "The shapes, step by step".)'), ()),
    ("3.2", mhf(attention=torch.nn.functional.scaled_dot_product_attention),
     ("without torch.nn.functional.scaled_dot_product_attention",), ("softmax(q k^T", "@ W_o")),
    ("3.2", entry("3.2", "uses attnbook.attention.scaled_dot_product_attention per head"),
     ("without attnbook.attention.scaled_dot_product_attention",), ()),
    ("3.2", entry("3.2", "uses torch.ops.aten._scaled_dot_product_attention_math"),
     ("called torch.ops.aten._scaled_dot_product_attention_math on x of shape",), ()),
    ("3.2", entry("3.2", "copies the matrices into torch's nn.MultiheadAttention and runs it"),
     ("without torch.nn.MultiheadAttention",), ()),
    ("3.2", entry("3.2", "copies the matrices into attnbook's MultiHeadAttention and runs it"),
     ("calls attnbook.multihead.MultiHeadAttention",), ()),
    ("3.2", entry("3.2", "uses F.multi_head_attention_forward with packed weights"),
     ("without torch.nn.functional.multi_head_attention_forward",), ()),
    ("3.3", lambda d_model, n_heads, bias=True: 4 * d_model**2 + 7,
     ("d_model=512, n_heads=8", "count each of the four projections"), ("1,050,624", "1050624")),
    ("3.3", lambda d_model, n_heads, bias=True: [4 * d_model**2], (), ("return 4 *",)),
    ("3.4", lambda x: x.sum(dim=1), ("x of shape (2, 3, 5, 4)", '(Re-read "Merging the heads, then W_O".)'), ()),
    ("3.4", mh(move=None), (), (".transpose(1, 2)", ".reshape(B, n, d_model)")),
    ("3.4", merge_via_flat_view, ("not contiguous in memory",), ()),  # the input it fails on
    ("3.4", merge_via_as_strided, ("not contiguous in memory",), ()),
])
def test_messages_show_and_do_not_show(exercise_id, answer, shown, not_shown):
    result = check(exercise_id, answer)
    message = result.message
    assert not result.passed
    assert all(piece in message for piece in shown) and not any(piece in message for piece in not_shown), message


REFUSED = re.compile(r"^without$|package's own|(without|called|calls) (torch|attnbook)\.")


def test_refused_answers_work_outside_the_check(solutions):
    """Every catalogue answer refused for the route it takes (a library function, the package's own solution)
    gives the right result outside the check, so that the refusal alone fails it (Triton needs a GPU or its
    interpreter); 3.4's answers that read the raw memory are right on a contiguous input."""
    g = torch.Generator().manual_seed(0)
    x = torch.randn(2, 5, 12, generator=g, dtype=torch.float64)
    heads = torch.randn(2, 3, 5, 4, generator=g)
    args = {"3.1": (x, 3), "3.2": (x, *(torch.randn(12, 12, generator=g, dtype=torch.float64) for _ in range(4)), 3),
            "3.3": (8, 2), "3.4": (heads,)}
    names = {"3.1": "split_heads", "3.2": "multi_head_forward", "3.3": "mha_param_count", "3.4": "merge_heads"}
    refused = [m for m in CATALOGUE if not m.right and REFUSED.search(m.hint or "") and "Triton" not in m.name]
    raw_memory = [m for m in CATALOGUE if m.answer is merge_via_flat_view or m.answer is merge_via_as_strided]
    assert len(refused) > 40 and len(raw_memory) == 2
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # flex_attention warns that it runs without torch.compile
        for m in refused + raw_memory:
            want = solutions(3)[names[m.exercise_id]](*args[m.exercise_id])
            got = m.answer(*args[m.exercise_id])
            assert got == want if m.exercise_id == "3.3" else torch.allclose(got, want), m.name


# ---------------------------------------------------------------------------------------------------------
# The inputs the checks use: scores where exp overflows (3.2), a non-contiguous split (3.4), and 3.3's two layers
# drawn from the run's seed, so a table of known layers does not pass
# ---------------------------------------------------------------------------------------------------------


def test_3_2_the_check_has_scores_where_exp_overflows():
    seen = []

    def multi_head_forward(x, W_q, W_k, W_v, W_o, n_heads):
        d_head = x.shape[-1] // n_heads
        q, k = ((x @ W).reshape(*x.shape[:2], n_heads, d_head).transpose(1, 2) for W in (W_q, W_k))
        seen.append(float((q @ k.transpose(-2, -1) / math.sqrt(d_head)).max()))
        return mhf()(x, W_q, W_k, W_v, W_o, n_heads)

    assert check("3.2", multi_head_forward).passed
    assert max(seen) > 710, seen  # exp overflows float64 above about 709.8


def test_3_4_check_feeds_a_non_contiguous_input():
    seen = []

    def merge_heads(x):
        seen.append((tuple(x.shape), x.is_contiguous()))
        return x.transpose(1, 2).reshape(x.size(0), x.size(2), -1)

    assert check("3.4", merge_heads).passed
    assert any(not contiguous for _, contiguous in seen), seen
    assert any(contiguous for _, contiguous in seen), seen


def test_3_3_drawn_layers_vary_and_keep_the_fixed_ones(monkeypatch):
    from attnbook.exercises.ch03 import mha_count_cases

    seen = set()
    for o in OFFSETS:
        monkeypatch.setattr(compare, "SEED_OFFSET", o)
        cases = mha_count_cases()
        assert cases[1] == (768, 12, True) and cases[5] == (12288, 96, True) and len(cases) == 10
        (d1, h1, b1), (d2, h2, b2) = cases[-2:]
        assert (b1, b2) == (True, False) and 2 <= min(h1, h2) and max(h1, h2) <= 16 and d1 % h1 == d2 % h2 == 0
        seen.add(tuple(cases[-2:]))
    assert len(seen) > 190


def test_3_3_drawn_layers_give_every_catalogue_entry_its_verdict(monkeypatch):
    catalogue_over_offsets("3.3", OFFSETS[:3], monkeypatch)
