"""Hints and message formatting: common exceptions mapped to what they usually mean, and the small helpers that
word a check's message ("a list of length 3", two numbers with enough digits to differ)."""
from __future__ import annotations

import math
import re

# Common exceptions and what they usually mean in the learner's code: (pattern on "Type: message", hint).
# The first pattern that matches wins, so the specific ones come first.
ERROR_HINTS: list[tuple[str, str]] = [
    (r"^OverflowError: math range error",
     "math.exp works on one Python number and overflows above about 709; use torch.exp on the whole tensor, "
     "after subtracting the maximum"),
    (r"^RecursionError",
     "your function calls itself too deeply: if it has the name of a library function (softmax, attention, ...), "
     "call the library one by its full name (torch.softmax) or rename yours; if it recurses on purpose, write it "
     "as a loop (Python allows about 1,000 nested calls)"),
    (r"Dimension out of range \(expected to be in range of \[-(\d+), \d+\], but got (-?\d+)\)"
     r"|dim=-?\d+ is out of range for a tensor with",
     "that dimension does not exist on this input, which has fewer dimensions than you assumed; count from "
     "the end: dim=-1 is always the last dimension (the keys of a score matrix), whatever comes before it"),
    (r"only one element tensors can be converted to Python scalars",
     "math.exp, math.sqrt, float() and int() work on single numbers, not on tensors: use torch.exp, torch.sqrt "
     "and tensor operations on the whole tensor"),
    (r"Boolean value of Tensor with more than one (value|element) is ambiguous",
     "`if mask:` (or `and`/`or`) asks whether a whole tensor is true; to test whether a mask was given, write "
     "`if mask is not None:`, and combine masks element by element with &, | and ~"),
    (r"std and var only support floating point",
     "var() and std() need floating-point numbers: keep the samples as floats (do not convert them to int)"),
    (r"batch1 must be a 3D tensor|batch2 must be a 3D tensor",
     "torch.bmm needs 3-D tensors on both sides; use the @ operator (torch.matmul), which handles 2-D and batched "
     "inputs and a 2-D weight matrix"),
    (r"^IndexError: The shape of the mask",
     "boolean indexing (x[mask]) picks out elements and flattens the result; to keep the shape, use "
     "x.masked_fill(~mask, value) or torch.where(mask, x, other)"),
    (r"^IndexError: too many indices",
     "you indexed more dimensions than the tensor has; check its shape with .shape"),
    (r"masked_fill_? only supports boolean masks",
     "masked_fill needs a boolean mask (True/False): build it with a comparison, or call .bool() on it"),
    (r"t\(\) expects a tensor with <= 2 dimensions|\.T was used on a tensor that is not 2-D",
     "this input has batch dimensions (it is 3-D or 4-D): .t() and .T are for 2-D matrices; transpose only the "
     "last two dimensions with k.transpose(-2, -1)"),
    (r"Expected size for first two dimensions of batch2 tensor|expected size for first two dimensions",
     "in a batched matrix product (..., n, k) @ (..., k, m) the batch dimensions must agree and the inner "
     "sizes must meet: transpose only the last two dimensions, k.transpose(-2, -1) (k.T reverses all of them)"),
    (r"mat1 and mat2 shapes cannot be multiplied|size mismatch|shapes cannot be multiplied",
     "in a matrix product A @ B the last size of A must equal the second-to-last size of B; check which "
     "operand needs transposing, and transpose only the last two dimensions (.transpose(-2, -1))"),
    (r"self must be a matrix|must be a matrix|Expected 2-D",
     "torch.mm and .mm accept 2-D matrices only; use the @ operator (torch.matmul), which treats leading "
     "dimensions as a batch"),
    (r"The size of tensor a \(\d+\) must match the size of tensor b \(\d+\) at non-singleton dimension",
     "two tensors whose shapes do not line up were combined element by element; give one of them a dimension "
     "of size 1 where the other has its own (x[:, None] or x.unsqueeze(-1)), or pass keepdim=True to the "
     "reduction (sum, amax, mean) so that its result lines up with its input"),
    (r"view size is not compatible with input tensor's size and stride",
     "after transpose or permute the memory is no longer in order: call .contiguous() before .view(), or use "
     ".reshape()"),
    (r"shape '\[[-\d, ]+\]' is invalid for input of size",
     "the sizes in your view/reshape do not multiply to the number of elements; write them from the input's "
     "shape (x.shape) rather than fixed numbers"),
    (r"torch\.return_types\.(max|min|sort|topk)",
     "x.max(dim=...) returns a pair (values, indices); use x.amax(dim=..., keepdim=True), or .values"),
    (r"unexpected keyword argument|got multiple values for argument",
     "keep the signature given in the task: the check passes some arguments by name"),
    (r"(takes \d+ positional arguments? but \d+ (were|was) given|missing \d+ required positional argument)",
     "keep the signature given in the task: the same arguments, in the same order"),
    (r"'(int|float|bool)' object has no attribute",
     "an argument you treat as a tensor is a number: keep the order of the arguments given in the task"),
    (r"^NameError: name '(\w+)' is not defined",
     "a name your function uses is not defined: define or import it in the cell, and run the cells above first"),
    (r"'NoneType' object|NoneType",
     "a value in your code is None: did a helper function forget its `return`?"),
    (r"expected scalar type|expected m1 and m2 to have the same dtype|should be the same dtype|dtype",
     "the tensors have different dtypes (float32, float64, int64): create new tensors with dtype=x.dtype, or "
     "build them from the inputs"),
    (r"Expected all tensors to be on the same device",
     "create new tensors on the input's device (device=x.device)"),
    (r"^ZeroDivisionError",
     "a division by zero in plain Python: use tensor operations, and check the case of an empty input"),
    (r"^TypeError: 'int' object is not callable|object is not callable",
     "a name you call is not a function here: was it overwritten by a number or a tensor earlier?"),
]


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
    article = "an" if name[:1].lower() in "aeiou" else "a"
    if isinstance(x, (list, tuple)):
        return f"{article} {name} of length {len(x)}"
    return f"{article} {name}"


def show_pair(expected: float, got: float) -> str:
    """'1.742, got 1.743': enough significant digits that the two numbers differ on screen."""
    for digits in range(4, 17):
        a, b = f"{expected:.{digits}g}", f"{got:.{digits}g}"
        if a != b:
            return f"{a}, got {b}"
    return f"{expected:.17g}, got {got:.17g}"


def entries(indices: list[list[int]]) -> str:
    """'entry [0, 1]' or 'entries [0, 1] and [1, 1]'."""
    if len(indices) == 1:
        return f"entry {indices[0]}"
    return "entries " + ", ".join(map(str, indices[:-1])) + f" and {indices[-1]}"


def fmt(x: float) -> str:
    """A number of points as short as possible: 1, 0.5, inf."""
    return f"{x:g}" if math.isfinite(x) else str(x)
