"""NumPy transcriptions of the scans, in float64 (complex128), one time step at a time: the
reference that the tests and ``lrnn doctor`` hold every backend to. Slow on purpose; never
used to compute anything else."""
from __future__ import annotations

import numpy as np


def _steps(length: int, reverse: bool):
    return range(length - 1, -1, -1) if reverse else range(length)


def linear_scan(a, b, reverse: bool = False, initial=None) -> np.ndarray:
    """``x_t = a_t x_{t-1} + b_t`` along axis -2 with ``x_{-1} = initial`` (zero if ``None``;
    ``reverse``: ``x_t = a_t x_{t+1} + b_t`` with ``x_L = initial``). ``a``: ``(N,)`` or
    broadcastable to ``b`` ``(..., L, N)``; ``initial``: ``(..., N)``. Returns float64, or
    complex128 if ``a``, ``b`` or ``initial`` is complex."""
    b = np.asarray(b)
    init_dtype = np.asarray(0.0 if initial is None else initial).dtype
    dtype = np.result_type(np.asarray(a).dtype, b.dtype, init_dtype, np.float64)
    b = b.astype(dtype)
    a = np.broadcast_to(np.asarray(a, dtype), b.shape)
    x = np.zeros_like(b)
    state = np.zeros(b.shape[:-2] + b.shape[-1:], dtype)
    if initial is not None:
        state = state + np.asarray(initial, dtype)
    for t in _steps(b.shape[-2], reverse):
        state = a[..., t, :] * state + b[..., t, :]
        x[..., t, :] = state
    return x


def rotation_scan(gamma, theta, b, reverse: bool = False, initial=None) -> np.ndarray:
    """``x_t = γ R(θ) x_{t-1} + b_t`` with ``R(θ)`` block-diagonal, the 2×2 block
    ``[[cos θ_i, -sin θ_i], [sin θ_i, cos θ_i]]`` acting on the pair ``(x_{2i}, x_{2i+1})``
    (RotRNN eq. 14, Lemma 3); ``gamma``, ``theta``: ``(N/2,)``; ``b``: ``(..., L, N)``;
    ``x_{-1} = initial`` ``(..., N)``, zero if ``None``."""
    gamma, theta = np.asarray(gamma, np.float64), np.asarray(theta, np.float64)
    b = np.asarray(b, np.float64)
    c, s = np.cos(theta), np.sin(theta)
    R = gamma[:, None, None] * np.stack([np.stack([c, -s], -1), np.stack([s, c], -1)], -2)
    pairs = b.reshape(b.shape[:-1] + (-1, 2))
    x = np.zeros_like(pairs)
    state = np.zeros(pairs.shape[:-3] + pairs.shape[-2:])
    if initial is not None:
        state = state + np.asarray(initial, np.float64).reshape(state.shape)
    for t in _steps(b.shape[-2], reverse):
        state = np.einsum("kij,...kj->...ki", R, state) + pairs[..., t, :, :]
        x[..., t, :, :] = state
    return x.reshape(b.shape)


def linear_scan_vjp(a, x, g):
    """Gradients of ``sum(g * x)`` for the real time-invariant ``x = linear_scan(a, b)``
    (``a``: ``(N,)``): ``db = λ`` with ``λ_t = g_t + a λ_{t+1}`` (the same scan run
    backwards) and ``da = Σ_t λ_t x_{t-1}``. Returns ``(da, db)``."""
    lam = linear_scan(a, g, reverse=True)
    x = np.asarray(x, lam.dtype)
    x_prev = np.concatenate([np.zeros_like(x[..., :1, :]), x[..., :-1, :]], axis=-2)
    da = (lam * x_prev).reshape(-1, x.shape[-1]).sum(0)
    return da, lam
