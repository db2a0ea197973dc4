"""The Rotational RNN (RotRNN; Dolga, Biegun, Cunningham & Barber, 2024).

``H`` independent heads of size ``n = d_state / H`` (§3.1, "Multi-Head Decay") each run

    x_t = γ_h A_h x_{t-1} + ξ_h B_h u_t,        x_0 = 0          (RotRNN eq. 6)

with a rotation ``A_h = P_h D(θ_h) P_hᵀ ∈ SO(n)`` (Lemma 3), ``P_h = expm(M_h - M_hᵀ)``
(Lemma 2), ``D(θ_h)`` block-diagonal with ``n/2`` 2×2 rotations, a decay
``γ_h = exp(-exp(ν_log_h))`` (App. B.3) and the normalisation

    ξ_h = sqrt((1 - γ_h²) / Tr[B_hᵀ B_h]),

recomputed from the current ``B`` at every call, so that Theorem 1's condition
``Tr[(ξB)ᵀ(ξB)] = 1 - γ²`` (with α = 1) holds for any ``B``, during all of training.
The output is ``y_t = C concat_h(x_t) + D ⊙ u_t``.

Parameters (``K = d_model``, ``H = n_heads``, ``n = d_state / H``):

    M (H, n, n), theta (H, n/2), nu_log (H,), B (H, n, K), C (K, d_state), D (K,)
    C_rev (K, d_state)   -- bidirectional only (App. B.2: P, D(θ), γ and B are shared)

The scan runs in the rotated basis ``z = Pᵀ x``, where the transition is ``γ D(θ)``
(App. B.1): ``z_t = γ D(θ) z_{t-1} + ξ (PᵀB) u_t``, a complex diagonal scan on planes
(``lrnn.scan.linear_scan_planes``; ``lrnn.rotation_scan`` is the same recurrence on pairs).

Expected state norm (white noise ``u_t ~ N(0, I)``, Theorem 1 with α = 1): since ``A`` is
orthogonal and ``x_{t-1}`` is independent of ``u_t``,

    E‖x_t‖² = γ² E‖x_{t-1}‖² + ξ² Tr[BᵀB] = γ² E‖x_{t-1}‖² + (1 - γ²).

From ``x_0 = 0`` this gives ``E‖x_t‖² = 1 - γ^{2t}``. Theorem 1 starts instead from a unit
first state; ``scale_first_state=True`` enforces it in expectation by feeding the first
step ``x_1 = B u_1 / ‖B‖_F`` (the usual ``ξ B u_1`` divided by ``sqrt(1 - γ²)``), so
``E‖x_1‖² = 1`` and then ``E‖x_t‖² = 1`` for every ``t``. (It keeps the layer linear in ``u``;
rescaling ``x_1`` to norm exactly 1 would not.)

State in, state out (causal layers): the recurrent state is ``{"x": x_t}`` of shape
``(..., H, n)`` in the original basis (``init_state`` gives ``x_0 = 0``); ``step`` advances it
by one input (eq. 6 as written, with the dense ``γ_h A_h``), ``apply(..., state=s,
return_state=True)`` by a chunk (the scan in the rotated basis from ``z = Pᵀ x``).
"""
from __future__ import annotations

import math

import jax
import jax.numpy as jnp

from ._gated import batch_shape_of as _batch_shape
from .._validate import (as_real_array, fail, renamed_keywords, require_bool, require_choice,
                         require_key, require_params, require_positive_int, require_real,
                         require_sequence)
from ..orthogonal import block_rotation, skew_expm
from ..scan import available_methods, linear_scan_planes


def head_size(d_state, n_heads) -> int:
    """``n = d_state / n_heads``, checked to be an even integer (pairs of rotated coordinates)."""
    require_positive_int("d_state", d_state)
    require_positive_int("n_heads", n_heads)
    if d_state % n_heads:
        fail("n_heads", n_heads,
             f"a divisor of d_state = {d_state} (every head has d_state / n_heads states)")
    n = d_state // n_heads
    if n % 2:
        fail("d_state", d_state,
             f"d_state / n_heads = {d_state} / {n_heads} = {n} to be even "
             "(each head rotates pairs of coordinates)")
    return n


def check_decays(gamma_min, gamma_max):
    """``(gamma_min, gamma_max)`` as floats, ``0 < gamma_min <= gamma_max < 1`` (App. B.3), or
    a ValueError."""
    gamma_min = require_real("gamma_min", gamma_min)
    gamma_max = require_real("gamma_max", gamma_max)
    if not 0.0 < gamma_min < 1.0:
        fail("gamma_min", gamma_min, "a decay in the open interval (0, 1)")
    if not 0.0 < gamma_max < 1.0:
        fail("gamma_max", gamma_max, "a decay in the open interval (0, 1)")
    if gamma_min > gamma_max:
        fail("gamma_min", gamma_min, f"a decay no larger than gamma_max = {gamma_max!r}")
    return gamma_min, gamma_max


def init(key, d_model, d_state, n_heads, *, gamma_min=0.9, gamma_max=0.999, max_phase=math.tau,
         bidirectional=False):
    """RotRNN parameters.

    Args:
      key: a ``jax.random`` key; the result is a deterministic function of it.
      d_model: ``K``, input/output width.
      d_state: total state size, ``n_heads · n`` with ``n`` even.
      n_heads: ``H``, the number of heads, each with its own decay ``γ_h``.
      gamma_min, gamma_max: ``γ_h`` uniform on ``[gamma_min, gamma_max] ⊂ (0, 1)`` (App. B.3).
      max_phase: ``θ`` uniform on ``[0, max_phase]`` (App. B.2, Tab. 2: 2π or π/10 ...).
      bidirectional: add ``C_rev`` for the backward pass (App. B.2).

    Returns:
      a dict with
      ``M (H, n, n)``: entries ``N(0, 1/n)``, so ``S = M - Mᵀ`` has entries of variance
      ``2/n`` and ``P = expm(S)`` is a well-spread rotation;
      ``theta (H, n/2)``: ``U(0, max_phase)``;
      ``nu_log (H,)``: ``log(-log γ)`` with ``γ ~ U(gamma_min, gamma_max)``;
      ``B (H, n, K)``: Glorot normal, variance ``2 / (n + K)`` (its scale cancels in ``ξB``);
      ``C (K, d_state)`` [and ``C_rev``]: entries ``N(0, 1/(H·directions))``, so that with
      ``E‖x_t‖² = 1`` per head (Theorem 1) each output has variance 1 at initialisation;
      ``D (K,)``: ``N(0, 1)``.

    Random streams: ``k_m, k_theta, k_gamma, k_b, k_c, k_d, k_crev = jax.random.split(key, 7)``.
    """
    require_key("key", key)
    require_positive_int("d_model", d_model)
    n = head_size(d_state, n_heads)
    gamma_min, gamma_max = check_decays(gamma_min, gamma_max)
    max_phase = require_real("max_phase", max_phase)
    bidirectional = require_bool("bidirectional", bidirectional)
    if max_phase <= 0:
        fail("max_phase", max_phase, "a positive angle in radians")
    h, k = n_heads, d_model
    k_m, k_theta, k_gamma, k_b, k_c, k_d, k_crev = jax.random.split(key, 7)
    gam = jax.random.uniform(k_gamma, (h,), minval=gamma_min, maxval=gamma_max)
    directions = 2 if bidirectional else 1
    c_std = 1.0 / math.sqrt(h * directions)
    params = {
        "M": jax.random.normal(k_m, (h, n, n)) / math.sqrt(n),
        "theta": jax.random.uniform(k_theta, (h, n // 2), minval=0.0, maxval=max_phase),
        "nu_log": jnp.log(-jnp.log(gam)),
        "B": jax.random.normal(k_b, (h, n, k)) * math.sqrt(2.0 / (n + k)),
        "C": jax.random.normal(k_c, (k, d_state)) * c_std,
        "D": jax.random.normal(k_d, (k,)),
    }
    if bidirectional:
        params["C_rev"] = jax.random.normal(k_crev, (k, d_state)) * c_std
    return params


# ----------------------------------------------------------------------------------------
# Derived quantities
# ----------------------------------------------------------------------------------------

_STATE_KEYS = ("M", "theta", "nu_log", "B")


def _sizes(params, keys=_STATE_KEYS + ("C", "D")):
    """(H, n, K) from the parameter shapes, checking that they agree."""
    require_params("params", params, keys, "lrnn.layers.rotrnn.init")
    m_shape = jnp.shape(params["M"])
    if len(m_shape) != 3 or m_shape[1] != m_shape[2] or m_shape[1] % 2:
        fail("params['M']", params["M"], "shape (H, n, n) with n even")
    h, n = m_shape[0], m_shape[1]
    checks = (("theta", (h, n // 2)), ("nu_log", (h,)))
    for name, shape in checks:
        if tuple(jnp.shape(params[name])) != shape:
            fail(f"params['{name}']", params[name], f"shape {shape} (H = {h}, n = {n})")
    b_shape = jnp.shape(params["B"])
    if len(b_shape) != 3 or b_shape[:2] != (h, n):
        fail("params['B']", params["B"], f"shape (H, n, d_model) with H = {h}, n = {n}")
    k = b_shape[2]
    for name in ("C", "C_rev"):
        if name in params and tuple(jnp.shape(params[name])) != (k, h * n):
            fail(f"params['{name}']", params[name], f"shape (d_model, d_state) = {(k, h * n)}")
    if "C_rev" in params:
        require_params("params", params, ("C_rev",), "lrnn.layers.rotrnn.init")
    if "D" in keys and tuple(jnp.shape(params["D"])) != (k,):
        fail("params['D']", params["D"], f"shape (d_model,) = ({k},), one skip weight per channel")
    return h, n, k


def gamma(params):
    """The decays ``γ_h = exp(-exp(ν_log_h)) ∈ (0, 1)``, shape ``(H,)`` (App. B.3)."""
    return jnp.exp(-jnp.exp(params["nu_log"]))


def _one_minus_gamma_sq(params):
    # 1 - γ² = -expm1(-2 exp(ν_log)), accurate when γ is close to 1.
    return -jnp.expm1(-2.0 * jnp.exp(params["nu_log"]))


def xi(params):
    """``ξ_h = sqrt((1 - γ_h²) / Tr[B_hᵀ B_h])``, shape ``(H,)`` (RotRNN §3.1, α = 1).

    Computed from the current ``B``, so ``Tr[(ξ_h B_h)ᵀ(ξ_h B_h)] = 1 - γ_h²`` always."""
    trace = jnp.sum(params["B"] ** 2, axis=(-2, -1))
    return jnp.sqrt(_one_minus_gamma_sq(params) / trace)


def P(params):
    """The orthogonal change of basis ``P_h = expm(M_h - M_hᵀ) ∈ SO(n)``, shape ``(H, n, n)``
    (Lemma 2)."""
    return skew_expm(params["M"])


def transition(params):
    """The dense transition ``γ_h P_h D(θ_h) P_hᵀ``, shape ``(H, n, n)`` (Lemma 3, eq. 6).

    For teaching and tests; the layer itself never forms it."""
    p = P(params)
    a = p @ block_rotation(params["theta"]) @ jnp.swapaxes(p, -1, -2)
    return gamma(params)[:, None, None] * a


# ----------------------------------------------------------------------------------------
# Forward pass
# ----------------------------------------------------------------------------------------

def _check_input(u, k):
    return require_sequence("u", u, k)


def _rotated_planes(params, u, p, *, scale_first_state, reverse, scan_method, x0=None,
                    return_final=False):
    """The scan of App. B.1 in the rotated basis, ``z = Pᵀ x``, on planes: ``(z_even, z_odd)``,
    each ``(..., L, H, n/2)``, the first and second coordinates of every rotation pair. Each
    pair is the complex number ``z_2i + i z_2i+1`` and its block ``γ D(θ_i)`` is
    ``γ e^{iθ_i}`` (Lemma 3), so the drive is two real products with the even and the odd rows
    of ``PᵀB`` and no array is interleaved or split around the scan."""
    h, n, _ = _sizes(params, _STATE_KEYS)
    b_rot = jnp.swapaxes(p, -1, -2) @ params["B"]                         # (H, n, K): PᵀB
    scale = xi(params)[:, None]
    if scale_first_state:
        # ξ / sqrt(1 - γ²) = 1 / ‖B‖_F: no 0/0 as γ -> 1.
        first_scale = (1.0 / jnp.sqrt(jnp.sum(params["B"] ** 2, axis=(-2, -1))))[:, None]
        t0 = -1 if reverse else 0

    def drive(rows):                                                      # (PᵀB) u_t, one plane
        d = jnp.einsum("hnk,...lk->...lhn", rows, u)
        scaled = d * scale
        if scale_first_state:
            scaled = scaled.at[..., t0, :, :].set(d[..., t0, :, :] * first_scale)
        return scaled.reshape(*scaled.shape[:-2], h * (n // 2))

    lam = jnp.repeat(gamma(params), n // 2) * jnp.exp(1j * params["theta"].reshape(-1))
    initial = None
    if x0 is not None:                                                    # z_0 = Pᵀ x_0, planes
        z0 = jnp.einsum("hji,...hj->...hi", p, x0)
        flat = lambda v: v.reshape(*v.shape[:-2], h * (n // 2)).astype(u.dtype)  # noqa: E731
        initial = (flat(z0[..., 0::2]), flat(z0[..., 1::2]))
    out = linear_scan_planes(lam, drive(b_rot[:, 0::2]), drive(b_rot[:, 1::2]),
                             reverse=reverse, method=scan_method, initial=initial,
                             return_final=return_final)
    (z_even, z_odd), final = out if return_final else (out, None)
    heads = lambda v: v.reshape(*v.shape[:-1], h, n // 2)                # noqa: E731
    if return_final:
        z_last = jnp.stack([heads(final[0]), heads(final[1])], axis=-1)
        final = jnp.einsum("hij,...hj->...hi", p, z_last.reshape(*z_last.shape[:-2], n))
        return heads(z_even), heads(z_odd), final
    return heads(z_even), heads(z_odd)


def _rotated_states(params, u, p, *, scale_first_state, reverse, scan_method):
    """``z = Pᵀ x``, shape ``(..., L, H, n)``, the pairs interleaved again."""
    z_even, z_odd = _rotated_planes(params, u, p, scale_first_state=scale_first_state,
                                    reverse=reverse, scan_method=scan_method)
    return jnp.stack([z_even, z_odd], axis=-1).reshape(*z_even.shape[:-1], -1)


def _check_options(scan_method, **flags):
    require_choice("scan_method", scan_method, available_methods())
    for name, value in flags.items():
        require_bool(name, value)


@renamed_keywords(method="scan_method")
def hidden_states(params, u, *, scale_first_state=False, reverse=False, scan_method="auto"):
    """The states of eq. 6, ``x_t = γ_h P_h D(θ_h) P_hᵀ x_{t-1} + ξ_h B_h u_t``, ``x_0 = 0``.

    Args:
      params: from ``init``.
      u: real, shape ``(..., L, d_model)``.
      scale_first_state: feed the first step ``B u_1 / ‖B‖_F`` instead of ``ξ B u_1``, so
        that ``E‖x_t‖² = 1`` for all ``t`` under white noise (Theorem 1); without it
        ``E‖x_t‖² = 1 - γ^{2t}`` (see the module docstring).
      reverse: run backwards in time, ``x_t = γ A x_{t+1} + ξ B u_t`` with ``x_{L+1} = 0``
        (the backward pass of a bidirectional layer; its "first" state is at ``t = L``).
      scan_method: the scan backend, passed to ``lrnn.scan.linear_scan_planes`` as its ``method``
        (``method=`` still works here, deprecated).

    Returns:
      real ``(..., L, H, n)``, in the original basis (``x = P z``).
    """
    _check_options(scan_method, scale_first_state=scale_first_state, reverse=reverse)
    _, _, k = _sizes(params, _STATE_KEYS)
    u = _check_input(u, k)
    p = P(params)
    z = _rotated_states(params, u, p, scale_first_state=scale_first_state, reverse=reverse,
                        scan_method=scan_method)
    return jnp.einsum("hij,...hj->...hi", p, z)


def _refuse_stateful(params, what):
    if "C_rev" in params:
        raise ValueError(f"`{what}`: a bidirectional RotRNN layer (params with 'C_rev') reads "
                         "the future, so it has no state to carry from one step or chunk to "
                         "the next; expected a unidirectional layer (init(..., "
                         "bidirectional=False)).")


def _state_dtype(params):
    return jnp.result_type(*(jnp.asarray(params[k]).dtype for k in _STATE_KEYS), jnp.float32)


def init_state(params, batch_shape=()):
    """The state before the first step, ``{"x": 0}`` of shape ``(*batch_shape, H, n)``, real
    (the dtype of the parameters). Refused for a bidirectional layer."""
    h, n, _ = _sizes(params)
    _refuse_stateful(params, "params")
    return {"x": jnp.zeros((*_batch_shape(batch_shape), h, n), _state_dtype(params))}


def check_state(params, state, batch_shape):
    """``state["x"]`` as a real array of shape ``(*batch_shape, H, n)``, or a ValueError."""
    h, n, _ = _sizes(params, _STATE_KEYS)
    if not isinstance(state, dict) or set(state) != {"x"}:
        fail("state", state, "the dict {'x': (..., H, n)} of lrnn.layers.rotrnn.init_state")
    x = jnp.asarray(state["x"])
    want = (*batch_shape, h, n)
    if x.shape != want:
        fail("state['x']", x, f"shape {want}: the batch dims of u, H = {h} heads of n = {n}")
    if not jnp.issubdtype(x.dtype, jnp.floating):
        fail("state['x']", x, "a real floating-point array")
    return x


def step(params, state, u_t):
    """One step of RotRNN eq. 6, ``x_t = γ_h A_h x_{t-1} + ξ_h B_h u_t`` with
    ``A_h = P_h D(θ_h) P_hᵀ`` (Lemma 3), then ``y_t = C concat_h(x_t) + D ⊙ u_t``.

    Args:
      params: from ``init`` (unidirectional).
      state: ``{"x": x_{t-1}}``, real ``(..., H, n)`` (``init_state``).
      u_t: real input ``(..., d_model)`` with the batch dims of ``state``.

    Returns:
      ``(state, y_t)``: ``{"x": x_t}`` and ``y_t`` of shape ``(..., d_model)``, the numbers of
      ``apply`` at that step (``scale_first_state=False``)."""
    h, n, k = _sizes(params)
    _refuse_stateful(params, "step")
    u_t = as_real_array("u_t", u_t, "(..., d_model)")
    if u_t.ndim < 1 or u_t.shape[-1] != k:
        fail("u_t", u_t, f"shape (..., d_model) with d_model = {k}")
    x = check_state(params, state, u_t.shape[:-1])
    drive = xi(params)[:, None] * jnp.einsum("hnk,...k->...hn", params["B"], u_t)
    x = jnp.einsum("hij,...hj->...hi", transition(params), x) + drive
    y = x.reshape(*x.shape[:-2], h * n) @ params["C"].T + params["D"] * u_t
    return {"x": x}, y


@renamed_keywords(method="scan_method")
def apply(params, u, *, scale_first_state=False, scan_method="auto", state=None,
          return_state=False):
    """The RotRNN layer ``y_t = C concat_h(x_t) + D ⊙ u_t``: ``(..., L, K)`` -> ``(..., L, K)``.

    Runs in the rotated basis with ``C̃ = C · blockdiag(P)`` so no step multiplies by a dense
    matrix (App. B.1). Bidirectional (``C_rev`` present, App. B.2):
    ``y_t = C x_t + C_rev x_t^rev + D ⊙ u_t`` with ``x^rev = hidden_states(..., reverse=True)``.
    ``scale_first_state`` and ``scan_method`` as in ``hidden_states``.

    ``state``: ``{"x": (..., H, n)}`` to start from (``init_state``, or the state another chunk
    returned) instead of ``x_0 = 0``; ``return_state=True`` returns ``(y, state)`` with the
    state after the last step. Unidirectional layers only; ``scale_first_state`` concerns the
    sequence's first step, so it is refused together with a carried ``state``."""
    _check_options(scan_method, scale_first_state=scale_first_state, return_state=return_state)
    h, n, k = _sizes(params)
    u = _check_input(u, k)
    p = P(params)
    x0 = None
    if state is not None or return_state:
        _refuse_stateful(params, "state" if state is not None else "return_state")
    if state is not None:
        if scale_first_state:
            fail("scale_first_state", scale_first_state, "False when a state is carried in "
                 "(the scaling applies to the first step of a sequence, which a carried state "
                 "has passed)")
        x0 = check_state(params, state, u.shape[:-2])

    def read(c, reverse):
        c_rot = jnp.einsum("khi,hij->khj", c.reshape(k, h, n), p)        # C · blockdiag(P)
        z_even, z_odd, *final = _rotated_planes(
            params, u, p, scale_first_state=scale_first_state, reverse=reverse,
            scan_method=scan_method, x0=None if reverse else x0, return_final=return_state)
        y = (jnp.einsum("khj,...lhj->...lk", c_rot[..., 0::2], z_even)      # C̃ z, pair by
             + jnp.einsum("khj,...lhj->...lk", c_rot[..., 1::2], z_odd))   # pair, on planes
        return y, (final[0] if final else None)

    y, final = read(params["C"], False)
    if "C_rev" in params:
        y = y + read(params["C_rev"], True)[0]
    y = y + params["D"] * u
    return (y, {"x": final}) if return_state else y
