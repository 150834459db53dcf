"""Hints and message formatting: common exceptions mapped to what they usually mean, and the small helpers that
word a check's message ("a list of length 3", two numbers with enough digits to differ)."""
from __future__ import annotations

from ..i18n import N_, _
import math
import re

# Common exceptions and what they usually mean in the learner's code: (pattern on "Type: message", hint).
# The first pattern that matches wins, so the specific ones come first.
ERROR_HINTS: list[tuple[str, str]] = [
    (r"^OverflowError: math range error",
     N_("math.exp works on one Python number and overflows above about 709; use torch.exp on the whole tensor, "
        "after subtracting the maximum")),
    (r"^RecursionError",
     N_("your function calls itself too deeply: if it has the name of a library function (softmax, attention, ...), "
        "call the library one by its full name (torch.softmax) or rename yours; if it recurses on purpose, write it "
        "as a loop (Python allows about 1,000 nested calls)")),
    (r"Dimension out of range \(expected to be in range of \[-(\d+), \d+\], but got (-?\d+)\)"
     r"|dim=-?\d+ is out of range for a tensor with",
     N_("that dimension does not exist on this input, which has fewer dimensions than you assumed; count from "
        "the end: dim=-1 is always the last dimension (the keys of a score matrix), whatever comes before it")),
    (r"only one element tensors can be converted to Python scalars",
     N_("math.exp, math.sqrt, float() and int() work on single numbers, not on tensors: use torch.exp, torch.sqrt "
        "and tensor operations on the whole tensor")),
    (r"Boolean value of Tensor with more than one (value|element) is ambiguous",
     N_("`if mask:` (or `and`/`or`) asks whether a whole tensor is true; to test whether a mask was given, write "
        "`if mask is not None:`, and combine masks element by element with &, | and ~")),
    (r"std and var only support floating point",
     N_("var() and std() need floating-point numbers: keep the samples as floats (do not convert them to int)")),
    (r"batch1 must be a 3D tensor|batch2 must be a 3D tensor",
     N_("torch.bmm needs 3-D tensors on both sides; use the @ operator (torch.matmul), which handles 2-D and batched "
        "inputs and a 2-D weight matrix")),
    (r"^IndexError: The shape of the mask",
     N_("boolean indexing (x[mask]) picks out elements and flattens the result; to keep the shape, use "
        "x.masked_fill(~mask, value) or torch.where(mask, x, other)")),
    (r"^IndexError: too many indices",
     N_("you indexed more dimensions than the tensor has; check its shape with .shape")),
    (r"masked_fill_? only supports boolean masks",
     N_("masked_fill needs a boolean mask (True/False): build it with a comparison, or call .bool() on it")),
    (r"t\(\) expects a tensor with <= 2 dimensions|\.T was used on a tensor that is not 2-D",
     N_("this input has batch dimensions (it is 3-D or 4-D): .t() and .T are for 2-D matrices; transpose only the "
        "last two dimensions with k.transpose(-2, -1)")),
    (r"Expected size for first two dimensions of batch2 tensor|expected size for first two dimensions",
     N_("in a batched matrix product (..., n, k) @ (..., k, m) the batch dimensions must agree and the inner "
        "sizes must meet: transpose only the last two dimensions, k.transpose(-2, -1) (k.T reverses all of them)")),
    (r"mat1 and mat2 shapes cannot be multiplied|size mismatch|shapes cannot be multiplied",
     N_("in a matrix product A @ B the last size of A must equal the second-to-last size of B; check which "
        "operand needs transposing, and transpose only the last two dimensions (.transpose(-2, -1))")),
    (r"self must be a matrix|must be a matrix|Expected 2-D",
     N_("torch.mm and .mm accept 2-D matrices only; use the @ operator (torch.matmul), which treats leading "
        "dimensions as a batch")),
    (r"The size of tensor a \(\d+\) must match the size of tensor b \(\d+\) at non-singleton dimension",
     N_("two tensors whose shapes do not line up were combined element by element; give one of them a dimension "
        "of size 1 where the other has its own (x[:, None] or x.unsqueeze(-1)), or pass keepdim=True to the "
        "reduction (sum, amax, mean) so that its result lines up with its input")),
    (r"view size is not compatible with input tensor's size and stride",
     N_("after a slice, transpose or permute the memory is no longer in order: call .contiguous() before .view(), "
        "or use .reshape()")),
    (r"shape '\[[-\d, ]+\]' is invalid for input of size",
     N_("the sizes in your view/reshape do not multiply to the number of elements; write them from the input's "
        "shape (x.shape) rather than fixed numbers")),
    (r"torch\.return_types\.(max|min|sort|topk)",
     N_("x.max(dim=...) returns a pair (values, indices); use x.amax(dim=..., keepdim=True), or .values")),
    (r"unexpected keyword argument|got multiple values for argument",
     N_("keep the signature given in the task: the check passes some arguments by name")),
    (r"(takes \d+ positional arguments? but \d+ (were|was) given|missing \d+ required positional argument)",
     N_("keep the signature given in the task: the same arguments, in the same order")),
    (r"'(int|float|bool)' object has no attribute",
     N_("an argument you treat as a tensor is a number: keep the order of the arguments given in the task")),
    (r"^NameError: name '(\w+)' is not defined",
     N_("a name your function uses is not defined: define or import it in the cell, and run the cells above first")),
    (r"^TypeError: 'float' object is not iterable",
     N_("a single number (a Python float) was used where several values were expected: a loop `for ... in`, sum(), "
        "list(), a statistics function or an unpacking `a, b = ...`; collect the values in a list or a tensor, and "
        "check what each of your expressions returns")),
    (r"^TypeError: 'int' object is not iterable",
     N_("an int was used where several values were expected: to repeat something n times write `for i in "
        "range(n)`, and collect values in a list or a tensor before sum(), list() or an unpacking `a, b = ...`")),
    (r"bad operand type for unary ~: 'NoneType'",
     N_("~ was applied to None: an argument that may be None (such as mask=None) must be tested with `if mask is "
        "not None:` before it is used; otherwise a helper function forgot its `return`")),
    (r"'NoneType' object|NoneType",
     N_("a value in your code is None: did a helper function forget its `return`?")),
    (r"expected scalar type|expected m1 and m2 to have the same dtype|should be the same dtype|dtype",
     N_("the tensors have different dtypes (float32, float64, int64): create new tensors with dtype=x.dtype, or "
        "build them from the inputs")),
    (r"Expected all tensors to be on the same device",
     N_("create new tensors on the input's device (device=x.device)")),
    (r"^ZeroDivisionError",
     N_("a division by zero in plain Python: use tensor operations, and check the case of an empty input")),
    (r"^TypeError: 'int' object is not callable|object is not callable",
     N_("a name you call is not a function here: was it overwritten by a number or a tensor earlier?")),
]


# Where a task asks for the input's precision, a float64 result is checked to FLOAT64_TOL (atol, rtol): float64
# arithmetic in any order of summation is right to about 1e-15 here, float32 arithmetic (inputs rounded to float32,
# relative error about 6e-8 per step) is off by 1e-8 or more on inputs with full float64 mantissas.
FLOAT64_TOL = (1e-12, 1e-12)
FLOAT32_ARITHMETIC = N_("on float64 inputs your result is right only to float32 precision (about 7 digits): compute in "
                        "the dtype of the inputs, with no .float() or float32 tensors on the way")



def tolerance_for(dtype) -> tuple[float, float]:
    """(atol, rtol) of a result in `dtype` where a task asks for the input's precision: FLOAT64_TOL for float64,
    the checks' usual (1e-5, 1e-4) otherwise."""
    import torch

    return FLOAT64_TOL if dtype == torch.float64 else (1e-5, 1e-4)


def explain_error(e: BaseException | str) -> str | None:
    """A hint for a common exception raised by a learner's code (see ERROR_HINTS), or None.

    `e` is the exception, or its text as "TypeName: message"."""
    message = e if isinstance(e, str) else f"{type(e).__name__}: {e}"
    for pattern, hint in ERROR_HINTS:
        if re.search(pattern, message):
            return hint
    return None


def describe(x) -> str:
    """'a list of length 3', 'an int', ... for messages about unexpected types."""
    name = type(x).__name__
    vowel = name[:1].lower() in "aeiou"
    if isinstance(x, (list, tuple)):
        return _("an {name} of length {length}", name=name, length=len(x)) if vowel else \
            _("a {name} of length {length}", name=name, length=len(x))
    return _("an {name}", name=name) if vowel else _("a {name}", name=name)


def show_pair(expected: float, got: float) -> str:
    """'1.742, got 1.743': enough significant digits that the two numbers differ on screen."""
    for digits in range(4, 17):
        a, b = f"{expected:.{digits}g}", f"{got:.{digits}g}"
        if a != b:
            return _("{a}, got {b}", a=a, b=b)
    return _("{expected:.17g}, got {got:.17g}", expected=expected, got=got)


def entries(indices: list[list[int]]) -> str:
    """'entry [0, 1]' or 'entries [0, 1] and [1, 1]'."""
    if len(indices) == 1:
        return _("entry {index}", index=indices[0])
    return _("entries {indices} and {last}", indices=", ".join(map(str, indices[:-1])), last=indices[-1])


def fmt(x: float) -> str:
    """A number of points as short as possible: 1, 0.5, inf."""
    return f"{x:g}" if math.isfinite(x) else str(x)
