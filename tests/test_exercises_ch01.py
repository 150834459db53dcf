"""Chapter 1 checkers: the book's reference solutions pass; plausible wrong answers fail with the right hint."""
import math

import pytest
import torch

from attnbook import softmax
from attnbook.exercises import check, compare


def assert_rejected(exercise_id, fn, hint):
    result = check(exercise_id, fn)
    assert result.status == "failed", (fn.__name__, result.message)
    assert hint in result.message, (fn.__name__, result.message)


def not_attempted(*args, **kwargs):
    raise NotImplementedError("replace this line with your code")


@pytest.mark.parametrize("exercise_id, name", [("1.1", "project_qkv"), ("1.2", "soft_lookup"),
                                               ("1.3", "stable_softmax")])
def test_reference_solution_passes(solutions, exercise_id, name):
    result = check(exercise_id, solutions(1)[name])
    assert result.passed, result.message


@pytest.mark.parametrize("exercise_id", ["1.1", "1.2", "1.3"])
def test_stub_is_not_attempted(exercise_id):
    result = check(exercise_id, not_attempted)
    assert result.status == "not attempted", result.message
    assert result.points == 0


# ---------------------------------------------------------------------------------------------------------
# 1.1  project_qkv
# ---------------------------------------------------------------------------------------------------------


def transposed_weights(X, W_q, W_k, W_v):
    return X @ W_q.T, X @ W_k.T, X @ W_v.T


def weights_first(X, W_q, W_k, W_v):
    return W_q @ X, W_k @ X, W_v @ X


def transposed_result(X, W_q, W_k, W_v):
    return (X @ W_q).transpose(-2, -1), (X @ W_k).transpose(-2, -1), (X @ W_v).transpose(-2, -1)


def w_q_for_all(X, W_q, W_k, W_v):
    return X @ W_q, X @ W_q, X @ W_q


def k_q_v_order(X, W_q, W_k, W_v):
    return X @ W_k, X @ W_q, X @ W_v


def only_q(X, W_q, W_k, W_v):
    return X @ W_q


def mm_2d_only(X, W_q, W_k, W_v):
    return X.mm(W_q), X.mm(W_k), X.mm(W_v)


def modifies_x(X, W_q, W_k, W_v):
    X *= 1.0
    X += 0.5
    return X @ W_q, X @ W_k, X @ W_v


@pytest.mark.parametrize("fn, hint", [
    (transposed_weights, "you transposed the weight matrix"),
    (weights_first, "not W_q @ X"),
    (transposed_result, "your Q is transposed"),
    (w_q_for_all, "your K looks like X @ W_q"),
    (k_q_v_order, "returned (K, Q, V)"),
    (only_q, "returned a single tensor"),
    (mm_2d_only, "use the @ operator"),
    (modifies_x, "in place"),
])
def test_1_1_wrong_answers_get_hints(fn, hint):
    assert_rejected("1.1", fn, hint)


def test_1_1_shape_error_is_explained():
    def transposed_when_not_square(X, W_q, W_k, W_v):
        out = X @ W_q, X @ W_k, X @ W_v
        if W_q.shape[0] != W_q.shape[1]:
            out = (X @ W_q.T, X @ W_k.T, X @ W_v.T)
        return out

    result = check("1.1", transposed_when_not_square)
    assert not result.passed
    assert "raised RuntimeError" in result.message and "X of shape (5, 6)" in result.message
    assert "compute X @ W" in result.message


# ---------------------------------------------------------------------------------------------------------
# 1.2  soft_lookup
# ---------------------------------------------------------------------------------------------------------


def raw_scores(q, K, V):
    w = K @ q
    return w @ V, w


def hard_lookup(q, K, V):
    w = torch.nn.functional.one_hot((K @ q).argmax(), K.shape[0]).to(q.dtype)
    return w @ V, w


def sum_of_keys(q, K, V):
    w = softmax(K @ q, dim=-1)
    return w @ K, w


def swapped(q, K, V):
    w = softmax(K @ q, dim=-1)
    return w, w @ V


def exp_not_normalised(q, K, V):
    w = (K @ q).exp()
    return w @ V, w


def sigmoid_weights(q, K, V):
    w = torch.sigmoid(K @ q)
    return w @ V, w


def scaled_scores(q, K, V):
    w = softmax(K @ q / math.sqrt(K.shape[-1]), dim=-1)
    return w @ V, w


def weighted_not_summed(q, K, V):
    w = softmax(K @ q, dim=-1)
    return w[:, None] * V, w


def query_times_keys(q, K, V):
    w = softmax(q @ K, dim=-1)
    return w @ V, w


@pytest.mark.parametrize("fn, hint", [
    (raw_scores, "pass them through softmax"),
    (hard_lookup, "hard lookup"),
    (sum_of_keys, "weighted sum of the keys"),
    (swapped, "returned (weights, output)"),
    (exp_not_normalised, "did not divide by their sum"),
    (sigmoid_weights, "not 1"),
    (scaled_scores, "chapter 2"),
    (weighted_not_summed, "did not add them up"),
    (query_times_keys, "the scores are K @ q"),
])
def test_1_2_wrong_answers_get_hints(fn, hint):
    assert_rejected("1.2", fn, hint)


# ---------------------------------------------------------------------------------------------------------
# 1.3  stable_softmax
# ---------------------------------------------------------------------------------------------------------


def naive(x, dim=-1):
    return x.exp() / x.exp().sum(dim=dim, keepdim=True)


def over_dim0(x, dim=-1):
    shifted = x - x.amax(dim=0, keepdim=True)
    return shifted.exp() / shifted.exp().sum(dim=0, keepdim=True)


def global_max(x, dim=-1):
    e = (x - x.max()).exp()
    return e / e.sum(dim=dim, keepdim=True)


def in_place(x, dim=-1):
    x -= x.amax(dim=dim, keepdim=True)
    return x.exp() / x.exp().sum(dim=dim, keepdim=True)


def max_without_keepdim(x, dim=-1):
    e = (x - x.amax(dim=dim)).exp()
    return e / e.sum(dim=dim, keepdim=True)


def max_returns_a_pair(x, dim=-1):
    e = (x - x.max(dim=dim)).exp()
    return e / e.sum(dim=dim, keepdim=True)


def always_last_dim(x, dim=-1):
    e = (x - x.amax(dim=-1, keepdim=True)).exp()
    return e / e.sum(dim=-1, keepdim=True)


def always_float32(x, dim=-1):
    e = (x - x.amax(dim=dim, keepdim=True)).exp()
    return (e / e.sum(dim=dim, keepdim=True)).float()


def test_1_3_wrong_answers_get_hints():
    cases = {
        naive: "subtract the row maximum",
        over_dim0: "normalised over dim=0",
        global_max: "not the global maximum",
        in_place: "in place",
        max_without_keepdim: "x.amax(dim=dim, keepdim=True)",
        max_returns_a_pair: "returns a pair (values, indices)",
        always_last_dim: "normalise over the `dim` you were given",
        always_float32: "return the dtype you were given",
    }
    for fn, hint in cases.items():
        assert_rejected("1.3", fn, hint)


def mean_shift(x, dim=-1):
    e = torch.exp(x - x.mean(dim, keepdim=True))
    return e / e.sum(dim, keepdim=True)


def min_shift(x, dim=-1):
    e = torch.exp(x - x.amin(dim=dim, keepdim=True))
    return e / e.sum(dim=dim, keepdim=True)


def abs_max_shift(x, dim=-1):
    e = torch.exp(x - x.abs().amax(dim=dim, keepdim=True))
    return e / e.sum(dim=dim, keepdim=True)


@pytest.mark.parametrize("fn", [mean_shift, min_shift, abs_max_shift], ids=["mean", "min", "abs-max"])
def test_1_3_a_shift_by_another_statistic_is_told_that_the_maximum_keeps_exp_at_most_1(fn):
    """A learner trial: the mean, the minimum or the largest |x| as the shift still overflows or underflows; the
    NaN message says that subtracting the maximum, and nothing else, keeps every exp <= 1."""
    result = check("1.3", fn)
    assert result.status == "failed" and "contains NaN" in result.message, result.message
    assert "Subtract the maximum along dim, not the mean, the minimum" in result.message, result.message
    assert "every exp is <= 1" in result.message, result.message


# ---------------------------------------------------------------------------------------------------------
# 1.3: what the task forbids is enforced, and common exceptions get hints
# ---------------------------------------------------------------------------------------------------------


def _softmax_via_torch(x, dim=-1):
    return torch.softmax(x, dim=dim)


def _softmax_via_method(x, dim=-1):
    return x.softmax(dim)


def _softmax_via_log_softmax(x, dim=-1):
    return torch.log_softmax(x, dim=dim).exp()


def _softmax_via_attnbook(x, dim=-1):
    from attnbook import softmax

    return softmax(x, dim=dim)


def _softmax_via_nn_module(x, dim=-1):
    return torch.nn.Softmax(dim=dim)(x)


@pytest.mark.parametrize("answer", [_softmax_via_torch, _softmax_via_method, _softmax_via_log_softmax,
                                    _softmax_via_nn_module])
def test_1_3_library_softmax_is_refused(answer):
    result = check("1.3", answer)
    assert not result.passed
    assert "the task asks you to write this without" in result.message, result.message
    assert "exp, amax and sum" in result.message
    # the advice names the steps, never the solution's code
    assert ".exp()" not in result.message and "e = (" not in result.message and "e / e" not in result.message


def test_1_3_the_packages_softmax_is_its_own_solution():
    result = check("1.3", _softmax_via_attnbook)
    assert not result.passed and "the package's own solution" in result.message, result.message


def test_1_3_math_exp_overflow_gets_a_hint():
    import math

    def stable_softmax(x, dim=-1):
        flat = [math.exp(v) for v in x.flatten().tolist()]
        e = torch.tensor(flat).reshape(x.shape)
        return e / e.sum(dim=dim, keepdim=True)

    result = check("1.3", stable_softmax)
    assert not result.passed and "OverflowError" in result.message
    assert "torch.exp" in result.message and "subtracting the maximum" in result.message


# Second learner trial: what still got through, and messages that did not help.


def _softmax_via_scipy(x, dim=-1):
    import scipy.special

    return torch.from_numpy(scipy.special.softmax(x.numpy(), axis=dim)).to(x.dtype)


def _softmax_via_private_torch(x, dim=-1):
    return torch._softmax(x, dim, False)


def _softmax_via_logsumexp(x, dim=-1):
    return torch.exp(x - torch.logsumexp(x, dim=dim, keepdim=True))


@pytest.mark.parametrize("answer", [_softmax_via_scipy, _softmax_via_private_torch, _softmax_via_logsumexp])
def test_1_3_other_library_shortcuts_are_refused(answer):
    result = check("1.3", answer)
    assert not result.passed and "the task asks you to write this without" in result.message, result.message


def test_1_3_the_default_dim_is_tested():
    def stable_softmax(x, dim=0):  # wrong default
        e = (x - x.amax(dim=dim, keepdim=True)).exp()
        return e / e.sum(dim=dim, keepdim=True)

    result = check("1.3", stable_softmax)
    assert not result.passed and "default dim" in result.message


def test_1_3_a_hard_coded_dim_is_named_as_written():
    def stable_softmax(x, dim=-1):
        e = (x - x.amax(dim=1, keepdim=True)).exp()
        return e / e.sum(dim=1, keepdim=True)

    result = check("1.3", stable_softmax)
    assert not result.passed and "you normalised over dim=1" in result.message, result.message


def test_half_precision_and_integer_results_get_a_dtype_message():
    def half(X, W_q, W_k, W_v):
        return (X @ W_q).half(), (X @ W_k).half(), (X @ W_v).half()

    def integer(X, W_q, W_k, W_v):
        return (X @ W_q).int(), (X @ W_k).int(), (X @ W_v).int()

    assert "dtype torch.float16" in check("1.1", half).message
    assert "integer dtype" in check("1.1", integer).message


def test_1_1_bmm_gets_the_bmm_hint():
    def project_qkv(X, W_q, W_k, W_v):
        return torch.bmm(X, W_q), torch.bmm(X, W_k), torch.bmm(X, W_v)

    result = check("1.1", project_qkv)
    assert not result.passed and "torch.bmm needs 3-D tensors" in result.message, result.message


def test_1_2_math_exp_on_a_tensor_and_a_bad_dim_get_hints():
    import math

    from attnbook import softmax

    def with_math_exp(q, K, V):
        e = math.exp(K @ q)
        return e @ V, e

    def with_bad_dim(q, K, V):
        w = softmax(K @ q, dim=1)
        return w @ V, w

    assert "use torch.exp" in check("1.2", with_math_exp).message
    assert "count from the end" in check("1.2", with_bad_dim).message


# Third learner trial: dtypes, large scores, the package's attention, hints that fit every input


def test_1_1_and_1_2_keep_the_dtype_of_the_input():
    def qkv_float64(X, W_q, W_k, W_v):
        return (X @ W_q).double(), (X @ W_k).double(), (X @ W_v).double()

    def qkv_float32(X, W_q, W_k, W_v):
        return (X @ W_q).float(), (X @ W_k).float(), (X @ W_v).float()

    def lookup_float32(q, K, V):
        w = softmax((K @ q).float(), dim=-1)
        return w @ V.float(), w

    for exercise_id, fn, wanted in [("1.1", qkv_float64, "expected torch.float32"),
                                    ("1.1", qkv_float32, "expected torch.float64"),
                                    ("1.2", lookup_float32, "expected torch.float64")]:
        result = check(exercise_id, fn)
        assert not result.passed and wanted in result.message and "dtype" in result.message, result.message


def test_1_1_einsum_without_a_batch_gets_the_batch_hint():
    def project_qkv(X, W_q, W_k, W_v):
        return tuple(torch.einsum("nd,dk->nk", X, W) for W in (W_q, W_k, W_v))

    result = check("1.1", project_qkv)
    assert not result.passed and "batch" in result.message and "not W @ X" not in result.message, result.message


def test_1_1_scaled_queries_are_told_the_scale_belongs_to_chapter_2():
    def project_qkv(X, W_q, W_k, W_v):
        return X @ W_q / math.sqrt(W_q.shape[1]), X @ W_k, X @ W_v

    result = check("1.1", project_qkv)
    assert not result.passed and "chapter 2" in result.message, result.message


def test_1_1_a_mistake_on_one_input_only_is_not_named():
    """Scaled queries on the batched inputs only: the scale mistake does not explain the 2-D inputs, so the message
    shows the first wrong entry and the rule instead of a hint about the scale."""
    def project_qkv(X, W_q, W_k, W_v):
        Q = X @ W_q
        if X.dim() == 3:
            Q = Q / math.sqrt(W_q.shape[1])
        return Q, X @ W_k, X @ W_v

    result = check("1.1", project_qkv)
    assert not result.passed and "batch of 2" in result.message, result.message
    assert "chapter 2" not in result.message and "at index" in result.message and "expected" in result.message


def test_1_2_a_softmax_without_the_max_shift_fails_on_large_scores():
    def soft_lookup(q, K, V):
        e = torch.exp(K @ q)
        w = e / e.sum()
        return w @ V, w

    result = check("1.2", soft_lookup)
    assert not result.passed and "large scores" in result.message and "overflows" in result.message, result.message


def test_1_2_the_packages_attention_is_refused():
    import attnbook

    def with_package(q, K, V):
        out, w = attnbook.scaled_dot_product_attention(q[None, :], K, V, scale=1.0)
        return out[0], w[0]

    def with_torch(q, K, V):
        w = softmax(K @ q, dim=-1)
        return torch.nn.functional.scaled_dot_product_attention(q[None], K, V, scale=1.0)[0], w

    assert "the package's own solution" in check("1.2", with_package).message
    assert "the task asks you to write this without" in check("1.2", with_torch).message


def test_1_2_a_list_is_not_a_tuple():
    def soft_lookup(q, K, V):
        w = softmax(K @ q, dim=-1)
        return [w @ V, w]

    result = check("1.2", soft_lookup)
    assert not result.passed and "list" in result.message and "tuple" in result.message


# ---------------------------------------------------------------------------------------------------------
# Issue 23: inputs drawn from the run's seed keep the properties they were tuned for
# ---------------------------------------------------------------------------------------------------------

from seed_offsets import OFFSETS  # noqa: E402  (200 values of compare.SEED_OFFSET)


def test_1_2_drawn_scores_overflow_and_underflow_float32_exp(monkeypatch):
    from attnbook.exercises import ch01

    seen = set()
    for o in OFFSETS:
        monkeypatch.setattr(compare, "SEED_OFFSET", o)
        cases = ch01._lookup_cases(ch01.generator(12))
        assert [tuple(c[1].shape) + tuple(c[2].shape) + tuple(c[3].shape) for c in cases] == [
            (3, 4, 3, 4, 3), (2, 5, 2, 5, 4), (3, 4, 3, 4, 2), (3, 1, 3, 1, 2)]
        high = cases[2][2] @ cases[2][1]
        low = cases[3][2] @ cases[3][1]
        assert torch.isinf(high.max().exp()) and high.max() > 95  # exp overflows float32 (above 88.7)
        assert (high == high.max()).sum() == 1  # one best key, so a hard lookup differs from softmax
        assert low.exp() == 0 and low.item() < -105  # exp underflows to 0 in float32 (below -103.9)
        assert str(high.max().item()) in cases[2][0] or f"{high.max().item():.4g}" in cases[2][0]
        seen.add((cases[0][1].tolist()[0], high.max().item(), low.item()))
    assert len(seen) == len(OFFSETS)


def test_1_3_drawn_logits_overflow_float32_exp(monkeypatch):
    from attnbook.exercises import ch01

    seen = set()
    for o in OFFSETS:
        monkeypatch.setattr(compare, "SEED_OFFSET", o)
        cases = ch01._softmax_cases(ch01.generator(13))
        big = [x for _desc, x, _dim in cases[2:5] + cases[6:8]]
        assert all(torch.isinf(x.abs().amax().exp()) for x in big)  # exp overflows float32 (above 88.7)
        assert cases[3][1].exp().sum() == 0  # every exp underflows: 0 / 0 without the shift
        seen.add(float(cases[2][1][0, 0]))
    assert len(seen) > 100  # a new size on most runs


def test_1_x_drawn_cases_give_every_catalogue_entry_its_verdict(monkeypatch):
    """The catalogue's verdicts hold under another seed too (the properties above cover 200); refused routes
    and types do not depend on the values, so only the answers judged by their values are run."""
    import mutants

    entries = [m for m in mutants.load(1) if m.exercise_id in ("1.2", "1.3") and "(generated)" not in m.name
               and not (m.hint or "").startswith(("without", "package's own", "tensor", "dtype", "float16"))]
    for o in OFFSETS[1:2]:
        monkeypatch.setattr(compare, "SEED_OFFSET", o)
        assert not [(m.name, r.message) for m in entries for ok, r in [mutants.run(m)] if not ok], o
