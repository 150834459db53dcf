"""Checker for exercise 5.1, the sinusoidal table."""
from __future__ import annotations

import torch
from torch import Tensor

from ..compare import generator
from ..guard import call
from ..registry import exercise
from ..runs import Run, collect, verdict
from ._shared import expect_type, half_band, import_transformers_first, reference_table, table_angles
from ...i18n import N_, _


_HALVES = (N_("you put all the sines first and all the cosines after them (the concatenated-halves layout); this "
              "exercise asks for the paper's interleaved layout: column 2i holds the sine of pair i and column 2i+1 "
              "the cosine of the same angle"))
_SWAPPED = N_("sin and cos are swapped: even columns (2i) hold the sine, odd columns (2i+1) the cosine")
_EXP_I = (N_("the exponent is 2i/d_model, where i is the pair index (column 2i and 2i+1 share it); you used i/d_model, "
             "which makes the frequencies fall half as fast"))
_EXP_J = (N_("columns 2i and 2i+1 share one frequency, 1 / 10000^(2i/d_model), with i the pair index; you used the "
             "column index j in the exponent (j/d_model), so each cosine got a frequency of its own"))
_EXP_2J = (N_("the exponent is 2i/d_model with i the pair index, so the exponents are 0, 2, 4, ... over d_model, one "
              "per pair; you used twice the column index, 2j/d_model"))
_T2T = (N_("your frequencies are spaced as in tensor2tensor and fairseq, 10000^(-i/(d_model/2 - 1)); the paper and "
           "this exercise use 10000^(-2i/d_model), so the slowest pair is not quite 1/10000"))
_BASE = (N_("the frequencies use base 10000: the angle is pos / 10000^(2i/d_model); your table matches base 1000"))
_MULTIPLY = (N_("you multiplied the position by 10000^(2i/d_model); divide by it: the angle is pos / 10000^(2i/d), "
                "so the first pair turns fastest (wavelength 2 pi) and later pairs ever more slowly"))
_START_1 = N_("positions start at 0: row 0 is position 0 (sin 0 = 0 and cos 0 = 1), row max_len - 1 the last one")
_DEGREES = (N_("the angle pos / 10000^(2i/d) is in radians, which is what torch.sin expects: do not convert it with "
               "pi / 180"))
_ONLY_SIN = N_("only the even columns are sines; the odd columns (2i+1) hold cos of the same angle")
_ONLY_COS = N_("the even columns (2i) hold sines; only the odd columns (2i+1) hold cosines")
_HALF_POSITIONS = (N_("your rows past position 2048 hold the values of other positions: float16 (half precision) "
                      "holds whole numbers exactly only up to 2048 (2049 becomes 2048, 2051 becomes 2052); make the "
                      "positions in float32 or float64, not float16"))
_TABLE_HALF = (N_("your values are off by about the rounding error of float16: half precision keeps only about 3 "
                  "significant digits, too few for angles that grow with the position. If a step (positions, "
                  "exponents, angles, sin/cos) is in float16 (.half() or dtype=torch.float16), keep it in float32"))

_TABLE_INSTEAD = (N_("no library sinusoidal table (attnbook's or Hugging Face's): build it yourself from torch.arange, "
                     "a division by 10000^(2i/d_model), torch.sin and torch.cos"))
# attnbook's table and everything in attnbook.positional that contains it (the public functions come before the
# private helper they call, so that a message names the function the learner called; sinusoidal_table and
# SinusoidalPositionalEncoding are the exercise's references, "the package's own solution"). Hugging Face's
# tables are forbidden by pattern, wherever they are imported from: module functions with "sinusoid" in their
# name (create_sinusoidal_embeddings of XLM, sinusoids of Whisper, ...) and the methods that make the weights of
# the *SinusoidalPositionalEmbedding classes (create_weight of Marian/Pegasus/RoFormer, make_weights and
# get_embedding of M2M100/XGLM/Speech2Text, ...). Tables with other frequencies (tensor2tensor's spacing) fail anyway.
# The layout helpers (halves_to_interleaved, sinusoidal_permutation) are allowed: they contain no table.
TABLE_FORBIDDEN = [
    (name, _TABLE_INSTEAD)
    for name in ("attnbook.positional.sinusoidal_table", "attnbook.positional.SinusoidalPositionalEncoding",
                 "attnbook.positional.shift_operator", "attnbook.positional.shift_matrix",
                 "attnbook.positional._frequencies",
                 "transformers.*sinusoid*", "transformers.models.*.create_weight", "transformers.models.*.make_weight*",
                 "transformers.models.*.get_embedding")
]


def _table_mistakes(max_len: int, d: int) -> dict:
    """{hint: the wrong table} for the usual mistakes on this size (matched to the case's 1e-4 but where stated)."""
    return {
        _HALVES: reference_table(max_len, d, layout="halves"),
        _SWAPPED: reference_table(max_len, d, swap=True),
        _EXP_I: reference_table(max_len, d, exponent="i"),
        _EXP_J: reference_table(max_len, d, exponent="j"),
        _EXP_2J: reference_table(max_len, d, exponent="2j"),
        _T2T: reference_table(max_len, d, exponent="t2t"),
        _BASE: reference_table(max_len, d, base=1000.0),
        _START_1: reference_table(max_len, d, start=1),
        _DEGREES: reference_table(max_len, d, degrees=True),
        _ONLY_SIN: reference_table(max_len, d, only="sin"),
        _ONLY_COS: reference_table(max_len, d, only="cos"),
        _HALF_POSITIONS: reference_table(max_len, d, half_positions=True),
        # Angles up to max_len * 10000 lose about 1e-2 in float32, so this one is matched more loosely.
        _MULTIPLY: (reference_table(max_len, d, divide=False), 5e-2, 0.0),
        _(_HALVES) + _("; also, ") + _(_SWAPPED): reference_table(max_len, d, layout="halves", swap=True),
    }


# The sizes every check uses: chosen so that every mistake above shows (each gives another table than the right one
# and than every other mistake on at least one of them; tests/test_exercises_ch05.py checks it). (2100, 8): float16
# holds positions exactly only up to 2048, and a float32 table is still right to 1e-4 there.
FIXED_SIZES = [(10, 8), (6, 4), (2100, 8), (7, 6), (1, 2), (3, 64)]


def table_sizes() -> list[tuple[int, int]]:
    """(max_len, d_model) of every case: the fixed sizes, and sizes drawn from the run's seed (`case_seed`), so that
    an answer cannot know them all in advance: the first case's max_len with another d_model and its d_model with
    another max_len (a table kept between calls must be looked up by both), and a long table past 2048 rows."""
    g = generator(510)
    d_other = 2 * int(torch.randint(5, 11, (), generator=g))  # 10 .. 20, never the first case's 8
    n_other = int(torch.randint(11, 41, (), generator=g))  # 11 .. 40, never the first case's 10
    n_long = int(torch.randint(2050, 2301, (), generator=g))  # past 2048, like the fixed (2100, 8)
    first, *rest = FIXED_SIZES
    # d_model=4 with the long table: its frequencies 1 and 1/100 keep a float32 "multiplied by 10000^(2i/d)"
    # table exact enough to be told so (a wider one puts angles of millions through float32)
    return [first, (first[0], d_other), (n_other, first[1]), *rest, (n_long, 4)]


def _table_error_hint(message: str) -> str | None:
    if "must be Tensor, not" in message:
        return (_("torch.sin and torch.cos need tensors, and math.sin a single number: make the positions and the "
                  "exponents tensors with torch.arange before dividing"))
    return None


@exercise("5.1", "The sinusoidal table", answer_name="sinusoidal_table", section="The formula",
          references=("attnbook.positional.sinusoidal_table", "attnbook.positional.SinusoidalPositionalEncoding"))
def check_sinusoidal_table(sinusoidal_table) -> str:
    """sinusoidal_table(max_len, d_model) -> float32 (max_len, d_model), sin in even columns, cos in odd ones.

    2100 rows: float16 holds positions exactly only up to 2048, and a float32 table is still right to 1e-4 there.
    """
    cases = [(_("max_len={n}, d_model={d}", n=n, d=d), n, d) for n, d in table_sizes()]

    def one(case, runs):
        on, max_len, d = case
        got = call(sinusoidal_table, max_len, d, what="sinusoidal_table", on=on, forbid=TABLE_FORBIDDEN,
                   explain=_table_error_hint, prepare=import_transformers_first)
        shape_hints = {
            (d, max_len): _("your table is transposed: one row per position, one column per feature"),
            (max_len, d // 2): _("return all d_model columns: sin in the even ones and cos in the odd ones"),
            (1, max_len, d): _("return a 2-D table (max_len, d_model), without a batch dimension"),
        }
        if isinstance(got, Tensor) and got.dim() == 2 and tuple(got.shape) not in shape_hints:
            rows, columns = got.shape
            if rows == max_len and columns != d:
                shape_hints[(rows, columns)] = _(
                    "your table has {columns} columns, but d_model={d} asks for {d}: one column per feature, from the "
                    "d_model argument (a table kept from an earlier call, or made with a fixed size, has another "
                    "width)", columns=columns, d=d)
            elif columns == d and rows != max_len:
                shape_hints[(rows, columns)] = _(
                    "your table has {rows} rows, but max_len={max_len} asks for {max_len}: one row per position, from "
                    "the max_len argument (a table kept from an earlier call, or made with a fixed size, has another "
                    "length)", rows=rows, max_len=max_len)
        got = expect_type(got, (max_len, d), what=_("your table"), on=on, shape_hints=shape_hints,
                          shape_hint=_("the table is 2-D, (max_len, d_model): one row per position and one column "
                                       "per feature"),
                          dtype=torch.float32,
                          dtype_hint=_("make the table in float32, the dtype of model weights: build it from float32 "
                                       "tensors (torch.arange(..., dtype=torch.float32)) or call .float() at the end"))
        return Run(on, got, reference_table(max_len, d), _table_mistakes(max_len, d), 1e-4, 0.0,
                   half_band(table_angles(max_len, d)))

    verdict(collect(cases, one), what=_("your table"), rule=None, band_hint=_TABLE_HALF)
    return _("right on {len_cases} sizes, from one position and d_model=2 to d_model=64", len_cases=len(cases))

