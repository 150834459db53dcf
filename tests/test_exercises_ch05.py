"""Chapter 5 checkers, beyond single verdicts: which answer passes and which fails with which hint is the mutant
catalogue's (tests/mutants/ch05.py, run by tests/test_remote.py). Here: the book's reference solutions pass, stubs are
not attempted, a message has several properties at once (what it names and what it must not show: solution code, the
expected entries, a mistake that explains one case only, the section to re-read), and the inputs drawn from the run's
seed keep every mistake apart. Every answer here is written out by hand, independently of the checker code."""
import math
import re

import numpy as np
import pytest
import torch

from attnbook import positional
from attnbook.exercises import check, reset_session
from mutants.ch05 import loop_table  # one mistake at a time, written as a learner would loop


@pytest.fixture(autouse=True)
def fresh_session():
    """Each test is a new learner: failed attempts from other tests must not change the messages (5.4 stops naming
    the wrong entries after 10 failed tries)."""
    reset_session()
    yield
    reset_session()

# ---------------------------------------------------------------------------------------------------------
# 5.1 the sinusoidal table
# ---------------------------------------------------------------------------------------------------------


def test_5_1_reference_passes(solutions):
    result = check("5.1", solutions(5)["sinusoidal_table"])
    assert result.passed, result.message


def test_5_1_not_attempted():
    def sinusoidal_table(max_len, d_model):
        raise NotImplementedError("replace this line with your code")

    assert check("5.1", sinusoidal_table).status == "not attempted"


@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16, torch.float64])
def test_5_1_any_dtype_but_float32_gets_the_dtype_message(dtype):
    def sinusoidal_table(max_len, d_model):
        pos = torch.arange(max_len, dtype=torch.float64)[:, None]
        angles = pos / 10000 ** (torch.arange(0, d_model, 2, dtype=torch.float64) / d_model)
        return torch.stack((angles.sin(), angles.cos()), dim=-1).reshape(max_len, d_model).to(dtype)

    result = check("5.1", sinusoidal_table)
    assert not result.passed
    assert f"has dtype {dtype}" in result.message and "expected torch.float32" in result.message, result.message
    assert "wrong values" not in result.message, result.message


def test_5_1_built_from_the_shift_operator_names_the_public_function():
    def sinusoidal_table(max_len, d_model):  # PE(p) = R_p PE(0), with PE(0) = (0, 1, 0, 1, ...)
        pe0 = torch.tensor([0.0, 1.0] * (d_model // 2), dtype=torch.float64)
        return torch.stack([positional.shift_operator(p, d_model, dtype=torch.float64) @ pe0
                            for p in range(max_len)]).float()

    result = check("5.1", sinusoidal_table)
    assert not result.passed and "called attnbook.positional.shift_operator" in result.message, result.message
    assert "_frequencies" not in result.message, result.message


def test_5_1_hugging_face_tables_are_refused():
    xlm = pytest.importorskip("transformers.models.xlm.modeling_xlm")

    def from_xlm(max_len, d_model):
        out = torch.empty(max_len, d_model)
        xlm.create_sinusoidal_embeddings(max_len, d_model, out)
        return out

    def from_marian(max_len, d_model):  # sines then cosines: interleave them back by hand
        from transformers.models.marian.modeling_marian import MarianSinusoidalPositionalEmbedding

        w = MarianSinusoidalPositionalEmbedding(max_len, d_model).create_weight()
        h = d_model // 2
        return torch.stack((w[:, :h], w[:, h:]), dim=-1).reshape(max_len, d_model)

    for answer, name in ((from_xlm, "create_sinusoidal_embeddings"), (from_marian, "create_weight")):
        result = check("5.1", answer)
        assert not result.passed and f"modeling_{'xlm' if answer is from_xlm else 'marian'}.{name}" in result.message, \
            result.message
        assert "no library sinusoidal table" in result.message, result.message


# The 5.1 answers below are written out here; each differs from the paper's table in one way.


def table_from(angles_fn, dtype=torch.float32):
    """A sinusoidal_table whose angles come from angles_fn(max_len, d_model) -> (max_len, d_model/2)."""
    def sinusoidal_table(max_len, d_model):
        a = angles_fn(max_len, d_model)
        return torch.stack((a.sin(), a.cos()), dim=-1).reshape(max_len, d_model).to(dtype)
    return sinusoidal_table


def test_5_1_float16_angles_are_named_and_the_numbers_shown_differ():
    answer = table_from(lambda n, d: (torch.arange(n, dtype=torch.float16)[:, None]
                                      / 10000 ** (torch.arange(0, d, 2, dtype=torch.float16) / d)).float())
    result = check("5.1", answer)
    assert not result.passed and "float16" in result.message, result.message
    m = re.search(r"expected (\S+), got (\S+)", result.message)
    assert m and m.group(1) != m.group(2), result.message


def test_5_1_a_mistake_that_explains_one_size_only_is_not_named():
    right = table_from(lambda n, d: torch.arange(n).double()[:, None] / 10000 ** (torch.arange(0, d, 2).double() / d))

    def halves_on_one_size(max_len, d_model):  # right everywhere except (10, 8), where the layout is halves
        pe = right(max_len, d_model)
        return torch.cat((pe[:, 0::2], pe[:, 1::2]), dim=-1) if (max_len, d_model) == (10, 8) else pe

    result = check("5.1", halves_on_one_size)
    assert not result.passed and "on max_len=10, d_model=8" in result.message, result.message
    assert "halves" not in result.message and "at index" in result.message, result.message


def test_5_1_hints_print_no_solution_code():
    for kwargs in ({"layout": "halves"}, {"exponent": "j/d"}, {"start": 1}):
        message = check("5.1", loop_table(**kwargs)).message
        assert '(Re-read "The formula".)' in message, (kwargs, message)
        for code in ("pe[:, 0::2]", "torch.arange(0, d_model, 2)", "torch.arange(max_len)"):
            assert code not in message, (kwargs, message)


# ---------------------------------------------------------------------------------------------------------
# 5.2 how far from permutation-equivariant
# ---------------------------------------------------------------------------------------------------------


def test_5_2_reference_passes(solutions):
    result = check("5.2", solutions(5)["max_equivariance_error"])
    assert result.passed, result.message


def test_5_2_not_attempted():
    def max_equivariance_error(f, x, perm):
        raise NotImplementedError

    assert check("5.2", max_equivariance_error).status == "not attempted"


def batch_axis(f, x, perm):
    return (f(x[perm]) - f(x)[perm]).abs().max().item()


def feature_axis(f, x, perm):
    return (f(x[:, :, perm]) - f(x)[:, :, perm]).abs().max().item()


def inverse_on_output(f, x, perm):
    inverse = torch.empty_like(perm)
    inverse[perm] = torch.arange(len(perm))
    return (f(x[:, perm]) - f(x)[:, inverse]).abs().max().item()


def output_not_permuted(f, x, perm):
    return (f(x[:, perm]) - f(x)).abs().max().item()


def mean_not_max(f, x, perm):
    return (f(x[:, perm]) - f(x)[:, perm]).abs().mean().item()


def signed_max(f, x, perm):
    return (f(x)[:, perm] - f(x[:, perm])).max().item()


def whole_tensor(f, x, perm):
    return (f(x[:, perm]) - f(x)[:, perm]).abs()


def always_zero(f, x, perm):
    f(x)
    return 0.0


def permuted_input_not_output(f, x, perm):  # the learner trial's answer that crashed the checker
    return (f(x[:, perm]) - x[:, perm]).abs().max().item()


def compared_with_itself(f, x, perm):
    return (f(x[:, perm]) - f(x[:, perm])).abs().max().item()


def truncated_to_int(f, x, perm):
    return int((f(x[:, perm]) - f(x)[:, perm]).abs().max().item())


def test_5_2_comparing_with_the_permuted_input_gets_a_hint_not_a_crash():
    result = check("5.2", permuted_input_not_output)
    assert not result.passed and "could not check" not in result.message, result.message
    assert "you compared f of the permuted input with the permuted input itself" in result.message, result.message


@pytest.mark.parametrize("answer", [always_zero, compared_with_itself], ids=lambda a: a.__name__)
def test_5_2_zero_gets_the_not_equivariant_hint_not_the_batch_axis_one(answer):
    result = check("5.2", answer)
    assert not result.passed and "this f is not equivariant" in result.message, result.message
    assert "batch axis" not in result.message, result.message


def test_5_2_int_is_refused_with_a_float_hint():
    result = check("5.2", truncated_to_int)
    assert not result.passed and "returned the int 12" in result.message, result.message
    assert "drop the fractional part" in result.message and "batch axis" not in result.message, result.message


def test_5_2_return_kinds_the_task_excludes_are_refused():
    def zero_dim_array(f, x, perm):
        return np.array((f(x[:, perm]) - f(x)[:, perm]).abs().max().item())

    def one_element_tensor(f, x, perm):
        return (f(x[:, perm]) - f(x)[:, perm]).abs().max().reshape(1)

    def integer_tensor(f, x, perm):
        return (f(x[:, perm]) - f(x)[:, perm]).abs().max().long()

    for answer, phrase in ((zero_dim_array, "returned a NumPy array of shape ()"),
                           (one_element_tensor, "tensor of shape (1,)"),
                           (integer_tensor, "integer tensor")):
        result = check("5.2", answer)
        assert not result.passed, answer.__name__
        assert phrase in result.message, result.message
        assert "a Python float, a NumPy float or a 0-d floating-point tensor" in result.message, result.message


def test_5_2_the_exact_case_says_what_was_expected():
    def off_by_a_factor(f, x, perm):
        return 2 * (f(x[:, perm]) - f(x)[:, perm]).abs().max().item()

    result = check("5.2", off_by_a_factor)
    assert not result.passed
    # f(x) = x + P with P[i, j] = i (j + 1), n = d = 4, perm [3, 0, 1, 2]: the difference is (i - perm[i]) (j + 1),
    # largest for i = 0 (|0 - 3| = 3) and j = 3 (j + 1 = 4): 12
    assert "returned 24 for f(x) = x + P" in result.message and "expected 12" in result.message, result.message


def test_5_2_one_position_gets_its_own_hint_not_the_sign_one():
    # on the first f, the last position alone happens to give what the signed maximum gives (4): only a mistake
    # that explains every case may be named
    def last_position(f, x, perm):
        return (f(x[:, perm]) - f(x)[:, perm])[:, -1].abs().max().item()

    def first_position(f, x, perm):
        return (f(x[:, perm]) - f(x)[:, perm])[:, 0].abs().max().item()

    for answer in (last_position, first_position):
        result = check("5.2", answer)
        assert not result.passed and "one position" in result.message, result.message
        assert "sign" not in result.message and "absolute value" not in result.message, result.message


def test_5_2_a_mistake_that_fits_one_case_only_is_not_named():
    def signed_on_the_first_f_only(f, x, perm):  # the signed maximum where the batch is 4, right elsewhere
        diff = f(x[:, perm]) - f(x)[:, perm]
        return diff.max().item() if x.shape == (4, 4, 4) else diff.abs().max().item()

    result = check("5.2", signed_on_the_first_f_only)
    assert not result.passed and "returned 4 for" in result.message, result.message
    assert "Hint:" not in result.message, result.message


@pytest.mark.parametrize("answer", [batch_axis, feature_axis, inverse_on_output, output_not_permuted, mean_not_max,
                                    signed_max, whole_tensor, always_zero], ids=lambda a: a.__name__)
def test_5_2_hints_print_no_solution_code(answer):
    message = check("5.2", answer).message
    assert '(Re-read "Attention does not know the order".)' in message, message
    for code in (".abs()", ".max()", ".item()", "f(x)[:, perm]", "(a - b)"):
        assert code not in message, (code, message)


# ---------------------------------------------------------------------------------------------------------
# 5.3 RoPE
# ---------------------------------------------------------------------------------------------------------


def test_5_3_reference_passes(solutions):
    result = check("5.3", solutions(5)["apply_rope"])
    assert result.passed, result.message


def test_5_3_not_attempted():
    def apply_rope(x, positions):
        raise NotImplementedError

    assert check("5.3", apply_rope).status == "not attempted"


def make_rope(*, sign=1, power="2i/d", freqs="cat"):
    """An apply_rope with one deliberate mistake, written by rotating pairs in a loop (the defaults are correct)."""

    def apply_rope(x, positions):
        d = x.size(-1)
        out = x.double().clone()
        for i in range(d // 2):
            theta = 10000.0 ** (-(2 * i if power == "2i/d" else i) / d)
            angle = sign * positions.double() * theta  # (seq,)
            if freqs == "repeat":  # cos/sin laid out as [f0, f0, f1, f1, ...] but combined with rotate-half
                a_col, b_col = i, i + d // 2
                ca, sa = torch.cos(positions.double() * 10000.0 ** (-2 * (a_col // 2) / d)), \
                    torch.sin(positions.double() * 10000.0 ** (-2 * (a_col // 2) / d))
                cb, sb = torch.cos(positions.double() * 10000.0 ** (-2 * (b_col // 2) / d)), \
                    torch.sin(positions.double() * 10000.0 ** (-2 * (b_col // 2) / d))
                xa, xb = x[..., a_col].double(), x[..., b_col].double()
                out[..., a_col] = xa * ca - xb * sa
                out[..., b_col] = xb * cb + xa * sb
                continue
            a, b = i, i + d // 2
            xa, xb = x[..., a].double(), x[..., b].double()
            out[..., a] = xa * torch.cos(angle) - xb * torch.sin(angle)
            out[..., b] = xa * torch.sin(angle) + xb * torch.cos(angle)
        return out.to(x.dtype)

    return apply_rope


def rope_at(x, positions):
    """The right rotation at the given positions, written with rotate_half (used to build wrong answers below)."""
    d = x.size(-1)
    freqs = positions.double()[:, None] / 10000 ** (torch.arange(0, d, 2).double() / d)  # (seq, d/2)
    emb = torch.cat((freqs, freqs), dim=-1)  # (seq, d)
    x1, x2 = x.chunk(2, dim=-1)
    return (x * emb.cos() + torch.cat((-x2, x1), dim=-1) * emb.sin()).to(x.dtype)


def test_5_3_positions_shifted_to_zero_or_assumed_consecutive_get_their_own_hints():
    def from_zero(x, positions):
        return rope_at(x, positions - positions.min())

    def consecutive(x, positions):
        return rope_at(x, positions[0] + torch.arange(x.size(-2)))

    for answer, phrase in ((from_zero, "you shifted the positions so that they start at 0"),
                           (consecutive, "you assumed consecutive positions")):
        result = check("5.3", answer)
        assert not result.passed and phrase in result.message, result.message
        assert "use the positions exactly as given" in result.message, result.message
        assert "you ignored the positions argument" not in result.message, result.message


def test_5_3_freqs_not_concatenated_gets_the_cat_hint():
    def apply_rope(x, positions):
        d = x.size(-1)
        freqs = positions[:, None].float() / 10000 ** (torch.arange(0, d, 2).float() / d)  # (seq, d/2)
        x1, x2 = x.chunk(2, dim=-1)
        return x * freqs.cos() + torch.cat((-x2, x1), dim=-1) * freqs.sin()  # (.., d) * (seq, d/2): fails

    result = check("5.3", apply_rope)
    assert not result.passed and "the d/2 angles repeated as a block" in result.message, result.message
    assert "torch.cat" not in result.message, result.message  # a rule, not the line of code


@pytest.mark.parametrize("model", ["mixtral", "falcon", "gemma3", "esm"])
def test_5_3_every_hugging_face_copy_is_refused(model):
    module = pytest.importorskip(f"transformers.models.{model}.modeling_{model}")
    rotate_half, apply_rotary_pos_emb = module.rotate_half, module.apply_rotary_pos_emb

    def with_rotate_half(x, positions):
        d = x.size(-1)
        freqs = positions[:, None].double() / 10000 ** (torch.arange(0, d, 2).double() / d)
        emb = torch.cat((freqs, freqs), dim=-1)
        return x * emb.cos().to(x.dtype) + rotate_half(x) * emb.sin().to(x.dtype)

    def with_apply_rotary_pos_emb(x, positions):
        d = x.size(-1)
        freqs = positions[:, None].double() / 10000 ** (torch.arange(0, d, 2).double() / d)
        emb = torch.cat((freqs, freqs), dim=-1)
        return apply_rotary_pos_emb(x, x, emb.cos().to(x.dtype), emb.sin().to(x.dtype), unsqueeze_dim=0)[0]

    for answer, name in ((with_rotate_half, "rotate_half"), (with_apply_rotary_pos_emb, "apply_rotary_pos_emb")):
        result = check("5.3", answer)
        assert not result.passed, (model, name)
        assert f"the task asks you to write this without transformers.models.{model}" in result.message, result.message
        assert "rotate_half(x) = cat(-x2, x1)" in result.message, result.message


def test_5_3_float16_angles_are_named_and_the_numbers_shown_differ():
    def apply_rope(x, positions):
        d = x.size(-1)
        freqs = (positions.float()[:, None] / 10000 ** (torch.arange(0, d, 2).float() / d)).half()
        emb = torch.cat((freqs, freqs), dim=-1)
        x1, x2 = x.chunk(2, dim=-1)
        return x * emb.cos().to(x.dtype) + torch.cat((-x2, x1), dim=-1) * emb.sin().to(x.dtype)

    result = check("5.3", apply_rope)
    assert not result.passed and "float16" in result.message, result.message
    m = re.search(r"expected (\S+), got (\S+)", result.message)
    assert m and m.group(1) != m.group(2), result.message


def test_5_3_hints_print_no_solution_code():
    for kwargs in ({"power": "i/d"}, {"freqs": "repeat"}, {"sign": -1}):
        message = check("5.3", make_rope(**kwargs)).message
        assert '(Re-read "Rotary position embedding (RoPE)".)' in message, (kwargs, message)
        for code in ("torch.cat((freqs, freqs)", "10000 ** (-torch.arange", "torch.arange(0, d, 2)"):
            assert code not in message, (kwargs, message)


# ---------------------------------------------------------------------------------------------------------
# 5.4 the shift matrix
# ---------------------------------------------------------------------------------------------------------


def test_5_4_reference_passes(solutions):
    result = check("5.4", solutions(5)["pe_shift_matrix"])
    assert result.passed, result.message


def test_5_4_lists_arrays_and_tuples_are_refused_the_task_asks_for_a_tensor():
    def entries(k, omega):
        c, s = math.cos(omega * k), math.sin(omega * k)
        return [[c, s], [-s, c]]

    answers = (entries, lambda k, omega: np.array(entries(k, omega)),
               lambda k, omega: tuple(tuple(row) for row in entries(k, omega)))
    for answer, kind in zip(answers, ("a list", "a NumPy array of shape (2, 2)", "a tuple")):
        result = check("5.4", answer)
        assert not result.passed, kind
        assert f"returned {kind}" in result.message and "expected a torch.Tensor" in result.message, result.message


def test_5_4_not_attempted():
    def pe_shift_matrix(k, omega):
        raise NotImplementedError

    assert check("5.4", pe_shift_matrix).status == "not attempted"


def transposed(k, omega):
    return torch.tensor([[math.cos(omega * k), -math.sin(omega * k)], [math.sin(omega * k), math.cos(omega * k)]])


def rows_swapped(k, omega):
    c, s = math.cos(omega * k), math.sin(omega * k)
    return torch.tensor([[-s, c], [c, s]])


def columns_swapped(k, omega):
    c, s = math.cos(omega * k), math.sin(omega * k)
    return torch.tensor([[s, c], [c, -s]])


def cos_sin_swapped(k, omega):
    c, s = math.cos(omega * k), math.sin(omega * k)
    return torch.tensor([[s, c], [-c, s]])


def identity(k, omega):
    return torch.eye(2)


def test_5_4_half_precision_gets_a_dtype_message():
    def pe_shift_matrix(k, omega):
        c, s = math.cos(omega * k), math.sin(omega * k)
        return torch.tensor([[c, s], [-s, c]], dtype=torch.float16)

    result = check("5.4", pe_shift_matrix)
    assert not result.passed and "dtype torch.float16" in result.message, result.message
    assert "expected float32 or float64" in result.message, result.message


@pytest.mark.parametrize("answer", [transposed, cos_sin_swapped, rows_swapped, columns_swapped, identity],
                         ids=lambda a: a.__name__)
def test_5_4_hints_never_state_the_entries(answer):
    message = check("5.4", answer).message
    assert "Hint:" in message and '(Re-read "Moving by k positions is a rotation".)' in message, message
    for giveaway in ("row 0 is", "[cos(omega k)", "cos(omega k), sin(omega k)", "[[cos", "-sin(omega k)", "transpose"):
        assert giveaway not in message, (giveaway, message)


def test_5_4_messages_never_give_the_numbers_away():
    def nearly(k, omega):
        return torch.tensor([[math.cos(omega * k), 0.5], [-math.sin(omega * k), math.cos(omega * k)]])

    result = check("5.4", nearly)
    assert not result.passed and "entry [0, 1] is wrong" in result.message, result.message
    assert f"{math.sin(1.5):.3f}" not in result.message and f"{math.sin(1.5):.2f}" not in result.message


def test_5_4_library_is_refused():
    def wrapped(k, omega):
        from attnbook.positional import shift_matrix

        return shift_matrix(k, omega)

    def from_the_operator(k, omega):  # d_model = 2 has the single frequency 1; scale k to get omega * k
        return positional.shift_operator(omega * k, 2)

    for answer in (wrapped, from_the_operator, positional.shift_matrix):
        result = check("5.4", answer)
        assert not result.passed and "the package's own solution" in result.message, result.message
        assert "math.cos(omega * k)" not in result.message and "math.sin(omega * k)" not in result.message


def test_5_4_abs_k_is_told_it_is_right_for_k_ge_0_only():
    def pe_shift_matrix(k, omega):
        c, s = math.cos(omega * abs(k)), math.sin(omega * abs(k))
        return torch.tensor([[c, s], [-s, c]])

    result = check("5.4", pe_shift_matrix)
    assert not result.passed and "right for k >= 0 but not for negative k" in result.message, result.message
    assert "back by k" not in result.message and "transpose" not in result.message, result.message


def test_5_4_integer_tensors_get_a_dtype_message():
    def pe_shift_matrix(k, omega):
        return torch.eye(2, dtype=torch.long)

    result = check("5.4", pe_shift_matrix)
    assert not result.passed and "dtype torch.int64" in result.message, result.message
    assert "expected float32 or float64" in result.message, result.message


# ---------------------------------------------------------------------------------------------------------
# Inputs drawn from the run's seed (issue 23): every property a case was tuned for holds for every seed
# ---------------------------------------------------------------------------------------------------------

from seed_offsets import OFFSETS, catalogue_over_offsets  # noqa: E402  (`offset` is a fixture in conftest)


def _apart(tables, i, j, tol):
    return any(not torch.allclose(t[i], t[j], atol=tol, rtol=0) for t in tables)


def test_5_1_drawn_sizes_keep_every_mistake_apart(offset):
    from attnbook.exercises.ch05 import table

    for o in OFFSETS:
        offset(o)
        sizes = table.table_sizes()
        (n0, d0), (n1, d1), (n2, d2) = sizes[:3]
        assert n1 == n0 and d1 != d0 and d2 == d0 and n2 != n0  # a cache keyed by one argument fails
        assert sizes[3:-1] == table.FIXED_SIZES[1:] and sizes[-1][0] > 2048
        refs = [table.reference_table(n, d) for n, d in sizes]
        mistakes = [[w for _hint, w, _tol in table._table_mistakes(n, d)] for n, d in sizes]
        for k in range(len(mistakes[0])):
            # 10x the checked accuracy, 1e-4: an answer making mistake k fails, and no other mistake explains it
            assert any(m[k].shape != r.shape or not torch.allclose(m[k], r, atol=1e-3, rtol=0)
                       for m, r in zip(mistakes, refs)), (o, k)
            for k2 in range(k):
                assert _apart([[m[k2], m[k]] for m in mistakes], 0, 1, 1e-3), (o, k, k2)


def test_5_2_every_seed_finds_cases_that_keep_every_mistake_apart(offset):
    """Each seed's cases come from the first of MAX_ATTEMPTS draws that keeps every mistake apart; over 200 seeds
    the first or second draw always did, and the fixed fallback keeps them apart too."""
    from attnbook.exercises.ch05 import equivariance

    attempts = []
    for o in OFFSETS:
        offset(o)
        attempts.append(equivariance._good_attempt(o))
    assert max(attempts) < 5 and equivariance.FIXED not in attempts, attempts
    assert equivariance._separated(equivariance._equivariance_cases(equivariance.FIXED))


def test_5_2_every_input_changes_with_the_seed(offset):
    from attnbook.exercises.ch05 import equivariance

    drawn = []
    for o in OFFSETS[:2]:
        offset(o)
        drawn.append(equivariance._equivariance_cases())
    for a, b in zip(*drawn):
        assert a[2].shape == b[2].shape and not torch.equal(a[2], b[2])  # x
        recipes = [getattr(c[1], "__attnbook_recipe__", (None, (), {}))[2] for c in (a, b)]
        if "seed" in recipes[0]:  # the attention's weights
            assert recipes[0]["seed"] != recipes[1]["seed"]
    assert any(not torch.equal(a[3], b[3]) for a, b in zip(*drawn))  # perm


def test_5_4_drawn_cases_vary_and_keep_the_fixed_ones(offset):
    from attnbook.exercises.ch05 import shift

    seen = set()
    for o in OFFSETS:
        offset(o)
        cases = shift.shift_cases()
        assert cases[:len(shift.FIXED_CASES)] == shift.FIXED_CASES
        (k_back, w_back), (k_ahead, w_ahead) = cases[len(shift.FIXED_CASES):]
        assert -12 <= k_back <= -1 and 2 <= k_ahead <= 30
        assert 0.05 <= min(w_back, w_ahead) <= max(w_back, w_ahead) <= 2.5
        seen.add((k_back, w_back, k_ahead, w_ahead))
    assert len(seen) > 190


@pytest.mark.parametrize("exercise_id", ["5.1", "5.2", "5.4"])
def test_drawn_cases_give_every_catalogue_entry_its_verdict(exercise_id, monkeypatch):
    """The catalogue's verdicts (right answers pass, wrong ones fail with their promised message) hold under other
    seeds too (two here, and seeds 0 to 2 in test_remote; the properties above cover 200)."""
    catalogue_over_offsets(exercise_id, OFFSETS[:2], monkeypatch, generated=False)
