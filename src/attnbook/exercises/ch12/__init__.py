"""Checkers for chapter 12, training on real text. One module per exercise; importing this package registers them.

    schedule     12.1  the learning rate of a step: linear warm-up, then a half cosine down to min_lr
    perplexity   12.2  perplexity from a mean cross-entropy in nats (a number, or a tensor of batch means)
    merge        12.3  one byte-pair-encoding merge on a list of ids, left to right without overlaps
    _shared      reading a learner's number as a Python float (12.1, 12.2); `judge`, the run over every case

Each check runs the answer on every case first (`judge`), then names a mistake only when that mistake gives the
answer's results on all of them; the references are the package's `training.warmup_cosine_lr`, `lm.perplexity` and
`text.merge_pair`, which are never an answer.
"""
# Importing registers the checkers, in the order of the exercises.
from . import schedule  # 12.1
from . import perplexity  # 12.2
from . import merge  # 12.3

__all__ = ["schedule", "perplexity", "merge"]
