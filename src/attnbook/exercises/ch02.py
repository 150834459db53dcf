"""Checkers for chapter 2, scaled dot-product attention."""
from __future__ import annotations
