"""Checker for exercise 6.4, nn.MultiheadAttention's masks in our convention (from a boolean mask where True
means 'blocked', or an additive one, to ours)."""
from __future__ import annotations

import torch
from torch import Tensor

from ..compare import generator
from ..guard import call
from ..registry import exercise, Wrong
from ..runs import Run, collect, verdict
from ._shared import mask_type, tf
from ...i18n import N_, _


def _allowed(shape: tuple[int, ...], g: torch.Generator) -> Tensor:
    """A random allow-mask (True = may attend) of `shape` with both kinds of entry, every query allowed at least
    one key (as any real mask has)."""
    while True:
        allow = torch.rand(shape, generator=g) < 0.6
        allow[..., int(torch.randint(shape[-1], (), generator=g))] = True  # one key every query may see
        if not allow.all():
            return allow


def _kept_lengths(lengths: list[int], width: int) -> Tensor:
    """(len(lengths), width) allow-mask of right-padded rows: True for the first lengths[b] keys of row b."""
    return torch.arange(width)[None, :] < torch.tensor(lengths)[:, None]


def _convert_cases() -> list[tuple[str, Tensor, Tensor]]:
    """(description, mask, expected allow-mask). Every mask comes from the run's seed (`generator`), so that no
    answer knows them in advance; each keeps what it is for: both allowed and blocked entries (so that inverting,
    or not, shows), padding at the end of a key_padding_mask, -1e9 and -10000 besides -inf. The float16 mask that
    blocks nothing is the one fixed input."""
    g = generator(640)
    square = _allowed((4, 4), g)  # (L, S) allow
    additive_square = _allowed((4, 4), g)
    rand = _allowed((6, 3, 5), g)  # (B*h, L, S) allow
    heads = _allowed((6, 3, 5), g)
    pad_lengths = torch.randint(1, 5, (3,), generator=g).tolist()  # 1 .. 4 real keys of 5 ...
    pad_lengths[int(torch.randint(3, (), generator=g))] = 5  # ... and one row without padding
    key_pad = _kept_lengths(pad_lengths, 5)  # (3, 5) allow
    short = int(torch.randint(1, 3, (), generator=g))  # 1 or 2 real tokens of 3, beside a sequence without padding
    bert = _kept_lengths([short, 3] if torch.rand((), generator=g) < 0.5 else [3, short], 3)  # (2, 3) allow
    blocked_inf = torch.zeros(4, 4).masked_fill(~additive_square, float("-inf"))
    return [
        (_("a boolean attn_mask of shape (4, 4) in nn.MultiheadAttention's convention (True = blocked)"),
         ~square, square),
        (_("an additive float mask of shape (4, 4) with 0 and -inf (the kind "
           "nn.Transformer.generate_square_subsequent_mask returns)"), blocked_inf, additive_square),
        (_("a boolean key_padding_mask of shape (3, 5), True at the padding"), ~key_pad, key_pad),
        (_("an additive float mask of shape (6, 3, 5) with 0 and -1e9"),
         torch.zeros(6, 3, 5).masked_fill(~rand, -1e9), rand),
        (_("an additive float64 mask of shape (2, 1, 1, 3) with 0 and -10000 (BERT's extended attention mask)"),
         torch.zeros(2, 1, 1, 3, dtype=torch.float64).masked_fill(~bert[:, None, None, :], -10000.0),
         bert[:, None, None, :]),
        (_("a boolean attn_mask of shape (6, 3, 5) in nn.MultiheadAttention's convention"), ~heads, heads),
        (_("an additive float16 mask of shape (3, 5) that blocks nothing (every entry 0)"),
         torch.zeros(3, 5, dtype=torch.float16), torch.ones(3, 5, dtype=torch.bool)),
    ]


def _convert_error_hint(message: str) -> str | None:
    if "bitwise_not" in message or "only implemented on integer and Boolean" in message:
        return (_("~ works on boolean tensors only; an additive mask is floating point, so compare its entries "
                  "with a number instead. Tell the two kinds of mask apart by their dtype"))
    if "Boolean value of Tensor with more than one" in message:
        return (_("`if mask:` asks about the whole tensor; to tell the two kinds of mask apart, test its dtype"))
    return None


CONVERT_FORBIDDEN = [
    ("attnbook.masks.convert_mask", N_("a boolean mask needs ~; an additive one a comparison"))
]


def _convert_mistakes(mask: Tensor, ref: Tensor) -> dict[str, Tensor]:
    """{hint: the mask that mistake gives}: a boolean mask's mistakes, or an additive one's."""
    if mask.dtype == torch.bool:
        return {
            _("nn.MultiheadAttention's True means 'blocked', ours means 'may attend': invert a boolean mask"):
                mask.clone(),
            _("this boolean mask came out all True: you treated it like an additive mask; a boolean mask is "
              "converted by inverting it"): torch.ones_like(mask),
        }
    m = mask.double()
    return {
        _("your mask is inverted: in an additive mask 0 means 'allowed' (adding 0 leaves the score unchanged) and a "
          "large negative number means 'blocked'"): ~ref,
        _("a large negative number such as -1e9 or -10000 blocks attention just like -inf (after the softmax its "
          "weight is 0): every large negative entry is blocked, not only -inf"): m != float("-inf"),
        _("BERT's -10000 blocks attention too (after the softmax its weight is about e^-10000 = 0): every large "
          "negative entry is blocked, -10000 included"): m >= -10000.0,
        _("every entry came out True: in an additive mask the large negative entries (-inf, -1e9, -10000) are the "
          "blocked ones"): torch.ones(mask.shape, dtype=torch.bool),
        _("every entry came out False: in an additive mask the entries equal to 0 are allowed"):
            torch.zeros(mask.shape, dtype=torch.bool),
    }


def _convert_detail(mask: Tensor, ref: Tensor, index: tuple[int, ...]) -> str:
    want = bool(ref[index])
    entry = mask[index].item()
    if mask.dtype == torch.bool:
        meaning = _("the input there is {entry}, which in nn.MultiheadAttention's convention means ",
                    entry=entry) + (_("'blocked'") if entry else _("'allowed'"))
    else:
        meaning = _("the input there is {entry:g}, which in an additive mask means ", entry=entry) + \
                  (_("'allowed'") if entry == 0 else _("'blocked'"))
    return _("entry {list_index} is {tf_not_want}, expected {tf_want}: {meaning}",
             list_index=list(index), tf_not_want=tf(not want), tf_want=tf(want), meaning=meaning)


@exercise("6.4", "nn.MultiheadAttention's masks in our convention", answer_name="to_allow_mask",
          section="Three mask conventions",
          references=("attnbook.masks.convert_mask",))
def check_to_allow_mask(to_allow_mask) -> str:
    """to_allow_mask(mask) -> bool mask of the same shape, True = may attend."""
    inputs = _convert_cases()

    def one(item, runs: list[Run]) -> Run:
        desc, mask, ref = item
        got = call(to_allow_mask, mask, what="to_allow_mask", on=desc, forbid=CONVERT_FORBIDDEN,
                   explain=_convert_error_hint)
        same_shape = isinstance(got, Tensor) and tuple(got.shape) == tuple(ref.shape)
        if same_shape and got.dtype != torch.bool and not got.is_complex():
            if got.is_floating_point() and mask.is_floating_point() and torch.equal(got.to(mask.dtype), mask):
                raise Wrong(_("to_allow_mask returned the additive mask unchanged on {desc}", desc=desc),
                            _("turn it into booleans: True where the entry is 0 (allowed), False where it is a large "
                              "negative number"))
            if bool(((got == 0) | (got == 1)).all()) and torch.equal(got.bool(), ref):
                raise Wrong(_("to_allow_mask returned dtype {dtype} on {desc}, expected torch.bool",
                              dtype=got.dtype, desc=desc),
                            _("return booleans: a comparison already gives a bool tensor (no .float() or .int() "
                              "after it)"))
        mask_type(got, ref, what=_("your mask"), on=desc,
                   shape_hint=_("keep the shape of the input: only the meaning of the entries changes"))
        return Run(desc, got, ref, _convert_mistakes(mask, ref), detail=lambda index: _convert_detail(mask, ref, index))

    verdict(collect(inputs, one), what=_("your mask"), rule=None)
    return (_("right on {len_inputs} masks: boolean attn_mask and key_padding_mask, additive with -inf, -1e9 and "
              "-10000", len_inputs=len(inputs)))
