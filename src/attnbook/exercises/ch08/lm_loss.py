"""Checker for exercise 8.2, the causal language-modelling loss. The reference is F.cross_entropy on the shifted
logits and ids."""
from __future__ import annotations

import numbers

import torch
import torch.nn.functional as F
from torch import Tensor

from ..compare import expect_tensor, generator
from ..guard import call
from ..registry import exercise, Wrong
from ..runs import Run, collect, verdict
from ...i18n import N_, _

# A pattern, matched by name when called (resolving the path would import transformers, 1 s or more). It names
# the loss functions themselves (ForCausalLMLoss, what a model's loss_function is), never the module's import
# ("<module>") or its private helpers, so that the message names the function the learner called.
LM_LOSS_FORBIDDEN = [("transformers.loss.loss_utils.For*LMLoss", N_("shift the logits and the ids yourself"))]
CLASS_DIM_HINT = (N_("F.cross_entropy wants the classes in dimension 1: flatten the logits to (batch * positions, "
                     "vocab_size) and the targets to (batch * positions,), or pass logits.transpose(1, 2)"))


# The shared hint for this error (hints.py) names transpose and permute only; here the slice of the shift is the
# usual cause.
VIEW_HINT = N_("after a slice, transpose or permute the memory is no longer in order (a slice that drops positions "
               "leaves gaps between the sequences): .view() cannot flatten it; use .reshape(), or call .contiguous() "
               "before .view()")


def _loss_error_hint(message: str) -> str | None:
    if "view size is not compatible with input tensor's size and stride" in message:
        return _(VIEW_HINT)
    if "Expected target size" in message or ("Expected input batch_size" in message and "target batch_size" in message):
        return CLASS_DIM_HINT
    if "expected scalar type Long" in message or "expected target dtype" in message:
        return _("the targets of F.cross_entropy are class indices: pass the integer ids (no .float())")
    return None


_LOSS_RULE = (N_("the loss is the mean, over all batch * (seq - 1) predictions, of minus the log-probability that "
                 "the output at position t gives to the token at position t + 1"))


def _lm_mistakes(logits: Tensor, ids: Tensor) -> dict[str, Tensor | None]:
    """The results of plausible mistakes on this input, keyed by the hint for each (None where this input cannot
    show the mistake)."""
    B, T, V = logits.shape
    lg, tg = logits[:, :-1], ids[:, 1:]  # the right pairs: the output at t, the token at t + 1

    def ce(x: Tensor, targets: Tensor, **kwargs) -> Tensor:
        return F.cross_entropy(x.reshape(-1, V), targets.reshape(-1), **kwargs)

    def nll(x: Tensor) -> Tensor:  # F.nll_loss of x's outputs (all but the last) against the right tokens
        return F.nll_loss(x[:, :-1].reshape(-1, V), tg.reshape(-1))

    right = ce(lg, tg)
    out = {
        _("no shift: the output at position t predicts the NEXT token, the one at position t + 1, not its own"):
            ce(logits, ids),
        _("the shift goes the wrong way: the output at position t predicts the token at t + 1, not the one at t - 1"):
            ce(logits[:, 1:], ids[:, :-1]),
        _("you summed the losses; take the mean over all batch * (seq - 1) predictions"): ce(lg, tg, reduction="sum"),
        _("you applied a softmax before F.cross_entropy, which applies log-softmax itself: pass the raw logits"):
            ce(torch.softmax(lg, dim=-1), tg),
        _("F.nll_loss expects log-probabilities: apply log_softmax first, or use F.cross_entropy on the raw logits"):
            nll(logits),
        _("shift by exactly one position: the output at t predicts the token at t + 1, not t + 2"):
            ce(logits[:, :-2], ids[:, 2:]) if T > 2 else None,
        _("the loss is the NEGATIVE log-probability of the right token (cross-entropy is positive)"): -right,
        _("your loss is batch times the mean: you averaged over the positions and summed over the sequences of the "
          "batch (in either order); take one mean over all batch * (seq - 1) predictions"):
            ce(lg, tg, reduction="none").view(B, T - 1).mean(dim=1).sum(),
        _("your loss is (seq - 1) times the mean: you summed over the positions and averaged over the sequences of "
          "the batch (in either order); take one mean over all batch * (seq - 1) predictions"):
            ce(lg, tg, reduction="none").view(B, T - 1).sum(dim=1).mean(),
        _("ignore_index=0 skips the targets that are token 0, a real token here; keep the default (-100) or leave "
          "ignore_index out"): ce(lg, tg, ignore_index=0) if bool((tg == 0).any()) else None,
        _("your log-softmax runs over the positions (dim=1): take it over the vocabulary, dim=-1"):
            nll(torch.log_softmax(logits, dim=1)),
        _("you divided the summed loss by batch * seq; there are batch * (seq - 1) predictions"):
            ce(lg, tg, reduction="sum") / (B * T),
        _("you scored only the last prediction of each sequence; the mean runs over all batch * (seq - 1) predictions"):
            ce(logits[:, -2], ids[:, -1]),
        _("your logits and targets are flattened in different orders (one position-major, one batch-major), so "
          "predictions are scored against the tokens of other positions: flatten both the same way"):
            ce(lg.transpose(0, 1), tg),
        _("label_smoothing changes the loss: the task asks for the plain cross-entropy"):
            ce(lg, tg, label_smoothing=0.1),
        _("you dropped the last position but scored each output against the token at its own position; the output "
          "at position t predicts the NEXT token, the one at t + 1"): ce(lg, ids[:, :-1]),
        _("you dropped the first position but scored each output against the token at its own position; the "
          "output at position t predicts the NEXT token, the one at t + 1"): ce(logits[:, 1:], tg),
    }
    if B > 1:
        out[_("you used only the first sequence of the batch; the mean runs over every sequence")] = ce(
            logits[:1, :-1], ids[:1, 1:])
        out[_("you flattened the batch before shifting, so the last output of each sequence predicts the first "
              "token of the next sequence: shift within each sequence, then flatten")] = ce(
            logits.reshape(-1, V)[:-1], ids.reshape(-1)[1:])
    return {hint: None if value is None or torch.allclose(value, right) else value for hint, value in out.items()}


# (description, B, T, V, seed[, dtype, scale of the logits]); the last, large logits, is not counted in the success
# message, which predates it
CASES = [
    (N_("logits of shape (2, 5, 7) and ids of shape (2, 5)"), 2, 5, 7, 820),
    (N_("logits (3, 9, 11) and ids (3, 9)"), 3, 9, 11, 821),
    (N_("a batch of 1: logits (1, 6, 13) and ids (1, 6)"), 1, 6, 13, 822),
    (N_("two tokens, so one prediction: logits (4, 2, 5) and ids (4, 2)"), 4, 2, 5, 823),
    (N_("float32 logits (2, 12, 50) and ids (2, 12)"), 2, 12, 50, 824, torch.float32),
    (N_("large float32 logits, from about -300 to 300, of shape (2, 4, 9) and ids (2, 4)"), 2, 4, 9, 825,
     torch.float32, 100.0),
]


def lm_case(B: int, T: int, V: int, seed: int, dtype=torch.float64, scale: float = 2.0) -> tuple[Tensor, Tensor]:
    """(logits, ids) of a case: the run's values, the same shapes and new numbers on every pass of the check."""
    g = generator(seed)
    logits = scale * torch.randn(B, T, V, generator=g, dtype=dtype)
    ids = torch.randint(V, (B, T), generator=g)
    ids[-1, -1] = 0  # one target is token 0, a real token, whatever the draw (ignore_index=0 shows)
    if scale > 10:  # targets alternate between the largest logit (exp overflows) and the smallest (underflows)
        ids[:, 1:] = torch.where(torch.arange(T - 1) % 2 == 0, logits[:, :-1].argmax(-1), logits[:, :-1].argmin(-1))
    return logits.requires_grad_(), ids


@exercise("8.2", "The causal language-modelling loss", answer_name="causal_lm_loss",
          section="Next-token prediction (GPT)")
def check_causal_lm_loss(causal_lm_loss) -> str:
    """causal_lm_loss(logits, ids) = mean cross-entropy of logits[:, t] against ids[:, t + 1]."""

    def one(case, runs: list[Run]) -> Run:
        on, logits, ids = _(case[0]), *lm_case(*case[1:])
        got = call(causal_lm_loss, logits, ids, what="causal_lm_loss", on=on, forbid=LM_LOSS_FORBIDDEN,
                   explain=_loss_error_hint)
        if isinstance(got, numbers.Real) and not isinstance(got, bool):
            raise Wrong(_("causal_lm_loss returned a Python {type_got___name} on {on}, expected a tensor",
                          type_got___name=type(got).__name__, on=on),
                        _("return the loss tensor itself, without .item() or float(): training calls "
                          "loss.backward() on it"))
        got = expect_tensor(got, what=_("your loss"), on=on, finite=False)
        V = logits.size(-1)
        right = F.cross_entropy(logits.detach()[:, :-1].reshape(-1, V), ids[:, 1:].reshape(-1))  # ()
        if got.numel() != 1:
            hint = (_("you returned one loss per prediction (reduction='none'): return their mean, a single number")
                    if got.numel() == ids[:, 1:].numel() else
                    _("return one number: the mean loss over all predictions"))
            raise Wrong(_("your loss has shape {tuple_got_shape} on {on}, expected a single number (shape ())",
                          tuple_got_shape=tuple(got.shape), on=on), hint)
        if got.dim() != 0:
            raise Wrong(_("your loss has shape {tuple_got_shape} on {on}, expected a 0-dimensional tensor (shape "
                          "())", tuple_got_shape=tuple(got.shape), on=on),
                        _("the mean over all predictions is already 0-dimensional: no reshape, view or unsqueeze"))
        if not got.is_floating_point():
            raise Wrong(_("your loss has dtype {dtype} on {on}, expected floating point", dtype=got.dtype, on=on),
                        _("keep the loss in floating point (no .long() or .int())"))
        if not torch.isfinite(got).all():
            raise Wrong(_("your loss is {got_item} on {on}, expected {right_item:.6g}",
                          got_item=got.item(), on=on, right_item=right.item()), (
                _("exp of a large logit overflows (inf / inf is NaN): compute log-probabilities with log_softmax or "
                  "logsumexp, which subtract the maximum, or use F.cross_entropy on the raw logits") if got.isnan() else
                _("a probability that underflows to 0 has log -inf: take log_softmax (or logsumexp), not the log of a "
                  "softmax, or use F.cross_entropy on the raw logits")))
        run = Run(on, got.detach(), right, _lm_mistakes(logits.detach(), ids), 1e-5, 1e-5)
        if run.right and not got.requires_grad:
            raise Wrong(_("your loss has the right value on {on} but no gradient can flow back to the logits",
                          on=on),
                        _("compute it from logits with tensor operations; .item(), float() or torch.tensor(...) "
                          "cut it off from the graph, and training calls loss.backward()"))
        return run

    verdict(collect(CASES, one), what=_("your loss"), rule=_LOSS_RULE)
    return _("right on {len_cases} inputs, including a batch of 1, a single prediction and float32",
             len_cases=len(CASES) - 1)
