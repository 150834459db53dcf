"""Checkers for chapter 10, GPU timing II: decoding, KV cache, grouped-query attention and serving. One module per
exercise; importing this package registers them all.

    cache_bytes   10.1  the size of a KV cache (an exact int of bytes)
    repeat        10.2  repeat_kv for grouped-query attention (without the package's or transformers' repeat_kv)
    attend        10.3  append to a cache and attend over it (bottom-right causal mask, no library attention)
    pages         10.4  read one sequence back from a paged KV cache (a pool of blocks and a block table)
    verify        10.5  verify a speculative draft: how many drafted tokens are accepted, the next token's distribution
(Each calls the answer with `call(..., reload=True)`: learner code may import a module for the first time.)
"""
# Importing registers the checkers, in the order of the exercises.
from . import cache_bytes  # 10.1
from . import repeat  # 10.2
from . import attend  # 10.3
from . import pages  # 10.4
from . import verify  # 10.5

__all__ = ["cache_bytes", "repeat", "attend", "pages", "verify"]
