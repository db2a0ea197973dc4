"""What ``method="auto"`` runs, and why (``choose_method``, ``describe``).

The decision, in order: the backend; the dtype (the Pallas kernel reads float32, complex64 and
bfloat16, never float64/complex128); the GPU's compute capability (Pallas-Triton compiles from
8.0 on); a stored GPU run of the kernel as built on that generation (``pallas_tuning``:
``TABLE[cc].measurement``, whose kernel fingerprint must be that of the kernel here: ``auto``
trusts only measurements, never predictions or a prototype's probe) and the shape rule it
measured; whether Pallas imports and the kernel lowers here (checked once per process, and on a
real GPU compiled and run once on a tiny problem). Whatever is left goes to the best XLA method
for the backend: ``"associative"`` on every GPU until such a run is stored.
"""
from __future__ import annotations

import numbers

import jax
import jax.numpy as jnp
import numpy as np

from .._validate import fail, require_bool, require_choice

#: The backends ``choose_method`` knows (``None``: the default backend).
BACKENDS = ("cpu", "gpu", "tpu")

#: Below this length ``"associative"`` is the GPU fallback; above it too (the stored H100 run
#: had it ahead of ``"chunked"`` and of the first kernel at every shape up to L = 65 536).
GPU_FALLBACK = "associative"


def _pallas_auto(backend, dtype, shape, time_invariant):
    """(use it?, why) for the Pallas kernel; imports Pallas only on a GPU backend."""
    if backend != "gpu":
        return False, ('"pallas" would run in Pallas interpret mode here (correct but slow: '
                       "it exists so that CI can test the kernel)")
    from .pallas import auto_ok
    return auto_ok(backend, dtype=dtype, shape=shape, time_varying=not time_invariant)


def _check_request(b_shape, time_invariant, dtype):
    """``(shape tuple, numpy dtype)`` of a valid request, or a ValueError naming the argument."""
    if isinstance(b_shape, (str, bytes)) or not hasattr(b_shape, "__len__") or not all(
            isinstance(d, numbers.Integral) and not isinstance(d, bool) for d in b_shape):
        fail("b_shape", b_shape, "the shape of b: a tuple of integers (..., L, N)")
    shape = tuple(int(d) for d in b_shape)
    if len(shape) < 2 or min(shape) < 0 or shape[-2] < 1:
        fail("b_shape", b_shape, "a shape (..., L, N) with at least two dimensions and L >= 1")
    require_bool("time_invariant", time_invariant)
    try:
        dt = np.dtype(jnp.dtype(dtype))
    except TypeError:
        fail("dtype", dtype, "a numeric dtype such as jnp.float32 or jnp.complex64")
    if not jnp.issubdtype(dt, jnp.inexact):
        fail("dtype", dtype, "a floating-point or complex dtype (the scan's computing dtype)")
    return shape, dt


def choose_method(b_shape, *, time_invariant: bool = True, backend: str | None = None,
                  dtype=jnp.complex64) -> str:
    """What ``method="auto"`` runs for ``b`` of this shape and dtype on this backend.

    * CPU: ``"sequential"``. In ``lrnn bench scan`` (``book/data/bench_scan_cpu.json``)
      XLA's ``lax.scan`` loop beat ``"chunked"`` and ``"associative"`` forward and
      forward+backward at B=8, N=256, L = 1K…16K: a CPU has few lanes, all of them already
      busy with the N channels, so the parallel methods only add passes over memory.
    * GPU: ``"pallas"`` only where ``lrnn.scan.pallas.auto_ok`` says the kernel runs here and
      a stored run of this very kernel (``pallas_tuning.TABLE[cc].measurement``, a file of
      ``book/data/``) showed it winning on this GPU generation for such a problem; otherwise
      ``"associative"``, which beat ``"chunked"`` and the first kernel on the stored H100 run
      (``book/data/bench_scan_h100_649d3fa.json``).

    ``b_shape`` must be a shape ``(..., L, N)`` of positive sizes, ``backend`` one of
    :data:`BACKENDS` or ``None``, ``dtype`` floating or complex: anything else is a ValueError.
    """
    b_shape, dtype = _check_request(b_shape, time_invariant, dtype)
    if backend is not None:
        require_choice("backend", backend, BACKENDS)
    backend = backend or jax.default_backend()
    if backend == "cpu":
        return "sequential"
    if backend == "gpu" and _pallas_auto(backend, dtype, tuple(b_shape), time_invariant)[0]:
        return "pallas"
    return GPU_FALLBACK


def describe(b_shape=(8, 4096, 256), *, time_invariant: bool = True, dtype=jnp.complex64) -> str:
    """One line: which method ``"auto"`` uses for ``b`` of this shape and dtype here, and why
    (including why the Pallas kernel is or is not used)."""
    b_shape, dtype = _check_request(b_shape, time_invariant, dtype)
    backend = jax.default_backend()
    devices = ", ".join(sorted({d.device_kind for d in jax.devices()}))
    method = choose_method(b_shape, time_invariant=time_invariant, backend=backend, dtype=dtype)
    reasons = {
        "sequential": ("on a CPU the lax.scan loop is the fastest and leanest at every size "
                       "measured (lrnn bench scan): the N channels already fill the "
                       "few vector lanes, so parallel scans only add passes over memory"),
        "associative": ("on a GPU it is the fastest XLA method measured (the stored H100 "
                        "benchmark, book/data/bench_scan_h100_649d3fa.json): log L fully "
                        "parallel levels, each a fused pass"),
    }
    _, pallas_reason = _pallas_auto(backend, dtype, tuple(b_shape), time_invariant)
    if method == "pallas":
        reason = pallas_reason
    else:
        reason = reasons[method] + f'; not "pallas", because {pallas_reason}'
    kind = "time-invariant" if time_invariant else "time-varying"
    return (f'method="auto" on backend {backend!r} ({devices}) for {dtype.name} b of shape '
            f"{tuple(b_shape)} ({kind} a): {method!r}, because {reason}.")
