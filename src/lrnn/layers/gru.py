"""GRU and RotGRU: a rotation of the reset-gated state (Velici & Prügel-Bennett 2017, eqs. 11–17).

RotGRU, with ``x = [h_{t-1}, x_t]``:

    z_t = σ(W_z x + b_z)            d_t = h_{t-1} ∘ σ(W_r x + b_r)
    r_t = U(2π σ(W_rot x + b_rot)) d_t
    ĥ_t = tanh(W_h [r_t, x_t] + b_h)
    h_t = (1 - z_t) ∘ h_{t-1} + z_t ∘ ĥ_t

``rotate=False`` drops the rotation (``r_t = d_t``): the plain GRU baseline. ``apply`` computes
the input parts of all gates (``W_z``, ``W_r``, ``W_rot`` and the ``x_t`` columns of ``W_h``)
for every time step before the scan, then per step one fused product of ``h_{t-1}`` with the
stacked recurrent weights of ``z``, ``r`` and the angles, and one of ``r_t`` with the ``r``
columns of ``W_h`` (``r_t`` depends on the first product, so the two cannot be fused).

State in, state out: the state is ``{"h": h_t}`` of shape ``(..., n)`` (``init_state``: zeros);
``step`` runs one input with the same fused products as ``apply``, and ``apply(..., state=s,
return_state=True)`` a chunk from it.
"""
from __future__ import annotations

import math

import jax
import jax.numpy as jnp

from ..orthogonal import rotate_pairs
from .._validate import renamed_keywords, require_bool
from ._gated import (_check_input, _check_sizes, _uniform, angles, check_state, check_step_input,
                     dtype_of, fused_weights, run, split_rows, zero_state)

GRU_GATES = ("z", "r", "h")
_ORIGIN = "lrnn.layers.gru.init"


@renamed_keywords(d_in="d_model", d_hidden="d_state")
def init(key, d_model: int, d_state: int, *, rotate: bool = True) -> dict:
    """Parameters of a (Rot)GRU cell (eqs. 11–17): ``W_z, W_r (n, n + d_in)`` on
    ``[h_{t-1}, x_t]``, ``W_h (n, n + d_in)`` on ``[r_t, x_t]``, biases ``b_z, b_r, b_h``, and
    when ``rotate``, ``W_rot (n/2, n + d_model)``, ``b_rot (n/2,)``."""
    _check_sizes(key, d_model, d_state, rotate)
    n, fan_in = d_state, d_state + d_model
    keys = jax.random.split(key, 4)
    params = {f"W_{g}": _uniform(k, (n, fan_in), fan_in) for g, k in zip(GRU_GATES, keys)}
    params.update({f"b_{g}": jnp.zeros((n,)) for g in GRU_GATES})
    if rotate:
        params["W_rot"] = _uniform(keys[3], (n // 2, fan_in), fan_in)
        params["b_rot"] = jnp.zeros((n // 2,))
    return params


def cell(params, h, x_t):
    """One (Rot)GRU step, eqs. 11–17 as written, from ``h (..., n)`` and ``x_t (..., d_in)``.
    Returns ``(h_t, h_t)``."""
    xcat = jnp.concatenate([h, x_t], axis=-1)
    z = jax.nn.sigmoid(xcat @ params["W_z"].T + params["b_z"])
    d = h * jax.nn.sigmoid(xcat @ params["W_r"].T + params["b_r"])
    r = rotate_pairs(d, angles(params, xcat)) if "W_rot" in params else d
    h_hat = jnp.tanh(jnp.concatenate([r, x_t], axis=-1) @ params["W_h"].T + params["b_h"])
    h_new = (1 - z) * h + z * h_hat
    return h_new, h_new


def _fused_step(params, n, dtype):
    """``(step, W_x, b)``: the per-step function ``step(h, drive_t) -> (h_t, h_t)`` of the fused
    weights, and the input part ``u W_xᵀ + b`` it expects as ``drive_t``."""
    rotate = "W_rot" in params
    hidden_gates = ("z", "r") + (("rot",) if rotate else ())
    sizes = [n, n] + ([n // 2] if rotate else [])
    W_h, W_x, b = fused_weights(params, hidden_gates + ("h",), n, dtype)
    gate_rows = sum(sizes)
    W_gates_t = W_h[:gate_rows].T                              # h_{t-1} -> z, r, angles
    W_cand_t = W_h[gate_rows:].T                               # r_t -> candidate ĥ_t

    def step(h, drive_t):
        z_x, cand_x = drive_t[..., :gate_rows], drive_t[..., gate_rows:]
        parts = split_rows(z_x + h @ W_gates_t, sizes)
        z = jax.nn.sigmoid(parts[0])
        d = h * jax.nn.sigmoid(parts[1])
        r = rotate_pairs(d, math.tau * jax.nn.sigmoid(parts[2])) if rotate else d
        h_hat = jnp.tanh(cand_x + r @ W_cand_t)
        h_new = (1 - z) * h + z * h_hat
        return h_new, h_new

    return step, W_x, b


def init_state(params, batch_shape=()) -> dict:
    """The state before the first step, ``{"h": 0}`` of shape ``(*batch_shape, n)``."""
    return zero_state(params, GRU_GATES, _ORIGIN, ("h",), batch_shape)


def step(params, state, u_t):
    """One (Rot)GRU step, eqs. 11–17: ``state = {"h": h_{t-1}}`` ``(..., n)`` and ``u_t``
    ``(..., d_in)`` give ``({"h": h_t}, h_t)``, the numbers of ``apply`` at that step (the
    same fused products), which ``cell`` writes gate by gate."""
    u_t, n = check_step_input(params, u_t, GRU_GATES, _ORIGIN)
    (h,) = check_state(state, ("h",), u_t.shape[:-1], n, _ORIGIN)
    dtype = dtype_of(params, u_t)
    fn, W_x, b = _fused_step(params, n, dtype)
    h, y = fn(h.astype(dtype), u_t.astype(dtype) @ W_x.T + b)
    return {"h": h}, y


def apply(params, u, *, state=None, return_state=False):
    """Run the (Rot)GRU over real ``u (..., L, d_in)``, ``L >= 1``, from ``h_0 = 0`` (or from
    ``state = {"h": (..., n)}``); returns ``(..., L, n)``: the states of ``cell`` step by step,
    with the input parts of the gates computed before the scan (see the module docstring).
    ``return_state=True``: ``(h, {"h": h_L})``."""
    u, n = _check_input(params, u, GRU_GATES, _ORIGIN)
    return_state = require_bool("return_state", return_state)
    dtype = dtype_of(params, u)
    fn, W_x, b = _fused_step(params, n, dtype)
    drive = u.astype(dtype) @ W_x.T + b                        # (..., L, G): all steps at once
    if state is None:
        h0 = jnp.zeros((*u.shape[:-2], n), dtype)
    else:
        (h0,) = check_state(state, ("h",), u.shape[:-2], n, _ORIGIN)
        h0 = h0.astype(dtype)
    hs, h = run(fn, h0, drive, return_carry=True)
    return (hs, {"h": h}) if return_state else hs
