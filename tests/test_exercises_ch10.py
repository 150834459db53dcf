"""Chapter 10 checkers: what the mutant catalogue (tests/mutants/ch10.py, the one home of "this answer passes" and
"this answer fails with a message containing X") cannot say: the book's reference solutions pass, not-attempted
answers are told, messages checked for more than one piece (the section to re-read, the input that catches a
mistake, what a message must not show or name), refusals of library shortcuts (transformers, torch.compile), what the
tasks say, properties of the drawn inputs over many seeds, and the chapter's own cells."""
import importlib
import io
import math
import sys
import tokenize
from fractions import Fraction

import nbformat
import numpy as np
import pytest
import torch
import torch.nn.functional as F

import mutants
from attnbook import multihead
from attnbook.exercises import check, compare
from attnbook.exercises.ch10.cache_bytes import cache_cases
from conftest import chapter_path
from seed_offsets import catalogue_over_offsets, offsets

mutants.load(10)  # first: importing mutants.ch10 by name before load() would leave out the generated entries
from mutants.ch10 import attend, cache_bytes, verify  # noqa: E402


def catalogue_answer(name):
    """The answer of chapter 10's catalogue entry called `name`."""
    return next(m.answer for m in mutants.load("10") if m.name == name)


def assert_fails(exercise_id, answer, holds=(), lacks=()):
    """`answer` fails, with a message that holds every piece of `holds` and none of `lacks`; returns the message."""
    result = check(exercise_id, answer)
    wrong = [p for p in holds if p not in result.message] + [p for p in lacks if p in result.message]
    assert not result.passed and not wrong, (wrong, result.message)
    return result.message


@pytest.mark.parametrize("exercise_id, name", [("10.1", "kv_cache_bytes"), ("10.2", "repeat_kv"),
                                               ("10.3", "attend_with_cache"), ("10.4", "gather_pages"),
                                               ("10.5", "verify_draft")])
def test_reference_passes_and_a_stub_is_not_attempted(solutions, exercise_id, name):
    result = check(exercise_id, solutions(10)[name])
    assert result.passed, result.message

    def stub(*args, **kwargs):
        raise NotImplementedError

    assert check(exercise_id, stub).status == "not attempted"


@pytest.mark.parametrize("exercise_id, phrases", [
    ("10.1", ["a Python `int` (not a tensor or a NumPy integer)"]),
    ("10.3", ["`attnbook.attention.softmax` is fine too", "do not change the inputs in place",
              "casting the output\n  back is fine"]),
    ("10.4", ["`block_table[t // block_size]`, at slot\n  `t % block_size`",
              "do not use\n`attnbook.serving.gather_pages` or `PagedKVCache`"]),
])
def test_task_text_says_what_the_check_accepts_and_forbids(exercise_id, phrases):
    nb = nbformat.read(chapter_path(10), as_version=4)
    text = next(c.source for c in nb.cells if c.source.startswith(f":::{{exercise}} {exercise_id}"))
    assert [p for p in phrases if p not in text] == []


def test_compiled_answers_pass_and_a_compiled_shortcut_does_not():
    pytest.importorskip("torch._dynamo")
    assert check("10.2", torch.compile(lambda x, n_rep: x.repeat_interleave(n_rep, dim=1), backend="eager")).passed
    assert check("10.3", torch.compile(attend(), backend="eager")).passed
    with_sdpa = catalogue_answer("torch's F.scaled_dot_product_attention with the bottom-right boolean mask")
    assert_fails("10.3", torch.compile(with_sdpa, backend="eager"), ["scaled_dot_product_attention"])


# five offsets at most here (test_remote adds run seeds 0 to 2 for every entry): enough to catch a verdict
# that flips with the values, within the CI time budget
@pytest.mark.parametrize("exercise_id, count", [("10.1", 5), ("10.2", 5), ("10.3", 2), ("10.4", 2), ("10.5", 2)])
def test_catalogue_verdicts_hold_for_many_offsets(exercise_id, count, monkeypatch):
    catalogue_over_offsets(exercise_id, offsets(count), monkeypatch)


def test_the_chapter_calls_the_package_functions_by_module_so_exercise_answers_cannot_shadow_them():
    """The exercises define kv_cache_bytes, repeat_kv and gather_pages (the first two with other signatures than the
    package's); the chapter's cells must reach the package's through their modules, so re-running them after an
    exercise still works."""
    nb = nbformat.read(chapter_path(10), as_version=4)
    exercises = next(i for i, c in enumerate(nb.cells) if c.source.startswith("## Exercises"))
    for cell in nb.cells[:exercises]:  # the check cells after it pass the learner's own functions
        if cell.cell_type != "code":
            continue
        tokens = [t for t in tokenize.generate_tokens(io.StringIO(cell.source).readline)
                  if t.type in (tokenize.NAME, tokenize.OP)]  # names and operators, outside strings and comments
        for i, token in enumerate(tokens):
            for name, module in (("kv_cache_bytes", "timing"), ("repeat_kv", "multihead"), ("gather_pages", "serving")):
                if token.string == name:
                    assert i >= 2 and [t.string for t in tokens[i - 2:i]] == [module, "."], (name, cell.source)


# ---------------------------------------------------------------------------------------------------------
# 10.1 the size of a KV cache
# ---------------------------------------------------------------------------------------------------------

def test_10_1_reference_matches_published_sizes(solutions):
    kv_cache_bytes = solutions(10)["kv_cache_bytes"]
    assert kv_cache_bytes(32, 32, 128, 4096) == 2 * 2**30  # LLaMA-2 7B, float16: 2 GiB, computed by hand
    assert kv_cache_bytes(32, 8, 128, 4096) == 2**29  # Mistral 7B: a quarter of that
    assert kv_cache_bytes(1, 1, 1, 1) == 4  # one key and one value of 2 bytes


FORMULA = ("n_layers · n_kv_heads", "× layers ×")  # what no hint may print


@pytest.mark.parametrize("answer, holds, lacks", [
    (cache_bytes(forget=("n_layers",)), ['Re-read "How big is the cache?"'], []),
    # right on the first case (float64), then forgets the bytes: reported on the second case (bytes_per_el=4), with
    # the neutral hint, since forgetting bytes_per_el does not explain the first case
    (cache_bytes(product=lambda f: math.prod(f if f[-1] == 8 else f[:-1])),
     ["bytes_per_el=4 (float32)", "check the factors of your product one by one"], ["multiply by bytes_per_el"]),
    # no known mistake; the package's own, converted: neither hint gives the formula away
    (cache_bytes(product=lambda f: math.prod(f[:-1]) + f[-1]), ["check the factors of your product one by one"],
     FORMULA),
    (catalogue_answer("calls attnbook.timing.kv_cache_bytes, converting bytes_per_el to a dtype"),
     ["calls attnbook.timing.kv_cache_bytes"], FORMULA),
    # tensors and arrays are refused with how to convert them
    (cache_bytes(then=torch.tensor), ["expected an int", "int(t)"], []),  # a 0-d int64 tensor
    (cache_bytes(then=lambda n: torch.tensor([n])), ["expected an int", "int(t)"], []),
    (cache_bytes(then=lambda n: torch.tensor(float(n))), ["expected an int", "int(t)"], []),
    (cache_bytes(then=np.array), ["expected an int", "int(a)"], []),  # a 0-d NumPy array
    # a size in whole units is named, though the first cache is far below one unit
    (cache_bytes(then=lambda n: round(n / 2**30)), ["size in GiB", "returned 0 on"], []),
    (cache_bytes(then=lambda n: int(n / 2**30)), ["size in GiB", "returned 0 on"], []),
    (cache_bytes(then=lambda n: int(n / 2**20)), ["size in MiB", "returned 0 on"], []),
    (cache_bytes(then=lambda n: round(n / 10**6)), ["size in MB", "returned 0 on"], []),
    (cache_bytes(then=lambda n: 0), [], ["GiB", "MiB"]),  # but a zero is not
])
def test_10_1_messages(answer, holds, lacks):
    assert_fails("10.1", answer, holds, lacks)


@pytest.mark.parametrize("answer, holds", [
    (cache_bytes(product=lambda f: np.prod(f, dtype=np.int64)), ["returned a NumPy int64 ({size:,})", "int("]),
    (cache_bytes(then=Fraction), ["a Fraction ({size})"]),  # reported, not crashed on
])
def test_10_1_other_numbers_are_shown_with_their_value(answer, holds):
    size = 2 * math.prod(cache_cases()[0][:6])
    assert_fails("10.1", answer, [p.format(size=size) for p in holds] + ["expected an int"], ["could not check"])


@pytest.mark.parametrize("offset", range(0, 200 * 7919, 7919))
def test_10_1_the_drawn_cases_keep_their_properties(offset, monkeypatch):
    # On every draw: the first case tells the mistakes in the product apart, no case's size spells its formula (the
    # message shows the right size of the first wrong case), the bytes per number are 8, 4, 2 in the first three
    # cases, and LLaMA-2 70B's size overflows int32 to a wrong non-zero number.
    from attnbook.exercises.ch09.cost import own_primes
    from attnbook.exercises.ch10.cache_bytes import _int32, separates

    monkeypatch.setattr(compare, "SEED_OFFSET", offset)
    cases = [(L, kv, d, S, B or 1, nb or 2) for L, kv, d, S, B, nb, _desc in cache_cases()]
    assert separates(*cases[0])
    sizes = [2 * math.prod(case) for case in cases]
    for case, size in zip(cases, sizes):
        assert size == 0 or not own_primes(case), case
    assert [case[5] for case in cases[:3]] == [8, 4, 2]
    assert _int32(sizes[4]) not in (0, sizes[4])
    assert sizes[-1] == 0 and len(set(cases)) == len(cases)


def test_10_1_a_size_of_distinct_primes_spells_its_formula():
    from attnbook.exercises.ch09.cost import unreadable

    assert not unreadable(18480, (3, 5, 7, 11, 1, 8))  # the old first case: 2^4 * 3 * 5 * 7 * 11


# ---------------------------------------------------------------------------------------------------------
# 10.2 repeat_kv
# ---------------------------------------------------------------------------------------------------------

def test_10_2_reference_agrees_with_transformers_and_gives_the_grouping_of_sdpa(solutions):
    repeat_kv = solutions(10)["repeat_kv"]
    modeling_llama = pytest.importorskip("transformers.models.llama.modeling_llama")
    g = torch.Generator().manual_seed(0)
    x = torch.randn(2, 3, 5, 4, generator=g, dtype=torch.float64)
    assert torch.equal(repeat_kv(x, 4), modeling_llama.repeat_kv(x, 4))
    # SDPA's enable_gqa pairs query head j with key/value head j // n_rep: the same grouping
    q = torch.randn(2, 12, 6, 4, generator=g, dtype=torch.float64)
    v = torch.randn(2, 3, 5, 4, generator=g, dtype=torch.float64)
    shared = F.scaled_dot_product_attention(q, x, v, enable_gqa=True)
    assert torch.allclose(F.scaled_dot_product_attention(q, repeat_kv(x, 4), repeat_kv(v, 4)), shared, atol=1e-12)


@pytest.mark.parametrize("answer, holds, lacks", [
    # a view of a non-contiguous x names the transpose
    (lambda x, n_rep: x.view(*x.shape[:2], 1, x.size(2) * x.size(3)).expand(-1, -1, n_rep, -1).reshape(
        x.size(0), x.size(1) * n_rep, *x.shape[2:]),
     ["this x is not contiguous", "float64 x of shape (2, 2, 7, 3), not contiguous"], []),
    # float32 ones turn a float16 x into float32; float32 and float64 x are unchanged
    (catalogue_answer("multiplies by a float32 ones tensor: turns float16 into float32"),
     ["dtype torch.float32 on float16 x", "expected torch.float16", "torch.ones or torch.zeros without dtype=x.dtype"],
     []),
    # the package's own solution: the hint does not give the recipe away
    (lambda x, n_rep: multihead.repeat_kv(x, n_rep),
     ["calls attnbook.multihead.repeat_kv", "the package's own solution"],
     ["x[:, :, None]", "repeat_interleave(n_rep, dim=1)"]),
])
def test_10_2_messages(answer, holds, lacks):
    assert_fails("10.2", answer, holds, lacks)


def test_10_2_forbids_transformers_repeat_kv_imported_inside():
    pytest.importorskip("transformers")

    def by_name(x, n_rep):
        module = importlib.import_module("transformers.models.qwen2.modeling_qwen2")
        return getattr(module, "repeat_kv")(x, n_rep)

    def by_import(x, n_rep):
        from transformers.models.mistral.modeling_mistral import repeat_kv

        return repeat_kv(x, n_rep)

    assert_fails("10.2", by_name, ["modeling_qwen2.repeat_kv"])
    assert_fails("10.2", by_import, ["modeling_mistral.repeat_kv"])


# ---------------------------------------------------------------------------------------------------------
# 10.3 append to a cache and attend over it
# ---------------------------------------------------------------------------------------------------------

def sdpa_reference(q, k, v):
    """Bottom-right causal attention of the last L queries over S keys, with PyTorch's own SDPA."""
    L, S = q.size(-2), k.size(-2)
    mask = torch.ones(L, S, dtype=torch.bool).tril(S - L)
    return F.scaled_dot_product_attention(q, k, v, attn_mask=mask)


def test_10_3_reference_agrees_with_sdpa_and_with_the_model_cache(solutions):
    attend_with_cache = solutions(10)["attend_with_cache"]
    g = torch.Generator().manual_seed(1)
    t = lambda *s: torch.randn(*s, generator=g, dtype=torch.float64)  # noqa: E731
    q, kc, vc, kn, vn = t(2, 3, 4, 8), t(2, 3, 6, 8), t(2, 3, 6, 5), t(2, 3, 4, 8), t(2, 3, 4, 5)
    out, k, v = attend_with_cache(q, kc, vc, kn, vn)
    assert torch.equal(k, torch.cat([kc, kn], dim=2)) and torch.equal(v, torch.cat([vc, vn], dim=2))
    assert torch.allclose(out, sdpa_reference(q, k, v), atol=1e-12)
    # one token at a time over an empty cache gives the causal attention of the whole sequence
    q_all, k_all, v_all = t(1, 2, 5, 4), t(1, 2, 5, 4), t(1, 2, 5, 4)
    kc, vc, rows = k_all[:, :, :0], v_all[:, :, :0], []
    for i in range(5):
        o, kc, vc = attend_with_cache(q_all[:, :, i:i + 1], kc, vc, k_all[:, :, i:i + 1], v_all[:, :, i:i + 1])
        rows.append(o)
    full = F.scaled_dot_product_attention(q_all, k_all, v_all, is_causal=True)
    assert torch.allclose(torch.cat(rows, dim=2), full, atol=1e-12)


ONE_TOKEN, CHUNK = "one new token: q (2, 3, 1, 4)", "a chunk of 3 new tokens"  # the first and the fourth input
CODE = ["torch.cat(", "return output, k_cache, v_cache", "k_cache = ", "dim=-2)"]  # what no hint may print
# float32 for float16 inputs only, the output not cast back
HALF_UPCAST = lambda q, *caches: attend(upcast=q.dtype == torch.float16)(q, *caches)  # noqa: E731


@pytest.mark.parametrize("answer, holds, lacks", [
    (attend(scale=lambda q, v: 1.0), ['Re-read "The KV cache"', ONE_TOKEN], []),
    (attend(mask="none"), [CHUNK], []),
    # on one new token each of these gives the output of another mistake; the chunks tell them apart, and the
    # message reports the first input that fails
    (attend(mask="tril(S - L - 1)"), ["off by one: it hides each new token from its own key", ONE_TOKEN],
     ["ignores the new tokens' own keys"]),
    (attend(mask="triu"), ["your mask is upper-triangular (triu)", ONE_TOKEN], ["attends only to the new tokens"]),
    (attend(scale=lambda q, v: 1 / math.sqrt(q.size(-2))),
     ["the scale uses d = q.size(-1), the size of the last dimension", ONE_TOKEN], ["left out the scale"]),
    # mask mistakes that one new token cannot tell apart get their own hint on the chunks
    (attend(mask="padded"), ["the triangle sits at the bottom right", CHUNK], []),
    (catalogue_answer("zeroes the masked weights after the softmax (the rows no longer sum to 1)"),
     ["you zeroed the masked weights after the softmax", CHUNK], []),
    (attend(mask="only without cache"), ["whatever the length of the cache", CHUNK], []),
    (attend(mask="square"), ["(L_new, S_total)", "bottom right"], []),
    # right for one new token, unscaled for chunks: a mistake that explains only some inputs is not named
    (attend(scale=lambda q, v: 1 / math.sqrt(q.size(-1)) if q.size(-2) == 1 else 1.0), [CHUNK, "at index"],
     ["left out the scale"]),
    # dtypes: float16 keeps its dtype; an upcast output is told to cast back, and a downcast one that it narrows
    (catalogue_answer("an additive float32 mask (torch.zeros without dtype): float16 scores become float32"),
     ["on float16, a half-precision cache", "the tensors have different dtypes"], []),
    (HALF_UPCAST, ["the output has dtype torch.float32 on float16", "cast the result back to the dtype of q"],
     ["no .float()"]),
    (attend(upcast=True), ["dtype torch.float32 on one new token in float64", "narrows"], []),
    # results in another order are named
    (attend(returns="rotated"), ["returned (k_cache, v_cache, output)", "the output first, then the grown key cache"],
     []),
    # hints do not print solution code
    (attend(returned=lambda cache, new: cache), ["Hint:"], CODE),
    (attend(grow=lambda cache, new: torch.cat([new, cache], dim=-2)), ["Hint:"], CODE),
    (attend(returns="swapped"), ["Hint:"], CODE),
    (attend(returns="output"), ["Hint:"], CODE),
    (attend(returns="list"), ["Hint:"], CODE),
    (attend(returned=lambda cache, new: new), ["Hint:"], CODE),  # only the new entries
    (lambda q, kc, vc, kn, vn: attend()(q, kc, vc, kn, vn)[::-1], ["Hint:"], CODE),  # reversed
    # what the task forbids: the hint does not give the recipe away; the cache class is not the package's solution
    (lambda q, kc, vc, kn, vn: (F.scaled_dot_product_attention(q, kc, vc), kc, vc),
     ["without torch.nn.functional.scaled_dot_product_attention"], ["q @ k.transpose", "tril(S - L)"]),
    (catalogue_answer("attnbook's KVCache to grow the caches, then hand-written attention"),
     ["without attnbook.multihead.KVCache"], ["package's own solution"]),
])
def test_10_3_messages(answer, holds, lacks):
    assert_fails("10.3", answer, holds, lacks)


def test_10_3_forbids_transformers_attention_functions_and_caches():
    modeling_llama = pytest.importorskip("transformers.models.llama.modeling_llama")
    eager_attention_forward = modeling_llama.eager_attention_forward  # imported at the top level

    class Module(torch.nn.Module):
        num_key_value_groups = 1

    def with_eager(q, k_cache, v_cache, k_new, v_new):
        k, v = torch.cat([k_cache, k_new], dim=-2), torch.cat([v_cache, v_new], dim=-2)
        L, S = q.size(-2), k.size(-2)
        bias = torch.zeros(L, S, dtype=q.dtype).masked_fill(~torch.ones(L, S, dtype=torch.bool).tril(S - L),
                                                            float("-inf"))
        out, _ = eager_attention_forward(Module().eval(), q, k, v, bias[None, None], scaling=q.size(-1) ** -0.5)
        return out.transpose(1, 2), k, v  # (B, L, h, d_v) -> (B, h, L, d_v)

    def with_sdpa_forward(q, k_cache, v_cache, k_new, v_new):  # imported inside
        from transformers.integrations.sdpa_attention import sdpa_attention_forward

        k, v = torch.cat([k_cache, k_new], dim=-2), torch.cat([v_cache, v_new], dim=-2)
        L, S = q.size(-2), k.size(-2)
        mask = torch.ones(L, S, dtype=torch.bool).tril(S - L)[None, None]
        out, _ = sdpa_attention_forward(torch.nn.Module().eval(), q, k, v, mask, is_causal=False)
        return out.transpose(1, 2), k, v

    def with_dynamic_cache(q, k_cache, v_cache, k_new, v_new):
        from transformers import DynamicCache

        cache = DynamicCache()
        cache.update(k_cache, v_cache, 0)
        k, v = cache.update(k_new, v_new, 0)
        return attend()(q, k[..., :0, :], v[..., :0, :], k, v)

    g = torch.Generator().manual_seed(0)
    q, kc, vc, kn, vn = (torch.randn(1, 2, n, 4, generator=g) for n in (3, 5, 5, 3, 3))
    out, k, v = with_eager(q, kc, vc, kn, vn)
    assert torch.allclose(out, sdpa_reference(q, k, v), atol=1e-6)  # right, but made with a shortcut
    assert_fails("10.3", with_eager, ["called transformers.models.llama.modeling_llama.eager_attention_forward"])
    assert_fails("10.3", with_sdpa_forward, ["sdpa_attention_forward"])
    assert_fails("10.3", with_dynamic_cache, ["without transformers.DynamicCache"])


def test_10_3_a_correct_answer_that_imports_a_module_on_first_use_passes(tmp_path, monkeypatch):
    # Like torch._dynamo or torch.distributed.tensor: a module that, when imported, registers a handler for an
    # attention op and so touches a name the task forbids, although the learner never calls it.
    (tmp_path / "registers_attention_handlers.py").write_text(
        "import torch\n"
        "HANDLERS = {torch.ops.aten._scaled_dot_product_flash_attention.default: None}\n"
    )
    monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.delitem(sys.modules, "registers_attention_handlers", raising=False)

    def attend_with_cache(q, k_cache, v_cache, k_new, v_new):
        import registers_attention_handlers  # noqa: F401 - imported on first use, as lazy imports are

        return attend()(q, k_cache, v_cache, k_new, v_new)

    result = check("10.3", attend_with_cache)
    assert result.passed, result.message


@pytest.mark.parametrize("offset", offsets(200))
def test_10_3_every_mistake_differs_on_every_draw(offset, monkeypatch):
    # Each known mistake (each way of making it) gives an output far from the right one on some input, by more than
    # ten times the tolerance of that input: it fails on every draw.
    from attnbook.exercises.ch10.attend import _attend_cases, _attend_mistakes, _bottom_right
    from attnbook.attention import scaled_dot_product_attention

    monkeypatch.setattr(compare, "SEED_OFFSET", offset)
    differs: dict[tuple[str, int], bool] = {}
    for _desc, (q, kc, vc, kn, vn) in _attend_cases():
        k, v = torch.cat([kc, kn], dim=-2), torch.cat([vc, vn], dim=-2)
        expected = scaled_dot_product_attention(q.double(), k.double(), v.double(),
                                                attn_mask=_bottom_right(q.size(-2), k.size(-2)))[0]
        atol, rtol = (1e-2, 1e-2) if q.dtype == torch.float16 else (1e-5, 1e-4)
        for hint, wrong in _attend_mistakes(q, kc, vc, kn, vn).items():
            for i, w in enumerate(wrong if isinstance(wrong, tuple) else (wrong,)):
                far = w.shape != expected.shape or not torch.allclose(w, expected, atol=10 * atol, rtol=10 * rtol,
                                                                     equal_nan=True)
                differs[hint, i] = differs.get((hint, i), False) or far
    assert all(differs.values()), [key for key, far in differs.items() if not far]


# ---------------------------------------------------------------------------------------------------------
# 10.4 read a sequence from a paged cache
# ---------------------------------------------------------------------------------------------------------

@pytest.mark.parametrize("name", ["ignores the table: the first blocks of the pool in order",
                                  "transposes the gathered blocks before flattening (slot-major order)",
                                  "returns every slot of the last block (no cut to length)"])
def test_10_4_hints_do_not_print_solution_code(name):
    assert_fails("10.4", catalogue_answer(name), ["Hint:"], [".reshape(", "pool[block_table]", "[:length]", "return "])


def _gather_by_hand(pool, table, length):
    """Position t from pool[table[t // block_size], t % block_size], one at a time."""
    bs = pool.size(1)
    return [pool[int(table[t // bs]), t % bs] for t in range(length)]


@pytest.mark.parametrize("offset", offsets(200))
def test_10_4_tables_defeat_reading_in_order_and_sorting_on_every_draw(offset, monkeypatch):
    # Each case's table is out of order (or a single block other than 0), so neither reading the pool's blocks in
    # order nor sorting the table (of two blocks or more) reproduces the sequence; the first case's ids are below
    # block_size, so that the mistakes that swap block and slot index the pool without an error there.
    from attnbook.exercises.ch10.pages import _CASES, _case

    monkeypatch.setattr(compare, "SEED_OFFSET", offset)
    for i, spec in enumerate(_CASES):
        _desc, pool, table, length = _case(*spec, seed=400 + i)
        n = -(-length // pool.size(1))
        assert table.dtype == torch.long and table.shape == (n,) and len(set(table.tolist())) == n
        right = _gather_by_hand(pool, table, length)
        for other in (torch.arange(n), table.sort().values)[:n]:  # one block: sorting changes nothing
            wrong = _gather_by_hand(pool, other, length)
            assert any(not torch.equal(a, b) for a, b in zip(right, wrong)), (i, table)
    _desc, pool, table, length = _case(*_CASES[0], seed=400)
    assert sorted(table.tolist()) == list(range(pool.size(1)))  # pool[slot, block] indexes without an error


# ---------------------------------------------------------------------------------------------------------
# 10.5 verify a draft
# ---------------------------------------------------------------------------------------------------------

def test_10_5_reference_agrees_with_the_package_by_hand(solutions):
    from attnbook.speculative import verify_draft as package
    verify_draft = solutions(10)["verify_draft"]
    p = torch.tensor([[0.5, 0.3, 0.2], [0.1, 0.1, 0.8]], dtype=torch.float64)
    q = torch.tensor([[0.2, 0.2, 0.6]], dtype=torch.float64)
    for u, n, dist in ((0.5, 0, [0.75, 0.25, 0.0]), (0.2, 1, [0.1, 0.1, 0.8])):  # p/q = 1/3 for token 2
        for fn in (verify_draft, package):
            got_n, got = fn(p, q, torch.tensor([2]), torch.tensor([u], dtype=torch.float64))
            assert got_n == n and torch.allclose(got, torch.tensor(dist, dtype=torch.float64))


@pytest.mark.parametrize("offset", range(0, 40 * 7919, 7919))
def test_10_5_the_drawn_cases_keep_their_properties(offset, monkeypatch):
    # On every draw: each case rejects where its description says (or nowhere), every u lies clear of the ratios the
    # rule and the mistakes compare it with, and in a case that rejects at a later position, the mistaken rules
    # (q / p, p alone, the comparison inverted) stop elsewhere and later drafted tokens (two where there is room)
    # would have been accepted.
    from attnbook.exercises.ch10.verify import CASES, MARGIN, case

    monkeypatch.setattr(compare, "SEED_OFFSET", offset)
    for index, (_desc, k, V, _dtype, reject, zero, again) in enumerate(CASES):
        p, q, draft, u = case(index)
        x = draft.tolist()
        ratios = [float(p[i, x[i]] / q[i, x[i]]) for i in range(k)]
        accepted = [u[i] < ratios[i] for i in range(k)]
        stop = accepted.index(False) if False in accepted else k
        assert stop == (k if reject is None else reject)
        for i in range(k):
            for t in (ratios[i], float(q[i, x[i]] / p[i, x[i]]) if p[i, x[i]] else math.inf, float(p[i, x[i]]),
                      float(p[i + 1, x[i]] / q[i, x[i]])):
                assert abs(float(u[i]) - t) >= MARGIN
        if zero:
            assert p[reject, x[reject]] == 0
        if again:  # a later token would be rejected too, and one accepted
            assert 1 <= sum(accepted[reject + 1:]) < k - reject - 1
        elif reject not in (None, 0):
            assert sum(accepted[reject + 1:]) >= min(2, k - reject - 1)
        if reject is not None and reject >= 3:  # u < p and u < p - q stop apart
            stops = [[bool(u[i] < bound(i)) for i in range(k)] + [False]
                     for bound in (lambda i: p[i, x[i]], lambda i: p[i, x[i]] - q[i, x[i]])]
            assert stops[0].index(False) != stops[1].index(False)
        if reject not in (None, 0):
            for wrong in (lambda i: u[i] < q[i, x[i]] / p[i, x[i]], lambda i: u[i] < p[i, x[i]],
                          lambda i: u[i] < p[i, x[i]] - q[i, x[i]], lambda i: u[i] >= ratios[i]):
                decisions = [bool(wrong(i)) for i in range(k)]
                assert (decisions.index(False) if False in decisions else k) != reject


@pytest.mark.parametrize("answer", [verify(accept=lambda u, p, q: u < (p / q) ** 2),
                                    verify(residual=lambda p, q: (p - q).exp())])
def test_10_5_messages_never_show_a_whole_distribution(answer):
    # rules of no one's: the message shows the first wrong n, the first wrong entry of dist
    message = assert_fails("10.5", answer, ["Hint: accept drafted token i while"], ["tensor("])
    assert message.count("0.") <= 3, message
