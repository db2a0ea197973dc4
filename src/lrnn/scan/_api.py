"""``linear_scan`` and ``rotation_scan``: validation, the choice of backend, and the custom VJP
shared by every backend (the adjoint of a linear recurrence is the same recurrence run
backwards)."""
from __future__ import annotations

import contextlib
import contextvars
import functools

import jax
import jax.numpy as jnp
import numpy as np
from jax import lax

from .._validate import fail, require_choice, require_ndim_at_least
from . import associative, chunked, sequential
from ._choose import choose_method

METHODS = ("auto", "sequential", "associative", "chunked", "pallas")


def available_methods() -> tuple[str, ...]:
    return METHODS


_FORWARD = {
    "sequential": sequential.scan,
    "associative": associative.scan,
    "chunked": chunked.scan,
}


def _forward(method, a, b, reverse):
    if method == "pallas":
        from .pallas import forward      # imported on first use: Pallas is heavy to import
        return forward(a, b, reverse)
    return _FORWARD[method](a, b, reverse)


# ----------------------------------------------------------------------------------------
# Custom VJP: the adjoint of x_t = a_t x_{t-1} + b_t is g_t + a_{t+1} λ_{t+1}, run backwards.
# ----------------------------------------------------------------------------------------

@functools.partial(jax.custom_vjp, nondiff_argnums=(2, 3))
def _scan(a, b, reverse, method):
    return _forward(method, a, b, reverse)


def _scan_fwd(a, b, reverse, method):
    if method == "pallas":               # keep x as the kernel wrote it (planes): no re-split
        from .pallas import forward_with_residuals
        x, x_planes = forward_with_residuals(a, b, reverse)
        return x, (a, x_planes)
    x = _forward(method, a, b, reverse)
    return x, (a, x)


def _scan_bwd(reverse, method, residuals, g):
    a, x = residuals
    if method == "sequential":
        return sequential.adjoint(a, x, g, reverse)
    if method == "pallas":               # one adjoint pass of the kernel, da formed inside it
        from .pallas import backward
        return backward(a, x, g, reverse)
    # JAX transposes linear maps without conjugation, so the adjoint uses a itself.
    a_adj = a if a.ndim == 1 else sequential.shift_towards_past(a, reverse)
    lam = _forward(method, a_adj, g, not reverse)
    da = lam * sequential.previous_state(x, reverse)
    if a.ndim == 1:
        da = da.reshape(-1, da.shape[-1]).sum(axis=0)
    return da, lam


_scan.defvjp(_scan_fwd, _scan_bwd)

# Called outside jit, the custom VJP traced and compiled its scan on every call (about 0.4 s on
# a CPU whatever the length); a jitted entry compiles once per shape and is inlined under jit.
_scan_compiled = jax.jit(_scan, static_argnums=(2, 3))


_OVERRIDE = contextvars.ContextVar("lrnn_scan_override", default=None)


@contextlib.contextmanager
def override(fn):
    """Context manager: inside it, ``linear_scan`` (and so ``rotation_scan`` and every layer
    built on them) checks its inputs as usual, then returns ``fn(a, b, reverse)`` instead of
    running a backend under the custom VJP. ``a`` arrives as ``(N,)`` when time-invariant, else
    broadcast to ``b``'s shape, both in the result's dtype; ``fn`` is differentiated by JAX.

    For benchmarks and experiments that run a model with another scan (``lrnn bench layer``
    times the layers with the papers' scan this way). It acts when a function is traced:
    ``jax.jit`` a function inside the block for it to compile with ``fn``."""
    if not callable(fn):
        fail("fn", fn, "a function fn(a, b, reverse) -> x")
    token = _OVERRIDE.set(fn)
    try:
        yield fn
    finally:
        _OVERRIDE.reset(token)


def _require_bool(name, value):
    """``reverse="no"`` would be truthy: only real booleans are accepted."""
    if not isinstance(value, (bool, np.bool_)):
        fail(name, value, "True or False")
    return bool(value)


def _numeric_array(name, value):
    """``value`` as a JAX array of numbers, or a ValueError naming ``name``."""
    if value is None:
        fail(name, value, "an array of numbers")
    if hasattr(value, "shape") and hasattr(value, "dtype"):     # NumPy, JAX arrays and tracers
        arr = value
    else:
        try:
            arr = np.asarray(value)
        except (ValueError, TypeError) as err:                 # ragged nested lists
            raise ValueError(f"`{name}`: got {type(value).__name__} that is not a rectangular "
                             f"array ({err}), expected an array of numbers.") from None
    dtype = np.dtype(arr.dtype)
    if dtype == np.bool_:
        fail(name, arr, "an array of numbers, not booleans")
    if not jnp.issubdtype(dtype, jnp.number):                  # bfloat16 is a number to JAX
        fail(name, arr, "an array of numbers (integer, float or complex)")
    return jnp.asarray(arr)


def _require_pallas_runs(dtype):
    """``method="pallas"`` asked for explicitly: it must be able to run the call here."""
    from .pallas import IO_DTYPES, capability_ok, device_capability, kernel_status, on_gpu
    if jnp.dtype(dtype).name not in IO_DTYPES:
        raise ValueError(f"`method`: got 'pallas' for {jnp.dtype(dtype).name} inputs, expected "
                         "float32, complex64 or bfloat16 inputs for it (use method='auto').")
    if on_gpu():
        cc = device_capability()
        too_old = cc is not None and not capability_ok(cc)[0]
        ok, why = capability_ok(cc) if too_old else kernel_status("gpu")
        if not ok:
            raise ValueError(f"`method`: got 'pallas', but the kernel cannot run on this GPU "
                             f"({why}); use method='auto', which falls back to an XLA method.")


def _is_time_invariant(a, b_shape, b_name) -> bool:
    """True for one decay per channel, ``(N,)``; False for a decay broadcastable to ``b``'s
    shape (time-varying); a ValueError naming ``a`` otherwise."""
    n = b_shape[-1]
    if a.ndim == 1 and a.shape[0] == n:
        return True
    try:
        ok = jnp.broadcast_shapes(a.shape, b_shape) == tuple(b_shape)
    except ValueError:
        ok = False
    if not ok:
        fail("a", a, f"shape ({n},) (one decay per channel) or a shape broadcastable to "
                     f"{b_name}'s shape {tuple(b_shape)}")
    return False


def _state_shape(b_shape):
    """The shape of one state: ``b``'s batch dims and ``N``, i.e. ``b`` without its time axis."""
    return tuple(b_shape[:-2]) + (b_shape[-1],)


def _check_initial(name, initial, b_shape, dtype, b_name):
    """``initial`` as an array of the scan's ``dtype`` and shape ``(..., N)``, or a ValueError
    naming ``name``. Its dtype must not widen the scan (a complex state for a real scan, or a
    float64 state for a float32 one, would change the result's dtype)."""
    v = _numeric_array(name, initial)
    shape = _state_shape(b_shape)
    if tuple(v.shape) != shape:
        fail(name, v, f"shape {shape}: {b_name}'s shape {tuple(b_shape)} without its time axis "
                      "-2 (one state per sequence)")
    if jnp.promote_types(v.dtype, dtype) != jnp.dtype(dtype):
        fail(name, v, f"a dtype that promotes into the scan's {jnp.dtype(dtype).name} (a complex "
                      "state needs a complex a or b; a wider float would change the result)")
    return v.astype(dtype)


def _first(reverse):
    """The time index the scan starts at: 0, or L - 1 with ``reverse``."""
    return -1 if reverse else 0


def _fold_initial(a, b, h0, reverse):
    """``b`` with ``a_t h0`` added to its first step: ``x_0 = a_0 h_{-1} + b_0`` is the scan
    from zero of the folded inputs, so every backend and the custom VJP run unchanged (the
    gradient of ``h0`` is ``a_0`` times the adjoint at the first step, by JAX's autodiff)."""
    t = _first(reverse)
    a_t = a if a.ndim == 1 else a[..., t, :]
    return b.at[..., t, :].add(a_t * h0)


def _final(x, reverse):
    """The last state computed: ``x[..., L-1, :]``, or ``x[..., 0, :]`` with ``reverse``."""
    return x[..., 0 if reverse else -1, :]


def linear_scan(a, b, *, reverse: bool = False, method: str = "auto", initial=None,
                return_final: bool = False):
    """Solve ``x_t = a_t * x_{t-1} + b_t`` from ``x_{-1} = initial`` (zero by default) along
    axis -2.

    Args:
      a: the decay. Either time-invariant with shape ``(N,)`` (the LRU/RotRNN case, one λ
        per channel) or time-varying, broadcastable to ``b.shape``. Real or complex.
      b: the inputs, shape ``(..., L, N)``, real or complex, any leading batch dims.
      reverse: run from the end: ``x_t = a_t * x_{t+1} + b_t`` from ``x_L = initial``.
      method: ``"auto"``, ``"sequential"``, ``"associative"``, ``"chunked"`` or ``"pallas"``
        (the Pallas kernel; interpret mode, slow, off-GPU).
      initial: the state before the first step, shape ``(..., N)`` (``b``'s shape without
        the time axis), in a dtype that promotes into the scan's (see Returns); ``None`` is
        zero. With ``reverse=True`` the first step is ``t = L - 1`` and ``initial`` is
        ``x_L``, the state after the end. It is folded into the first input
        (``b_0 + a_0 initial``), so every method runs unchanged and is differentiable with
        respect to it.
      return_final: also return the last state computed, ``x[..., L-1, :]`` (``x[..., 0, :]``
        with ``reverse=True``): the ``initial`` of the next chunk of the sequence.

    Returns:
      ``x`` with the shape of ``b`` and the promoted dtype of ``a`` and ``b``; with
      ``return_final=True`` the pair ``(x, x_final)``, ``x_final`` of shape ``(..., N)``.
      Scanning ``b`` in consecutive chunks, each from the previous chunk's final state,
      gives the states of one scan over the whole of ``b``.

    Non-finite values are not filtered: a NaN or inf in ``a`` or ``b`` propagates into every
    later state (earlier ones with ``reverse=True``), exactly as in the recurrence.

    Differentiation: reverse mode only (``jax.grad``, ``jax.vjp``, ``jax.jacrev``). The scan
    has a custom VJP (the adjoint is the same scan run backwards), and JAX cannot apply
    forward mode (``jax.jvp``, ``jax.jacfwd``) to a custom VJP; use ``jax.jacrev`` for
    Jacobians.
    """
    require_choice("method", method, available_methods())
    reverse = _require_bool("reverse", reverse)
    return_final = _require_bool("return_final", return_final)
    a = _numeric_array("a", a)
    b = _numeric_array("b", b)
    require_ndim_at_least("b", b, 2, "(..., L, N)")
    if b.shape[-2] == 0:
        fail("b", b, "at least one time step on axis -2 (L >= 1)")
    time_invariant = _is_time_invariant(a, b.shape, "b")
    dtype = jnp.result_type(a.dtype, b.dtype)
    if not jnp.issubdtype(dtype, jnp.inexact):
        dtype = jnp.result_type(dtype, jnp.float32)
    if initial is not None:
        initial = _check_initial("initial", initial, b.shape, dtype, "b")
    if method == "auto":
        method = choose_method(b.shape, time_invariant=time_invariant, dtype=dtype)
    elif method == "pallas":
        _require_pallas_runs(dtype)
    if not time_invariant:
        a = jnp.broadcast_to(a, b.shape)
    a, b = a.astype(dtype), b.astype(dtype)
    if initial is not None:
        b = _fold_initial(a, b, initial, reverse)
    replacement = _OVERRIDE.get()
    if replacement is not None:
        x = replacement(a, b, reverse)
    else:
        x = _scan_compiled(a, b, reverse, method)
    return (x, _final(x, reverse)) if return_final else x


# ----------------------------------------------------------------------------------------
# Planes: a complex scan whose inputs and outputs stay two real arrays.
# ----------------------------------------------------------------------------------------

def _flat(v):
    """``(..., L, N)`` -> ``(G, L, N)``, the kernel's layout."""
    return v.reshape(-1, *v.shape[-2:])


def _decay_planes(a, shape, *, complex_=False):
    """The kernel's planes of ``a``: ``(N,)`` each, or ``(G, L, N)`` for a time-varying ``a``
    broadcast to ``shape``; ``complex_`` adds a zero imaginary plane to a real ``a``."""
    from .pallas import to_planes
    planes = to_planes(a) if a.ndim == 1 else tuple(_flat(v) for v in to_planes(a))
    if complex_ and len(planes) == 1:
        planes = (planes[0], jnp.zeros_like(planes[0]))
    return planes


@functools.partial(jax.custom_vjp, nondiff_argnums=(3,))
def _pallas_planes(a, b_re, b_im, reverse):
    return _pallas_planes_fwd(a, b_re, b_im, reverse)[0]


def _pallas_planes_fwd(a, b_re, b_im, reverse):
    from .pallas import scan_planes
    x = scan_planes(_decay_planes(a, b_re.shape), (_flat(b_re), _flat(b_im)), reverse=reverse)
    return (x[0].reshape(b_re.shape), x[1].reshape(b_re.shape)), (a, x)


def _pallas_planes_bwd(reverse, residuals, cotangents):
    from .pallas import scan_planes
    a, x = residuals
    g_re, g_im = cotangents
    shape = g_re.shape
    # JAX's cotangent of the complex x = x_re + i x_im is g_re - i g_im; the adjoint scan runs
    # with a itself (no conjugation), and the cotangent of b_im is minus the imaginary plane.
    lam, da = scan_planes(_decay_planes(a, shape, complex_=True), (_flat(g_re), -_flat(g_im)),
                          reverse=not reverse, x=x)
    da = lax.complex(*da)
    da = da.reshape(a.shape) if a.ndim == 1 else da.reshape(shape)
    if not jnp.iscomplexobj(a):
        da = jnp.real(da)
    return da.astype(a.dtype), lam[0].reshape(shape), (-lam[1]).reshape(shape)


_pallas_planes.defvjp(_pallas_planes_fwd, _pallas_planes_bwd)


_COMPLEX_ARRAYS = contextvars.ContextVar("lrnn_scan_complex_arrays", default=False)


@contextlib.contextmanager
def complex_arrays():
    """Context manager: inside it, ``linear_scan_planes`` joins its planes into a complex array
    and runs ``linear_scan`` on it for every method, the kernel included (XLA then splits and
    joins the planes around the kernel, as the layers did before they kept planes). For the
    benchmark's comparison rows; like ``override``, it acts when a function is traced."""
    token = _COMPLEX_ARRAYS.set(True)
    try:
        yield
    finally:
        _COMPLEX_ARRAYS.reset(token)


def _real_plane(name, value):
    v = _numeric_array(name, value)
    if not jnp.issubdtype(v.dtype, jnp.floating):
        fail(name, v, "a real floating-point array (one plane of a complex array)")
    return v


def _check_initial_planes(initial, b_shape, out_dtype):
    """``initial`` as a pair of real planes ``(h_re, h_im)``, each ``(..., N)``."""
    if not isinstance(initial, (tuple, list)) or len(initial) != 2:
        fail("initial", initial, "a pair (h_re, h_im) of real planes, each of shape "
                                 f"{_state_shape(b_shape)}")
    planes = []
    for name, v in zip(("initial[0]", "initial[1]"), initial):
        v = _real_plane(name, v)
        planes.append(_check_initial(name, v, b_shape, out_dtype, "b_re"))
    return planes


def linear_scan_planes(a, b_re, b_im, *, reverse: bool = False, method: str = "auto",
                       initial=None, return_final: bool = False):
    """``linear_scan(a, b_re + i b_im)`` with the complex inputs and states as two real planes.

    The LRU and RotRNN layers form ``B u`` as two real products and read ``Re(C x)`` from the
    planes, so with ``method="pallas"`` no complex array is built, split or joined around the
    kernel: it reads the two planes of ``b`` and writes the two planes of ``x`` (16 bytes per
    complex64 element instead of 48 with XLA's split and join), forward and backward. Every
    other method forms the complex array inside and runs ``linear_scan``: the same numbers.

    Args:
      a: the complex (or real) decay, ``(N,)`` or broadcastable to ``b_re.shape``.
      b_re, b_im: real and imaginary planes of the inputs, the same shape ``(..., L, N)`` and
        the same real floating dtype.
      reverse, method: as in ``linear_scan``.
      initial: ``None`` (zero) or the planes ``(h_re, h_im)`` of the state before the first
        step, each of shape ``(..., N)`` (``x_L`` with ``reverse=True``), as in
        ``linear_scan``; folded into the first step's planes, so the kernel runs unchanged.
      return_final: also return the planes of the last state computed, as in ``linear_scan``.

    Returns:
      ``(x_re, x_im)``, each with the shape of ``b_re`` and the real dtype of the result
      (half-precision planes are computed in float32 and returned in their own dtype); with
      ``return_final=True``, ``((x_re, x_im), (f_re, f_im))``, the final planes ``(..., N)``.
      Reverse-mode differentiation, as ``linear_scan``.
    """
    require_choice("method", method, available_methods())
    reverse = _require_bool("reverse", reverse)
    return_final = _require_bool("return_final", return_final)
    a = _numeric_array("a", a)
    b_re = _real_plane("b_re", b_re)
    b_im = _real_plane("b_im", b_im)
    require_ndim_at_least("b_re", b_re, 2, "(..., L, N)")
    if b_im.shape != b_re.shape:
        fail("b_im", b_im, f"the shape of b_re, {tuple(b_re.shape)}")
    if b_im.dtype != b_re.dtype:
        fail("b_im", b_im, f"the dtype of b_re, {b_re.dtype}")
    if b_re.shape[-2] == 0:
        fail("b_re", b_re, "at least one time step on axis -2 (L >= 1)")
    time_invariant = _is_time_invariant(a, b_re.shape, "b_re")
    out_dtype = jnp.result_type(b_re.dtype, jnp.real(jnp.zeros((), a.dtype)).dtype)
    if initial is not None:
        initial = _check_initial_planes(initial, b_re.shape, out_dtype)
    work = jnp.promote_types(out_dtype, jnp.float32)          # no half-precision complex
    complex_dtype = jnp.result_type(work, jnp.complex64)
    if method == "auto":
        method = choose_method(b_re.shape, time_invariant=time_invariant, dtype=complex_dtype)
    elif method == "pallas":
        _require_pallas_runs(complex_dtype)
    a = a.astype(complex_dtype) if jnp.iscomplexobj(a) else a.astype(work)
    if not time_invariant:
        a = jnp.broadcast_to(a, b_re.shape)
    b_re, b_im = b_re.astype(work), b_im.astype(work)
    if initial is not None:
        t = _first(reverse)
        push = (a if a.ndim == 1 else a[..., t, :]) * lax.complex(*(h.astype(work)
                                                                   for h in initial))
        b_re = b_re.at[..., t, :].add(jnp.real(push))
        b_im = b_im.at[..., t, :].add(jnp.imag(push))
    if method == "pallas" and work == jnp.float32 and _OVERRIDE.get() is None \
            and not _COMPLEX_ARRAYS.get():
        x_re, x_im = _pallas_planes(a, b_re, b_im, reverse)
    else:
        x = linear_scan(a, lax.complex(b_re, b_im), reverse=reverse, method=method)
        x_re, x_im = jnp.real(x), jnp.imag(x)
    x_re, x_im = x_re.astype(out_dtype), x_im.astype(out_dtype)
    if return_final:
        return (x_re, x_im), (_final(x_re, reverse), _final(x_im, reverse))
    return x_re, x_im


# ----------------------------------------------------------------------------------------
# Rotations: x_t = γ R(θ) x_{t-1} + b_t is a complex diagonal scan with λ = γ e^{iθ}.
# ----------------------------------------------------------------------------------------

def pairs_to_complex(x):
    """``(..., 2K)`` real → ``(..., K)`` complex, pairing ``(x_{2i}, x_{2i+1})`` as ``x_{2i} + i x_{2i+1}``."""
    return lax.complex(x[..., 0::2], x[..., 1::2])


def complex_to_pairs(z):
    """Inverse of ``pairs_to_complex``: interleave real and imaginary parts."""
    return jnp.stack([jnp.real(z), jnp.imag(z)], axis=-1).reshape(*z.shape[:-1], 2 * z.shape[-1])


def rotation_scan(gamma, theta, b, *, reverse: bool = False, method: str = "auto",
                  initial=None, return_final: bool = False):
    """Solve ``x_t = γ R(θ) x_{t-1} + b_t`` from ``x_{-1} = initial`` (zero by default) along
    axis -2.

    ``R(θ)`` is block-diagonal with 2×2 blocks ``[[cos θ_i, -sin θ_i], [sin θ_i, cos θ_i]]``
    acting on the pairs ``(x_{2i}, x_{2i+1})`` (RotRNN Lemma 3, eq. 14). Each block is the
    complex number ``γ_i e^{iθ_i}`` acting on ``x_{2i} + i x_{2i+1}``, so this is
    ``linear_scan`` with ``λ = γ e^{iθ}`` on ``N/2`` complex channels.

    Args:
      gamma: decays, shape ``(N//2,)``, real.
      theta: angles in radians, shape ``(N//2,)``, real.
      b: inputs, shape ``(..., L, N)``, real, with N even.
      reverse, method: as in ``linear_scan``.
      initial: ``None`` (zero) or the real state before the first step, shape ``(..., N)``
        (``x_L`` with ``reverse=True``), in pairs like ``b``; as in ``linear_scan``.
      return_final: also return the last state computed, ``(..., N)``, as in ``linear_scan``.

    Returns:
      ``x``, real, with the shape of ``b`` and the promoted dtype of ``gamma``, ``theta`` and
      ``b``. Half-precision ``b`` (float16, bfloat16) is computed in float32 (there is no
      half-precision complex type) and returned in its own dtype, as ``linear_scan`` returns
      it. With ``return_final=True``, ``(x, x_final)``. Reverse-mode differentiation only, as
      ``linear_scan``.
    """
    reverse = _require_bool("reverse", reverse)
    return_final = _require_bool("return_final", return_final)
    gamma = _numeric_array("gamma", gamma)
    theta = _numeric_array("theta", theta)
    b = _numeric_array("b", b)
    require_ndim_at_least("b", b, 2, "(..., L, N)")
    if not jnp.issubdtype(b.dtype, jnp.floating):
        fail("b", b, "a real floating-point array (pairs of real coordinates)")
    n = b.shape[-1]
    if n % 2:
        fail("b", b, "an even last dimension N (the state is made of 2-D rotation pairs)")
    for name, v in (("gamma", gamma), ("theta", theta)):
        if v.shape != (n // 2,):
            fail(name, v, f"shape ({n // 2},), one value per rotation pair of b's N={n}")
        if jnp.iscomplexobj(v):
            fail(name, v, "a real array")
    out_dtype = jnp.result_type(b.dtype, gamma.dtype, theta.dtype)
    work = jnp.promote_types(out_dtype, jnp.float32)         # complex needs >= float32 parts
    if initial is not None:
        initial = _check_initial("initial", _real_plane("initial", initial), b.shape,
                                 out_dtype, "b")
        initial = pairs_to_complex(initial.astype(work))
    lam = gamma.astype(work) * jnp.exp(1j * theta.astype(work))
    z = linear_scan(lam, pairs_to_complex(b.astype(work)), reverse=reverse, method=method,
                    initial=initial)
    x = complex_to_pairs(z).astype(out_dtype)
    return (x, _final(x, reverse)) if return_final else x
