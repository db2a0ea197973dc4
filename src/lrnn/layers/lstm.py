"""LSTM and RotLSTM: a rotation gate on the memory cells (Velici & Prügel-Bennett 2017, eqs. 3–10).

RotLSTM, with ``x = [h_{t-1}, x_t]``:

    f_t = σ(W_f x + b_f)            i_t = σ(W_i x + b_i)            o_t = σ(W_o x + b_o)
    u_t = 2π σ(W_rot x + b_rot)                                     (angles, eq. 7)
    d_t = f_t ∘ c_{t-1} + i_t ∘ tanh(W_c x + b_c)
    c_t = U(u_t) d_t                                                 (eq. 9, U as in eq. 2)
    h_t = o_t ∘ tanh(c_t)

``rotate=False`` drops the rotation (``c_t = d_t``): the plain LSTM baseline. The angles depend
on ``h_{t-1}``, so the recurrence is not linear in the state and cannot use a parallel scan:
``apply`` runs ``lax.scan`` over time, with the input part of every gate computed for all steps
before the scan and one fused ``h_{t-1}`` product per step (see ``lrnn.layers._gated``). The GRU
pair is in ``lrnn.layers.gru``.

State in, state out: the state is ``{"h": h_t, "c": c_t}``, each ``(..., n)`` (``init_state``:
zeros); ``step`` runs one input with the same fused products as ``apply``, and
``apply(..., state=s, return_state=True)`` a chunk from it.
"""
from __future__ import annotations

import math

import jax
import jax.numpy as jnp

from ..orthogonal import rotate_pairs
from .._validate import renamed_keywords, require_bool
from ._gated import (_check_input, _check_sizes, _uniform, angles, check_state, check_step_input,
                     dtype_of, fused_weights, run, split_rows, zero_state)

LSTM_GATES = ("f", "i", "o", "c")
_ORIGIN = "lrnn.layers.lstm.init"


@renamed_keywords(d_in="d_model", d_hidden="d_state")
def init(key, d_model: int, d_state: int, *, rotate: bool = True,
         forget_bias: float = 1.0) -> dict:
    """Parameters of a (Rot)LSTM cell.

    Returns a dict with ``W_f, W_i, W_o, W_c`` of shape ``(n, n + d_model)`` (columns ordered as
    ``[h_{t-1}, x_t]``, eq. 3), biases ``b_f, b_i, b_o, b_c`` of shape ``(n,)`` and, when
    ``rotate``, ``W_rot (n/2, n + d_model)`` and ``b_rot (n/2,)``. Weights are uniform in
    ±1/sqrt(n + d_model); the forget bias starts at ``forget_bias`` (1 by default; the oRNN
    paper's LSTM baseline uses 5, oRNN §5), the other biases at 0."""
    _check_sizes(key, d_model, d_state, rotate)
    check_forget_bias(forget_bias)
    n, fan_in = d_state, d_state + d_model
    keys = jax.random.split(key, 5)
    params = {f"W_{g}": _uniform(k, (n, fan_in), fan_in) for g, k in zip(LSTM_GATES, keys)}
    params.update({f"b_{g}": jnp.zeros((n,)) for g in LSTM_GATES})
    params["b_f"] = jnp.full((n,), float(forget_bias))
    if rotate:
        params["W_rot"] = _uniform(keys[4], (n // 2, fan_in), fan_in)
        params["b_rot"] = jnp.zeros((n // 2,))
    return params


def check_forget_bias(forget_bias) -> float:
    """``forget_bias`` as a float; ValueError unless it is a finite real number. A bool is
    refused: ``True`` is not a bias."""
    if isinstance(forget_bias, bool) or not isinstance(forget_bias, (int, float)) \
            or not math.isfinite(forget_bias):
        raise ValueError(f"`forget_bias`: got {forget_bias!r}, expected a finite real number "
                         "(the initial forget-gate bias b_f, e.g. 1 or 5).")
    return float(forget_bias)


def cell(params, carry, x_t):
    """One (Rot)LSTM step, eqs. 3–10 as written. ``carry = (h, c)`` each ``(..., n)``; ``x_t``
    is ``(..., d_in)``. Returns ``((h_t, c_t), h_t)``."""
    h, c = carry
    xcat = jnp.concatenate([h, x_t], axis=-1)

    def gate(g):
        return xcat @ params[f"W_{g}"].T + params[f"b_{g}"]

    f, i, o = jax.nn.sigmoid(gate("f")), jax.nn.sigmoid(gate("i")), jax.nn.sigmoid(gate("o"))
    d = f * c + i * jnp.tanh(gate("c"))
    c_new = rotate_pairs(d, angles(params, xcat)) if "W_rot" in params else d
    h_new = o * jnp.tanh(c_new)
    return (h_new, c_new), h_new


def _fused_step(params, n, dtype):
    """``(step, W_x, b)``: the per-step function ``step((h, c), z_t) -> ((h_t, c_t), h_t)`` of
    the fused weights, and the input part ``u W_xᵀ + b`` it expects as ``z_t``."""
    rotate = "W_rot" in params
    gates = LSTM_GATES + (("rot",) if rotate else ())
    sizes = [n] * 4 + ([n // 2] if rotate else [])
    W_h, W_x, b = fused_weights(params, gates, n, dtype)
    W_h_t = W_h.T

    def step(carry, z_t):
        h, c = carry
        parts = split_rows(z_t + h @ W_h_t, sizes)
        f, i, o = (jax.nn.sigmoid(p) for p in parts[:3])
        d = f * c + i * jnp.tanh(parts[3])
        c_new = rotate_pairs(d, math.tau * jax.nn.sigmoid(parts[4])) if rotate else d
        h_new = o * jnp.tanh(c_new)
        return (h_new, c_new), h_new

    return step, W_x, b


def init_state(params, batch_shape=()) -> dict:
    """The state before the first step, ``{"h": 0, "c": 0}``, each ``(*batch_shape, n)``."""
    return zero_state(params, LSTM_GATES, _ORIGIN, ("h", "c"), batch_shape)


def step(params, state, u_t):
    """One (Rot)LSTM step, eqs. 3–10: ``state = {"h": h_{t-1}, "c": c_{t-1}}`` (each
    ``(..., n)``) and ``u_t`` ``(..., d_in)`` give ``({"h": h_t, "c": c_t}, h_t)``: the
    numbers of ``apply`` at that step (the same fused products), which ``cell`` writes gate
    by gate."""
    u_t, n = check_step_input(params, u_t, LSTM_GATES, _ORIGIN)
    h, c = check_state(state, ("h", "c"), u_t.shape[:-1], n, _ORIGIN)
    dtype = dtype_of(params, u_t)
    fn, W_x, b = _fused_step(params, n, dtype)
    (h, c), y = fn((h.astype(dtype), c.astype(dtype)), u_t.astype(dtype) @ W_x.T + b)
    return {"h": h, "c": c}, y


def apply(params, u, *, state=None, return_state=False):
    """Run the (Rot)LSTM over real ``u`` of shape ``(..., L, d_in)``, ``L >= 1``, from
    ``h_0 = c_0 = 0`` (or from ``state = {"h", "c"}``, each ``(..., n)``). Returns ``h`` of
    shape ``(..., L, n)``: the states of ``cell`` step by step, computed with every gate's
    input part before the scan and one product ``h_{t-1} W_hᵀ`` of the stacked recurrent
    weights per step. ``return_state=True``: ``(h, {"h": h_L, "c": c_L})``."""
    u, n = _check_input(params, u, LSTM_GATES, _ORIGIN)
    return_state = require_bool("return_state", return_state)
    dtype = dtype_of(params, u)
    fn, W_x, b = _fused_step(params, n, dtype)
    drive = u.astype(dtype) @ W_x.T + b                        # (..., L, G): all steps at once
    if state is None:
        zeros = jnp.zeros((*u.shape[:-2], n), dtype)
        carry0 = (zeros, zeros)
    else:
        carry0 = tuple(v.astype(dtype) for v in
                       check_state(state, ("h", "c"), u.shape[:-2], n, _ORIGIN))
    hs, (h, c) = run(fn, carry0, drive, return_carry=True)
    return (hs, {"h": h, "c": c}) if return_state else hs
