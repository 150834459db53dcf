"""Checkers for chapter 4, residual connections, LayerNorm and the Transformer block: one module per exercise,
`layer_norm` (4.1), `feed_forward` (4.2), `block` (4.3, a pre-norm block from its sublayers) and `param_count`
(4.4, the encoder's parameter count); `_shared` holds what 4.1 to 4.3 use."""
# Importing registers the checkers, in the order of the exercises.
from . import layer_norm  # 4.1
from . import feed_forward  # 4.2
from . import block  # 4.3
from . import param_count  # 4.4

__all__ = ["layer_norm", "feed_forward", "block", "param_count"]
