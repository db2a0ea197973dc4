"""What ``method="auto"`` runs, and why (``choose_method``, ``describe``).

The decision, in order: the backend; the dtype (the Pallas kernel reads float32, complex64 and
bfloat16, never float64/complex128); the GPU's compute capability (Pallas-Triton compiles from
8.0 on; the kernel is used only where ``pallas_tuning`` holds measurements); whether Pallas
imports and the kernel lowers here (checked once per process, and on a real GPU compiled and
run once on a tiny problem); and the shape rule measured on that GPU. Whatever is left goes to
the best XLA method for the backend.
"""
from __future__ import annotations

import jax
import jax.numpy as jnp

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


def choose_method(b_shape, *, time_invariant: bool = True, backend: str | None = None,
                  dtype=jnp.complex64) -> str:
    """What ``method="auto"`` runs for ``b`` of this shape and dtype on this backend.

    * CPU: ``"sequential"``. In ``python -m lrnn bench scan`` (``book/data/bench_scan_cpu.json``)
      XLA's ``lax.scan`` loop beat ``"chunked"`` and ``"associative"`` forward and
      forward+backward at B=8, N=256, L = 1K…16K: a CPU has few lanes, all of them already
      busy with the N channels, so the parallel methods only add passes over memory.
    * GPU: ``"pallas"`` where ``lrnn.scan.pallas.auto_ok`` says the kernel runs here and won
      on this GPU generation for such a problem (``book/data/bench_scan_gpu.json``);
      otherwise ``"associative"``, which beat ``"chunked"`` on the stored H100 runs.
    """
    backend = backend or jax.default_backend()
    if backend == "cpu":
        return "sequential"
    if backend == "gpu" and _pallas_auto(backend, dtype, tuple(b_shape), time_invariant)[0]:
        return "pallas"
    return GPU_FALLBACK


def describe(b_shape=(8, 4096, 256), *, time_invariant: bool = True, dtype=jnp.complex64) -> str:
    """One line: which method ``"auto"`` uses for ``b`` of this shape and dtype here, and why
    (including why the Pallas kernel is or is not used)."""
    backend = jax.default_backend()
    devices = ", ".join(sorted({d.device_kind for d in jax.devices()}))
    dtype = jnp.dtype(dtype)
    method = choose_method(b_shape, time_invariant=time_invariant, backend=backend, dtype=dtype)
    reasons = {
        "sequential": ("on a CPU the lax.scan loop is the fastest and leanest at every size "
                       "measured (python -m lrnn bench scan): the N channels already fill the "
                       "few vector lanes, so parallel scans only add passes over memory"),
        "associative": ("on a GPU it is the fastest XLA method measured (the stored H100 "
                        "benchmark): log L fully parallel levels, each a fused pass"),
    }
    _, pallas_reason = _pallas_auto(backend, dtype, tuple(b_shape), time_invariant)
    if method == "pallas":
        reason = pallas_reason
    else:
        reason = reasons[method] + f'; not "pallas", because {pallas_reason}'
    kind = "time-invariant" if time_invariant else "time-varying"
    return (f'method="auto" on backend {backend!r} ({devices}) for {dtype.name} b of shape '
            f"{tuple(b_shape)} ({kind} a): {method!r}, because {reason}.")
