"""Checkers for chapter 7, images as sequences.

One module per exercise: `patchify` (7.1, cutting images into patches), `conv` (7.2, the patch embedding as a
convolution) and `cls_token` (7.3, the class token and the positions); `_shared` holds what they share.
Importing this package imports the three modules, which registers the three checkers.
"""
# Importing registers the checkers, in the order of the exercises.
from . import patchify  # 7.1
from . import conv  # 7.2
from . import cls_token  # 7.3

__all__ = ["patchify", "conv", "cls_token"]
