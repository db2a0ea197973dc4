"""The oRNN: a simple recurrent network whose transition matrix is a product of Householder
reflections (Mhammedi et al., 2017), so it is orthogonal for every parameter value.

    h_t = φ(W h_{t-1} + V x_t + b),    φ(z) = max(z/10, z)    (leaky ReLU, oRNN §5)

with ``W = H_n(u_n) ⋯ H_{n-m+1}(u_{n-m+1})`` (oRNN eq. 8; times ``H_1(u_1)`` of eq. 7 when
``m = n``). ``W h`` is computed by ``lrnn.orthogonal.wy_transform`` (oRNN Algorithm 1), m
reflections of O(n) each, so a step costs O(n·m) instead of O(n²); ``W`` is never formed.

Parameters (a plain dict, symbols of the paper):

* ``U``  ``(n, m)`` reflection vectors in the layout of eq. 9 (zeros above the diagonal; the
  part above is masked inside every function, so it has zero gradient). When ``m = n`` the
  last column is unused: its eq.-9 entry ``u_1`` is the separate scalar ``u1``.
* ``V``  ``(n, d_in)`` input matrix, ``b`` ``(n,)`` bias.
* ``h0`` ``(n,)`` learnt initial state, only with ``learn_h0=True`` (otherwise ``h_0 = 0``).
* ``u1`` ``()`` only when ``m = n``. The forward pass uses ``+1`` if ``u1 > 0`` and ``-1``
  otherwise, the paper's convention; its gradient is passed straight through (the derivative
  with respect to the entry ``u_1`` of ``H_1(u_1)`` at ``±1``, the gradient the paper computes
  before resetting ``u_1`` to its sign). ``project`` performs that reset.
"""
from __future__ import annotations

import math

import jax
import jax.numpy as jnp

from .._validate import fail, require_positive_int
from ..orthogonal import _apply_h1, _check_U, eq9_mask, householder_product, wy_transform_columns


def init(key, d_in: int, d_hidden: int, n_reflections: int, *, learn_h0: bool = False) -> dict:
    """Random oRNN parameters (uniform initialisations in the spirit of oRNN §5, zero bias).

    ``U`` entries on and below the diagonal ~ U(-1, 1) (eq. 9 layout, zeros elsewhere);
    ``V`` ~ U(-a, a) with ``a = √(6 / (n + d_in))``; ``b = 0``; ``h0`` ~ U(-c, c) with
    ``c = √(3 / (2n))`` when learnt; ``u1 = 1`` when ``m = n``.

    Args:
      key: a PRNG key.
      d_in: input size.
      d_hidden: ``n``, the hidden size.
      n_reflections: ``m``, the number of reflection vectors, ``1 <= m <= n``.
    Returns:
      dict with ``U (n, m)``, ``V (n, d_in)``, ``b (n,)``, and ``h0 (n,)`` / ``u1 ()`` as above.
    """
    require_positive_int("d_in", d_in)
    require_positive_int("d_hidden", d_hidden)
    require_positive_int("n_reflections", n_reflections)
    n, m = d_hidden, n_reflections
    if m > n:
        raise ValueError(f"`n_reflections`: got {m!r}, expected at most d_hidden = {n} "
                         "(m <= n reflection vectors, oRNN eq. 8).")
    k_u, k_v, k_h = jax.random.split(key, 3)
    U = jax.random.uniform(k_u, (n, m), minval=-1.0, maxval=1.0) * eq9_mask(n, m)
    a = math.sqrt(6.0 / (n + d_in))
    params = {
        "U": U,
        "V": jax.random.uniform(k_v, (n, d_in), minval=-a, maxval=a),
        "b": jnp.zeros((n,)),
    }
    if learn_h0:
        c = math.sqrt(3.0 / (2 * n))
        params["h0"] = jax.random.uniform(k_h, (n,), minval=-c, maxval=c)
    if m == n:
        params["u1"] = jnp.ones(())
    return params


@jax.custom_jvp
def sign_u1(u1):
    """``+1`` where ``u1 > 0`` and ``-1`` otherwise (oRNN §5), with a straight-through
    derivative (the tangent of ``u1`` is passed unchanged)."""
    return jnp.where(u1 > 0, 1.0, -1.0).astype(jnp.result_type(u1, float))


@sign_u1.defjvp
def _sign_u1_jvp(primals, tangents):
    (u1,), (t,) = primals, tangents
    return sign_u1(u1), jnp.asarray(t, jnp.result_type(u1, float))


def _fail_params(params, expected):
    got = f"a dict with keys {sorted(params)}" if isinstance(params, dict) else \
        f"an object of type {type(params).__name__}"
    raise ValueError(f"`params`: got {got}, expected {expected}.")


def _unpack(params):
    """Validate ``params`` and return ``(reflection columns, u1 sign or None, V, b, h0)``."""
    if not isinstance(params, dict):
        _fail_params(params, "a dict with keys 'U', 'V', 'b' (from lrnn.ornn.init)")
    for name in ("U", "V", "b"):
        if name not in params:
            _fail_params(params, f"a dict with key {name!r} (from lrnn.ornn.init)")
    U = jnp.asarray(params["U"])
    if U.ndim != 2:
        fail("params['U']", U, "shape (n, m) (oRNN eq. 9)")
    n, m = U.shape
    if m > n:
        fail("params['U']", U, f"at most n = {n} columns (m <= n, oRNN eq. 8)")
    if m == n:
        if "u1" not in params:
            _fail_params(params, "a key 'u1' (a scalar) when U has m = n columns")
        u1 = jnp.asarray(params["u1"])
        if u1.shape != ():
            fail("params['u1']", u1, "a scalar (oRNN eq. 7)")
        sign = sign_u1(u1)
    else:
        if "u1" in params:
            fail("params['u1']", params["u1"], f"no 'u1' entry when m = {m} < n = {n}")
        sign = None
    cols, sign = _check_U(U, sign, name="params['U']")
    V = jnp.asarray(params["V"])
    if V.ndim != 2 or V.shape[0] != n:
        fail("params['V']", V, f"shape (n, d_in) with n = {n}")
    b = jnp.asarray(params["b"])
    if b.shape != (n,):
        fail("params['b']", b, f"shape ({n},)")
    h0 = jnp.asarray(params["h0"]) if "h0" in params else jnp.zeros((n,), b.dtype)
    if h0.shape != (n,):
        fail("params['h0']", h0, f"shape ({n},)")
    return cols, sign, V, b, h0


def _transition_apply(cols, sign, h):
    """``W h`` (oRNN Algorithm 1 forward; ``H_1(u_1)`` first when m = n)."""
    if sign is not None:
        h = _apply_h1(sign, h)
    return wy_transform_columns(cols, h) if cols.shape[1] else h


def leaky_relu(z):
    """``φ(z) = max(z/10, z)`` (oRNN §5)."""
    return jnp.maximum(z / 10, z)


def transition(params) -> jax.Array:
    """The dense transition matrix ``W`` of shape ``(n, n)`` (oRNN eq. 8), orthogonal for
    every parameter value (nonzero reflection vectors). For inspection and tests."""
    _unpack(params)
    n, m = jnp.shape(params["U"])
    sign = sign_u1(jnp.asarray(params["u1"])) if m == n else None
    return householder_product(params["U"], sign)


def step(params, h, x_t):
    """One oRNN step ``h_t = φ(W h_{t-1} + V x_t + b)``.

    Args:
      h: ``h_{t-1}``, shape ``(..., n)``.
      x_t: shape ``(..., d_in)`` with the same leading (batch) dimensions as ``h``.
    Returns:
      ``h_t``, shape ``(..., n)``.
    """
    cols, sign, V, b, _ = _unpack(params)
    n, d_in = V.shape
    h = jnp.asarray(h)
    x_t = jnp.asarray(x_t)
    if h.ndim < 1 or h.shape[-1] != n:
        fail("h", h, f"shape (..., n) with n = {n}")
    if x_t.ndim < 1 or x_t.shape[-1] != d_in:
        fail("x_t", x_t, f"shape (..., d_in) with d_in = {d_in}")
    if x_t.shape[:-1] != h.shape[:-1]:
        fail("x_t", x_t, f"the batch dimensions of h, {h.shape[:-1]}")
    dtype = jnp.result_type(cols.dtype, V.dtype, h.dtype, x_t.dtype, float)
    cols, h = cols.astype(dtype), h.astype(dtype)
    return leaky_relu(_transition_apply(cols, sign, h) + x_t.astype(dtype) @ V.T.astype(dtype)
                      + b.astype(dtype))


def apply(params, u):
    """Run the oRNN over a sequence: ``h_t = φ(W h_{t-1} + V x_t + b)`` for ``t = 1, …, L``,
    starting from ``h0`` (learnt, or zero), with ``W h`` computed in O(n·m) by oRNN
    Algorithm 1 inside a ``lax.scan`` over time.

    Args:
      u: inputs of shape ``(..., L, d_in)``; leading dimensions are batch dimensions.
    Returns:
      hidden states ``h_1, …, h_L`` of shape ``(..., L, n)``.
    """
    cols, sign, V, b, h0 = _unpack(params)
    n, d_in = V.shape
    u = jnp.asarray(u)
    if u.ndim < 2 or u.shape[-1] != d_in:
        fail("u", u, f"shape (..., L, d_in) with d_in = {d_in}")
    dtype = jnp.result_type(cols.dtype, V.dtype, b.dtype, h0.dtype, u.dtype, float)
    cols = cols.astype(dtype)
    drive = u.astype(dtype) @ V.T.astype(dtype) + b.astype(dtype)        # (..., L, n)
    carry = jnp.broadcast_to(h0.astype(dtype), u.shape[:-2] + (n,))

    def body(h, z):
        h = leaky_relu(_transition_apply(cols, sign, h) + z)
        return h, h

    _, hs = jax.lax.scan(body, carry, jnp.moveaxis(drive, -2, 0))
    return jnp.moveaxis(hs, 0, -2)


def project(params) -> dict:
    """The paper's step after each gradient update (oRNN §5): zero ``U`` above its eq.-9
    structure and set ``u1`` to ``-1`` if ``u1 <= 0``, ``+1`` otherwise. Not needed for
    correctness here (the forward pass already masks and takes the sign), but it keeps the
    stored parameters equal to the ones in use."""
    out = dict(params)
    n, m = jnp.shape(params["U"])
    out["U"] = params["U"] * eq9_mask(n, m).astype(jnp.asarray(params["U"]).dtype)
    if "u1" in params:
        out["u1"] = sign_u1(jnp.asarray(params["u1"]))
    return out
