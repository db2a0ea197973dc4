"""The Linear Recurrent Unit (LRU; Orvieto et al., 2023).

The layer maps an input sequence ``u`` of shape ``(..., L, H)`` to ``y`` of the same shape
through a complex diagonal linear recurrence with ``N`` states (LRU §3.2–§3.4, Appendix A):

    x_k = Λ x_{k-1} + exp(γ_log) ⊙ (B u_k),      x_0 = 0,
    y_k = Re(C x_k) + D ⊙ u_k,

with ``Λ = diag(λ)``, ``λ_j = exp(-exp(ν_log_j) + i exp(θ_log_j))`` (the stable exponential
parametrisation of §3.3: ``|λ_j| < 1`` for every real ``ν_log_j``) and the normalisation
``γ_j = sqrt(1 - |λ_j|²)`` of §3.4, initialised so that under white-noise input every state
has, as ``k → ∞``, the variance of its input ``(B u_k)_j``.

Parameters are a dict of real arrays (``N = d_state``, ``H = d_model``):

    nu_log (N,), theta_log (N,), gamma_log (N,)
    B_re, B_im (N, H)
    C_re, C_im (H, N), or (H, 2N) for a bidirectional layer
    D (H,)

A bidirectional layer runs the same recurrence (same ``λ``, ``γ``, ``B``) forwards and
backwards in time; its state is the concatenation ``[x_fwd, x_rev]`` of shape ``(..., L, 2N)``
and ``C`` reads both halves.

State in, state out (causal layers): the recurrent state is ``{"x": x_k}``, complex
``(..., N)`` (``init_state`` gives ``x_0 = 0``). ``step`` advances it by one input,
``apply(params, u, state=s, return_state=True)`` by a whole chunk; both continue the same
sequence, so a long input can be run online, one step or one chunk at a time.
"""
from __future__ import annotations

import math

import jax
import jax.numpy as jnp
import numpy as np

from ._gated import batch_shape_of as _batch_shape
from .._validate import (as_real_array, fail, renamed_keywords, require_bool, require_choice,
                         require_key, require_params, require_positive_int, require_real,
                         require_sequence)
from ..scan import available_methods, linear_scan_planes


def check_ring(r_min, r_max):
    """``(r_min, r_max)`` as floats, ``0 <= r_min <= r_max <= 1`` (Lemma 3.2), or a ValueError."""
    r_min = require_real("r_min", r_min)
    r_max = require_real("r_max", r_max)
    if not 0.0 <= r_min <= 1.0:
        fail("r_min", r_min, "a radius with 0 <= r_min <= r_max <= 1")
    if not 0.0 <= r_max <= 1.0:
        fail("r_max", r_max, "a radius with 0 <= r_min <= r_max <= 1")
    if r_min > r_max:
        fail("r_min", r_min, f"a radius no larger than r_max = {r_max!r} (0 <= r_min <= r_max <= 1)")
    return r_min, r_max


def check_phase(max_phase):
    """``max_phase`` as a positive float, or a ValueError."""
    max_phase = require_real("max_phase", max_phase)
    if max_phase <= 0:
        fail("max_phase", max_phase, "a positive angle in radians (e.g. 2π, or π/50 for PathX)")
    return max_phase


# ----------------------------------------------------------------------------------------
# Initialisation (Lemma 3.2, Appendix A)
# ----------------------------------------------------------------------------------------

def ring_from_uniforms(u1, u2, *, r_min=0.0, r_max=1.0, max_phase=math.tau):
    """The map of LRU Lemma 3.2 from two uniforms on [0, 1] to ``(nu_log, theta_log)``.

    ``ν = -½ log(u1 (r_max² - r_min²) + r_min²)`` and ``θ = max_phase · u2``, so that
    ``λ = exp(-ν + iθ)`` is uniform on the ring ``r_min <= |λ| <= r_max`` with phase in
    ``[0, max_phase]`` (inverse-CDF sampling of ``|λ|²``, which is uniform on
    ``[r_min², r_max²]``). Returns the logarithms ``(log ν, log θ)`` that the layer learns.

    ``u1 = 1`` with ``r_max = 1`` gives ``|λ| = 1`` (``nu_log = -inf``); ``u2 = 0`` gives
    ``θ = 0`` (``theta_log = -inf``); both are exact limits, as in the paper's code."""
    r_min, r_max = check_ring(r_min, r_max)
    max_phase = check_phase(max_phase)
    u1 = jnp.asarray(u1)
    u2 = jnp.asarray(u2)
    nu_log = jnp.log(-0.5 * jnp.log(u1 * (r_max ** 2 - r_min ** 2) + r_min ** 2))
    theta_log = jnp.log(max_phase * u2)
    return nu_log, theta_log


def ring_init(key, n, r_min=0.0, r_max=1.0, max_phase=math.tau):
    """``n`` eigenvalues uniform on the ring ``r_min <= |λ| <= r_max`` (LRU Lemma 3.2).

    Draws ``u1, u2 ~ U(0, 1)`` of shape ``(n,)`` from ``jax.random.split(key)`` (in that
    order) and returns ``ring_from_uniforms(u1, u2, ...)``: ``(nu_log, theta_log)``, each
    of shape ``(n,)``."""
    require_key("key", key)
    require_positive_int("n", n)
    r_min, r_max = check_ring(r_min, r_max)
    max_phase = check_phase(max_phase)
    k1, k2 = jax.random.split(key)
    u1 = jax.random.uniform(k1, (n,))
    u2 = jax.random.uniform(k2, (n,))
    return ring_from_uniforms(u1, u2, r_min=r_min, r_max=r_max, max_phase=max_phase)


def init(key, d_model, d_state, *, r_min=0.0, r_max=1.0, max_phase=math.tau, bidirectional=False):
    """LRU parameters as in the paper's Appendix A (``init_lru_parameters``).

    Args:
      key: a ``jax.random`` key; the result is a deterministic function of it.
      d_model: ``H``, the input/output width.
      d_state: ``N``, the number of complex states.
      r_min, r_max: the ring of Lemma 3.2, ``0 <= r_min <= r_max <= 1``.
      max_phase: eigenvalue phases are uniform on ``[0, max_phase]`` (§3.4: small for PathX).
      bidirectional: give ``C`` shape ``(H, 2N)`` to read a forward and a backward state.

    Returns:
      a dict with ``nu_log, theta_log, gamma_log`` of shape ``(N,)``; ``B_re, B_im`` of shape
      ``(N, H)``, entries ``N(0, 1/(2H))`` (Glorot with halved variance per component);
      ``C_re, C_im`` of shape ``(H, N)`` [``(H, 2N)`` bidirectional], entries
      ``N(0, 1/fan_in)`` with fan-in ``N`` [``2N``: the two directions together keep the
      output variance of the unidirectional layer]; ``D`` of shape ``(H,)``, entries
      ``N(0, 1)``; and ``gamma_log = log sqrt(1 - |λ|²)`` (§3.4).

    Random streams: ``k_ring, k_bre, k_bim, k_cre, k_cim, k_d = jax.random.split(key, 6)``,
    with ``k_ring`` passed to ``ring_init``.
    """
    require_key("key", key)
    require_positive_int("d_model", d_model)
    require_positive_int("d_state", d_state)
    r_min, r_max = check_ring(r_min, r_max)
    if r_min == 1.0:
        fail("r_min", r_min, "a radius below 1: with r_min = r_max = 1 every |λ| = 1, so the "
             "normalisation γ = sqrt(1 - |λ|²) of §3.4 is 0 and every state stays zero")
    max_phase = check_phase(max_phase)
    bidirectional = require_bool("bidirectional", bidirectional)
    k_ring, k_bre, k_bim, k_cre, k_cim, k_d = jax.random.split(key, 6)
    h, n = d_model, d_state
    nu_log, theta_log = ring_init(k_ring, n, r_min, r_max, max_phase)
    c_cols = 2 * n if bidirectional else n
    params = {
        "nu_log": nu_log,
        "theta_log": theta_log,
        "B_re": jax.random.normal(k_bre, (n, h)) / math.sqrt(2 * h),
        "B_im": jax.random.normal(k_bim, (n, h)) / math.sqrt(2 * h),
        "C_re": jax.random.normal(k_cre, (h, c_cols)) / math.sqrt(c_cols),
        "C_im": jax.random.normal(k_cim, (h, c_cols)) / math.sqrt(c_cols),
        "D": jax.random.normal(k_d, (h,)),
    }
    params["gamma_log"] = jnp.log(jnp.sqrt(1 - jnp.abs(eigenvalues(params)) ** 2))
    return params


# ----------------------------------------------------------------------------------------
# Forward pass (§3.3, §3.4, Appendix A)
# ----------------------------------------------------------------------------------------

def eigenvalues(params):
    """``λ = exp(-exp(ν_log) + i exp(θ_log))``, complex, shape ``(N,)`` (LRU §3.3)."""
    return jnp.exp(-jnp.exp(params["nu_log"]) + 1j * jnp.exp(params["theta_log"]))


_STATE_KEYS = ("nu_log", "theta_log", "gamma_log", "B_re", "B_im")
_OUTPUT_KEYS = ("C_re", "C_im", "D")


def _sizes(params, keys=_STATE_KEYS + _OUTPUT_KEYS):
    """(H, N, bidirectional) from the parameter shapes, checking they agree."""
    require_params("params", params, keys, "lrnn.layers.lru.init")
    if jnp.ndim(params["nu_log"]) != 1:
        fail("params['nu_log']", params["nu_log"], "shape (N,)")
    n = jnp.shape(params["nu_log"])[0]
    for name in ("theta_log", "gamma_log"):
        if jnp.shape(params[name]) != (n,):
            fail(f"params['{name}']", params[name], f"shape (N,) = ({n},) like nu_log")
    b_shape = jnp.shape(params["B_re"])
    if len(b_shape) != 2 or b_shape[0] != n:
        fail("params['B_re']", params["B_re"], f"shape (N, H) with N = {n} (the size of nu_log)")
    h = b_shape[1]
    if jnp.shape(params["B_im"]) != b_shape:
        fail("params['B_im']", params["B_im"], f"the shape of B_re, {tuple(b_shape)}")
    if "C_re" not in keys:
        return h, n, None
    c_shape = jnp.shape(params["C_re"])
    if c_shape not in ((h, n), (h, 2 * n)):
        fail("params['C_re']", params["C_re"],
             f"shape (H, N) = {(h, n)} or, bidirectional, (H, 2N) = {(h, 2 * n)}")
    if "C_im" in keys and jnp.shape(params["C_im"]) != c_shape:
        fail("params['C_im']", params["C_im"], f"the shape of C_re, {tuple(c_shape)}")
    if "D" in keys and jnp.shape(params["D"]) != (h,):
        fail("params['D']", params["D"], f"shape (H,) = ({h},), one skip weight per channel")
    return h, n, c_shape[1] == 2 * n


def _check_input(u, h):
    return require_sequence("u", u, h)


def normalized_B(params):
    """``diag(exp(γ_log)) (B_re + i B_im)``, complex, shape ``(N, H)`` (§3.4)."""
    b = params["B_re"] + 1j * params["B_im"]
    return b * jnp.exp(params["gamma_log"])[:, None]


@renamed_keywords(method="scan_method")
def hidden_states(params, u, *, scan_method="auto"):
    """The states ``x_k = Λ x_{k-1} + exp(γ_log) ⊙ (B u_k)``, ``x_0 = 0``.

    Args:
      params: from ``init``.
      u: real, shape ``(..., L, H)``.
      scan_method: the scan backend, passed to ``lrnn.scan.linear_scan_planes`` as its ``method``
        (``method=`` still works here, deprecated).

    Returns:
      complex ``(..., L, N)``; for a bidirectional layer ``(..., L, 2N)``: the forward states
      ``[..., :N]`` followed by the backward states ``[..., N:]``, which solve
      ``x_k = Λ x_{k+1} + exp(γ_log) ⊙ (B u_k)`` with ``x_{L+1} = 0``.
    """
    require_choice("scan_method", scan_method, available_methods())
    h, _, bidirectional = _sizes(params, _STATE_KEYS + ("C_re",))
    return _states(params, _check_input(u, h), bidirectional, scan_method)


def _state_planes(params, u, bidirectional, scan_method, x0=None):
    """``(Re x, Im x)``: B u as two real products, the scan on planes (``linear_scan_planes``).
    No complex array is formed around the scan, and the gradient for the real ``u`` is never a
    complex array cast to real (JAX 0.7.2 warns about that cast). ``x0``: the planes of the
    state before the first step (causal layers only), or ``None`` for zero."""
    lam = eigenvalues(params)
    b = normalized_B(params)
    bu_re = jnp.einsum("...lh,nh->...ln", u, b.real)
    bu_im = jnp.einsum("...lh,nh->...ln", u, b.imag)
    x_re, x_im = linear_scan_planes(lam, bu_re, bu_im, method=scan_method, initial=x0)
    if bidirectional:
        r_re, r_im = linear_scan_planes(lam, bu_re, bu_im, reverse=True, method=scan_method)
        x_re = jnp.concatenate([x_re, r_re], axis=-1)
        x_im = jnp.concatenate([x_im, r_im], axis=-1)
    return x_re, x_im


def _states(params, u, bidirectional, scan_method):
    return jax.lax.complex(*_state_planes(params, u, bidirectional, scan_method))


def _refuse_bidirectional(bidirectional, what):
    if bidirectional:
        raise ValueError(f"`{what}`: a bidirectional LRU layer (C of shape (H, 2N)) reads the "
                         "future, so it has no state to carry from one step or chunk to the "
                         "next; expected a unidirectional layer (init(..., bidirectional=False)).")


def _state_dtype(params):
    real = jnp.result_type(*(jnp.asarray(params[k]).dtype for k in _STATE_KEYS), jnp.float32)
    return jnp.result_type(real, jnp.complex64)


def init_state(params, batch_shape=()):
    """The state before the first step, ``{"x": 0}`` of shape ``(*batch_shape, N)``, complex
    (complex64 for float32 parameters). Refused for a bidirectional layer."""
    h, n, bidirectional = _sizes(params)
    _refuse_bidirectional(bidirectional, "params")
    batch_shape = _batch_shape(batch_shape)
    return {"x": jnp.zeros((*batch_shape, n), _state_dtype(params))}


def check_state(params, state, batch_shape, n):
    """``state["x"]`` as a complex array of shape ``(*batch_shape, N)``, or a ValueError."""
    if not isinstance(state, dict) or set(state) != {"x"}:
        fail("state", state, "the dict {'x': (..., N) complex} of lrnn.layers.lru.init_state")
    x = jnp.asarray(state["x"])
    want = (*batch_shape, n)
    if x.shape != want:
        fail("state['x']", x, f"shape {want}: the batch dims of u and N = {n}")
    if not jnp.issubdtype(x.dtype, jnp.inexact):
        fail("state['x']", x, "a complex (or real) floating-point array")
    return x.astype(_state_dtype(params))


def step(params, state, u_t):
    """One step of the LRU (eq. 3 with a diagonal Λ, §3.3–§3.4): ``x_k = λ ⊙ x_{k-1} +
    exp(γ_log) ⊙ (B u_k)``, ``y_k = Re(C x_k) + D ⊙ u_k``.

    Args:
      params: from ``init`` (unidirectional).
      state: ``{"x": x_{k-1}}``, complex ``(..., N)`` (``init_state``).
      u_t: real input of shape ``(..., H)`` with the batch dims of ``state``.

    Returns:
      ``(state, y_t)``: ``{"x": x_k}`` and real ``y_t`` of shape ``(..., H)``. The same
      numbers as ``apply`` at that step: its cost and memory do not grow with ``k``."""
    h, n, bidirectional = _sizes(params)
    _refuse_bidirectional(bidirectional, "step")
    u_t = as_real_array("u_t", u_t, "(..., H)")
    if u_t.ndim < 1 or u_t.shape[-1] != h:
        fail("u_t", u_t, f"shape (..., H) with H = {h}")
    x = check_state(params, state, u_t.shape[:-1], n)
    x = eigenvalues(params) * x + u_t @ normalized_B(params).T
    y = (x.real @ params["C_re"].T - x.imag @ params["C_im"].T) + params["D"] * u_t
    return {"x": x}, y


@renamed_keywords(method="scan_method")
def apply(params, u, *, scan_method="auto", state=None, return_state=False):
    """The LRU layer ``y_k = Re(C x_k) + D ⊙ u_k``: real ``(..., L, H)`` -> ``(..., L, H)``.

    ``scan_method`` is the scan backend, passed to ``lrnn.scan.linear_scan_planes`` as its
    ``method`` (``method=`` still works, deprecated). Bidirectional: ``x_k`` is the
    concatenated state of ``hidden_states``.

    ``state``: ``{"x": complex (..., N)}`` to start from (``init_state``, or the state another
    chunk returned) instead of ``x_0 = 0``; ``return_state=True`` returns ``(y, state)`` with
    the state after the last step. Unidirectional layers only."""
    require_choice("scan_method", scan_method, available_methods())
    return_state = require_bool("return_state", return_state)
    h, n, bidirectional = _sizes(params)
    u = _check_input(u, h)
    x0 = None
    if state is not None or return_state:
        _refuse_bidirectional(bidirectional, "state" if state is not None else "return_state")
    if state is not None:
        x = check_state(params, state, u.shape[:-2], n)
        x0 = (x.real.astype(u.dtype), x.imag.astype(u.dtype))
    x_re, x_im = _state_planes(params, u, bidirectional, scan_method, x0)
    y = (jnp.einsum("...ln,hn->...lh", x_re, params["C_re"])           # Re(C x), from the planes
         - jnp.einsum("...ln,hn->...lh", x_im, params["C_im"]))
    y = y + params["D"] * u
    if return_state:
        return y, {"x": jax.lax.complex(x_re[..., -1, :], x_im[..., -1, :])}
    return y


def impulse_response(params, L):
    """The convolution kernel of a unidirectional layer: ``K`` of shape ``(L, H, H)`` with

        K[0] = Re(C diag(γ) B) + diag(D),   K[k] = Re(C Λ^k diag(γ) B)  (k >= 1),

    so that ``y_k = Σ_{j=0}^{k} K[j] u_{k-j}`` (the unrolled recurrence, LRU eq. 4).
    ``K[k][:, i]`` is the output at lag ``k`` after a unit impulse on input channel ``i``; the
    states after an impulse are ``hidden_states(params, impulse)``."""
    require_positive_int("L", L)
    h, _, bidirectional = _sizes(params)
    if bidirectional:
        fail("params", params["C_re"],
             "a unidirectional layer (C of shape (H, N)); a bidirectional layer is not causal, "
             "take its response from apply(params, impulse) instead")
    lam = eigenvalues(params)
    powers = lam[None, :] ** jnp.arange(L)[:, None]                      # (L, N)
    c = params["C_re"] + 1j * params["C_im"]
    k = jnp.einsum("hn,ln,ni->lhi", c, powers, normalized_B(params)).real
    return k.at[0].add(jnp.diag(params["D"]))


# ----------------------------------------------------------------------------------------
# Forward-pass blow-up (Prop. 3.3)
# ----------------------------------------------------------------------------------------

def forward_blowup(r_min, r_max):
    """LRU Prop. 3.3: ``lim_k E‖x_k‖² / E‖B u‖²`` for eigenvalues uniform on the ring
    ``[r_min, r_max]``, white-noise input and no γ normalisation:

        (1 / (r_max² - r_min²)) · log((1 - r_min²) / (1 - r_max²)),

    which is ``E_s[1 / (1 - s)]`` for ``s = |λ|²`` uniform on ``[r_min², r_max²]``; for
    ``r_min = r_max = r`` it is the limit ``1 / (1 - r²)`` (§3.4, eq. 5).

    Computed as ``log1p(ε/ρ)/ε`` with ``ε = r_max² - r_min²``, ``ρ = 1 - r_max²`` so that
    nearly equal radii lose no accuracy. Returns ``inf`` when ``r_max = 1`` (the state norm
    grows without bound). Accepts floats or arrays (broadcast), returns a float or an array.
    """
    rmin = np.asarray(r_min, dtype=float)
    rmax = np.asarray(r_max, dtype=float)
    if not np.all(np.isfinite(rmin)) or np.any((rmin < 0) | (rmin > 1)):
        fail("r_min", r_min, "radii with 0 <= r_min <= r_max <= 1")
    if not np.all(np.isfinite(rmax)) or np.any((rmax < 0) | (rmax > 1)):
        fail("r_max", r_max, "radii with 0 <= r_min <= r_max <= 1")
    if np.any(rmin > rmax):
        fail("r_min", r_min, f"radii no larger than r_max = {r_max!r}")
    eps = rmax ** 2 - rmin ** 2
    rho = 1.0 - rmax ** 2
    with np.errstate(divide="ignore", invalid="ignore"):
        ring = np.log1p(eps / rho) / eps
        out = np.where(eps > 0, ring, 1.0 / rho)
    out = np.where(rho == 0, np.inf, out)
    return float(out) if out.ndim == 0 else out
