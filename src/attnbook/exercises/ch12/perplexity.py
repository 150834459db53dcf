"""Checker for exercise 12.2, perplexity from a mean cross-entropy in nats: exp of the mean loss, as a Python
float, for a number, a 0-d tensor or a tensor of batch means. The reference is `attnbook.lm.perplexity`."""
from __future__ import annotations

import math
import re

import torch

from ..guard import call
from ..hints import show_pair
from ..registry import exercise, Wrong
from ._shared import as_number, close
from ...i18n import N_, _


def _cases():
    """(mean_loss, description). Numbers first, where exp, 2 **, 10 **, bits and the loss itself all differ; then
    0-d tensors; then tensors of batch means, where the sum, a single batch and the mean of the perplexities
    differ from the mean."""
    grad = torch.tensor(3.7, dtype=torch.float64, requires_grad=True) * 1.0  # a loss straight from a model
    return [
        (3.0, "mean_loss=3.0"),
        (0.0, _("mean_loss=0.0, a model that gives the right token probability 1")),
        (math.log(50), _("mean_loss=log(50) = 3.912, a uniform guess among 50 tokens")),
        (2, _("mean_loss=2, an int")),
        (math.log(50257), _("mean_loss=log(50257) = 10.825, a uniform guess among GPT-2's 50,257 tokens")),
        (torch.tensor(2.5), _("a 0-d float32 tensor, tensor(2.5)")),
        (torch.tensor(4.2, dtype=torch.float64), _("a 0-d float64 tensor, tensor(4.2)")),
        (grad, _("a 0-d float64 loss tensor that carries a gradient, tensor(3.7, grad_fn=...)")),
        (torch.tensor([3.1, 3.3, 3.2, 3.4], dtype=torch.float64), _("the mean losses of 4 equal batches, "
                                                                    "tensor([3.1, 3.3, 3.2, 3.4])")),
        (torch.tensor([2.0, 4.0]), _("the float32 mean losses of 2 equal batches, tensor([2.0, 4.0])")),
    ]


def _values(x) -> list[float]:
    """The losses in x as Python floats (one for a number or a 0-d tensor)."""
    if isinstance(x, torch.Tensor):
        return [float(v) for v in x.detach().double().flatten()]
    return [float(x)]


def _mean(x) -> float:
    v = _values(x)
    return sum(v) / len(v)


# hint -> the result of that mistake on a case's input
MISTAKES = {
    N_("2 ** loss is the perplexity of a loss in bits; a cross-entropy from F.cross_entropy is in nats (natural "
       "logarithm), so its perplexity is exp(loss)"): lambda x: 2.0 ** _mean(x),
    N_("10 ** loss undoes a base-10 logarithm; the loss is in nats (natural logarithm): exp(loss)"):
        lambda x: 10.0 ** _mean(x),
    N_("that is the loss in bits per token (loss / ln 2); the perplexity is exp(loss)"):
        lambda x: _mean(x) / math.log(2),
    N_("that is the loss itself; the perplexity is exp(mean_loss)"): _mean,
    N_("exp(-loss) is the geometric mean of the probabilities given to the right tokens, 1 / perplexity; the "
       "perplexity is exp(+loss)"): lambda x: math.exp(-_mean(x)),
    N_("2.718 is e to four digits only: use math.exp or torch.exp, which are exact"):
        lambda x: 2.718 ** _mean(x),
    N_("do not round: a perplexity is a real number, exp(mean_loss)"): lambda x: float(round(math.exp(_mean(x)))),
    N_("you summed the batch losses: their mean is the mean loss; average them, then exponentiate"):
        lambda x: math.exp(sum(_values(x))),
    N_("the mean of the batches' perplexities is not the perplexity: average the losses first, then exponentiate the "
       "mean"): lambda x: sum(math.exp(v) for v in _values(x)) / len(_values(x)),
    N_("use every batch's loss: their mean is the mean loss"): lambda x: math.exp(_values(x)[0]),
    N_("use every batch's loss, not only the last: their mean is the mean loss"): lambda x: math.exp(_values(x)[-1]),
    N_("the perplexity undoes the logarithm of the cross-entropy: exp(mean_loss), no log"):
        lambda x: math.log(_mean(x)) if _mean(x) > 0 else math.nan,
}


def _perplexity_error_hint(message: str) -> str | None:
    if re.search(r"exp\(\): argument 'input' .*must be Tensor, not (float|int)", message):
        return (_("mean_loss may be a Python number: torch.exp needs a tensor; use math.exp(float(mean_loss)), or "
                  "make a tensor first with torch.as_tensor"))
    if re.search(r"'(float|int)' object has no attribute", message):
        return (_("mean_loss may be a plain Python number, which has no tensor methods (.item(), .mean(), .exp()): "
                  "handle numbers and tensors, e.g. with isinstance(mean_loss, torch.Tensor)"))
    if "only one element tensors can be converted" in message or "a Tensor with" in message:
        return (_("a tensor may hold the mean losses of several batches: take their mean first (mean_loss.mean()), "
                  "then exponentiate that one number"))
    if "math domain error" in message:
        return _("the perplexity undoes the logarithm of the cross-entropy: exp(mean_loss), no log")
    return None


@exercise("12.2", "Perplexity", section="Perplexity", references=("attnbook.lm.perplexity",))
def check_perplexity(perplexity) -> str:
    """perplexity(mean_loss) -> exp(mean loss) as a Python float."""
    cases = _cases()
    runs = []  # (the learner's result, the input) of every case, in order
    for x, on in cases:
        try:
            got = as_number(call(perplexity, x, what="perplexity", on=on, explain=_perplexity_error_hint),
                            fn="perplexity", on=on)
        except Wrong:
            if any(not close(g, math.exp(_mean(c))) for g, c, _unused in runs):
                break  # a wrong perplexity came first: report it, with the evidence of the cases before
            raise
        runs.append((got, x, on))
    wrong = [i for i, (got, x, _unused) in enumerate(runs) if not close(got, math.exp(_mean(x)))]
    if not wrong:
        return (_("right on {len_cases} inputs: numbers, 0-d tensors (float32, float64, a loss with a gradient) "
                  "and tensors of batch means", len_cases=len(cases)))
    got, x, on = runs[wrong[0]]
    hint = next((h for h, f in MISTAKES.items() if all(close(g, f(c)) for g, c, _unused in runs)), None)
    raise Wrong(_("perplexity is wrong on {on}: expected {show_pair_math_exp__mean}",
                  on=on, show_pair_math_exp__mean=show_pair(math.exp(_mean(x)), got)),
                hint or _("the perplexity is exp of the mean cross-entropy in nats; for a tensor of batch means, "
                          "exp of their mean"))
