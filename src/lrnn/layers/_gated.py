"""What the gated cells share: initialisation, checks, the rotation angles of RotLSTM eq. 7
(also RotGRU eq. 14), the gate weights fused for a whole sequence, and the loop over time.

Every weight ``W_g`` of shape ``(n, n + d_in)`` acts on ``[h_{t-1}, x_t]`` (RotLSTM eq. 3), so
``W_g [h; x] = W_g[:, :n] h + W_g[:, n:] x``. ``apply`` uses that split: the input parts of all
gates are one ``(G, d_in)`` matrix applied to every time step at once before the scan (one
large product), and the recurrent parts one ``(G, n)`` matrix, one product per step. The
``cell`` functions keep the equations as the paper writes them, for teaching and exercises.
"""
from __future__ import annotations

import math

import jax
import jax.numpy as jnp
from jax import lax

from .._validate import fail, require_bool, require_key, require_params, require_positive_int
from .._validate import as_real_array, require_sequence


def _uniform(key, shape, fan_in):
    bound = 1.0 / math.sqrt(fan_in)
    return jax.random.uniform(key, shape, minval=-bound, maxval=bound)


def _check_sizes(key, d_model, d_state, rotate):
    """``init(key, d_model, d_state)``: the input size and the hidden size ``n``."""
    require_key("key", key)
    require_bool("rotate", rotate)
    require_positive_int("d_model", d_model)
    require_positive_int("d_state", d_state)
    if rotate and d_state % 2:
        raise ValueError(f"`d_state`: got {d_state!r}, expected an even number: the rotation "
                         "acts on pairs of memory cells (RotLSTM eq. 2).")


def _check_params(params, gates, origin):
    """Validate the weights ``W_g``/``b_g`` of ``gates`` (and ``W_rot``/``b_rot`` when present);
    return ``(n, d_in)``."""
    keys = [f"{w}_{g}" for g in gates for w in ("W", "b")]
    require_params("params", params, keys, origin)
    first = f"W_{gates[0]}"
    shape = jnp.shape(params[first])
    if len(shape) != 2 or shape[1] <= shape[0]:
        fail(f"params['{first}']", params[first], "shape (n, n + d_in) (columns [h_{t-1}, x_t])")
    n, fan_in = shape
    rows = dict.fromkeys(gates, n)
    if "W_rot" in params or "b_rot" in params:
        require_params("params", params, ("W_rot", "b_rot"), origin)
        if n % 2:
            fail(f"params['{first}']", params[first], "an even hidden size n when W_rot rotates "
                 "pairs of cells")
        rows["rot"] = n // 2
    for g, r in rows.items():
        if jnp.shape(params[f"W_{g}"]) != (r, fan_in):
            fail(f"params['W_{g}']", params[f"W_{g}"], f"shape ({r}, {fan_in})")
        if jnp.shape(params[f"b_{g}"]) != (r,):
            fail(f"params['b_{g}']", params[f"b_{g}"], f"shape ({r},)")
    return n, fan_in - n


def _check_input(params, u, gates, origin):
    n, d_in = _check_params(params, gates, origin)
    return require_sequence("u", u, d_in, "d_model"), n


def angles(params, xcat):
    """Rotation angles ``u_t = 2π σ(W_rot x + b_rot)`` (RotLSTM eq. 7), shape ``(..., n/2)``."""
    return math.tau * jax.nn.sigmoid(xcat @ params["W_rot"].T + params["b_rot"])


def fused_weights(params, gates, n, dtype):
    """The gate weights of ``gates`` (in order) stacked once per forward pass: the recurrent
    parts ``(G, n)`` (columns acting on ``h_{t-1}``), the input parts ``(G, d_in)`` and the
    biases ``(G,)``, with ``G`` the total number of gate rows."""
    W = jnp.concatenate([jnp.asarray(params[f"W_{g}"]) for g in gates], axis=0).astype(dtype)
    b = jnp.concatenate([jnp.asarray(params[f"b_{g}"]) for g in gates]).astype(dtype)
    return W[:, :n], W[:, n:], b


def split_rows(z, sizes):
    """Split the last axis of ``z`` into consecutive pieces of ``sizes``."""
    edges = [sum(sizes[:i]) for i in range(1, len(sizes))]
    return jnp.split(z, edges, axis=-1)


def dtype_of(params, u):
    return jnp.result_type(*(jnp.asarray(v).dtype for v in params.values()), u.dtype, float)


def run(step, carry0, inputs, *, return_carry=False):
    """``lax.scan`` of ``step`` over axis -2 of ``inputs``; returns the stacked outputs with
    time back on axis -2 (and the final carry, with ``return_carry``)."""
    carry, hs = lax.scan(step, carry0, jnp.moveaxis(inputs, -2, 0))
    hs = jnp.moveaxis(hs, 0, -2)
    return (hs, carry) if return_carry else hs


def batch_shape_of(batch_shape):
    """``batch_shape`` as a tuple of non-negative ints (an int ``B`` is ``(B,)``)."""
    if isinstance(batch_shape, int) and not isinstance(batch_shape, bool):
        batch_shape = (batch_shape,)
    if not isinstance(batch_shape, (tuple, list)) or not all(
            isinstance(d, int) and not isinstance(d, bool) and d >= 0 for d in batch_shape):
        fail("batch_shape", batch_shape, "a tuple of non-negative ints, e.g. () or (B,)")
    return tuple(batch_shape)


def zero_state(params, gates, origin, keys, batch_shape):
    """``{key: 0}`` for each of ``keys``, each ``(*batch_shape, n)`` in the parameters' dtype."""
    n, _ = _check_params(params, gates, origin)
    shape = (*batch_shape_of(batch_shape), n)
    dtype = jnp.result_type(*(jnp.asarray(v).dtype for v in params.values()), float)
    return {k: jnp.zeros(shape, dtype) for k in keys}


def check_state(state, keys, batch_shape, n, origin):
    """The arrays ``state[k]`` for ``k`` in ``keys``, each real ``(*batch_shape, n)``, or a
    ValueError naming the first that is not."""
    if not isinstance(state, dict) or set(state) != set(keys):
        fail("state", state, f"the dict {{{', '.join(repr(k) for k in keys)}}} of "
                             f"{origin.replace('.init', '.init_state')}, each (..., n)")
    out = []
    for k in keys:
        v = jnp.asarray(state[k])
        if v.shape != (*batch_shape, n):
            fail(f"state[{k!r}]", v, f"shape {(*batch_shape, n)}: the batch dims of the input "
                                     f"and n = {n}")
        if not jnp.issubdtype(v.dtype, jnp.floating):
            fail(f"state[{k!r}]", v, "a real floating-point array")
        out.append(v)
    return out


def check_step_input(params, u_t, gates, origin):
    """``u_t`` as a real ``(..., d_in)`` array; returns ``(u_t, n)``."""
    n, d_in = _check_params(params, gates, origin)
    u_t = as_real_array("u_t", u_t, "(..., d_model)")
    if u_t.ndim < 1 or u_t.shape[-1] != d_in:
        fail("u_t", u_t, f"shape (..., d_model) with d_model = {d_in}")
    return u_t, n
