"""What a check reads of a call besides its output: observers, computed where the answer ran, as plain data.

An observer is made by the checker from plain data and names the call's arguments by position, never by object:
`call(fn, x, w, observe=Gradients([0], weights))` returns `(output, observer.read(output, args, kwargs))`. In a
notebook it reads right after the call; in the grader its name and parameters cross to the sandboxed kernel
(`remote.py`), which reads the same thing beside the learner's code and sends back only what it read. What an
observer reports is evidence the checker judges, never a verdict.
"""
from __future__ import annotations

from ..i18n import _
import torch
from torch import Tensor

OBSERVERS: dict[str, type] = {}  # name -> class, for the kernel to rebuild an observer from its spec


class Observer:
    """Base class: `params` (plain data: numbers, strings, tensors, lists of them) rebuild the observer with
    `cls(**params)`; `read(output, args, kwargs)` returns plain data."""

    def __init_subclass__(cls, **kwargs):
        super().__init_subclass__(**kwargs)
        OBSERVERS[cls.__name__] = cls

    params: dict = {}

    def read(self, output, args: tuple, kwargs: dict):
        raise NotImplementedError

    def spec(self) -> tuple[str, dict]:
        return type(self).__name__, self.params


def from_spec(name: str, params: dict) -> Observer:
    """The observer that `spec()` described (ValueError for a name that is not an observer)."""
    cls = OBSERVERS.get(name) if isinstance(name, str) else None
    if cls is None or not isinstance(params, dict):
        raise ValueError(_("no observer called {str_name_100!r}", str_name_100=str(name)[:100]))
    return cls(**params)


class Nothing(Observer):
    """Sees nothing (a check that observes some calls and not others gets the same pair from every call)."""

    def read(self, output, args, kwargs):
        return None


class Gradients(Observer):
    """The gradients of the output against `weights` with respect to the arguments at `positions`: a list (None
    for an argument the output does not depend on); None when the output carries no gradient; the error's text
    when backpropagating raises."""

    def __init__(self, positions: list[int], weights: Tensor):
        self.params = {"positions": list(positions), "weights": weights}

    def read(self, output, args, kwargs):
        if not isinstance(output, Tensor) or not output.requires_grad:
            return None
        weights = self.params["weights"]
        try:
            return list(torch.autograd.grad(output, [args[i] for i in self.params["positions"]],
                                            weights.to(output.dtype), allow_unused=True))
        except RuntimeError as e:
            return str(e)


class Backward(Observer):
    """After output.sum().backward(), the .grad of the arguments named in `names` ({name: position}); None when
    the output carries no gradient; "Type: message" when backward raises."""

    def __init__(self, names: dict[str, int]):
        self.params = {"names": dict(names)}

    def read(self, output, args, kwargs):
        if not isinstance(output, Tensor) or not output.requires_grad:
            return None
        try:
            output.sum().backward()
        except Exception as e:  # noqa: BLE001 - anything the learner's graph raises becomes feedback
            return f"{type(e).__name__}: {e}"
        return {name: args[i].grad for name, i in sorted(self.params["names"].items())}


class Training(Observer):
    """Whether the module at `position` is in training mode after the call."""

    def __init__(self, position: int):
        self.params = {"position": position}

    def read(self, output, args, kwargs):
        return bool(args[self.params["position"]].training)


class Drawn(Observer):
    """Whether the generator at `position` (seeded with `seed`) has been drawn from."""

    def __init__(self, position: int, seed: int):
        self.params = {"position": position, "seed": seed}

    def read(self, output, args, kwargs):
        fresh = torch.Generator().manual_seed(self.params["seed"]).get_state()
        return not torch.equal(args[self.params["position"]].get_state(), fresh)


class ChangedItem(Observer):
    """The index of the first tensor of the list at `position` that differs from `originals` (changed in place),
    or None."""

    def __init__(self, position: int, originals: list[Tensor]):
        self.params = {"position": position, "originals": list(originals)}

    def read(self, output, args, kwargs):
        given = args[self.params["position"]]
        for i, (b, original) in enumerate(zip(given, self.params["originals"])):
            if b.shape != original.shape or not torch.equal(b, original):
                return i
        return None
