"""Checkers for chapter 6, decoder masking, cross-attention and a complete Transformer.

The references are written out here from the definitions (query i may attend to key j when j <= i and key j is
a real token), independently of `attnbook.masks`; 6.3's reference is a plain argmax loop over the package's
model, and each known mistake is the same loop with that one mistake.

Every checker runs all its cases before it judges: a known mistake is named only when it gives the learner's
result on every case where it is told (6.1, 6.2 and 6.4 by `runs.collect`/`verdict`; 6.3 by its own loop, whose
mistakes are whole decodings computed only when needed); otherwise the message shows the first wrong entry and the
rule it breaks (never a whole expected mask or row).

One module per exercise (importing this package registers the four checkers); `_shared` holds what the mask
checkers share (the type and shape check of a mask, the wording shared by 6.1 and 6.2).
"""
# Importing registers the checkers, in the order of the exercises.
from . import causal  # 6.1
from . import decoder_mask  # 6.2
from . import greedy  # 6.3
from . import convert  # 6.4

__all__ = ["causal", "decoder_mask", "greedy", "convert"]
