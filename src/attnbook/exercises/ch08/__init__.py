"""Checkers for chapter 8, BERT vs GPT. One module per exercise; importing this package registers them all.

    masking    8.1  BERT's masking: 15% of the positions chosen, of those 80% [MASK], 10% a random id, 10% unchanged
    lm_loss    8.2  the causal language-modelling loss (cross-entropy of each output against the next token)
    sampling   8.3  temperature and top-k sampling (greedy at temperature 0)
    top_p      8.4  nucleus (top-p) filtering of logits
    _shared    what 8.1 and 8.3 both use: the statistical window `within_window` (its bounds are explained in that
               module's docstring) and the integer-dtype test

8.1 (BERT's masking) and 8.3 (sampling) are random. A learner may draw the random numbers in any order, so the
checks cannot compare draws with a reference. They test the structure exactly (what may change, what the labels
hold, the shape and dtype), the proportions statistically over many draws, and the use of the generator:
the same generator seed must give the same result whatever the state of the global generators, and another
seed another result. The references are written out here from the definitions; 8.2's is F.cross_entropy on the
shifted logits and ids. 8.4 (nucleus filtering) is exact: its cases are drawn clear of every threshold it compares.
"""
# Importing registers the checkers, in the order of the exercises.
from . import masking  # 8.1
from . import lm_loss  # 8.2
from . import sampling  # 8.3
from . import top_p  # 8.4

__all__ = ["masking", "lm_loss", "sampling", "top_p"]
