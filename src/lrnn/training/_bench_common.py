"""What the scan benchmark (``bench``) and the layer benchmark (``bench_layer``) share: the
papers' scan, timing, compilation and memory, the device, the targets' row format, and
writing results. Neither benchmark imports the other's private names."""
from __future__ import annotations

import json
import os
import platform
import statistics
import time

import jax
import jax.numpy as jnp
from jax import lax

from ..scan import binary_operator


# ----------------------------------------------------------------------------------------
# The papers' code, as written there (LRU appendix A: repeat λ, associative_scan, autodiff).
# ----------------------------------------------------------------------------------------

def paper_associative_scan(lam, bu, reverse=False):
    """LRU appendix A lines 19–22, batched: λ repeated per step, differentiated by autodiff."""
    lam_elements = jnp.broadcast_to(jnp.repeat(lam[None, :], bu.shape[-2], axis=0), bu.shape)
    _, x = lax.associative_scan(binary_operator, (lam_elements, bu), reverse=reverse,
                                axis=bu.ndim - 2)
    return x


def paper_lax_scan(lam, bu, reverse=False):
    """A plain ``lax.scan`` over time, differentiated by autodiff (it stores every state)."""
    def step(x, b_k):
        x = lam * x + b_k
        return x, x
    _, x = lax.scan(step, jnp.zeros(bu.shape[:-2] + bu.shape[-1:], bu.dtype),
                    jnp.moveaxis(bu, -2, 0), reverse=reverse)
    return jnp.moveaxis(x, 0, -2)


def paper_scan(a, b, reverse=False):
    """The papers' scan for any ``a`` that ``linear_scan`` accepts: λ repeated per step when
    time-invariant (``paper_associative_scan``), else ``lax.associative_scan`` as it is."""
    if a.ndim == 1:
        return paper_associative_scan(a, b, reverse)
    _, x = lax.associative_scan(binary_operator, (a, b), reverse=reverse, axis=b.ndim - 2)
    return x


# ----------------------------------------------------------------------------------------
# Measuring
# ----------------------------------------------------------------------------------------

def block(tree):
    for leaf in jax.tree_util.tree_leaves(tree):
        leaf.block_until_ready()
    return tree


def compile_and_memory(fn, *args):
    """Compile ``jax.jit(fn)`` for ``args``: returns (compiled, seconds, memory dict)."""
    t0 = time.perf_counter()
    compiled = jax.jit(fn).lower(*args).compile()
    seconds = time.perf_counter() - t0
    m = compiled.memory_analysis()
    memory = None
    if m is not None:
        memory = {
            "argument_bytes": int(m.argument_size_in_bytes),
            "output_bytes": int(m.output_size_in_bytes),
            "temp_bytes": int(m.temp_size_in_bytes),
            "alias_bytes": int(m.alias_size_in_bytes),
            "peak_bytes": int(m.argument_size_in_bytes + m.output_size_in_bytes
                              + m.temp_size_in_bytes - m.alias_size_in_bytes),
            "xla_peak_memory_bytes": int(getattr(m, "peak_memory_in_bytes", -1)),
        }
    return compiled, seconds, memory


def time_interleaved(calls, *, repeats: int):
    """Best and median wall time of each ``(compiled, args)`` in ``calls``, timed round-robin
    (one call of each per round, after a warm-up round) so that a change in the machine's load
    during the run hits every row alike."""
    for compiled, args in calls:
        block(compiled(*args))
    times = [[] for _ in calls]
    for _ in range(repeats):
        for i, (compiled, args) in enumerate(calls):
            t0 = time.perf_counter()
            block(compiled(*args))
            times[i].append(time.perf_counter() - t0)
    return [(min(t), statistics.median(t)) for t in times]


# ----------------------------------------------------------------------------------------
# The device, targets, results
# ----------------------------------------------------------------------------------------

def pick_device(kind):
    """The first device of ``kind`` (``"cpu"``, ``"gpu"``; ``None``: JAX's default)."""
    if kind is None:
        return jax.devices()[0]
    try:
        return jax.devices(kind)[0]
    except RuntimeError as err:
        raise SystemExit(f"--device: got {kind!r}, but there is no such device here ({err}). "
                         f"Available: {[d.platform for d in jax.devices()]}")


def device_info(device):
    info = {"platform": device.platform, "device_kind": device.device_kind,
            "jax": jax.__version__, "host": platform.node(), "machine": platform.machine(),
            "processor": platform.processor() or platform.machine()}
    cc = getattr(device, "compute_capability", None)
    if cc is not None:
        info["compute_capability"] = str(cc)
    info["cpu_count"] = os.cpu_count()
    try:
        with open("/proc/cpuinfo") as f:
            info["cpu_model"] = next(line.split(":", 1)[1].strip() for line in f
                                     if line.startswith("model name"))
    except (OSError, StopIteration):
        pass
    if hasattr(os, "getloadavg"):                # other work on the machine skews CPU timings
        info["load_average_1_5_15min"] = [round(v, 2) for v in os.getloadavg()]
    return info


def target_row(target, shape, measured, threshold, passed, unit):
    """One evaluated target; ``passed`` is None when nothing was measured."""
    return {"target": target, "shape": list(shape) if shape else None, "measured": measured,
            "threshold": threshold, "unit": unit,
            "passed": None if measured is None else bool(passed)}


def on_gpu(results) -> bool:
    """Whether stored benchmark ``results`` were measured on a GPU."""
    return bool(results) and results.get("device", {}).get("platform") == "gpu"


def write_text(text, path):
    """Write ``text`` to ``path`` atomically (a temporary file beside it, then a rename)."""
    tmp = f"{path}.tmp-{os.getpid()}"
    with open(tmp, "w") as f:
        f.write(text)
    os.replace(tmp, path)
    print(f"wrote {path}")


def write_json(out, path):
    """``out`` as JSON at ``path`` (nothing when ``path`` is empty)."""
    if path:
        write_text(json.dumps(out, indent=1) + "\n", path)


def pallas_runs_here() -> tuple[bool, str]:
    """Whether the Pallas kernel can be timed on this GPU (compute capability >= 8.0, and it
    imports, lowers, compiles and runs), and why not."""
    from ..scan import pallas as scan_pallas
    ok, why = scan_pallas.capability_ok(scan_pallas.device_capability())
    return scan_pallas.kernel_status("gpu") if ok else (ok, why)


def want_pallas_rows(choice: str, platform_: str) -> bool:
    """Whether a benchmark times the kernel's rows: ``choice`` is ``--pallas`` (``yes``: also on
    a CPU, in Pallas interpret mode; ``no``; ``auto``: on a GPU where the kernel runs, with a
    notice where it cannot)."""
    if choice != "auto":
        return choice == "yes"
    if platform_ != "gpu":
        return False
    ok, why = pallas_runs_here()
    if not ok:
        print(f"pallas rows left out: {why}")
    return ok
