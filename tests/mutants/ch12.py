"""Chapter 12 (training on real text): learner answers to exercises 12.1-12.3."""
from __future__ import annotations

import importlib
import math

import numpy as np
import torch

import attnbook.lm as _lm
import attnbook.text as _text
import attnbook.training as _training
from mutants import RIGHT, WRONG, fresh_import, function_copy, right, table, wrong

# ----------------------------------------------------------------------------------------------------------------
# 12.1  lr_at(step, max_lr, warmup_steps, total_steps, min_lr=0.0) -> float
# ----------------------------------------------------------------------------------------------------------------


def lr(warm=lambda s, w: (s + 1) / w, inclusive=False, warm_first=False, floor_warm=False, t_from="warmup_steps",
       t_over="total_steps - warmup_steps", decay=None, cos=math.cos, angle=math.pi, half=0.5,
       amplitude="max_lr - min_lr", past="min_lr", use_min=True):
    """12.1's learner template: lr_at with the named mistakes switched on (the defaults: a right answer). warm: the
    warm-up's fraction of max_lr at (step, warmup_steps); warm_first: min(1, warm(...)) before the warm-up test;
    decay: the fraction of the span left at t (None: half * (1 + cos(angle * t))); past: after total_steps,
    "min_lr", "zero", "continue" (no clamp) or "clamp t" (t at most 1)."""
    def lr_at(step, max_lr, warmup_steps, total_steps, min_lr=0.0):
        if not use_min:
            min_lr = 0.0
        fraction = min(1.0, warm(step, warmup_steps)) if warm_first else None
        if step < warmup_steps or (inclusive and 0 < warmup_steps and step <= warmup_steps):
            rate = max_lr * (warm(step, warmup_steps) if fraction is None else fraction)
            return max(min_lr, rate) if floor_warm else rate
        if step > total_steps and past in ("min_lr", "zero"):
            return min_lr if past == "min_lr" else 0.0
        start = {"warmup_steps": warmup_steps, "0": 0, "warmup_steps - 1": warmup_steps - 1}[t_from]
        t = (step - start) / (total_steps - warmup_steps if t_over == "total_steps - warmup_steps" else total_steps)
        if past == "clamp t":
            t = min(t, 1.0)
        span = max_lr if amplitude == "max_lr" else max_lr - min_lr
        if decay is not None:
            return min_lr + span * decay(t)
        return float(min_lr + span * half * (1 + cos(angle * t)))
    return lr_at


def stepped(make, warm_up_by_hand=False):
    """12.1's answers that read the rate off a PyTorch scheduler: make(opt, M, W, T, m) builds it for max_lr,
    warmup_steps, total_steps and min_lr on a dummy SGD optimizer at max_lr, then stepped `step` times;
    warm_up_by_hand: the warm-up computed by hand, the scheduler stepped only from its end up to total_steps."""
    def lr_at(step, max_lr, warmup_steps, total_steps, min_lr=0.0):
        if warm_up_by_hand and step < warmup_steps:
            return max_lr * (step + 1) / warmup_steps
        opt = torch.optim.SGD([torch.nn.Parameter(torch.zeros(1))], lr=max_lr)
        sched = make(opt, max_lr, warmup_steps, total_steps, min_lr)
        for _ in range(min(step, total_steps) - warmup_steps if warm_up_by_hand else step):
            opt.step()
            sched.step()
        return opt.param_groups[0]["lr"]
    return lr_at


def _from_transformers(path):
    """the function of transformers at `path` ("get_..." or "optimization.get_..."), imported when the answer runs"""
    module, _, name = ("transformers." + path).rpartition(".")
    return getattr(importlib.import_module(module), name)


# The 37 inputs of the check as a notebook run shows them (offset 0), with their rates: an answer that looks its
# inputs up instead of computing them.
_KNOWN_SCHEDULE = {case: _training.warmup_cosine_lr(*case[:4], case[4] or 0.0) for case in [
    *[(s, 0.5, 4, 20, 0.05) for s in (0, 1, 3, 4, 5, 9, 12, 16, 19, 20, 21, 37)],
    *[(s, 3e-3, 10, 110, 3e-4) for s in (0, 9, 10, 35, 60, 85, 109, 110, 500)],
    *[(s, 1.0, 0, 8, 0.0) for s in (0, 2, 4, 6, 8, 9)],
    *[(s, 2.0, 1, 3, 0.5) for s in (0, 1, 2, 3, 4)],
    *[(s, 1.0, 10, 30, 0.5) for s in (0, 3, 9, 20, 30)],
]}
_wc = function_copy(_training.warmup_cosine_lr, "lr_at")
_scheduler = torch.optim.lr_scheduler

table("12.1", [
    ("NumPy's cos, t clamped to [0, 1]", RIGHT, lr(cos=np.cos, past="clamp t")),
    ("math.cos, with min_lr returned past total_steps before t is computed", RIGHT, lr()),
    ("the squared cosine of half the angle: (1 + cos x) / 2 = cos(x / 2) ** 2", RIGHT,
     lr(decay=lambda t: math.cos(math.pi * t / 2) ** 2)),
    ("the decay written with sin: (1 + cos(pi t)) / 2 = 1 - sin(pi t / 2) ** 2", RIGHT,
     lr(decay=lambda t: 1 - math.sin(math.pi * t / 2) ** 2)),
    ("float32 torch arithmetic, returned with .item()", RIGHT,
     lr(cos=lambda x: torch.cos(torch.tensor(x)), past="clamp t")),
    ("one expression: a multiplier of the span above min_lr", RIGHT,
     lambda step, max_lr, warmup_steps, total_steps, min_lr=0.0: (step + 1) / warmup_steps * max_lr
     if step < warmup_steps
     else min_lr + 0.5 * (1.0 + math.cos(math.pi * min(1.0, (step - warmup_steps) / (total_steps - warmup_steps))))
     * (max_lr - min_lr)),
    ("handed in attnbook.training.warmup_cosine_lr itself", "package's own", _training.warmup_cosine_lr),
    ("a lambda around attnbook.training.warmup_cosine_lr", "the package's own solution",
     lambda step, max_lr, warmup_steps, total_steps, min_lr=0.0: _training.warmup_cosine_lr(
         step, max_lr, warmup_steps, total_steps, min_lr)),
    ("a types.FunctionType copy of the package's schedule", "package's own",
     lambda step, max_lr, warmup_steps, total_steps, min_lr=0.0: _wc(step, max_lr, warmup_steps, total_steps, min_lr)),
    ("the package's private factor of train(), scaled", "_lr_factor",
     lambda step, max_lr, warmup_steps, total_steps, min_lr=0.0: min_lr if step > total_steps
     else min_lr + (max_lr - min_lr) * _training._lr_factor(step, total_steps, warmup_steps, "cosine")),
    # PyTorch's and transformers' schedulers
    ("PyTorch's LambdaLR on a dummy optimizer, stepped `step` times", "without torch.optim.lr_scheduler.LambdaLR",
     stepped(lambda opt, M, W, T, m: _scheduler.LambdaLR(opt, lambda s: lr(past="clamp t")(s, M, W, T, m) / M))),
    ("LambdaLR with the learner's own factor (the message names LambdaLR, not its __init__)",
     "without torch.optim.lr_scheduler.LambdaLR",
     stepped(lambda opt, M, W, T, m: _scheduler.LambdaLR(opt, lambda s: 1.0))),
    ("LinearLR then CosineAnnealingLR, chained with SequentialLR", "without torch.optim.lr_scheduler.LinearLR",
     stepped(lambda opt, M, W, T, m: _scheduler.SequentialLR(opt, [
         _scheduler.LinearLR(opt, start_factor=1 / max(W, 1), total_iters=max(W, 1)),
         _scheduler.CosineAnnealingLR(opt, T - W, eta_min=m)], milestones=[W]))),
    ("CosineAnnealingLR for the decay, the warm-up by hand", "without torch.optim.lr_scheduler.CosineAnnealingLR",
     stepped(lambda opt, M, W, T, m: _scheduler.CosineAnnealingLR(opt, T - W, eta_min=m), warm_up_by_hand=True)),
    # imported where no reading of the code sees it: where transformers was not loaded before the check, the
    # message names the torch scheduler it runs (LambdaLR) instead
    ("transformers.get_cosine_schedule_with_warmup, stepped `step` times", "the task asks you to write this without",
     stepped(lambda opt, M, W, T, m: _from_transformers("get_cosine_schedule_with_warmup")(opt, W, T))),
    ("transformers' cosine schedule with a floor, imported from transformers.optimization",
     "without transformers.get_cosine_with_min_lr_schedule_with_warmup",
     stepped(lambda opt, M, W, T, m: _from_transformers("optimization.get_cosine_with_min_lr_schedule_with_warmup")(
         opt, W, T, min_lr=m))),
    # the warm-up
    ("warm-up max_lr * step / warmup_steps: step 0 gets 0", "off by one", lr(warm=lambda s, w: s / w)),
    ("warm-up (step + 1) / (warmup_steps + 1)", "warmup_steps + 1", lr(warm=lambda s, w: (s + 1) / (w + 1))),
    ("warm-up while step <= warmup_steps (one step too many)", "not <=", lr(inclusive=True)),
    ("no warm-up: max_lr during the warm-up steps", "rise linearly", lr(warm=lambda s, w: 1.0)),
    ("min(1, (step + 1) / warmup_steps) computed first: divides by zero without a warm-up", "warmup_steps may be 0",
     lr(warm_first=True)),
    ("a floor of min_lr under the warm-up too (a learner trial's find)", "even where that is below min_lr",
     lr(floor_warm=True)),
    # t
    ("t = (step - warmup_steps) / total_steps", "not divided by total_steps", lr(t_over="total_steps")),
    ("t = step / total_steps: the cosine counted from step 0", "not step / total_steps",
     lr(t_from="0", t_over="total_steps")),
    ("the cosine's t counted from step warmup_steps - 1 (a mix of conventions)",
     "(step + 1) / warmup_steps while step < warmup_steps", lr(t_from="warmup_steps - 1")),
    # the decay
    ("ignores min_lr: decays to 0", "ends at min_lr, not at 0", lr(use_min=False)),
    ("min_lr added to max_lr's cosine: starts at max_lr + min_lr", "scale the cosine by max_lr - min_lr",
     lr(amplitude="max_lr")),
    ("math.cos(180 * t), as if cos took degrees", "half a period is π", lr(angle=180.0)),
    ("math.cos(math.radians(math.pi * t))", "no math.radians", lr(angle=math.radians(math.pi))),
    ("a linear decay from max_lr to min_lr instead of the cosine", "linear decay", lr(decay=lambda t: 1 - t)),
    ("a full period: cos(2 pi t), back up to max_lr at the end", "cos(2π t)", lr(angle=2 * math.pi)),
    ("cos(pi t / 2): a quarter period", "quarter period", lr(angle=math.pi / 2)),
    ("(1 + cos(pi t)) without the / 2", "without the / 2", lr(half=1.0)),
    ("the cosine goes on past total_steps (no clamp)", "comes back up", lr(past="continue")),
    ("returns 0 past total_steps", "not 0", lr(past="zero")),
    ("knows the check's inputs from a notebook run: a table of their rates, max_lr for anything else", WRONG,
     lambda step, max_lr, warmup_steps, total_steps, min_lr=0.0: _KNOWN_SCHEDULE.get(
         (step, max_lr, warmup_steps, total_steps, min_lr), max_lr)),
])


@wrong("12.1", hint="expected a Python float. Hint: convert a one-element tensor with float(t)")
def lr_at_tensor(step, max_lr, warmup_steps, total_steps, min_lr=0.0):
    """computed with torch and returned as a tensor"""
    if step < warmup_steps:
        return torch.tensor(max_lr * (step + 1) / warmup_steps)
    t = torch.tensor(min(1.0, (step - warmup_steps) / (total_steps - warmup_steps)), dtype=torch.float64)
    return min_lr + (max_lr - min_lr) * 0.5 * (1 + torch.cos(math.pi * t))


@wrong("12.1", hint="return")
def lr_at_no_return(step, max_lr, warmup_steps, total_steps, min_lr=0.0):
    """computes the rate but forgets to return it"""
    rate = lr()(step, max_lr, warmup_steps, total_steps, min_lr)  # noqa: F841


# ----------------------------------------------------------------------------------------------------------------
# 12.2  perplexity(mean_loss) -> float
# ----------------------------------------------------------------------------------------------------------------


def _values(mean_loss):
    """the batch losses as Python floats (a number: itself)"""
    return mean_loss.detach().double().flatten().tolist() if isinstance(mean_loss, torch.Tensor) else [mean_loss]


def _mean(mean_loss):
    """the mean loss as a Python float, in float64"""
    return mean_loss.detach().double().mean().item() if isinstance(mean_loss, torch.Tensor) else float(mean_loss)


# The inputs of the check as a notebook run shows them (offset 0)
_KNOWN_LOSSES = {(3.0,): math.exp(3.0), (0.0,): 1.0, (math.log(50),): 50.0, (2.0,): math.exp(2),
                 (math.log(50257),): 50257.0, (2.5,): math.exp(2.5), (4.2,): math.exp(4.2), (3.7,): math.exp(3.7),
                 (3.1, 3.3, 3.2, 3.4): math.exp(3.25), (2.0, 4.0): math.exp(3.0)}
_lm_fresh = fresh_import(_lm, "lm")

table("12.2", [
    ("math.e ** the mean", RIGHT,
     lambda mean_loss: math.e ** (float(mean_loss.mean()) if isinstance(mean_loss, torch.Tensor) else mean_loss)),
    ("torch in float64 throughout, .item() at the end", RIGHT,
     lambda mean_loss: torch.as_tensor(mean_loss, dtype=torch.float64).detach().mean().exp().item()),
    ("torch.as_tensor with dtype=torch.float64 (an int becomes a float tensor)", RIGHT,
     lambda mean_loss: torch.as_tensor(mean_loss, dtype=torch.float64).detach().mean().exp().item()),
    ("NumPy: np.exp of np.mean, a NumPy float64 (a float)", RIGHT,
     lambda mean_loss: np.exp(np.mean(mean_loss.detach().numpy() if isinstance(mean_loss, torch.Tensor)
                                      else mean_loss, dtype=np.float64))),
    ("2 ** (the loss converted to bits)", RIGHT, lambda mean_loss: 2 ** (_mean(mean_loss) / math.log(2))),
    ("float32 arithmetic on tensors, math.exp on numbers", RIGHT,
     lambda mean_loss: float(torch.exp(mean_loss.detach().float().mean())) if isinstance(mean_loss, torch.Tensor)
     else math.exp(mean_loss)),
    ("handed in attnbook.lm.perplexity itself", "package's own", _lm.perplexity),
    ("a lambda around attnbook.lm.perplexity", "the package's own solution",
     lambda mean_loss: _lm.perplexity(mean_loss)),
    ("perplexity from a second, separate import of attnbook/lm.py", "package's own",
     lambda mean_loss: _lm_fresh.perplexity(mean_loss)),
    # the formula
    ("2 ** loss", "in bits", lambda mean_loss: 2.0 ** _mean(mean_loss)),
    ("10 ** loss", "base-10", lambda mean_loss: 10.0 ** _mean(mean_loss)),
    ("the loss in bits: loss / ln 2", "bits per token", lambda mean_loss: _mean(mean_loss) / math.log(2)),
    ("returns the mean loss unchanged", "the loss itself", lambda mean_loss: _mean(mean_loss)),
    ("exp(-loss)", "1 / perplexity", lambda mean_loss: math.exp(-_mean(mean_loss))),
    ("2.718 ** loss", "four digits", lambda mean_loss: 2.718 ** _mean(mean_loss)),
    ("math.log of the loss", "no log", lambda mean_loss: math.log(_mean(mean_loss))),
    ("rounded to a whole number of tokens", "do not round", lambda mean_loss: round(math.exp(_mean(mean_loss)))),
    # a tensor of batch losses
    ("exp of the sum of the batch losses", "summed the batch losses",
     lambda mean_loss: math.exp(sum(_values(mean_loss)))),
    ("the mean of exp(batch loss)", "mean of the batches' perplexities",
     lambda mean_loss: float(np.mean(np.exp(_values(mean_loss))))),
    ("only the first batch's loss", "every batch", lambda mean_loss: math.exp(_values(mean_loss)[0])),
    ("float(mean_loss): fails on a tensor of several batch means", "take their mean first",
     lambda mean_loss: math.exp(float(mean_loss))),
    ("mean_loss.mean().item(): fails on a Python number", "may be a plain Python number, which has no tensor methods",
     lambda mean_loss: math.exp(mean_loss.mean().item())),
    ("torch.exp on the argument, which may be a Python float", "torch.exp needs a tensor",
     lambda mean_loss: torch.exp(mean_loss.mean() if isinstance(mean_loss, torch.Tensor) and mean_loss.dim()
                                 else mean_loss).item()),
    ("torch.as_tensor(mean_loss).mean(): an int makes an integer tensor, which has no mean", "integer tensor",
     lambda mean_loss: torch.as_tensor(mean_loss).detach().mean().exp().item()),
    ("torch.mean(torch.tensor(...)) on a number", "integer tensor",
     lambda mean_loss: math.exp(_mean(mean_loss)) if isinstance(mean_loss, torch.Tensor)
     else math.exp(torch.mean(torch.tensor(mean_loss)).item())),
    (".long() before the mean", "integer tensor",
     lambda mean_loss: math.exp(torch.as_tensor(mean_loss).detach().long().mean().item())),
    ("NumPy's keyword on a tensor method: the error is in the answer's own call (a learner trial's find: the hint",
     "mean() has no parameter 'axis'", lambda mean_loss: float(np.exp(np.mean(mean_loss)))),
    # what is returned
    ("returns a tensor", "expected a Python float. Hint: convert a one-element tensor with float(t)",
     lambda mean_loss: torch.exp(torch.as_tensor(mean_loss, dtype=torch.float64).mean())),
    ("returns a NumPy float32", "float(...)", lambda mean_loss: np.float32(math.exp(_mean(mean_loss)))),
    ("knows the check's inputs from a notebook run: a table of their perplexities, 1.0 for anything else", WRONG,
     lambda mean_loss: _KNOWN_LOSSES.get(tuple(round(float(v), 6) for v in _values(mean_loss)), 1.0)),
])


# ----------------------------------------------------------------------------------------------------------------
# 12.3  merge_pair(ids, pair, new_id) -> list
# ----------------------------------------------------------------------------------------------------------------


def merge(from_right=False, compare="ids", check_end=True, last="kept", write=True, step_after=2, overlap=False,
          first_only=False, returns=list):
    """12.3's learner template: a while loop over a copy of ids with the named mistakes switched on (the defaults:
    a right answer; compare "list slice" is ids[i:i + 2] == pair, a list against the pair as given; overlap moves
    on by 1 where the pair starts again; returns: what the merged list is handed back as)."""
    def merge_pair(ids, pair, new_id):
        seq, target = list(ids), tuple(pair)
        if from_right:
            seq, target = seq[::-1], target[::-1]
        out, i = [], 0
        while i < (len(seq) - 1 if last == "lost" else len(seq)):
            if compare == "tuple slice":
                found = tuple(seq[i:i + 2]) == target
            elif compare == "list slice":
                found = seq[i:i + 2] == pair
            elif compare == "either order":
                found = i + 1 < len(seq) and ({seq[i], seq[i + 1]} == set(pair) and seq[i] != seq[i + 1]
                                              or (seq[i], seq[i + 1]) == target)
            else:
                found = (i + 1 < len(seq) or not check_end) and seq[i] == target[0] and seq[i + 1] == target[1]
            if found:
                if write:
                    out.append(new_id)
                again = overlap and i + 2 < len(seq) and (seq[i + 1], seq[i + 2]) == target
                i += 1 if again else step_after
                if first_only:
                    out += seq[i:]
                    break
            else:
                out.append(seq[i])
                i += 1
        return returns(out[::-1] if from_right else out)
    return merge_pair


def slice_merge(copy=True):
    """12.3's answers that merge with slice assignment, ids[i:i + 2] = [new_id]; copy: on a copy of ids (False:
    on the caller's list itself, which is returned)."""
    def merge_pair(ids, pair, new_id):
        if copy:
            ids = list(ids)
        i = 0
        while i < len(ids) - 1:
            if ids[i] == pair[0] and ids[i + 1] == pair[1]:
                ids[i:i + 2] = [new_id]
            i += 1
        return ids
    return merge_pair


@right("12.3")
def merge_pair_flag(ids, pair, new_id):
    """a for loop with a flag that skips the second id of a merged pair"""
    out, skip = [], False
    for i, x in enumerate(ids):
        if skip:
            skip = False
            continue
        if i + 1 < len(ids) and x == pair[0] and ids[i + 1] == pair[1]:
            out.append(new_id)
            skip = True
        else:
            out.append(x)
    return out


# The ten inputs of the check as a notebook run shows them (offset 0)
_KNOWN_MERGES = {(tuple(ids), pair, new): _text.merge_pair(ids, pair, new) for ids, pair, new in [
    ([5, 6, 7, 5, 6], (5, 6), 9), ([3, 3, 3], (3, 3), 8), ([1, 2, 3], (3, 4), 9), ([2, 1, 2, 1], (1, 2), 7),
    ([4, 4, 4, 4, 4], (4, 4), 6), ([11, 2, 1, 21, 1, 2], (1, 2), 300), ([8, 1, 2, 3], (1, 2), 256), ([], (1, 2), 5),
    ([7], (7, 7), 9)]}


_text_fresh = fresh_import(_text, "text")

table("12.3", [
    ("handed in attnbook.text.merge_pair itself", "package's own", _text.merge_pair),
    ("a lambda around attnbook.text.merge_pair", "the package's own solution",
     lambda ids, pair, new_id: _text.merge_pair(ids, pair, new_id)),
    ("merge_pair from a second, separate import of attnbook/text.py", "package's own",
     lambda ids, pair, new_id: _text_fresh.merge_pair(ids, pair, new_id)),
    # the loop
    ("merges the first occurrence only", "not only the first", merge(first_only=True)),
    ("knows the check's short inputs from a notebook run (a table), merges only the first occurrence otherwise", WRONG,
     lambda ids, pair, new_id: list(_KNOWN_MERGES.get((tuple(ids), tuple(pair), new_id),
                                                      merge(first_only=True)(ids, pair, new_id)))),
    ("scans from the right end", "left to right", merge(from_right=True)),
    ("after a merge, steps by 1 when the next position starts the pair again", "must not overlap", merge(overlap=True)),
    ("while i < len(ids) - 1: the last id is dropped when it is not merged", "last id is lost", merge(last="lost")),
    ("writes new_id but keeps the pair's second id", "skip both ids",
     lambda ids, pair, new_id: [new_id if i + 1 < len(ids) and (x, ids[i + 1]) == tuple(pair) else x
                                for i, x in enumerate(ids)]),
    ("also merges the reversed pair", "ordered", merge(compare="either order")),
    ("moves on by 3 after a merge: the id after the pair is lost", "putting the pair back in place of every new_id",
     merge(step_after=3)),
    ("cuts the list into aligned chunks of two and merges a chunk that is the pair: occurrences at odd positions are",
     "leaves them unmerged",
     lambda ids, pair, new_id: [x for i in range(0, len(ids), 2)
                                for x in ([new_id] if tuple(ids[i:i + 2]) == tuple(pair) else ids[i:i + 2])]),
    ("removes the pair instead of replacing it", "put new_id where the pair was", merge(write=False)),
    ("reads ids[i + 1] without checking the end", "no next id", merge(check_end=False)),
    ("compares the slice ids[i:i + 2], a list, with the tuple pair: never equal", "a list never equals a tuple",
     merge(compare="list slice")),
    ("merges in place with slice assignment and returns ids", "in place", slice_merge(copy=False)),
    ("returns the input list itself when nothing is merged (a learner trial's find)", "it was given",
     lambda ids, pair, new_id: merge()(ids, pair, new_id)
     if any(ids[i] == pair[0] and ids[i + 1] == pair[1] for i in range(len(ids) - 1)) else ids),
    # ids as text or bytes
    ("joins the ids into text and replaces 'a b' by the new id", "compare ids, not text",
     lambda ids, pair, new_id: [int(t) for t in " ".join(str(i) for i in ids).replace(
         f"{pair[0]} {pair[1]}", str(new_id)).split()]),
    ("str.replace on the ids joined with a space on each side (a learner trial): adjacent occurrences are missed",
     "uses up the space after it",
     lambda ids, pair, new_id: [int(t) for t in (" " + " ".join(map(str, ids)) + " ").replace(
         f" {pair[0]} {pair[1]} ", f" {new_id} ").split()]),
    ("bytes.replace: every id taken as a byte", "256 and above",
     lambda ids, pair, new_id: list(bytes(ids).replace(bytes(pair), bytes([new_id])))),
    ("returns bytes when every id fits in a byte", "256 and above",
     merge(returns=lambda out: bytes(out) if all(0 <= t < 256 for t in out) else out)),
    # what is returned
    ("returns a tuple", "expected a list", merge(returns=tuple)),
    ("returns a NumPy array", "expected a list", merge(returns=lambda out: np.array(out, dtype=np.int64))),
    ("a copy merged in place with slice assignment", RIGHT, slice_merge(copy=True)),
    ("tuple(ids[i:i + 2]) == tuple(pair), with an index", RIGHT, merge(compare="tuple slice")),
    ("a while loop over a copy, comparing ids[i] and ids[i + 1] with pair[0] and pair[1]", RIGHT, merge()),
])


@wrong("12.3", hint="train_bpe")
def merge_pair_peeking(ids, pair, new_id):
    """peeks at the package's BPE trainer first (forbidden), then merges by hand"""
    _text.train_bpe("", 0)
    return merge(compare="tuple slice")(ids, pair, new_id)


@wrong("12.3", hint="256 and above")
def merge_pair_bytearray(ids, pair, new_id):
    """a bytearray, merged by hand and returned as a list"""
    data, out, i = bytearray(ids), bytearray(), 0
    while i < len(data):
        merged = data[i:i + 2] == bytes(pair)
        out.append(new_id if merged else data[i])
        i += 2 if merged else 1
    return list(out)


@wrong("12.3", hint="return")
def merge_pair_no_return(ids, pair, new_id):
    """builds the list but forgets to return it"""
    out = merge()(ids, pair, new_id)  # noqa: F841


@wrong("12.3", hint="write it as a loop")
def merge_pair_recursive(ids, pair, new_id):
    """recursive on the rest of the list: right, but too deep for 2,000 ids (a learner trial's find: the hint
    spoke of a shadowed library name)"""
    if len(ids) < 2:
        return list(ids)
    if (ids[0], ids[1]) == tuple(pair):
        return [new_id] + merge_pair_recursive(ids[2:], pair, new_id)
    return [ids[0]] + merge_pair_recursive(ids[1:], pair, new_id)


@right("12.3")
def merge_pair_iterator(ids, pair, new_id):
    """an iterator, with next() to consume the second id"""
    out, it = [], iter(ids)
    previous = next(it, None)
    if previous is None:
        return out
    for x in it:
        if previous is not None and (previous, x) == tuple(pair):
            out.append(new_id)
            previous = None
        else:
            if previous is not None:
                out.append(previous)
            previous = x
    if previous is not None:
        out.append(previous)
    return out


@right("12.3")
def merge_pair_zip(ids, pair, new_id):
    """with zip over neighbours and a counter of ids to skip"""
    out, skip = [], 0
    for x, y in zip(ids, list(ids[1:]) + [None]):
        if skip:
            skip -= 1
            continue
        if (x, y) == tuple(pair):
            out.append(new_id)
            skip = 1
        else:
            out.append(x)
    return out
