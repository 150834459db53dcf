"""Checkers for chapter 4, residual connections, LayerNorm and the Transformer block.

One module per exercise: `layer_norm` (4.1, LayerNorm from scratch), `feed_forward` (4.2, the position-wise
feed-forward network), `block` (4.3, a pre-norm block from its sublayers) and `param_count` (4.4, the encoder's
parameter count); `_shared` holds what 4.1 to 4.3 use (float64 random inputs, the tolerances for a result in the
input's dtype, the dtype check). Importing this package imports the four modules, which registers the four
checkers.
"""
# Importing registers the checkers, in the order of the exercises.
from . import layer_norm  # 4.1
from . import feed_forward  # 4.2
from . import block  # 4.3
from . import param_count  # 4.4

__all__ = ["layer_norm", "feed_forward", "block", "param_count"]
