"""Chapter 2 checkers: the book's reference solutions pass; plausible wrong answers fail with the right hint."""
import math

import numpy as np
import pytest
import torch

from attnbook.exercises import check

# ---------------------------------------------------------------------------------------------------------
# 2.1 attention by hand
# ---------------------------------------------------------------------------------------------------------

Q = torch.tensor([[1.0, 0.0], [0.0, 1.0]])
K = torch.tensor([[1.0, 0.0], [0.5, 0.5]])
V = torch.tensor([[2.0, 0.0], [1.0, 1.0]])


def test_2_1_reference_passes(solutions):
    result = check("2.1", solutions(2)["answer_2_1"])
    assert result.passed, result.message


def test_2_1_accepts_a_nested_list_a_tuple_and_an_array(solutions):
    answer = solutions(2)["answer_2_1"]
    rounded = [[round(x, 3) for x in row] for row in answer.tolist()]
    for form in (rounded, tuple(tuple(row) for row in rounded), np.array(rounded)):
        result = check("2.1", form)
        assert result.passed, (type(form).__name__, result.message)


def test_2_1_not_attempted():
    result = check("2.1", None)
    assert result.status == "not attempted"


@pytest.mark.parametrize(
    "wrong, hint",
    [
        (torch.softmax(Q @ K.T, dim=-1) @ V, "left out the scale"),
        (torch.softmax(Q @ K.T / 2, dim=-1) @ V, "divided the scores by d_k = 2"),
        (torch.softmax(Q @ K.T / math.sqrt(2), dim=0) @ V, "normalised each column"),
        (torch.softmax(Q @ K / math.sqrt(2), dim=-1) @ V, "your scores are not Q K^T"),
        (torch.softmax(Q @ K.T / math.sqrt(2), dim=-1), "multiply them by V"),
        ((torch.softmax(Q @ K.T / math.sqrt(2), dim=-1) @ V).T.tolist(), "transposed"),
    ],
    ids=["no-scale", "scale-by-d_k", "softmax-dim0", "K-not-transposed", "weights", "transposed"],
)
def test_2_1_wrong_answers_get_hints(wrong, hint):
    result = check("2.1", wrong)
    assert not result.passed
    assert hint in result.message, result.message


def test_2_1_wrong_shape_and_garbage():
    assert "shape (2, 3)" in check("2.1", [[1, 2, 3], [4, 5, 6]]).message
    assert "single number" in check("2.1", 1.5875).message
    assert not check("2.1", "1.59, 0.41").passed
    result = check("2.1", [[1.6, 0.4], [1.4, 0.6]])  # rounded to one decimal: not within 1e-3
    assert not result.passed and "every entry is wrong" in result.message


# ---------------------------------------------------------------------------------------------------------
# 2.2 attention with a mask
# ---------------------------------------------------------------------------------------------------------


def test_2_2_reference_passes(solutions):
    result = check("2.2", solutions(2)["attention"])
    assert result.passed, result.message


def test_2_2_not_attempted():
    def attention(q, k, v, mask=None):
        raise NotImplementedError("replace this line with your code")

    assert check("2.2", attention).status == "not attempted"


def make_attention(*, dim=-1, scale="sqrt", fill=float("-inf"), invert=False, after=False, fix_empty=True,
                   returns="both"):
    """An attention function with one deliberate mistake (the defaults give a correct one)."""

    def attention(q, k, v, mask=None):
        d_k = q.size(-1)
        divisor = {"sqrt": math.sqrt(d_k), "none": 1.0, "d_k": d_k, "dim0": math.sqrt(q.size(0))}[scale]
        scores = q @ k.transpose(-2, -1) / divisor
        if mask is not None and not after:
            scores = scores.masked_fill(mask if invert else ~mask, fill)
        weights = torch.softmax(scores, dim=dim)
        if mask is not None and after:
            weights = weights * mask
        if mask is not None and fix_empty and not after:
            weights = weights.masked_fill(~mask.any(dim=-1, keepdim=True), 0.0)
        output = weights @ v
        return {"both": (output, weights), "swapped": (weights, output), "output": output}[returns]

    return attention


def test_2_2_a_correct_variant_passes():
    assert check("2.2", make_attention()).passed


@pytest.mark.parametrize(
    "kwargs, hint",
    [
        ({"dim": -2}, "normalises over the queries (dim=-2)"),
        ({"scale": "none"}, "left out the scale"),
        ({"scale": "d_k"}, "divided the scores by d_k"),
        ({"scale": "dim0"}, "q.size(-1)"),
        ({"invert": True}, "mask is inverted"),
        ({"after": True}, "applied the mask after the softmax"),
        ({"fix_empty": False}, "gets NaN weights"),
        ({"fill": -1e9, "fix_empty": False}, "uniform weights"),
        ({"returns": "swapped"}, "you swapped them"),
        ({"returns": "output"}, "returned only the output"),
    ],
    ids=lambda x: str(x) if isinstance(x, dict) else "",
)
def test_2_2_wrong_answers_get_hints(kwargs, hint):
    result = check("2.2", make_attention(**kwargs))
    assert not result.passed, kwargs
    assert hint in result.message, (kwargs, result.message)


def test_2_2_messages_name_the_input():
    result = check("2.2", make_attention(dim=-2))
    assert "2-D q (3, 4)" in result.message, result.message
    result = check("2.2", make_attention(fix_empty=False))
    assert "may attend to no key" in result.message, result.message


def test_2_2_batched_failure_gets_a_transpose_hint():
    def attention(q, k, v, mask=None):  # works for 2-D inputs only
        weights = torch.softmax(q @ k.t() / math.sqrt(q.size(-1)), dim=-1)
        return weights @ v, weights

    result = check("2.2", attention)
    assert not result.passed
    assert "3-D" in result.message and "k.transpose(-2, -1)" in result.message, result.message


def test_2_2_returning_only_the_weights_or_none():
    def only_weights(q, k, v, mask=None):
        return make_attention()(q, k, v, mask)[1]

    def no_return(q, k, v, mask=None):
        make_attention()(q, k, v, mask)

    assert "returned only the weights" in check("2.2", only_weights).message
    assert "expected a tuple" in check("2.2", no_return).message


def test_2_2_in_place_mask_is_reported():
    def attention(q, k, v, mask=None):
        if mask is None:
            return make_attention()(q, k, v)
        mask.logical_not_()  # flips the caller's mask in place, then treats True as blocked
        return make_attention(invert=True)(q, k, v, mask)

    result = check("2.2", attention)
    assert not result.passed and "in place" in result.message, result.message


# ---------------------------------------------------------------------------------------------------------
# 2.3 padding mask
# ---------------------------------------------------------------------------------------------------------


def test_2_3_reference_passes(solutions):
    result = check("2.3", solutions(2)["padding_mask"])
    assert result.passed, result.message


def test_2_3_not_attempted():
    def padding_mask(lengths, max_len):
        raise NotImplementedError

    assert check("2.3", padding_mask).status == "not attempted"


def inverted(lengths, max_len):
    return torch.arange(max_len)[None, :] >= lengths[:, None]


def less_equal(lengths, max_len):
    return torch.arange(max_len)[None, :] <= lengths[:, None]


def as_int(lengths, max_len):
    return (torch.arange(max_len)[None, :] < lengths[:, None]).long()


def as_float(lengths, max_len):
    return (torch.arange(max_len)[None, :] < lengths[:, None]).float()


def transposed(lengths, max_len):
    return torch.arange(max_len)[:, None] < lengths[None, :]


def mutates(lengths, max_len):
    lengths.clamp_(max=max_len - 1)  # changes the caller's tensor where a length equals max_len
    return torch.arange(max_len)[None, :] < lengths[:, None]


def one_based(lengths, max_len):
    return torch.arange(1, max_len + 1)[None, :] < lengths[:, None]


@pytest.mark.parametrize(
    "fn, hint",
    [
        (inverted, "mask is inverted"),
        (less_equal, "not p <= length"),
        (as_int, "compare, don't cast"),
        (as_float, "compare, don't cast"),
        (transposed, "transposed"),
        (mutates, "in place"),
        (one_based, "exactly lengths[b] True values"),
    ],
    ids=lambda x: getattr(x, "__name__", ""),
)
def test_2_3_wrong_answers_get_hints(fn, hint):
    result = check("2.3", fn)
    assert not result.passed, fn.__name__
    assert hint in result.message, (fn.__name__, result.message)


def test_2_3_other_wrong_values_are_described():
    def first_always_true(lengths, max_len):
        mask = torch.arange(max_len)[None, :] < lengths[:, None]
        return mask | (torch.arange(max_len) == 0)

    result = check("2.3", first_always_true)
    assert "row 0 (length 0) is True at position 0, expected False" in result.message, result.message
    assert "[False, False, False]" not in result.message  # the first wrong entry, never a whole expected row


# ---------------------------------------------------------------------------------------------------------
# 2.4 variance of a dot product
# ---------------------------------------------------------------------------------------------------------


def test_2_4_reference_passes(solutions):
    result = check("2.4", solutions(2)["dot_product_variance"])
    assert result.passed, result.message


def test_2_4_passes_with_any_seed_and_a_float():
    for seed in range(5):
        def variance(d_k, n_samples=10_000, seed=seed):
            g = torch.Generator().manual_seed(seed)
            q, k = torch.randn(n_samples, d_k, generator=g), torch.randn(n_samples, d_k, generator=g)
            return (q * k).sum(-1).var().item()

        assert check("2.4", variance).passed, seed

    def numpy_variance(d_k, n_samples=10_000):
        rng = np.random.default_rng(7)
        return np.var(np.sum(rng.standard_normal((n_samples, d_k)) * rng.standard_normal((n_samples, d_k)), 1))

    assert check("2.4", numpy_variance).passed


def test_2_4_not_attempted():
    def dot_product_variance(d_k, n_samples=10_000):
        raise NotImplementedError

    assert check("2.4", dot_product_variance).status == "not attempted"


def dots(d_k, n, sampler=torch.randn, same=False):
    q = sampler(n, d_k)
    k = q if same else sampler(n, d_k)
    return (q * k).sum(-1)


@pytest.mark.parametrize(
    "fn, hint",
    [
        (lambda d_k, n_samples=10_000: (dots(d_k, n_samples) / math.sqrt(d_k)).var().item(), "scaled q.k"),
        (lambda d_k, n_samples=10_000: (torch.randn(n_samples, d_k) * torch.randn(n_samples, d_k)).var().item(),
         "variance of one product"),
        (lambda d_k, n_samples=10_000: dots(d_k, n_samples).std().item(), "standard deviation"),
        (lambda d_k, n_samples=10_000: dots(d_k, n_samples).mean().item(), "mean of q.k"),
        (lambda d_k, n_samples=10_000: dots(d_k, n_samples, torch.rand).var().item(), "torch.rand"),
        (lambda d_k, n_samples=10_000: dots(d_k, n_samples, torch.rand).mean().item(), "mean of q.k for uniform"),
        (lambda d_k, n_samples=10_000: dots(d_k, n_samples, same=True).var().item(), "k = q"),
        (lambda d_k, n_samples=10_000: float(d_k), "measure it"),
        (lambda d_k, n_samples=10_000: dots(d_k, n_samples), "tensor of shape (10000,)"),
    ],
    ids=["scaled", "one-product", "std", "mean", "uniform", "uniform-mean", "same-vector", "exact", "no-reduce"],
)
def test_2_4_wrong_answers_get_hints(fn, hint):
    result = check("2.4", fn)
    assert not result.passed
    assert hint in result.message, result.message



# ---------------------------------------------------------------------------------------------------------
# Findings of the learner trial (issue 6): forbidden shortcuts, luck, give-aways, misleading hints
# ---------------------------------------------------------------------------------------------------------


def _by_hand_output() -> list[list[float]]:
    """softmax(Q K^T / sqrt(2)) V for the exercise's matrices, in plain Python (independent of torch)."""
    q, k, v = [[1.0, 0.0], [0.0, 1.0]], [[1.0, 0.0], [0.5, 0.5]], [[2.0, 0.0], [1.0, 1.0]]
    out = []
    for qi in q:
        s = [sum(a * b for a, b in zip(qi, kj)) / math.sqrt(2) for kj in k]
        e = [math.exp(x) for x in s]
        w = [x / sum(e) for x in e]
        out.append([sum(w[j] * v[j][c] for j in range(2)) for c in range(2)])
    return out


@pytest.mark.parametrize("wrong", [
    [[1.0, 0.0], [0.0, 1.0]], [[1.5, 0.5], [1.5, 0.5]], [[1.6, 0.4], [1.4, 0.6]], [[2.0, 1.0], [1.0, 2.0]],
    torch.softmax(Q @ K.T, dim=-1) @ V, (torch.softmax(Q @ K.T / math.sqrt(2), dim=-1) @ V) + 0.01,
])
def test_2_1_messages_never_reveal_the_expected_numbers(wrong):
    result = check("2.1", wrong)
    assert not result.passed
    for row in _by_hand_output():
        for x in row:
            for digits in (2, 3, 4):
                assert f"{x:.{digits}f}" not in result.message, (x, result.message)
    assert "max abs error" not in result.message and "expected" not in result.message


def test_2_1_nan_and_integer_answers_get_their_own_messages():
    nan = check("2.1", [[float("nan"), 0.5], [1.2, 0.3]])
    assert not nan.passed and "NaN" in nan.message and "mask" not in nan.message
    integer = check("2.1", torch.tensor([[2, 0], [1, 1]]))
    assert not integer.passed and "integer" in integer.message and "decimal point" in integer.message


def _attention_via_torch_sdpa(q, k, v, mask=None):
    out = torch.nn.functional.scaled_dot_product_attention(q, k, v, attn_mask=mask)
    return out, None


def _attention_via_package(q, k, v, mask=None):
    from attnbook import scaled_dot_product_attention

    return scaled_dot_product_attention(q, k, v, attn_mask=mask)


def test_2_2_library_attention_is_refused():
    result = check("2.2", _attention_via_torch_sdpa)
    assert not result.passed and "the task asks you to write this without" in result.message, result.message
    result = check("2.2", _attention_via_package)
    assert not result.passed and "the package's own solution" in result.message, result.message


def test_2_2_boolean_indexing_is_not_blamed_on_k_T():
    def attention(q, k, v, mask=None):
        scores = q @ k.transpose(-2, -1) / math.sqrt(q.size(-1))
        if mask is not None:
            scores[~mask] = float("-inf")  # boolean indexing: breaks once the mask must broadcast
        weights = torch.softmax(scores, dim=-1)
        return weights @ v, weights

    result = check("2.2", attention)
    assert not result.passed and "IndexError" in result.message, result.message
    assert "masked_fill" in result.message and "k.T" not in result.message


def test_2_2_dim_2_on_a_2d_input_gets_a_hint():
    def attention(q, k, v, mask=None):
        weights = torch.softmax(q @ k.transpose(-2, -1) / math.sqrt(q.size(-1)), dim=2)
        return weights @ v, weights

    result = check("2.2", attention)
    assert not result.passed and "Dimension out of range" in result.message
    assert "dim=-1 is always the last dimension" in result.message


def test_2_3_library_padding_mask_is_refused():
    def padding_mask(lengths, max_len):
        from attnbook.masks import padding_mask as library_mask

        return library_mask(lengths, max_len)

    result = check("2.3", padding_mask)
    assert not result.passed and "the package's own solution" in result.message, result.message


def test_2_3_missing_new_axis_gets_a_broadcasting_hint():
    def padding_mask(lengths, max_len):
        return torch.arange(max_len)[None, :] < lengths  # (1, max_len) < (batch,): lines up wrongly

    result = check("2.3", padding_mask)
    assert not result.passed and "x[:, None]" in result.message, result.message


def _variance_ignoring_n_samples(d_k, n_samples=10_000):
    q, k = torch.randn(1_000, d_k), torch.randn(1_000, d_k)
    return (q * k).sum(-1).var().item()


def _variance_with_hard_coded_samples(d_k, n_samples=10_000):
    q, k = torch.randn(100_000, d_k), torch.randn(100_000, d_k)
    return (q * k).sum(-1).var().item()


@pytest.mark.parametrize("answer", [_variance_ignoring_n_samples, _variance_with_hard_coded_samples])
def test_2_4_an_answer_that_ignores_n_samples_fails_every_time(answer):
    verdicts = {check("2.4", answer).message for _ in range(3)}
    assert len(verdicts) == 1, verdicts  # the same verdict on every run
    (message,) = verdicts
    assert "n_samples" in message and "exactly the same number" in message


def test_2_4_a_right_answer_with_its_own_seed_passes_every_time():
    def dot_product_variance(d_k, n_samples=10_000):
        g = torch.Generator().manual_seed(1234)
        q, k = torch.randn(n_samples, d_k, generator=g), torch.randn(n_samples, d_k, generator=g)
        return float(((q * k).sum(-1)).var())

    assert all(check("2.4", dot_product_variance).passed for _ in range(3))


# Second learner trial (after the fixes above)


def test_2_1_guessing_entry_by_entry_stops_being_answered():
    from attnbook.exercises import reset_session

    reset_session()
    messages = [check("2.1", [[1.0 + i / 100, 0.0], [1.0, 0.0]]).message for i in range(12)]
    assert "entries" in messages[0] or "entry" in messages[0]
    assert "no longer named" in messages[-1] and "[0, 0]" not in messages[-1]
    reset_session()


def test_2_1_rounded_too_early_gets_its_own_hint():
    rounded = [[round(x, 2) for x in row] for row in _by_hand_output()]
    result = check("2.1", rounded)
    assert not result.passed and "rounded too early" in result.message


def test_2_1_a_list_of_row_tensors_is_accepted():
    out = torch.softmax(Q @ K.T / math.sqrt(2), dim=-1) @ V
    assert check("2.1", [out[0], out[1]]).passed


def test_2_1_transposed_scores_are_not_called_q_times_k():
    result = check("2.1", torch.softmax(K @ Q.T / math.sqrt(2), dim=-1) @ V)
    assert not result.passed and "your scores are not Q K^T" in result.message and "Q @ K;" not in result.message


def _attention_output_via_private_sdpa(q, k, v, mask=None):
    s = q @ k.transpose(-2, -1) / math.sqrt(q.size(-1))
    if mask is not None:
        s = s.masked_fill(~mask, float("-inf"))
    w = torch.softmax(s, -1).nan_to_num()
    return torch._C._nn.scaled_dot_product_attention(q, k, v, attn_mask=mask).nan_to_num(), w


def _attention_output_via_tiled(q, k, v, mask=None):
    from attnbook.attention import tiled_attention

    w = torch.softmax(q @ k.transpose(-2, -1) / math.sqrt(q.size(-1)), -1)
    return tiled_attention(q, k, v), w


def test_2_2_other_attention_routes_are_refused():
    result = check("2.2", _attention_output_via_private_sdpa)
    assert not result.passed and "the task asks you to write this without" in result.message, result.message
    result = check("2.2", _attention_output_via_tiled)
    assert not result.passed and "the package's own solution" in result.message, result.message


def test_2_2_if_mask_gets_a_hint():
    def attention(q, k, v, mask=None):
        s = q @ k.transpose(-2, -1) / math.sqrt(q.size(-1))
        if mask:
            s = s.masked_fill(~mask, float("-inf"))
        w = torch.softmax(s, -1)
        return w @ v, w

    result = check("2.2", attention)
    assert not result.passed and "if mask is not None" in result.message


def test_2_3_int32_lengths_are_tested():
    def padding_mask(lengths, max_len):  # one_hot accepts int64 only
        return torch.nn.functional.one_hot(lengths, max_len + 1)[:, 1:].flip(1).cumsum(1).flip(1).bool()

    result = check("2.3", padding_mask)
    assert not result.passed and "int32" in result.message


def _variance_unseeded_ignoring_n_samples(d_k, n_samples=10_000):
    rng = np.random.default_rng()
    return float((rng.standard_normal((10_000, d_k)) * rng.standard_normal((10_000, d_k))).sum(1).var(ddof=1))


def _variance_unseeded_100_samples(d_k, n_samples=10_000):
    g = torch.Generator()
    g.seed()
    return (torch.randn(100, d_k, generator=g) * torch.randn(100, d_k, generator=g)).sum(1).var().item()


def test_2_4_unseeded_answers_that_ignore_n_samples_fail():
    message = check("2.4", _variance_unseeded_ignoring_n_samples).message
    assert "use the n_samples argument" in message, message
    results = [check("2.4", _variance_unseeded_100_samples) for _ in range(5)]
    assert not any(r.passed for r in results), [r.message for r in results]


def test_2_4_unseeded_right_answer_passes():
    def dot_product_variance(d_k, n_samples=10_000):
        rng = np.random.default_rng()
        return float((rng.standard_normal((n_samples, d_k)) * rng.standard_normal((n_samples, d_k))).sum(1).var(ddof=1))

    assert all(check("2.4", dot_product_variance).passed for _ in range(3))


def test_2_4_integer_samples_get_no_misleading_hint():
    def dot_product_variance(d_k, n_samples=10_000):
        q, k = torch.randn(n_samples, d_k).int(), torch.randn(n_samples, d_k).int()
        return (q * k).sum(-1).float().var().item()

    result = check("2.4", dot_product_variance)
    assert not result.passed and "uniform" not in result.message, result.message


# Third learner trial: dtypes, hints that fit every input and print no solution code, return types


def _attention(scale_size=None, cast=None, zero_empty_after_output=False):
    """Attention with one deliberate change (none by default): the scale from another size, a cast of the
    inputs, or the output computed before the NaN rows of the weights are set to 0."""
    def attention(q, k, v, mask=None):
        size = {"L": q.size(-2), "S": k.size(-2), "d_v": v.size(-1), None: q.size(-1)}[scale_size]
        if cast is not None:
            q, k, v = q.to(cast), k.to(cast), v.to(cast)
        scores = q @ k.transpose(-2, -1) / math.sqrt(size)
        if mask is not None:
            scores = scores.masked_fill(~mask, float("-inf"))
        weights = torch.softmax(scores, dim=-1)
        if zero_empty_after_output:
            return weights @ v, weights.nan_to_num(0.0)
        weights = weights.nan_to_num(0.0)
        return weights @ v, weights
    return attention


def test_2_2_float64_inputs_must_give_float64_results():
    result = check("2.2", _attention(cast=torch.float32))
    assert not result.passed and "dtype torch.float32" in result.message and "expected torch.float64" in result.message


@pytest.mark.parametrize("size, named", [("L", "number of queries"), ("S", "number of keys"),
                                         ("d_v", "size of the values")])
def test_2_2_a_scale_by_the_wrong_size_names_that_size(size, named):
    result = check("2.2", _attention(scale_size=size))
    assert not result.passed and named in result.message, result.message
    assert "q.size(0)" not in result.message


def test_2_2_output_before_the_nan_fix_is_named():
    result = check("2.2", _attention(zero_empty_after_output=True))
    assert not result.passed and "output" in result.message and "NaN" in result.message, result.message
    assert "overflows" not in result.message


def test_2_2_hints_print_no_solution_code():
    result = check("2.2", make_attention(fix_empty=False))
    assert not result.passed and "gets NaN weights" in result.message
    assert "masked_fill(" not in result.message and "mask.any(" not in result.message, result.message


def test_2_2_ignoring_the_mask_and_a_re_broadcast_mask_get_hints():
    def ignores_mask(q, k, v, mask=None):
        return _attention()(q, k, v)

    def re_broadcasts(q, k, v, mask=None):
        if mask is not None and mask.dim() == 2:
            mask = mask[:, None, None, :]
        return _attention()(q, k, v, mask)

    assert "did not apply the mask" in check("2.2", ignores_mask).message
    message = check("2.2", re_broadcasts).message
    assert "use it as it is" in message and "keepdim" not in message, message


def test_2_2_a_mistake_on_one_input_only_is_not_named():
    """No scale on the 4-D inputs only: the missing scale does not explain the 2-D and 3-D inputs."""
    def attention(q, k, v, mask=None):
        size = 1.0 if q.dim() == 4 else math.sqrt(q.size(-1))
        weights = torch.softmax(q @ k.transpose(-2, -1) / size, dim=-1)
        return weights @ v, weights

    result = check("2.2", attention)
    assert not result.passed and "4-D" in result.message
    assert "left out the scale" not in result.message and "at index" in result.message, result.message


def test_2_3_the_bool_hint_prints_no_code():
    result = check("2.3", as_int)
    assert "compare, don't cast" in result.message
    assert "[None, :]" not in result.message and "[:, None]" not in result.message, result.message


def test_2_4_only_a_python_float_is_accepted():
    def as_tensor(d_k, n_samples=10_000):
        return (torch.randn(n_samples, d_k) * torch.randn(n_samples, d_k)).sum(-1).var()

    def as_float32(d_k, n_samples=10_000):
        rng = np.random.default_rng(3)
        a = rng.standard_normal((n_samples, d_k), dtype=np.float32)
        return (a * rng.standard_normal((n_samples, d_k), dtype=np.float32)).sum(-1).var()

    def rounded(d_k, n_samples=10_000):
        return round((torch.randn(n_samples, d_k) * torch.randn(n_samples, d_k)).sum(-1).var().item())

    assert ".item()" in check("2.4", as_tensor).message
    assert "float32" in check("2.4", as_float32).message and "float(" in check("2.4", as_float32).message
    assert "the int" in check("2.4", rounded).message


def test_2_4_swapped_sizes_get_their_own_hint():
    def swapped(d_k, n_samples=10_000):
        return (torch.randn(d_k, n_samples) * torch.randn(d_k, n_samples)).sum(-1).var().item()

    result = check("2.4", swapped)
    assert not result.passed and "n_samples pairs of vectors of size d_k" in result.message, result.message
