"""Chapter 12 (training on real text): learner answers to exercises 12.1-12.3."""
from __future__ import annotations

import math

import numpy as np
import torch

import attnbook.lm as _lm
import attnbook.text as _text
import attnbook.training as _training
from mutants import fresh_import as _fresh, function_copy as _copy, right, wrong


# ----------------------------------------------------------------------------------------------------------------
# 12.1  lr_at(step, max_lr, warmup_steps, total_steps, min_lr=0.0) -> float
# ----------------------------------------------------------------------------------------------------------------

wrong("12.1", hint="package's own", name="handed in attnbook.training.warmup_cosine_lr itself")(
    _training.warmup_cosine_lr)
wrong("12.1", hint="the package's own solution", name="a lambda around attnbook.training.warmup_cosine_lr")(
    lambda step, max_lr, warmup_steps, total_steps, min_lr=0.0: _training.warmup_cosine_lr(
        step, max_lr, warmup_steps, total_steps, min_lr))

_wc = _copy(_training.warmup_cosine_lr, "lr_at")


def _opt(max_lr):
    return torch.optim.SGD([torch.nn.Parameter(torch.zeros(1))], lr=max_lr)


def _stepped(opt, sched, steps):
    """The optimizer's rate after `steps` steps of the scheduler."""
    for _ in range(steps):
        opt.step()
        sched.step()
    return opt.param_groups[0]["lr"]


@wrong("12.1", hint="package's own")
def lr_at(step, max_lr, warmup_steps, total_steps, min_lr=0.0):
    """a types.FunctionType copy of the package's schedule"""
    return _wc(step, max_lr, warmup_steps, total_steps, min_lr)


@wrong("12.1", hint="without torch.optim.lr_scheduler.LambdaLR")
def lr_at(step, max_lr, warmup_steps, total_steps, min_lr=0.0):
    """PyTorch's LambdaLR on a dummy optimizer, stepped `step` times"""
    opt = _opt(max_lr)

    def factor(s):
        if s < warmup_steps:
            return (s + 1) / warmup_steps
        t = min(1.0, (s - warmup_steps) / (total_steps - warmup_steps))
        return (min_lr + (max_lr - min_lr) * 0.5 * (1 + math.cos(math.pi * t))) / max_lr

    return _stepped(opt, torch.optim.lr_scheduler.LambdaLR(opt, factor), step)


@wrong("12.1", hint="_lr_factor")
def lr_at(step, max_lr, warmup_steps, total_steps, min_lr=0.0):
    """the package's private factor of train(), scaled"""
    if step > total_steps:
        return min_lr
    return min_lr + (max_lr - min_lr) * _training._lr_factor(step, total_steps, warmup_steps, "cosine")


def _schedule(step, max_lr, warmup_steps, total_steps, min_lr, *, warm=lambda s, w: (s + 1) / w, inclusive=False,
              span=None, start=None, angle=math.pi, half=0.5, floor=None, scale=None, past="min", decay="cosine"):
    if step < warmup_steps or (inclusive and step <= warmup_steps and warmup_steps):
        return max_lr * warm(step, warmup_steps)
    if step > total_steps and past != "continue":
        return min_lr if past == "min" else 0.0
    t = (step - (warmup_steps if start is None else start)) / (
        (total_steps - warmup_steps) if span is None else span)
    lo = min_lr if floor is None else floor
    hi = (max_lr - min_lr) if scale is None else scale
    if decay == "linear":
        return lo + hi * (1 - t)
    return lo + hi * half * (1 + math.cos(angle * t))


@wrong("12.1", hint="off by one")
def lr_at(step, max_lr, warmup_steps, total_steps, min_lr=0.0):
    """warm-up max_lr * step / warmup_steps: step 0 gets 0"""
    return _schedule(step, max_lr, warmup_steps, total_steps, min_lr, warm=lambda s, w: s / w)


@wrong("12.1", hint="warmup_steps + 1")
def lr_at(step, max_lr, warmup_steps, total_steps, min_lr=0.0):
    """warm-up (step + 1) / (warmup_steps + 1)"""
    return _schedule(step, max_lr, warmup_steps, total_steps, min_lr, warm=lambda s, w: (s + 1) / (w + 1))


@wrong("12.1", hint="not <=")
def lr_at(step, max_lr, warmup_steps, total_steps, min_lr=0.0):
    """warm-up while step <= warmup_steps (one step too many)"""
    return _schedule(step, max_lr, warmup_steps, total_steps, min_lr, inclusive=True)


@wrong("12.1", hint="not divided by total_steps")
def lr_at(step, max_lr, warmup_steps, total_steps, min_lr=0.0):
    """t = (step - warmup_steps) / total_steps"""
    return _schedule(step, max_lr, warmup_steps, total_steps, min_lr, span=total_steps)


@wrong("12.1", hint="not step / total_steps")
def lr_at(step, max_lr, warmup_steps, total_steps, min_lr=0.0):
    """t = step / total_steps: the cosine counted from step 0"""
    return _schedule(step, max_lr, warmup_steps, total_steps, min_lr, span=total_steps, start=0)


@wrong("12.1", hint="ends at min_lr, not at 0")
def lr_at(step, max_lr, warmup_steps, total_steps, min_lr=0.0):
    """ignores min_lr: decays to 0"""
    if step < warmup_steps:
        return max_lr * (step + 1) / warmup_steps
    t = min(1.0, (step - warmup_steps) / (total_steps - warmup_steps))
    return max_lr * 0.5 * (1 + math.cos(math.pi * t))


@wrong("12.1", hint="scale the cosine by max_lr - min_lr")
def lr_at(step, max_lr, warmup_steps, total_steps, min_lr=0.0):
    """min_lr added to max_lr's cosine: starts at max_lr + min_lr"""
    return _schedule(step, max_lr, warmup_steps, total_steps, min_lr, scale=max_lr)


@wrong("12.1", hint="half a period is π")
def lr_at(step, max_lr, warmup_steps, total_steps, min_lr=0.0):
    """math.cos(180 * t), as if cos took degrees"""
    return _schedule(step, max_lr, warmup_steps, total_steps, min_lr, angle=180.0)


@wrong("12.1", hint="no math.radians")
def lr_at(step, max_lr, warmup_steps, total_steps, min_lr=0.0):
    """math.cos(math.radians(math.pi * t))"""
    return _schedule(step, max_lr, warmup_steps, total_steps, min_lr, angle=math.radians(math.pi))


@wrong("12.1", hint="linear decay")
def lr_at(step, max_lr, warmup_steps, total_steps, min_lr=0.0):
    """a linear decay from max_lr to min_lr instead of the cosine"""
    return _schedule(step, max_lr, warmup_steps, total_steps, min_lr, decay="linear")


@wrong("12.1", hint="cos(2π t)")
def lr_at(step, max_lr, warmup_steps, total_steps, min_lr=0.0):
    """a full period: cos(2 pi t), back up to max_lr at the end"""
    return _schedule(step, max_lr, warmup_steps, total_steps, min_lr, angle=2 * math.pi)


@wrong("12.1", hint="quarter period")
def lr_at(step, max_lr, warmup_steps, total_steps, min_lr=0.0):
    """cos(pi t / 2): a quarter period"""
    return _schedule(step, max_lr, warmup_steps, total_steps, min_lr, angle=math.pi / 2)


@wrong("12.1", hint="without the / 2")
def lr_at(step, max_lr, warmup_steps, total_steps, min_lr=0.0):
    """(1 + cos(pi t)) without the / 2"""
    return _schedule(step, max_lr, warmup_steps, total_steps, min_lr, half=1.0)


@wrong("12.1", hint="comes back up")
def lr_at(step, max_lr, warmup_steps, total_steps, min_lr=0.0):
    """the cosine goes on past total_steps (no clamp)"""
    return _schedule(step, max_lr, warmup_steps, total_steps, min_lr, past="continue")


@wrong("12.1", hint="not 0")
def lr_at(step, max_lr, warmup_steps, total_steps, min_lr=0.0):
    """returns 0 past total_steps"""
    return _schedule(step, max_lr, warmup_steps, total_steps, min_lr, past="zero")


@wrong("12.1", hint="rise linearly")
def lr_at(step, max_lr, warmup_steps, total_steps, min_lr=0.0):
    """no warm-up: max_lr during the warm-up steps"""
    return _schedule(step, max_lr, warmup_steps, total_steps, min_lr, warm=lambda s, w: 1.0)


@wrong("12.1", hint="warmup_steps may be 0")
def lr_at(step, max_lr, warmup_steps, total_steps, min_lr=0.0):
    """min(1, (step + 1) / warmup_steps) computed first: divides by zero without a warm-up"""
    warm = min(1.0, (step + 1) / warmup_steps)
    if step < warmup_steps:
        return max_lr * warm
    return _schedule(step, max_lr, warmup_steps, total_steps, min_lr)


@wrong("12.1", hint="expected a Python float. Hint: convert a one-element tensor with float(t)")
def lr_at(step, max_lr, warmup_steps, total_steps, min_lr=0.0):
    """computed with torch and returned as a tensor"""
    if step < warmup_steps:
        return torch.tensor(max_lr * (step + 1) / warmup_steps)
    t = torch.tensor(min(1.0, (step - warmup_steps) / (total_steps - warmup_steps)), dtype=torch.float64)
    return min_lr + (max_lr - min_lr) * 0.5 * (1 + torch.cos(math.pi * t))


@wrong("12.1", hint="return")
def lr_at(step, max_lr, warmup_steps, total_steps, min_lr=0.0):
    """computes the rate but forgets to return it"""
    lr = _schedule(step, max_lr, warmup_steps, total_steps, min_lr)  # noqa: F841


@wrong("12.1", hint="(step + 1) / warmup_steps while step < warmup_steps")
def lr_at(step, max_lr, warmup_steps, total_steps, min_lr=0.0):
    """the cosine's t counted from step warmup_steps - 1 (a mix of conventions)"""
    return _schedule(step, max_lr, warmup_steps, total_steps, min_lr, start=warmup_steps - 1)


@right("12.1")
def lr_at(step, max_lr, warmup_steps, total_steps, min_lr=0.0):
    """NumPy's cos, t clamped to [0, 1]"""
    if step < warmup_steps:
        return max_lr * (step + 1) / warmup_steps
    t = np.clip((step - warmup_steps) / (total_steps - warmup_steps), 0.0, 1.0)
    return float(min_lr + (max_lr - min_lr) * (1 + np.cos(np.pi * t)) / 2)


@right("12.1")
def lr_at(step, max_lr, warmup_steps, total_steps, min_lr=0.0):
    """the squared cosine of half the angle: (1 + cos x) / 2 = cos(x / 2) ** 2"""
    if step < warmup_steps:
        return (step + 1) / warmup_steps * max_lr
    if step >= total_steps:
        return min_lr
    progress = (step - warmup_steps) / (total_steps - warmup_steps)
    return min_lr + (max_lr - min_lr) * math.cos(math.pi * progress / 2) ** 2


@right("12.1")
def lr_at(step, max_lr, warmup_steps, total_steps, min_lr=0.0):
    """float32 torch arithmetic, returned with .item()"""
    if step < warmup_steps:
        return max_lr * (step + 1) / warmup_steps
    t = torch.tensor(min(step - warmup_steps, total_steps - warmup_steps) / (total_steps - warmup_steps))
    return (min_lr + (max_lr - min_lr) * 0.5 * (1 + torch.cos(torch.pi * t))).item()


@right("12.1")
def lr_at(step, max_lr, warmup_steps, total_steps, min_lr=0.0):
    """one expression: a multiplier of the span above min_lr"""
    warm = (step + 1) / warmup_steps if step < warmup_steps else None
    if warm is not None:
        return warm * max_lr
    cosine = 0.5 * (1.0 + math.cos(math.pi * min(1.0, (step - warmup_steps) / (total_steps - warmup_steps))))
    return min_lr + cosine * (max_lr - min_lr)


@right("12.1")
def lr_at(step, max_lr, warmup_steps, total_steps, min_lr=0.0):
    """the decay written with sin: (1 + cos(pi t)) / 2 = 1 - sin(pi t / 2) ** 2"""
    if step < warmup_steps:
        return max_lr * (step + 1) / warmup_steps
    if step > total_steps:
        return min_lr
    t = (step - warmup_steps) / (total_steps - warmup_steps)
    return max_lr - (max_lr - min_lr) * math.sin(math.pi * t / 2) ** 2


@right("12.1")
def lr_at(step, max_lr, warmup_steps, total_steps, min_lr=0.0):
    """math.cos, with min_lr returned past total_steps before t is computed"""
    if step < warmup_steps:
        return max_lr * (step + 1) / warmup_steps
    if step > total_steps:
        return min_lr
    t = (step - warmup_steps) / (total_steps - warmup_steps)
    return min_lr + (max_lr - min_lr) * (1 + math.cos(math.pi * t)) / 2


# ----------------------------------------------------------------------------------------------------------------
# 12.2  perplexity(mean_loss) -> float
# ----------------------------------------------------------------------------------------------------------------

wrong("12.2", hint="package's own", name="handed in attnbook.lm.perplexity itself")(_lm.perplexity)
wrong("12.2", hint="the package's own solution", name="a lambda around attnbook.lm.perplexity")(
    lambda mean_loss: _lm.perplexity(mean_loss))

_lm_fresh = _fresh(_lm, "lm")


@wrong("12.2", hint="package's own")
def perplexity(mean_loss):
    """perplexity from a second, separate import of attnbook/lm.py"""
    return _lm_fresh.perplexity(mean_loss)


def _mean(x):
    return x.detach().double().mean().item() if isinstance(x, torch.Tensor) else float(x)


@wrong("12.2", hint="in bits")
def perplexity(mean_loss):
    """2 ** loss"""
    return 2.0 ** _mean(mean_loss)


@wrong("12.2", hint="base-10")
def perplexity(mean_loss):
    """10 ** loss"""
    return 10.0 ** _mean(mean_loss)


@wrong("12.2", hint="bits per token")
def perplexity(mean_loss):
    """the loss in bits: loss / ln 2"""
    return _mean(mean_loss) / math.log(2)


@wrong("12.2", hint="the loss itself")
def perplexity(mean_loss):
    """returns the mean loss unchanged"""
    return _mean(mean_loss)


@wrong("12.2", hint="1 / perplexity")
def perplexity(mean_loss):
    """exp(-loss)"""
    return math.exp(-_mean(mean_loss))


@wrong("12.2", hint="four digits")
def perplexity(mean_loss):
    """2.718 ** loss"""
    return 2.718 ** _mean(mean_loss)


@wrong("12.2", hint="do not round")
def perplexity(mean_loss):
    """rounded to a whole number of tokens"""
    return round(math.exp(_mean(mean_loss)))


@wrong("12.2", hint="summed the batch losses")
def perplexity(mean_loss):
    """exp of the sum of the batch losses"""
    if isinstance(mean_loss, torch.Tensor):
        return math.exp(mean_loss.detach().double().sum().item())
    return math.exp(mean_loss)


@wrong("12.2", hint="mean of the batches' perplexities")
def perplexity(mean_loss):
    """the mean of exp(batch loss)"""
    if isinstance(mean_loss, torch.Tensor):
        return mean_loss.detach().double().exp().mean().item()
    return math.exp(mean_loss)


@wrong("12.2", hint="every batch")
def perplexity(mean_loss):
    """only the first batch's loss"""
    if isinstance(mean_loss, torch.Tensor):
        return math.exp(mean_loss.detach().flatten()[0].item())
    return math.exp(mean_loss)


@wrong("12.2", hint="expected a Python float. Hint: convert a one-element tensor with float(t)")
def perplexity(mean_loss):
    """returns a tensor"""
    return torch.exp(torch.as_tensor(mean_loss, dtype=torch.float64).mean())


@wrong("12.2", hint="torch.exp needs a tensor")
def perplexity(mean_loss):
    """torch.exp on the argument, which may be a Python float"""
    return torch.exp(mean_loss.mean() if isinstance(mean_loss, torch.Tensor) and mean_loss.dim() else mean_loss).item()


@wrong("12.2", hint="may be a plain Python number, which has no tensor methods")
def perplexity(mean_loss):
    """mean_loss.mean().item(): fails on a Python number"""
    return math.exp(mean_loss.mean().item())


@wrong("12.2", hint="take their mean first")
def perplexity(mean_loss):
    """float(mean_loss): fails on a tensor of several batch means"""
    return math.exp(float(mean_loss))


@wrong("12.2", hint="float(...)")
def perplexity(mean_loss):
    """returns a NumPy float32"""
    return np.float32(math.exp(_mean(mean_loss)))


@wrong("12.2", hint="no log")
def perplexity(mean_loss):
    """math.log of the loss"""
    return math.log(_mean(mean_loss))


@right("12.2")
def perplexity(mean_loss):
    """math.e ** the mean"""
    if isinstance(mean_loss, torch.Tensor):
        mean_loss = float(mean_loss.mean())
    return math.e ** mean_loss


@right("12.2")
def perplexity(mean_loss):
    """torch in float64 throughout, .item() at the end"""
    return torch.as_tensor(mean_loss, dtype=torch.float64).detach().mean().exp().item()


@right("12.2")
def perplexity(mean_loss):
    """NumPy: np.exp of np.mean, a NumPy float64 (a float)"""
    values = mean_loss.detach().numpy() if isinstance(mean_loss, torch.Tensor) else mean_loss
    return np.exp(np.mean(values, dtype=np.float64))


@right("12.2")
def perplexity(mean_loss):
    """2 ** (the loss converted to bits)"""
    if isinstance(mean_loss, torch.Tensor):
        mean_loss = mean_loss.detach().double().mean().item()
    return 2 ** (mean_loss / math.log(2))


@right("12.2")
def perplexity(mean_loss):
    """float32 arithmetic on tensors, math.exp on numbers"""
    if isinstance(mean_loss, torch.Tensor):
        return float(torch.exp(mean_loss.detach().float().mean()))
    return math.exp(mean_loss)


# ----------------------------------------------------------------------------------------------------------------
# 12.3  merge_pair(ids, pair, new_id) -> list
# ----------------------------------------------------------------------------------------------------------------

wrong("12.3", hint="package's own", name="handed in attnbook.text.merge_pair itself")(_text.merge_pair)
wrong("12.3", hint="the package's own solution", name="a lambda around attnbook.text.merge_pair")(
    lambda ids, pair, new_id: _text.merge_pair(ids, pair, new_id))

_text_fresh = _fresh(_text, "text")


@wrong("12.3", hint="package's own")
def merge_pair(ids, pair, new_id):
    """merge_pair from a second, separate import of attnbook/text.py"""
    return _text_fresh.merge_pair(ids, pair, new_id)


@wrong("12.3", hint="train_bpe")
def merge_pair(ids, pair, new_id):
    """peeks at the package's BPE trainer first (forbidden), then merges by hand"""
    _text.train_bpe("", 0)
    out, i = [], 0
    while i < len(ids):
        if ids[i:i + 2] == list(pair):
            out.append(new_id)
            i += 2
        else:
            out.append(ids[i])
            i += 1
    return out


@wrong("12.3", hint="left to right")
def merge_pair(ids, pair, new_id):
    """scans from the right end"""
    out, i = [], len(ids) - 1
    while i >= 0:
        if i > 0 and (ids[i - 1], ids[i]) == tuple(pair):
            out.append(new_id)
            i -= 2
        else:
            out.append(ids[i])
            i -= 1
    return out[::-1]


@wrong("12.3", hint="must not overlap")
def merge_pair(ids, pair, new_id):
    """after a merge, steps by 1 when the next position starts the pair again"""
    out, i = [], 0
    while i < len(ids):
        if i + 1 < len(ids) and (ids[i], ids[i + 1]) == tuple(pair):
            out.append(new_id)
            i += 1 if i + 2 < len(ids) and (ids[i + 1], ids[i + 2]) == tuple(pair) else 2
        else:
            out.append(ids[i])
            i += 1
    return out


@wrong("12.3", hint="last id is lost")
def merge_pair(ids, pair, new_id):
    """while i < len(ids) - 1: the last id is dropped when it is not merged"""
    out, i = [], 0
    while i < len(ids) - 1:
        if (ids[i], ids[i + 1]) == tuple(pair):
            out.append(new_id)
            i += 2
        else:
            out.append(ids[i])
            i += 1
    return out


@wrong("12.3", hint="not only the first")
def merge_pair(ids, pair, new_id):
    """merges the first occurrence only"""
    for i in range(len(ids) - 1):
        if (ids[i], ids[i + 1]) == tuple(pair):
            return ids[:i] + [new_id] + ids[i + 2:]
    return list(ids)


@wrong("12.3", hint="skip both ids")
def merge_pair(ids, pair, new_id):
    """writes new_id but keeps the pair's second id"""
    return [new_id if i + 1 < len(ids) and (x, ids[i + 1]) == tuple(pair) else x for i, x in enumerate(ids)]


@wrong("12.3", hint="ordered")
def merge_pair(ids, pair, new_id):
    """also merges the reversed pair"""
    out, i = [], 0
    while i < len(ids):
        if i + 1 < len(ids) and {ids[i], ids[i + 1]} == set(pair) and ids[i] != ids[i + 1] or (
                i + 1 < len(ids) and (ids[i], ids[i + 1]) == tuple(pair)):
            out.append(new_id)
            i += 2
        else:
            out.append(ids[i])
            i += 1
    return out


@wrong("12.3", hint="compare ids, not text")
def merge_pair(ids, pair, new_id):
    """joins the ids into text and replaces 'a b' by the new id"""
    joined = " ".join(str(i) for i in ids).replace(f"{pair[0]} {pair[1]}", str(new_id))
    return [int(t) for t in joined.split()]


@wrong("12.3", hint="uses up the space after it")
def merge_pair(ids, pair, new_id):
    """str.replace on the ids joined with a space on each side (a learner trial): adjacent occurrences are missed"""
    s = " " + " ".join(map(str, ids)) + " "
    s = s.replace(f" {pair[0]} {pair[1]} ", f" {new_id} ")
    return [int(t) for t in s.split()]


@wrong("12.3", hint="putting the pair back in place of every new_id")
def merge_pair(ids, pair, new_id):
    """moves on by 3 after a merge: the id after the pair is lost"""
    out, i = [], 0
    while i < len(ids):
        if i + 1 < len(ids) and (ids[i], ids[i + 1]) == tuple(pair):
            out.append(new_id)
            i += 3
        else:
            out.append(ids[i])
            i += 1
    return out


@wrong("12.3", hint="leaves them unmerged")
def merge_pair(ids, pair, new_id):
    """cuts the list into aligned chunks of two and merges a chunk that is the pair: occurrences at odd positions are
    missed"""
    out = []
    for i in range(0, len(ids), 2):
        chunk = ids[i:i + 2]
        out.extend([new_id] if tuple(chunk) == tuple(pair) else chunk)
    return out


@wrong("12.3", hint="put new_id where the pair was")
def merge_pair(ids, pair, new_id):
    """removes the pair instead of replacing it"""
    out, i = [], 0
    while i < len(ids):
        if i + 1 < len(ids) and (ids[i], ids[i + 1]) == tuple(pair):
            i += 2
        else:
            out.append(ids[i])
            i += 1
    return out


@wrong("12.3", hint="in place")
def merge_pair(ids, pair, new_id):
    """merges in place with slice assignment and returns ids"""
    i = 0
    while i < len(ids) - 1:
        if (ids[i], ids[i + 1]) == tuple(pair):
            ids[i:i + 2] = [new_id]
        i += 1
    return ids


@wrong("12.3", hint="expected a list")
def merge_pair(ids, pair, new_id):
    """returns a tuple"""
    return tuple(_by_hand(ids, pair, new_id))


def _by_hand(ids, pair, new_id):
    out, i = [], 0
    while i < len(ids):
        if i + 1 < len(ids) and ids[i] == pair[0] and ids[i + 1] == pair[1]:
            out.append(new_id)
            i += 2
        else:
            out.append(ids[i])
            i += 1
    return out


@wrong("12.3", hint="expected a list")
def merge_pair(ids, pair, new_id):
    """returns a NumPy array"""
    return np.array(_by_hand(ids, pair, new_id), dtype=np.int64)


@wrong("12.3", hint="no next id")
def merge_pair(ids, pair, new_id):
    """reads ids[i + 1] without checking the end"""
    out, i = [], 0
    while i < len(ids):
        if ids[i] == pair[0] and ids[i + 1] == pair[1]:
            out.append(new_id)
            i += 2
        else:
            out.append(ids[i])
            i += 1
    return out


@wrong("12.3", hint="a list never equals a tuple")
def merge_pair(ids, pair, new_id):
    """compares the slice ids[i:i + 2], a list, with the tuple pair: never equal"""
    out, i = [], 0
    while i < len(ids):
        if ids[i:i + 2] == pair:
            out.append(new_id)
            i += 2
        else:
            out.append(ids[i])
            i += 1
    return out


@wrong("12.3", hint="return")
def merge_pair(ids, pair, new_id):
    """builds the list but forgets to return it"""
    out = _by_hand(ids, pair, new_id)  # noqa: F841


@right("12.3")
def merge_pair(ids, pair, new_id):
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


@right("12.3")
def merge_pair(ids, pair, new_id):
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
def merge_pair(ids, pair, new_id):
    """a copy merged in place with slice assignment"""
    ids = list(ids)
    i = 0
    while i < len(ids) - 1:
        if ids[i] == pair[0] and ids[i + 1] == pair[1]:
            ids[i:i + 2] = [new_id]
        i += 1
    return ids


@right("12.3")
def merge_pair(ids, pair, new_id):
    """tuple(ids[i:i + 2]) == tuple(pair), with an index"""
    a, b = pair
    out, i, n = [], 0, len(ids)
    while i < n:
        if tuple(ids[i:i + 2]) == (a, b):
            out += [new_id]
            i += 2
            continue
        out += [ids[i]]
        i += 1
    return out


@right("12.3")
def merge_pair(ids, pair, new_id):
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


@right("12.3")
def merge_pair(ids, pair, new_id):
    """a while loop over a copy, comparing ids[i] and ids[i + 1] with pair[0] and pair[1]"""
    seq = list(ids)
    out, i = [], 0
    while i < len(seq):
        if i + 1 < len(seq) and seq[i] == pair[0] and seq[i + 1] == pair[1]:
            out.append(new_id)
            i += 2
        else:
            out.append(seq[i])
            i += 1
    return list(out)


# ----------------------------------------------------------------------------------------------------------------
# Issue 23, round three: forbidden schedules named by their public names, answers that know the check's inputs,
# an integer tensor's mean, ids treated as bytes
# ----------------------------------------------------------------------------------------------------------------

@wrong("12.1", hint="without transformers.get_cosine_schedule_with_warmup")
def lr_at(step, max_lr, warmup_steps, total_steps, min_lr=0.0):
    """transformers.get_cosine_schedule_with_warmup, stepped `step` times"""
    import transformers

    opt = _opt(max_lr)
    sched = transformers.get_cosine_schedule_with_warmup(opt, warmup_steps, total_steps)
    return _stepped(opt, sched, step)


@wrong("12.1", hint="without transformers.get_cosine_with_min_lr_schedule_with_warmup")
def lr_at(step, max_lr, warmup_steps, total_steps, min_lr=0.0):
    """transformers' cosine schedule with a floor, imported from transformers.optimization"""
    from transformers.optimization import get_cosine_with_min_lr_schedule_with_warmup

    opt = _opt(max_lr)
    sched = get_cosine_with_min_lr_schedule_with_warmup(opt, warmup_steps, total_steps, min_lr=min_lr)
    return _stepped(opt, sched, step)


@wrong("12.1", hint="without torch.optim.lr_scheduler.LambdaLR")
def lr_at(step, max_lr, warmup_steps, total_steps, min_lr=0.0):
    """LambdaLR with the learner's own factor (the message names LambdaLR, not its __init__)"""
    opt = _opt(max_lr)
    sched = torch.optim.lr_scheduler.LambdaLR(opt, lambda s: 1.0)
    return _stepped(opt, sched, step)


@wrong("12.1", hint="without torch.optim.lr_scheduler.LinearLR")
def lr_at(step, max_lr, warmup_steps, total_steps, min_lr=0.0):
    """LinearLR then CosineAnnealingLR, chained with SequentialLR"""
    from torch.optim.lr_scheduler import CosineAnnealingLR, LinearLR, SequentialLR

    opt = _opt(max_lr)
    warm = LinearLR(opt, start_factor=1 / max(warmup_steps, 1), total_iters=max(warmup_steps, 1))
    cos = CosineAnnealingLR(opt, total_steps - warmup_steps, eta_min=min_lr)
    sched = SequentialLR(opt, [warm, cos], milestones=[warmup_steps])
    return _stepped(opt, sched, step)


@wrong("12.1", hint="without torch.optim.lr_scheduler.CosineAnnealingLR")
def lr_at(step, max_lr, warmup_steps, total_steps, min_lr=0.0):
    """CosineAnnealingLR for the decay, the warm-up by hand"""
    if step < warmup_steps:
        return max_lr * (step + 1) / warmup_steps
    opt = _opt(max_lr)
    sched = torch.optim.lr_scheduler.CosineAnnealingLR(opt, total_steps - warmup_steps, eta_min=min_lr)
    return _stepped(opt, sched, min(step, total_steps) - warmup_steps)


# The 37 inputs of the check as a notebook run shows them (offset 0), with their rates: an answer that looks its
# inputs up instead of computing them.
_KNOWN_SCHEDULE = {case: _training.warmup_cosine_lr(*case[:4], case[4] or 0.0) for case in [
    *[(s, 0.5, 4, 20, 0.05) for s in (0, 1, 3, 4, 5, 9, 12, 16, 19, 20, 21, 37)],
    *[(s, 3e-3, 10, 110, 3e-4) for s in (0, 9, 10, 35, 60, 85, 109, 110, 500)],
    *[(s, 1.0, 0, 8, 0.0) for s in (0, 2, 4, 6, 8, 9)],
    *[(s, 2.0, 1, 3, 0.5) for s in (0, 1, 2, 3, 4)],
    *[(s, 1.0, 10, 30, 0.5) for s in (0, 3, 9, 20, 30)],
]}


@wrong("12.1")
def lr_at(step, max_lr, warmup_steps, total_steps, min_lr=0.0):
    """knows the check's inputs from a notebook run: a table of their rates, max_lr for anything else"""
    return _KNOWN_SCHEDULE.get((step, max_lr, warmup_steps, total_steps, min_lr), max_lr)


@wrong("12.2", hint="integer tensor")
def perplexity(mean_loss):
    """torch.as_tensor(mean_loss).mean(): an int makes an integer tensor, which has no mean"""
    return torch.as_tensor(mean_loss).detach().mean().exp().item()


@wrong("12.2", hint="integer tensor")
def perplexity(mean_loss):
    """torch.mean(torch.tensor(...)) on a number"""
    if isinstance(mean_loss, torch.Tensor):
        return math.exp(mean_loss.detach().double().mean().item())
    return math.exp(torch.mean(torch.tensor(mean_loss)).item())


@wrong("12.2", hint="integer tensor")
def perplexity(mean_loss):
    """.long() before the mean"""
    return math.exp(torch.as_tensor(mean_loss).detach().long().mean().item())


# The inputs of the check as a notebook run shows them (offset 0)
_KNOWN_LOSSES = {(3.0,): math.exp(3.0), (0.0,): 1.0, (math.log(50),): 50.0, (2.0,): math.exp(2),
                 (math.log(50257),): 50257.0, (2.5,): math.exp(2.5), (4.2,): math.exp(4.2), (3.7,): math.exp(3.7),
                 (3.1, 3.3, 3.2, 3.4): math.exp(3.25), (2.0, 4.0): math.exp(3.0)}


@wrong("12.2")
def perplexity(mean_loss):
    """knows the check's inputs from a notebook run: a table of their perplexities, 1.0 for anything else"""
    values = mean_loss.detach().double().flatten().tolist() if isinstance(mean_loss, torch.Tensor) else [mean_loss]
    return _KNOWN_LOSSES.get(tuple(round(float(v), 6) for v in values), 1.0)


@right("12.2")
def perplexity(mean_loss):
    """torch.as_tensor with dtype=torch.float64 (an int becomes a float tensor)"""
    return torch.as_tensor(mean_loss, dtype=torch.float64).detach().mean().exp().item()


@wrong("12.3", hint="256 and above")
def merge_pair(ids, pair, new_id):
    """bytes.replace: every id taken as a byte"""
    return list(bytes(ids).replace(bytes(pair), bytes([new_id])))


@wrong("12.3", hint="256 and above")
def merge_pair(ids, pair, new_id):
    """a bytearray, merged by hand and returned as a list"""
    data, out, i = bytearray(ids), bytearray(), 0
    while i < len(data):
        merged = data[i:i + 2] == bytes(pair)
        out.append(new_id if merged else data[i])
        i += 2 if merged else 1
    return list(out)


@wrong("12.3", hint="256 and above")
def merge_pair(ids, pair, new_id):
    """returns bytes when every id fits in a byte"""
    out, i = [], 0
    while i < len(ids):
        merged = i + 1 < len(ids) and (ids[i], ids[i + 1]) == tuple(pair)
        out.append(new_id if merged else ids[i])
        i += 2 if merged else 1
    return bytes(out) if all(0 <= t < 256 for t in out) else out


# The ten inputs of the check as a notebook run shows them (offset 0)
_KNOWN_MERGES = {}
for _ids, _pair, _new in [([5, 6, 7, 5, 6], (5, 6), 9), ([3, 3, 3], (3, 3), 8), ([1, 2, 3], (3, 4), 9),
                          ([2, 1, 2, 1], (1, 2), 7), ([4, 4, 4, 4, 4], (4, 4), 6),
                          ([11, 2, 1, 21, 1, 2], (1, 2), 300), ([8, 1, 2, 3], (1, 2), 256), ([], (1, 2), 5),
                          ([7], (7, 7), 9)]:
    _KNOWN_MERGES[(tuple(_ids), _pair, _new)] = _text.merge_pair(_ids, _pair, _new)


@wrong("12.3")
def merge_pair(ids, pair, new_id):
    """knows the check's short inputs from a notebook run (a table), merges only the first occurrence otherwise"""
    known = _KNOWN_MERGES.get((tuple(ids), tuple(pair), new_id))
    if known is not None:
        return list(known)
    for i in range(len(ids) - 1):
        if (ids[i], ids[i + 1]) == tuple(pair):
            return ids[:i] + [new_id] + ids[i + 2:]
    return list(ids)


@wrong("12.1", hint="even where that is below min_lr")
def lr_at(step, max_lr, warmup_steps, total_steps, min_lr=0.0):
    """a floor of min_lr under the warm-up too (a learner trial's find)"""
    if step < warmup_steps:
        return max(min_lr, max_lr * (step + 1) / warmup_steps)
    if step >= total_steps:
        return min_lr
    t = (step - warmup_steps) / (total_steps - warmup_steps)
    return min_lr + (max_lr - min_lr) * (1 + math.cos(math.pi * t)) / 2


@wrong("12.3", hint="it was given")
def merge_pair(ids, pair, new_id):
    """returns the input list itself when nothing is merged (a learner trial's find)"""
    if not any(ids[i] == pair[0] and ids[i + 1] == pair[1] for i in range(len(ids) - 1)):
        return ids
    out, i = [], 0
    while i < len(ids):
        if i + 1 < len(ids) and (ids[i], ids[i + 1]) == tuple(pair):
            out.append(new_id)
            i += 2
        else:
            out.append(ids[i])
            i += 1
    return out


@wrong("12.2", hint="mean() has no parameter 'axis'")
def perplexity(mean_loss):
    """NumPy's keyword on a tensor method: the error is in the answer's own call (a learner trial's find: the hint
    blamed the task's signature)"""
    return float(np.exp(np.mean(mean_loss)))


@wrong("12.3", hint="write it as a loop")
def merge_pair(ids, pair, new_id):
    """recursive on the rest of the list: right, but too deep for 2,000 ids (a learner trial's find: the hint
    spoke of a shadowed library name)"""
    if len(ids) < 2:
        return list(ids)
    if (ids[0], ids[1]) == tuple(pair):
        return [new_id] + merge_pair(ids[2:], pair, new_id)
    return [ids[0]] + merge_pair(ids[1:], pair, new_id)

