"""Checker for exercise 12.1, the learning rate of a step: a linear warm-up, then a half cosine down to min_lr,
then min_lr. The reference is `attnbook.training.warmup_cosine_lr`, never an answer."""
from __future__ import annotations

import importlib
import math
from functools import partial
import random
import sys

import torch.optim.lr_scheduler

from ...training import warmup_cosine_lr as _right
from ..ch05._shared import import_transformers_first
from ..compare import case_seed
from ..guard import call
from ..hints import show_pair
from ..registry import exercise, Wrong
from ._shared import as_number, judge
from ...i18n import N_, _

_SCHEDULE_INSTEAD = N_("compute the rate yourself with math.cos and math.pi")
# PyTorch's schedulers by their public names (a forbidden class is also seen by the code of its methods, so a
# subclass of LRScheduler is named too), and the package's own factor of train()
SCHEDULE_FORBIDDEN = [(path, _SCHEDULE_INSTEAD) for path in (
    *[f"torch.optim.lr_scheduler.{name}" for name in torch.optim.lr_scheduler.__all__],
    "torch.optim.swa_utils.SWALR", "attnbook.training._lr_factor",
)]


def schedule_forbidden(fn) -> list[tuple[str, str]]:
    """SCHEDULE_FORBIDDEN and, once the learner's code has imported transformers (in the notebook, or in its own
    body: `prepare=import_transformers_first` imports it first), every schedule of transformers.optimization, by
    the name the learner would write: transformers.get_cosine_schedule_with_warmup where transformers exports it,
    else transformers.optimization.<name>. A call however reached is seen by the function's code."""
    paths = list(SCHEDULE_FORBIDDEN)
    hf = sys.modules.get("transformers")
    if hf is None:
        return paths
    try:
        optimization = importlib.import_module("transformers.optimization")
    except Exception:  # noqa: BLE001 - not importable here, so not callable by the learner either
        return paths
    for name, value in sorted(vars(optimization).items()):
        if "schedul" in name.lower() and not name.startswith("_") and callable(value) and \
                getattr(value, "__module__", None) == optimization.__name__:
            exported = getattr(hf, name, None) is value
            paths.append((f"transformers.{name}" if exported else f"transformers.optimization.{name}",
                          _SCHEDULE_INSTEAD))
    return paths


# The five schedules of the check, drawn from the run's seed (compare.case_seed) with the properties that tell the
# known mistakes apart in every draw (tests/test_exercises_ch12.py checks that over many seeds). Schedule A alone
# tells every known mistake apart: its warm-up's first and last steps (off by one either way), the cosine's first step
# (warm-up through step warmup_steps), three steps inside it and its last (the period, the span, degrees, linear,
# min_lr), and steps past total_steps (one just past, where a cosine that goes on is still near min_lr, and one far
# past). B has other magnitudes; C has no warm-up (warmup_steps=0) and the default min_lr; D a one-step warm-up; E a
# warm-up that starts below min_lr (a floor of min_lr under the warm-up shows there). Every value is a short decimal,
# so that the message shows it exactly.
SCHEDULE_STEPS = (12, 9, 6, 5, 5)  # steps per schedule: 37 in all


def cases() -> list[tuple[int, float, int, int, float | None]]:
    """[(step, max_lr, warmup_steps, total_steps, min_lr or None for the default 0.0)] of this run."""
    rng = random.Random(case_seed(1201))
    out = []
    # A: 3 to 6 warm-up steps, a decay of 14 to 20 steps, min_lr 5% to 20% of max_lr
    M, W = round(rng.uniform(0.2, 0.9), 2), rng.randint(3, 6)
    T, m = W + rng.randint(14, 20), round(M * rng.uniform(0.05, 0.2), 3)
    D = T - W
    out += [(s, M, W, T, m) for s in (0, 1, W - 1, W, W + 1, W + round(0.3 * D), W + D // 2, W + round(0.75 * D),
                                      T - 1, T, T + 1, T + rng.randint(10, 20))]
    # B: a rate of a few 1e-3, 8 to 12 warm-up steps, a long decay, min_lr a tenth of max_lr
    M, W = round(rng.uniform(1.0, 5.0) * 1e-3, 5), rng.randint(8, 12)
    T = W + 4 * rng.randint(20, 30)
    D = T - W
    out += [(s, M, W, T, round(M / 10, 6)) for s in (0, W - 1, W, W + D // 4, W + D // 2, W + 3 * D // 4, T - 1, T,
                                                     T + rng.randint(200, 500))]
    # C: no warm-up, the default min_lr, a decay of 8, 12 or 16 steps seen at its quarters and one step past
    M, T = round(rng.uniform(0.5, 2.0), 2), 4 * rng.randint(2, 4)
    out += [(s, M, 0, T, None) for s in (0, T // 4, T // 2, 3 * T // 4, T, T + 1)]
    # D: a one-step warm-up, total_steps=3: every step from 0 to 4
    M = round(rng.uniform(1.0, 3.0), 2)
    m = round(M * rng.uniform(0.1, 0.4), 2)
    out += [(s, M, 1, 3, m) for s in range(5)]
    # E: 8 to 12 warm-up steps and min_lr 40% to 60% of max_lr: step 0's rate, at most max_lr / 8, is below min_lr
    M, W = round(rng.uniform(0.8, 1.2), 2), rng.randint(8, 12)
    T, m = W + rng.randint(15, 25), round(M * rng.uniform(0.4, 0.6), 2)
    out += [(s, M, W, T, m) for s in (0, 3, W - 1, (W + T) // 2, T)]
    return out


def _cosine(step, M, W, T, m, *, over_total=False, from_zero=False, angle=math.pi, half=0.5, to_zero=False,
            scale_max=False):
    """The cosine part, or it with one thing changed: t over total_steps, t counted from step 0, the angle at
    t = 1, the factor of (1 + cos), the floor (0 instead of min_lr, then scaled by max_lr), the scale (max_lr)."""
    t = (step - (0 if from_zero else W)) / (T if over_total else T - W)
    floor = 0.0 if to_zero else m
    scale = M if to_zero or scale_max else M - m
    return floor + scale * half * (1.0 + math.cos(angle * t))


def _warm(step, M, W, T, m):
    return M * (step + 1) / W


def _past(step, M, W, T, m):
    return m


def _zero(step, M, W, T, m):
    return 0.0


def _phased(warm=_warm, cos=_cosine, past=_past):
    """A schedule from its three parts (the right ones by default): warm(step) while step < W, cos(step) up to T,
    past(step) after."""
    def lr(step, M, W, T, m):
        if step < W:
            return warm(step, M, W, T, m)
        if step > T:
            return past(step, M, W, T, m)
        return cos(step, M, W, T, m)
    return lr


def _decay(**change):
    """The right schedule but for one thing of the cosine (see _cosine)."""
    return _phased(cos=partial(_cosine, **change))


def _warm_inclusive(step, M, W, T, m):
    return M * (step + 1) / W if step <= W and W else _right(step, M, W, T, m)


RULE = (N_("the rate of step `step` (counted from 0) is max_lr · (step + 1) / warmup_steps while step < warmup_steps; "
           "then min_lr + (max_lr - min_lr) · (1 + cos(π t)) / 2 with t = (step - warmup_steps) / (total_steps - "
           "warmup_steps), up to step total_steps; then min_lr"))

# hint -> the rate that mistake gives, as a function of (step, max_lr, warmup_steps, total_steps, min_lr)
MISTAKES = {
    N_("the warm-up is off by one: the first step, step 0, already gets max_lr · 1 / warmup_steps, and step "
       "warmup_steps - 1 reaches max_lr; use (step + 1) / warmup_steps"):
        _phased(warm=lambda s, M, W, T, m: M * s / W),
    N_("the warm-up divides by warmup_steps + 1: with (step + 1) / warmup_steps, the last warm-up step "
       "(step warmup_steps - 1) reaches max_lr"):
        _phased(warm=lambda s, M, W, T, m: M * (s + 1) / (W + 1)),
    N_("step warmup_steps is the first step of the cosine, which starts at max_lr: warm up while step < "
       "warmup_steps, not <="): _warm_inclusive,
    N_("the cosine runs over the total_steps - warmup_steps steps after the warm-up: t = (step - warmup_steps) / "
       "(total_steps - warmup_steps), not divided by total_steps"): _decay(over_total=True),
    N_("the cosine starts after the warm-up: t = (step - warmup_steps) / (total_steps - warmup_steps), which is 0 "
       "at step warmup_steps, not step / total_steps"): _decay(over_total=True, from_zero=True),
    N_("the cosine ends at min_lr, not at 0: min_lr + (max_lr - min_lr) · (1 + cos(π t)) / 2, and min_lr after "
       "total_steps"): _phased(cos=partial(_cosine, to_zero=True), past=_zero),
    N_("scale the cosine by max_lr - min_lr, so that it starts at max_lr and ends at min_lr: "
       "min_lr + (max_lr - min_lr) · (1 + cos(π t)) / 2"): _decay(scale_max=True),
    N_("math.cos takes radians: half a period is π (math.pi), not 180"): _decay(angle=180.0),
    N_("math.cos takes radians and π t already is an angle in radians: no math.radians"):
        _decay(angle=math.radians(math.pi)),
    N_("that is a linear decay: the task asks for a half cosine, min_lr + (max_lr - min_lr) · (1 + cos(π t)) / 2"):
        _phased(cos=lambda s, M, W, T, m: m + (M - m) * (1 - (s - W) / (T - W))),
    N_("a half cosine goes down once, from max_lr to min_lr: cos(π t), not cos(2π t), which comes back up to "
       "max_lr at the end"): _decay(angle=2 * math.pi),
    N_("the decay is half a period of the cosine, cos(π t) from t = 0 to 1: cos(π t / 2) is a quarter period, "
       "which stops halfway down"): _decay(angle=math.pi / 2),
    N_("(1 + cos(π t)) / 2 goes from 1 down to 0; without the / 2 the rate starts at twice max_lr"):
        _decay(half=1.0),
    N_("past total_steps the rate stays at min_lr: the cosine, continued, comes back up"): _phased(past=_cosine),
    N_("past total_steps the rate stays at min_lr, not 0"): _phased(past=_zero),
    N_("the warm-up is max_lr · (step + 1) / warmup_steps even where that is below min_lr: min_lr is the floor "
       "of the cosine and after it, not of the warm-up"):
        _phased(warm=lambda s, M, W, T, m: max(m, _warm(s, M, W, T, m))),
    N_("the first warmup_steps steps rise linearly to max_lr: max_lr · (step + 1) / warmup_steps"):
        _phased(warm=lambda s, M, W, T, m: M),
}


def _schedule_error_hint(message: str) -> str | None:
    if "ZeroDivisionError" in message:
        return _("warmup_steps may be 0: then there is no warm-up, and the cosine starts at step 0")
    return None


def _describe(step, M, W, T, m) -> str:
    extra = "" if m is None else _(", min_lr={m:g}", m=m)
    return _("lr_at({step}, max_lr={M:g}, warmup_steps={W}, total_steps={T}{extra})",
             step=step, M=M, W=W, T=T, extra=extra)


def _phase(step, W, T) -> str:
    if step < W:
        return _("a warm-up step")
    if step <= T:
        return _("a step of the cosine")
    return _("a step past total_steps")


@exercise("12.1", "Warm-up and cosine decay", answer_name="lr_at", section="The learning-rate schedule",
          references=("attnbook.training.warmup_cosine_lr",))
def check_lr_at(lr_at) -> str:
    """lr_at(step, max_lr, warmup_steps, total_steps, min_lr=0.0) -> float."""
    all_cases = cases()  # min_lr None: the call leaves it out, for its default 0.0

    def answer_on(i):
        step, M, W, T, m = all_cases[i]
        on, kwargs = _describe(*all_cases[i]), {} if m is None else {"min_lr": m}
        return as_number(call(lr_at, step, M, W, T, what="lr_at", on=on, forbid=schedule_forbidden,
                              explain=_schedule_error_hint, prepare=import_transformers_first, **kwargs),
                         fn="lr_at", on=on)

    inputs = [(step, M, W, T, 0.0 if m is None else m) for step, M, W, T, m in all_cases]
    found = judge(answer_on, inputs, _right, MISTAKES)
    if found is None:
        return (_("right (to a relative 1e-6) on {len_cases} steps of {n_schedules} schedules: the warm-up, the "
                  "cosine from max_lr to min_lr, the steps past total_steps, no warm-up at all, a one-step warm-up "
                  "and a warm-up that starts below min_lr", len_cases=len(all_cases),
                  n_schedules=len(SCHEDULE_STEPS)))
    i, got, hint = found
    step, _M, W, T, _m = all_cases[i]
    raise Wrong(_("lr_at is wrong on {describe_step_m_w_t_m_sh}, {phase_step_w_t}: expected "
                  "{show_pair__right_case_go}",
                  describe_step_m_w_t_m_sh=_describe(*all_cases[i]), phase_step_w_t=_phase(step, W, T),
                  show_pair__right_case_go=show_pair(_right(*inputs[i]), got)), hint or RULE)
