"""GRU and RotGRU: a rotation of the reset-gated state (Velici & Prügel-Bennett 2017, eqs. 11–17).

RotGRU, with ``x = [h_{t-1}, x_t]``:

    z_t = σ(W_z x + b_z)            d_t = h_{t-1} ∘ σ(W_r x + b_r)
    r_t = U(2π σ(W_rot x + b_rot)) d_t
    ĥ_t = tanh(W_h [r_t, x_t] + b_h)
    h_t = (1 - z_t) ∘ h_{t-1} + z_t ∘ ĥ_t

``rotate=False`` drops the rotation (``r_t = d_t``): the plain GRU baseline.
"""
from __future__ import annotations

import jax
import jax.numpy as jnp

from ..orthogonal import rotate_pairs
from ._gated import _check_input, _check_sizes, _run, _uniform, angles

GRU_GATES = ("z", "r", "h")


def init(key, d_in: int, d_hidden: int, *, rotate: bool = True) -> dict:
    """Parameters of a (Rot)GRU cell (eqs. 11–17): ``W_z, W_r (n, n + d_in)`` on
    ``[h_{t-1}, x_t]``, ``W_h (n, n + d_in)`` on ``[r_t, x_t]``, biases ``b_z, b_r, b_h``, and
    when ``rotate``, ``W_rot (n/2, n + d_in)``, ``b_rot (n/2,)``."""
    _check_sizes(d_in, d_hidden, rotate)
    n, fan_in = d_hidden, d_hidden + d_in
    keys = jax.random.split(key, 4)
    params = {f"W_{g}": _uniform(k, (n, fan_in), fan_in) for g, k in zip(GRU_GATES, keys)}
    params.update({f"b_{g}": jnp.zeros((n,)) for g in GRU_GATES})
    if rotate:
        params["W_rot"] = _uniform(keys[3], (n // 2, fan_in), fan_in)
        params["b_rot"] = jnp.zeros((n // 2,))
    return params


def cell(params, h, x_t):
    """One (Rot)GRU step from ``h (..., n)`` and ``x_t (..., d_in)``. Returns ``(h_t, h_t)``."""
    xcat = jnp.concatenate([h, x_t], axis=-1)
    z = jax.nn.sigmoid(xcat @ params["W_z"].T + params["b_z"])
    d = h * jax.nn.sigmoid(xcat @ params["W_r"].T + params["b_r"])
    r = rotate_pairs(d, angles(params, xcat)) if "W_rot" in params else d
    h_hat = jnp.tanh(jnp.concatenate([r, x_t], axis=-1) @ params["W_h"].T + params["b_h"])
    h_new = (1 - z) * h + z * h_hat
    return h_new, h_new


def apply(params, u):
    """Run the (Rot)GRU over ``u (..., L, d_in)`` from ``h_0 = 0``; returns ``(..., L, n)``."""
    u, n = _check_input(params, u, "W_z")
    h0 = jnp.zeros((*u.shape[:-2], n), u.dtype)
    return _run(lambda h, x: cell(params, h, x), h0, u)
