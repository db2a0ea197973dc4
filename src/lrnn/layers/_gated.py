"""What the gated cells share: initialisation, size checks, the rotation angles of RotLSTM
eq. 7 (also RotGRU eq. 14), and the loop over time."""
from __future__ import annotations

import math

import jax
import jax.numpy as jnp
from jax import lax

from .._validate import fail, require_positive_int


def _uniform(key, shape, fan_in):
    bound = 1.0 / math.sqrt(fan_in)
    return jax.random.uniform(key, shape, minval=-bound, maxval=bound)


def _check_sizes(d_in, d_hidden, rotate):
    require_positive_int("d_in", d_in)
    require_positive_int("d_hidden", d_hidden)
    if rotate and d_hidden % 2:
        raise ValueError(f"`d_hidden`: got {d_hidden!r}, expected an even number: the rotation "
                         "acts on pairs of memory cells (RotLSTM eq. 2).")


def _sizes(params, gate="W_f"):
    n, fan_in = params[gate].shape
    return n, fan_in - n


def _check_input(params, u, gate):
    n, d_in = _sizes(params, gate)
    u = jnp.asarray(u)
    if u.ndim < 2 or u.shape[-1] != d_in:
        fail("u", u, f"shape (..., L, {d_in}) (time on axis -2, d_in = {d_in} features)")
    return u, n


def angles(params, xcat):
    """Rotation angles ``u_t = 2π σ(W_rot x + b_rot)`` (RotLSTM eq. 7), shape ``(..., n/2)``."""
    return 2 * jnp.pi * jax.nn.sigmoid(xcat @ params["W_rot"].T + params["b_rot"])


def _run(step, carry0, u):
    _, hs = lax.scan(step, carry0, jnp.moveaxis(u, -2, 0))
    return jnp.moveaxis(hs, 0, -2)


