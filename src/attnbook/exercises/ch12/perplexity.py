"""Checker for exercise 12.2, perplexity from a mean cross-entropy in nats: exp of the mean loss, as a Python
float, for a number, a 0-d tensor or a tensor of batch means. The reference is `attnbook.lm.perplexity`."""
from __future__ import annotations

import math
import random
import re

import torch

from ..compare import case_seed
from ..guard import call
from ..hints import show_pair
from ..registry import exercise, Wrong
from ._shared import as_number, judge
from ...i18n import N_, _


# Each value of a batch of four around its mean: the first and the last differ from the mean, and so do the sum and
# the mean of the perplexities, whatever the mean.
BATCH_OFFSETS = (-0.15, 0.05, -0.05, 0.15)


def _cases():
    """(mean_loss, description), drawn from the run's seed (compare.case_seed): every value but the edge case 0.0
    changes from run to run, as short decimals that the message shows exactly. Numbers first, where exp, 2 **,
    10 **, bits and the loss itself all differ; then 0-d tensors; then tensors of batch means, where the sum, a
    single batch and the mean of the perplexities differ from the mean."""
    rng = random.Random(case_seed(1202))
    a, n = round(rng.uniform(2.0, 4.5), 3), rng.randint(1, 6)
    vocab, big = rng.randint(20, 200), rng.randint(30000, 60000)
    b, c, e = (round(rng.uniform(1.5, 5.0), 2) for _unused in range(3))
    m4, lo = round(rng.uniform(2.5, 4.0), 2), round(rng.uniform(1.5, 3.0), 1)
    four = [round(m4 + o, 2) for o in BATCH_OFFSETS]
    grad = torch.tensor(e, dtype=torch.float64, requires_grad=True) * 1.0  # a loss straight from a model
    return [
        (a, _("mean_loss={a}", a=a)),
        (0.0, _("mean_loss=0.0, a model that gives the right token probability 1")),
        (math.log(vocab), _("mean_loss=log({vocab}) = {loss:.3f}, a uniform guess among {vocab} tokens",
                            vocab=vocab, loss=math.log(vocab))),
        (n, _("mean_loss={n}, an int", n=n)),
        (math.log(big), _("mean_loss=log({vocab}) = {loss:.3f}, a uniform guess among {vocab} tokens (GPT-2 has "
                          "50,257)", vocab=big, loss=math.log(big))),
        (torch.tensor(b), _("a 0-d float32 tensor, tensor({b})", b=b)),
        (torch.tensor(c, dtype=torch.float64), _("a 0-d float64 tensor, tensor({c})", c=c)),
        (grad, _("a 0-d float64 loss tensor that carries a gradient, tensor({e}, grad_fn=...)", e=e)),
        (torch.tensor(four, dtype=torch.float64), _("the mean losses of 4 equal batches, tensor({four})",
                                                    four=four)),
        (torch.tensor([lo, lo + 2.0]), _("the float32 mean losses of 2 equal batches, tensor([{lo}, {hi}])",
                                         lo=lo, hi=round(lo + 2.0, 1))),
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
    if re.search(r"could not infer output dtype.*Got: (Long|Int|Short|Char|Byte|Bool)", message):
        return (_("mean() needs a floating-point tensor, and this one is an integer tensor: an int such as "
                  "mean_loss=2 makes one (torch.tensor(2), torch.as_tensor(2)), and so does .long(). Make the "
                  "tensor with dtype=torch.float64, or convert the number with float(...)"))
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


@exercise("12.2", "Perplexity", answer_name="perplexity", section="Perplexity", references=("attnbook.lm.perplexity",))
def check_perplexity(perplexity) -> str:
    """perplexity(mean_loss) -> exp(mean loss) as a Python float."""
    cases = _cases()

    def answer_on(i):
        x, on = cases[i]
        return as_number(call(perplexity, x, what="perplexity", on=on, explain=_perplexity_error_hint),
                         fn="perplexity", on=on)

    found = judge(answer_on, [(x,) for x, _on in cases], lambda x: math.exp(_mean(x)), MISTAKES)
    if found is None:
        return (_("right (to a relative 1e-6) on {len_cases} inputs: numbers, 0-d tensors (float32, float64, a "
                  "loss with a gradient) and tensors of batch means", len_cases=len(cases)))
    i, got, hint = found
    x, on = cases[i]
    raise Wrong(_("perplexity is wrong on {on}: expected {show_pair_math_exp__mean}",
                  on=on, show_pair_math_exp__mean=show_pair(math.exp(_mean(x)), got)),
                hint or _("the perplexity is exp of the mean cross-entropy in nats; for a tensor of batch means, "
                          "exp of their mean"))
