"""The course's precision policy, and a CPU emulation of TF32 to test it.

On an A100, L4, H100 (NVIDIA compute capability >= 8.0) JAX's DEFAULT matmul precision lets
every float32 matrix product run on tensor cores in TF32: the operands keep 10 mantissa bits
instead of 23, a relative error near 1e-3 per product. Which products really go to tensor cores
depends on their sizes, the GPU and the XLA version, so the course designs for the worst case:

* **Checks and grading** (``lrnn.course.check.check``, the hidden tests, the grader) run the student's
  function and the reference under :func:`exact_matmuls` (``jax.default_matmul_precision
  ("float32")``), so a verdict is the same on a CPU, a T4 and a TF32 GPU.
* **The chapters** run their demonstrations under the same setting, which ``lrnn.course.setup``
  switches on (:func:`use_course_policy`).
* **Training** (chapter 7, ``lrnn.training.train``) keeps JAX's fast default: TF32 rounding is far below
  the noise of stochastic gradients.

:func:`emulate_tf32` rounds the operands of every float32/complex64 ``dot_general`` whose
effective precision allows TF32 to 10 mantissa bits (round to nearest even), on any backend.
Set ``LRNN_EMULATE_TF32=1`` before importing ``lrnn`` to switch it on in a process (the grader
passes the variable on to its kernels), so that a CPU test sees what a TF32 GPU would compute.
Only the forward products are rounded: the products that autodiff derives for a backward pass
are not (a TF32 GPU would round those as well).
"""
from __future__ import annotations

import contextlib
import functools
import os

import jax
import jax.numpy as jnp
from jax import lax

#: The precision of float32 matrix products in checks, grading and the chapters.
POLICY = "float32"
EMULATE_ENV = "LRNN_EMULATE_TF32"

#: Effective precisions under which an Ampere-or-newer GPU may use TF32 (worst case: HIGH too).
_TF32_ALLOWED = {None, "default", "DEFAULT", "tensorfloat32", "bfloat16", "high", "HIGH",
                 "fastest", "ANY_F8_ANY_F8_F32", "BF16_BF16_F32", "TF32_TF32_F32"}


def exact_matmuls():
    """Context manager: float32 matrix products at full float32 precision inside it."""
    return jax.default_matmul_precision(POLICY)


def use_course_policy() -> None:
    """Make full float32 products the process-wide default (what ``lrnn.course.setup`` does)."""
    jax.config.update("jax_default_matmul_precision", POLICY)


def current_default() -> str | None:
    """The default matmul precision in force here (context managers included), or None."""
    return jax.config.jax_default_matmul_precision


def tf32_possible(device=None) -> bool:
    """True on an NVIDIA GPU of compute capability >= 8.0, where DEFAULT may mean TF32."""
    device = device or jax.devices()[0]
    if device.platform != "gpu":
        return False
    try:
        return float(getattr(device, "compute_capability", "0")) >= 8.0
    except (TypeError, ValueError):
        return False


def policy_line(device=None) -> str:
    """One plain sentence about the matmul precision in force, for the setup cell."""
    default = current_default()
    exact = default in ("float32", "highest", "HIGHEST")
    where = ("this GPU would otherwise run them in TF32" if tf32_possible(device)
             else "the same on every CPU and GPU")
    if emulating():
        where += "; TF32 is being emulated (LRNN_EMULATE_TF32=1)"
    state = "full float32" if exact else f"JAX's default ({default or 'DEFAULT'}: TF32 allowed)"
    return f"float32 matrix products: {state}; checks and grading always use full float32 ({where})."


# ----------------------------------------------------------------------------------------
# TF32 emulation
# ----------------------------------------------------------------------------------------

def round_to_tf32(x):
    """Round float32 values to TF32 (10 mantissa bits, round to nearest even); complex64 part
    by part. The gradient passes straight through."""
    x = jnp.asarray(x)
    if jnp.issubdtype(x.dtype, jnp.complexfloating):
        return lax.complex(round_to_tf32(jnp.real(x)), round_to_tf32(jnp.imag(x)))
    if x.dtype != jnp.float32:
        return x
    bits = lax.bitcast_convert_type(x, jnp.uint32)
    lsb = (bits >> 13) & jnp.uint32(1)
    rounded = (bits + jnp.uint32(0x0FFF) + lsb) & jnp.uint32(0xFFFFE000)
    finite = jnp.isfinite(x)
    y = lax.bitcast_convert_type(rounded, jnp.float32)
    # Straight-through gradient; inf and NaN pass unchanged (inf - inf would make a NaN).
    return jnp.where(finite, x + lax.stop_gradient(jnp.where(finite, y - x, 0)), x)


def _allows_tf32(precision) -> bool:
    if precision is None:
        return current_default() in _TF32_ALLOWED
    if isinstance(precision, (tuple, list)):
        return any(_allows_tf32(p) for p in precision)
    name = getattr(precision, "name", precision)
    return str(name) in _TF32_ALLOWED


_ORIGINAL = {}


def _rounding_dot_general(lhs, rhs, dimension_numbers, precision=None, preferred_element_type=None,
                          **kwargs):
    original = _ORIGINAL["dot_general"]
    if _allows_tf32(precision):
        lhs, rhs = round_to_tf32(lhs), round_to_tf32(rhs)
    return original(lhs, rhs, dimension_numbers, precision=precision,
                    preferred_element_type=preferred_element_type, **kwargs)


def emulating() -> bool:
    return "dot_general" in _ORIGINAL


def emulate_tf32(enable: bool = True) -> None:
    """Switch the TF32 emulation on (or off) in this process. Functions already traced by
    ``jax.jit`` keep what they compiled: switch it on before running anything."""
    # JAX has no public hook on every matrix product: jnp.matmul, jnp.einsum, jnp.dot and
    # the others call the dot_general of jax._src.lax.lax directly, not jax.lax.dot_general,
    # so both are replaced (a TF32 emulation for tests only; nothing else reaches jax._src).
    from jax._src.lax import lax as lax_internal
    if enable and not emulating():
        _ORIGINAL["dot_general"] = lax_internal.dot_general
        wrapped = functools.wraps(lax_internal.dot_general)(_rounding_dot_general)
        lax_internal.dot_general = wrapped
        jax.lax.dot_general = wrapped
        jax.clear_caches()
    elif not enable and emulating():
        original = _ORIGINAL.pop("dot_general")
        lax_internal.dot_general = original
        jax.lax.dot_general = original
        jax.clear_caches()


@contextlib.contextmanager
def tf32_emulated():
    """Context manager form of :func:`emulate_tf32` (for tests)."""
    was = emulating()
    emulate_tf32(True)
    try:
        yield
    finally:
        emulate_tf32(was)


def install_from_environment() -> None:
    """Called when ``lrnn`` is imported: emulate TF32 if ``LRNN_EMULATE_TF32=1``."""
    if os.environ.get(EMULATE_ENV) == "1":
        emulate_tf32(True)
