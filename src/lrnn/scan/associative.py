"""``method="associative"``: ``lax.associative_scan`` with the operator of the linear
recurrence, as in the LRU appendix and the RotRNN code."""
from __future__ import annotations

import jax.numpy as jnp
from jax import lax


def binary_operator(left, right):
    """The associative operator of the linear recurrence: applying ``left`` then ``right``
    is ``x -> a_r (a_l x + b_l) + b_r``."""
    a_l, b_l = left
    a_r, b_r = right
    return a_r * a_l, a_r * b_l + b_r


def scan(a, b, reverse):
    """``a``: ``(N,)`` or ``b.shape``; ``b``: ``(..., L, N)``. Returns ``x``."""
    a_full = jnp.broadcast_to(a, b.shape)
    _, x = lax.associative_scan(binary_operator, (a_full, b), reverse=reverse, axis=b.ndim - 2)
    return x
