"""``method="chunked"``: a sequential scan inside chunks of length ``T`` (all chunks at once),
a short sequential scan over the chunk ends, then one fix-up multiply."""
from __future__ import annotations

import math

import jax.numpy as jnp

from . import sequential


def default_chunk_size(length: int) -> int:
    """About sqrt(L), a power of two: both the in-chunk and the across-chunk loops are short."""
    return max(1, 2 ** round(math.log2(max(1.0, math.sqrt(length)))))


def scan(a, b, reverse, chunk_size=None):
    """``a``: ``(N,)`` or ``b.shape``; ``b``: ``(..., L, N)``. Returns ``x``."""
    if reverse:
        a_f = a if a.ndim == 1 else jnp.flip(a, -2)
        return jnp.flip(scan(a_f, jnp.flip(b, -2), False, chunk_size), -2)
    *lead, length, n = b.shape
    size = chunk_size or default_chunk_size(length)
    n_chunks = -(-length // size)
    pad = n_chunks * size - length
    time_invariant = a.ndim == 1

    def to_chunks(v, fill):
        if pad:
            widths = [(0, 0)] * (v.ndim - 2) + [(0, pad), (0, 0)]
            v = jnp.pad(v, widths, constant_values=fill)
        return v.reshape(*v.shape[:-2], n_chunks, size, v.shape[-1])

    b_c = to_chunks(b, 0)                                   # (..., C, T, N)
    # Every chunk starts from zero: one lax.scan over the T positions of all chunks at once.
    x_local = sequential.scan(a if time_invariant else to_chunks(a, 1), b_c, False)
    if time_invariant:
        powers = jnp.cumprod(jnp.broadcast_to(a, (size, n)), axis=0)          # a^1 … a^T
        chunk_gain = powers[-1]                                                # (N,)
    else:
        powers = jnp.cumprod(to_chunks(a, 1), axis=-2)                        # (..., C, T, N)
        chunk_gain = powers[..., -1, :]                                        # (..., C, N)
    ends = x_local[..., -1, :]                                                 # (..., C, N)
    # Carry across chunks: h_c = gain_c * h_{c-1} + end_c, a recurrence of length C.
    carry = sequential.scan(chunk_gain, ends, False)
    carry_in = jnp.concatenate([jnp.zeros_like(carry[..., :1, :]), carry[..., :-1, :]], axis=-2)
    x = x_local + powers * carry_in[..., None, :]
    x = x.reshape(*lead, n_chunks * size, n)
    return x[..., :length, :]
