"""RotLSTM and RotGRU: rotation gates on the memory of gated RNNs (Velici & Prügel-Bennett 2017).

RotLSTM (eqs. 3–10), with ``x = [h_{t-1}, x_t]``:

    f_t = σ(W_f x + b_f)            i_t = σ(W_i x + b_i)            o_t = σ(W_o x + b_o)
    u_t = 2π σ(W_rot x + b_rot)                                     (angles, eq. 7)
    d_t = f_t ∘ c_{t-1} + i_t ∘ tanh(W_c x + b_c)
    c_t = U(u_t) d_t                                                 (eq. 9, U as in eq. 2)
    h_t = o_t ∘ tanh(c_t)

RotGRU (eqs. 11–17):

    z_t = σ(W_z x + b_z)            d_t = h_{t-1} ∘ σ(W_r x + b_r)
    r_t = U(2π σ(W_rot x + b_rot)) d_t
    ĥ_t = tanh(W_h [r_t, x_t] + b_h)
    h_t = (1 - z_t) ∘ h_{t-1} + z_t ∘ ĥ_t

``rotate=False`` drops the rotation (``c_t = d_t``, ``r_t = d_t``): the plain LSTM and GRU
baselines. The angles depend on ``h_{t-1}``, so the recurrence is not linear in the state and
cannot use a parallel scan: ``apply`` runs ``lax.scan`` over time.
"""
from __future__ import annotations

import math

import jax
import jax.numpy as jnp
from jax import lax

from ._validate import fail, require_positive_int
from .orthogonal import rotate_pairs

LSTM_GATES = ("f", "i", "o", "c")
GRU_GATES = ("z", "r", "h")


def _uniform(key, shape, fan_in):
    bound = 1.0 / math.sqrt(fan_in)
    return jax.random.uniform(key, shape, minval=-bound, maxval=bound)


def _check_sizes(d_in, d_hidden, rotate):
    require_positive_int("d_in", d_in)
    require_positive_int("d_hidden", d_hidden)
    if rotate and d_hidden % 2:
        raise ValueError(f"`d_hidden`: got {d_hidden!r}, expected an even number: the rotation "
                         "acts on pairs of memory cells (RotLSTM eq. 2).")


def init(key, d_in: int, d_hidden: int, *, rotate: bool = True) -> dict:
    """Parameters of a (Rot)LSTM cell.

    Returns a dict with ``W_f, W_i, W_o, W_c`` of shape ``(n, n + d_in)`` (columns ordered as
    ``[h_{t-1}, x_t]``, eq. 3), biases ``b_f, b_i, b_o, b_c`` of shape ``(n,)`` and, when
    ``rotate``, ``W_rot (n/2, n + d_in)`` and ``b_rot (n/2,)``. Weights are uniform in
    ±1/sqrt(n + d_in); the forget bias starts at 1, the other biases at 0."""
    _check_sizes(d_in, d_hidden, rotate)
    n, fan_in = d_hidden, d_hidden + d_in
    keys = jax.random.split(key, 5)
    params = {f"W_{g}": _uniform(k, (n, fan_in), fan_in) for g, k in zip(LSTM_GATES, keys)}
    params.update({f"b_{g}": jnp.zeros((n,)) for g in LSTM_GATES})
    params["b_f"] = jnp.ones((n,))
    if rotate:
        params["W_rot"] = _uniform(keys[4], (n // 2, fan_in), fan_in)
        params["b_rot"] = jnp.zeros((n // 2,))
    return params


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


def cell(params, carry, x_t):
    """One (Rot)LSTM step. ``carry = (h, c)`` each ``(..., n)``; ``x_t`` is ``(..., d_in)``.
    Returns ``((h_t, c_t), h_t)``."""
    h, c = carry
    xcat = jnp.concatenate([h, x_t], axis=-1)

    def gate(g):
        return xcat @ params[f"W_{g}"].T + params[f"b_{g}"]

    f, i, o = jax.nn.sigmoid(gate("f")), jax.nn.sigmoid(gate("i")), jax.nn.sigmoid(gate("o"))
    d = f * c + i * jnp.tanh(gate("c"))
    c_new = rotate_pairs(d, angles(params, xcat)) if "W_rot" in params else d
    h_new = o * jnp.tanh(c_new)
    return (h_new, c_new), h_new


def _run(step, carry0, u):
    _, hs = lax.scan(step, carry0, jnp.moveaxis(u, -2, 0))
    return jnp.moveaxis(hs, 0, -2)


def apply(params, u):
    """Run the (Rot)LSTM over ``u`` of shape ``(..., L, d_in)`` from ``h_0 = c_0 = 0``.
    Returns ``h`` of shape ``(..., L, n)``."""
    u, n = _check_input(params, u, "W_f")
    zeros = jnp.zeros((*u.shape[:-2], n), u.dtype)
    return _run(lambda carry, x: cell(params, carry, x), (zeros, zeros), u)


def gru_init(key, d_in: int, d_hidden: int, *, rotate: bool = True) -> dict:
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


def gru_cell(params, h, x_t):
    """One (Rot)GRU step from ``h (..., n)`` and ``x_t (..., d_in)``. Returns ``(h_t, h_t)``."""
    xcat = jnp.concatenate([h, x_t], axis=-1)
    z = jax.nn.sigmoid(xcat @ params["W_z"].T + params["b_z"])
    d = h * jax.nn.sigmoid(xcat @ params["W_r"].T + params["b_r"])
    r = rotate_pairs(d, angles(params, xcat)) if "W_rot" in params else d
    h_hat = jnp.tanh(jnp.concatenate([r, x_t], axis=-1) @ params["W_h"].T + params["b_h"])
    h_new = (1 - z) * h + z * h_hat
    return h_new, h_new


def gru_apply(params, u):
    """Run the (Rot)GRU over ``u (..., L, d_in)`` from ``h_0 = 0``; returns ``(..., L, n)``."""
    u, n = _check_input(params, u, "W_z")
    h0 = jnp.zeros((*u.shape[:-2], n), u.dtype)
    return _run(lambda h, x: gru_cell(params, h, x), h0, u)
