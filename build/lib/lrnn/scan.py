"""Linear scans: one API, interchangeable backends, and a reference beside the fast ones.

``linear_scan(a, b)`` computes the first-order linear recurrence

    x_t = a_t * x_{t-1} + b_t,        x_{-1} = 0,

along axis -2 of ``b`` (shape ``(..., L, N)``). It is the recurrence of the LRU (LRU §3.3,
eq. 3 after diagonalisation) and, through ``rotation_scan``, of the RotRNN (RotRNN eq. 6 in
the rotated basis, Appendix B.1).

Backends (``method=``):

* ``"sequential"``  — ``lax.scan`` over time: the reference, O(L) steps of O(N) work.
* ``"associative"`` — ``lax.associative_scan`` with the operator
  ``(a, b) ∘ (a', b') = (a'·a, a'·b + b')``, as in the LRU appendix and the RotRNN code.
* ``"chunked"``     — a sequential scan inside chunks of length ``T`` (all chunks at once),
  a short sequential scan over the chunk ends, then one fix-up multiply.
* ``"pallas"``      — a Pallas kernel (``lrnn.scan_pallas``): chunked over time with the state
  in registers, reading ``b`` and writing ``x`` once. Compiled with Triton on a GPU, run in
  Pallas interpret mode (slow, for testing) elsewhere.
* ``"auto"``        — the fastest correct choice for the backend and size (see ``describe``).

Every method is differentiated by the same custom VJP: the adjoint of a linear recurrence is
the same recurrence run backwards, so the backward pass is one more scan and the memory kept
for it is ``a`` and ``x``, O(L·N), instead of every level of the associative scan.
"""
from __future__ import annotations

import functools
import math

import jax
import jax.numpy as jnp
from jax import lax

from ._validate import fail, require_choice, require_ndim_at_least

METHODS = ("auto", "sequential", "associative", "chunked", "pallas")


def available_methods() -> tuple[str, ...]:
    return METHODS


# ----------------------------------------------------------------------------------------
# Forward implementations. Each takes `a` of shape (N,) [time-invariant] or exactly b.shape
# [time-varying], both already in the compute dtype, and returns x with b's shape.
# ----------------------------------------------------------------------------------------

def _scan_sequential(a, b, reverse):
    time_invariant = a.ndim == 1
    b_t = jnp.moveaxis(b, -2, 0)
    carry0 = jnp.zeros(b_t.shape[1:], b.dtype)
    if time_invariant:
        def step(x, b_k):
            x = a * x + b_k
            return x, x
        _, x = lax.scan(step, carry0, b_t, reverse=reverse)
    else:
        def step(x, ab_k):
            a_k, b_k = ab_k
            x = a_k * x + b_k
            return x, x
        _, x = lax.scan(step, carry0, (jnp.moveaxis(a, -2, 0), b_t), reverse=reverse)
    return jnp.moveaxis(x, 0, -2)


def binary_operator(left, right):
    """The associative operator of the linear recurrence: applying ``left`` then ``right``
    is ``x -> a_r (a_l x + b_l) + b_r``."""
    a_l, b_l = left
    a_r, b_r = right
    return a_r * a_l, a_r * b_l + b_r


def _scan_associative(a, b, reverse):
    a_full = jnp.broadcast_to(a, b.shape)
    _, x = lax.associative_scan(binary_operator, (a_full, b), reverse=reverse, axis=b.ndim - 2)
    return x


def default_chunk_size(length: int) -> int:
    """About sqrt(L), a power of two: both the in-chunk and the across-chunk loops are short."""
    return max(1, 2 ** round(math.log2(max(1.0, math.sqrt(length)))))


def _scan_chunked(a, b, reverse, chunk_size=None):
    if reverse:
        a_f = a if a.ndim == 1 else jnp.flip(a, -2)
        return jnp.flip(_scan_chunked(a_f, jnp.flip(b, -2), False, chunk_size), -2)
    *lead, length, n = b.shape
    size = chunk_size or default_chunk_size(length)
    n_chunks = -(-length // size)
    pad = n_chunks * size - length
    time_invariant = a.ndim == 1

    def to_chunks(v, fill):
        if pad:
            widths = [(0, 0)] * (v.ndim - 2) + [(0, pad), (0, 0)]
            v = jnp.pad(v, widths, constant_values=fill)
        return v.reshape(*v.shape[:-2], n_chunks, size, v.shape[-1])

    b_c = to_chunks(b, 0)                                   # (..., C, T, N)
    # Every chunk starts from zero: one lax.scan over the T positions of all chunks at once.
    x_local = _scan_sequential(a if time_invariant else to_chunks(a, 1), b_c, False)
    if time_invariant:
        powers = jnp.cumprod(jnp.broadcast_to(a, (size, n)), axis=0)          # a^1 … a^T
        chunk_gain = powers[-1]                                                # (N,)
    else:
        powers = jnp.cumprod(to_chunks(a, 1), axis=-2)                        # (..., C, T, N)
        chunk_gain = powers[..., -1, :]                                        # (..., C, N)
    ends = x_local[..., -1, :]                                                 # (..., C, N)
    # Carry across chunks: h_c = gain_c * h_{c-1} + end_c, a recurrence of length C.
    carry = _scan_sequential(chunk_gain, ends, False)
    carry_in = jnp.concatenate([jnp.zeros_like(carry[..., :1, :]), carry[..., :-1, :]], axis=-2)
    x = x_local + powers * carry_in[..., None, :]
    x = x.reshape(*lead, n_chunks * size, n)
    return x[..., :length, :]


def _scan_pallas(a, b, reverse):
    from .scan_pallas import forward      # imported on first use: Pallas is heavy to import
    return forward(a, b, reverse)


_FORWARD = {
    "sequential": _scan_sequential,
    "associative": _scan_associative,
    "chunked": _scan_chunked,
    "pallas": _scan_pallas,
}


def _forward(method, a, b, reverse):
    return _FORWARD[method](a, b, reverse)


# ----------------------------------------------------------------------------------------
# Choosing a method
# ----------------------------------------------------------------------------------------

def _pallas_auto(backend):
    """(use it?, why) for the Pallas kernel; imports Pallas only on a GPU backend."""
    if backend != "gpu":
        return False, ('"pallas" would run in Pallas interpret mode here (correct but slow: '
                       "it exists so that CI can test the kernel)")
    from .scan_pallas import auto_ok
    return auto_ok(backend)


def choose_method(b_shape, *, time_invariant: bool = True, backend: str | None = None) -> str:
    """What ``method="auto"`` runs for ``b`` of this shape on this backend.

    * GPU of compute capability >= 8.0: ``"pallas"``.
    * Other GPUs (Colab's T4): ``"associative"`` for short sequences, ``"chunked"`` otherwise.
    * CPU: ``"sequential"``. In ``python -m lrnn.bench scan`` (``book/data/bench_scan_cpu.json``)
      XLA's ``lax.scan`` loop beat ``"chunked"`` and ``"associative"`` forward and
      forward+backward at B=8, N=256, L = 1K…16K: a CPU has few lanes, all of them already
      busy with the N channels, so the parallel methods only add passes over memory.

    The GPU fallbacks are not measured yet (no GPU benchmark is stored)."""
    backend = backend or jax.default_backend()
    length = b_shape[-2]
    if backend == "gpu" and _pallas_auto(backend)[0]:
        return "pallas"
    if backend == "cpu":
        return "sequential"
    return "associative" if length <= 256 else "chunked"


def describe(b_shape=(8, 4096, 256), *, time_invariant: bool = True) -> str:
    """Say which method ``"auto"`` uses for ``b`` of this shape here, and why.

    Includes why the Pallas kernel is or is not used: it is chosen only on a GPU of CUDA
    compute capability >= 8.0 (A100, H100, ...); on Colab's T4 (7.5) and on CPUs a fallback
    is chosen."""
    backend = jax.default_backend()
    devices = ", ".join(d.device_kind for d in jax.devices())
    method = choose_method(b_shape, time_invariant=time_invariant, backend=backend)
    reasons = {
        "sequential": ("on a CPU the lax.scan loop is the fastest and leanest at every size "
                       "measured (python -m lrnn.bench scan): the N channels already fill the "
                       "few vector lanes, so parallel scans only add passes over memory")
        if backend == "cpu" else "one lax.scan step per position",
        "chunked": "long sequences: ~2·sqrt(L) loop steps over wide vectors, and no log L "
                   "extra passes over memory as in the associative scan",
        "associative": "short sequences on an accelerator: log L fully parallel levels",
    }
    _, pallas_reason = _pallas_auto(backend)
    if method == "pallas":
        reason = pallas_reason
    else:
        reason = reasons[method] + f'; not "pallas", because {pallas_reason}'
    return (f'method="auto" on backend {backend!r} ({devices}) for b of shape '
            f"{tuple(b_shape)}: {method!r}, because {reason}.")


# ----------------------------------------------------------------------------------------
# Custom VJP: the adjoint of x_t = a_t x_{t-1} + b_t is g_t + a_{t+1} λ_{t+1}, run backwards.
# ----------------------------------------------------------------------------------------

def _shift_towards_past(v, reverse):
    """v_{t+1} at position t (zero at the end); the other way round when ``reverse``."""
    zero = jnp.zeros_like(v[..., :1, :])
    if reverse:
        return jnp.concatenate([zero, v[..., :-1, :]], axis=-2)
    return jnp.concatenate([v[..., 1:, :], zero], axis=-2)


def _previous_state(x, reverse):
    """x_{t-1} at position t (zero at the start); x_{t+1} when ``reverse``."""
    zero = jnp.zeros_like(x[..., :1, :])
    if reverse:
        return jnp.concatenate([x[..., 1:, :], zero], axis=-2)
    return jnp.concatenate([zero, x[..., :-1, :]], axis=-2)


@functools.partial(jax.custom_vjp, nondiff_argnums=(2, 3))
def _scan(a, b, reverse, method):
    return _forward(method, a, b, reverse)


def _scan_fwd(a, b, reverse, method):
    x = _forward(method, a, b, reverse)
    return x, (a, x)


def _adjoint_sequential(a, x, g, reverse):
    """The reverse scan and the gradient of a in one loop, for ``method="sequential"``.

    Walking backwards, the carry is λ_{t+1}; it meets x_t at step t, so
    ``da = Σ_t λ_{t+1} x_t`` accumulates without a shifted copy of x."""
    time_invariant = a.ndim == 1
    move = lambda v: jnp.moveaxis(v, -2, 0)
    g_t, x_t = move(g), move(x)
    a_t = jnp.broadcast_to(a, x_t.shape[1:]) if time_invariant else move(_shift_towards_past(a, reverse))
    zero = jnp.zeros(g_t.shape[1:], g.dtype)

    def step(carry, inputs):
        lam_next, da = carry
        if time_invariant:
            g_k, x_k = inputs
            a_k = a_t
        else:
            g_k, x_k, a_k = inputs
        da = da + lam_next * x_k if time_invariant else da
        lam = g_k + a_k * lam_next
        return (lam, da), lam

    inputs = (g_t, x_t) if time_invariant else (g_t, x_t, a_t)
    (_, da), lam = lax.scan(step, (zero, zero), inputs, reverse=not reverse)
    lam = jnp.moveaxis(lam, 0, -2)
    if time_invariant:
        return da.reshape(-1, da.shape[-1]).sum(axis=0), lam
    return lam * _previous_state(x, reverse), lam


def _scan_bwd(reverse, method, residuals, g):
    a, x = residuals
    if method == "sequential":
        return _adjoint_sequential(a, x, g, reverse)
    # JAX transposes linear maps without conjugation, so the adjoint uses a itself.
    a_adj = a if a.ndim == 1 else _shift_towards_past(a, reverse)
    lam = _forward(method, a_adj, g, not reverse)
    da = lam * _previous_state(x, reverse)
    if a.ndim == 1:
        da = da.reshape(-1, da.shape[-1]).sum(axis=0)
    return da, lam


_scan.defvjp(_scan_fwd, _scan_bwd)


def linear_scan(a, b, *, reverse: bool = False, method: str = "auto"):
    """Solve ``x_t = a_t * x_{t-1} + b_t`` with ``x_{-1} = 0`` along axis -2.

    Args:
      a: the decay. Either time-invariant with shape ``(N,)`` (the LRU/RotRNN case, one λ
        per channel) or time-varying, broadcastable to ``b.shape``. Real or complex.
      b: the inputs, shape ``(..., L, N)``, real or complex, any leading batch dims.
      reverse: run from the end: ``x_t = a_t * x_{t+1} + b_t`` with ``x_L = 0``.
      method: ``"auto"``, ``"sequential"``, ``"associative"``, ``"chunked"`` or ``"pallas"``
        (the Pallas kernel; interpret mode, slow, off-GPU).

    Returns:
      ``x`` with the shape of ``b`` and the promoted dtype of ``a`` and ``b``.

    Non-finite values are not filtered: a NaN or inf in ``a`` or ``b`` propagates into every
    later state (earlier ones with ``reverse=True``), exactly as in the recurrence.
    """
    a = jnp.asarray(a)
    b = jnp.asarray(b)
    require_choice("method", method, available_methods())
    require_ndim_at_least("b", b, 2, "(..., L, N)")
    if b.shape[-2] == 0:
        fail("b", b, "at least one time step on axis -2 (L >= 1)")
    n = b.shape[-1]
    if a.ndim == 1 and a.shape[0] == n:
        time_invariant = True
    else:
        try:
            ok = jnp.broadcast_shapes(a.shape, b.shape) == b.shape
        except ValueError:
            ok = False
        if not ok:
            fail("a", a, f"shape ({n},) (one decay per channel) or a shape broadcastable to "
                         f"b's shape {tuple(b.shape)}")
        time_invariant = False
    dtype = jnp.result_type(a.dtype, b.dtype)
    if not jnp.issubdtype(dtype, jnp.inexact):
        dtype = jnp.result_type(dtype, jnp.float32)
    if method == "auto":
        method = choose_method(b.shape, time_invariant=time_invariant)
    if not time_invariant:
        a = jnp.broadcast_to(a, b.shape)
    x = _scan(a.astype(dtype), b.astype(dtype), bool(reverse), method)
    return x


# ----------------------------------------------------------------------------------------
# Rotations: x_t = γ R(θ) x_{t-1} + b_t is a complex diagonal scan with λ = γ e^{iθ}.
# ----------------------------------------------------------------------------------------

def pairs_to_complex(x):
    """``(..., 2K)`` real → ``(..., K)`` complex, pairing ``(x_{2i}, x_{2i+1})`` as ``x_{2i} + i x_{2i+1}``."""
    return lax.complex(x[..., 0::2], x[..., 1::2])


def complex_to_pairs(z):
    """Inverse of ``pairs_to_complex``: interleave real and imaginary parts."""
    return jnp.stack([jnp.real(z), jnp.imag(z)], axis=-1).reshape(*z.shape[:-1], 2 * z.shape[-1])


def rotation_scan(gamma, theta, b, *, reverse: bool = False, method: str = "auto"):
    """Solve ``x_t = γ R(θ) x_{t-1} + b_t`` with ``x_{-1} = 0`` along axis -2.

    ``R(θ)`` is block-diagonal with 2×2 blocks ``[[cos θ_i, -sin θ_i], [sin θ_i, cos θ_i]]``
    acting on the pairs ``(x_{2i}, x_{2i+1})`` (RotRNN Lemma 3, eq. 14). Each block is the
    complex number ``γ_i e^{iθ_i}`` acting on ``x_{2i} + i x_{2i+1}``, so this is
    ``linear_scan`` with ``λ = γ e^{iθ}`` on ``N/2`` complex channels.

    Args:
      gamma: decays, shape ``(N//2,)``, real.
      theta: angles in radians, shape ``(N//2,)``, real.
      b: inputs, shape ``(..., L, N)``, real, with N even.
      reverse, method: as in ``linear_scan``.

    Returns:
      ``x``, real, with the shape of ``b``.
    """
    gamma = jnp.asarray(gamma)
    theta = jnp.asarray(theta)
    b = jnp.asarray(b)
    require_ndim_at_least("b", b, 2, "(..., L, N)")
    n = b.shape[-1]
    if n % 2:
        fail("b", b, "an even last dimension N (the state is made of 2-D rotation pairs)")
    if jnp.iscomplexobj(b):
        fail("b", b, "a real array (pairs of real coordinates)")
    for name, v in (("gamma", gamma), ("theta", theta)):
        if v.shape != (n // 2,):
            fail(name, v, f"shape ({n // 2},), one value per rotation pair of b's N={n}")
        if jnp.iscomplexobj(v):
            fail(name, v, "a real array")
    lam = gamma * jnp.exp(1j * theta)
    z = linear_scan(lam, pairs_to_complex(b), reverse=reverse, method=method)
    return complex_to_pairs(z).astype(jnp.result_type(b.dtype, gamma.dtype, theta.dtype))

