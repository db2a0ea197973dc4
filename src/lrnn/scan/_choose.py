"""What ``method="auto"`` runs, and why (``choose_method``, ``describe``)."""
from __future__ import annotations

import jax


def _pallas_auto(backend):
    """(use it?, why) for the Pallas kernel; imports Pallas only on a GPU backend."""
    if backend != "gpu":
        return False, ('"pallas" would run in Pallas interpret mode here (correct but slow: '
                       "it exists so that CI can test the kernel)")
    from .pallas import auto_ok
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
