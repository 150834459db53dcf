"""attnbook: the companion package of an executable book that teaches the Transformer from first principles."""
from .attention import scaled_dot_product_attention, softmax
from .i18n import get_language, set_language
from .masks import causal_mask, combine_masks, convert_mask, padding_mask
from .notebook import seed_everything, setup

__version__ = "0.1.0"

__all__ = [
    "scaled_dot_product_attention",
    "softmax",
    "causal_mask",
    "padding_mask",
    "combine_masks",
    "convert_mask",
    "seed_everything",
    "setup",
    "set_language",
    "get_language",
]
