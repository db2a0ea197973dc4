"""What the scan benchmark (``scan``) and the layer benchmark (``layer``) share: the
papers' scan, timing, compilation and memory, the device, the targets' row format, and
writing results. Neither benchmark imports the other's private names."""
from __future__ import annotations

import functools
import json
import os
import pathlib
import platform
import statistics
import subprocess
import time

import jax
import jax.numpy as jnp
from jax import lax

from .. import _io
from ..scan import binary_operator

#: complex64, time-invariant λ: the shapes of the GPU issue's bandwidth and speed-up targets.
GPU_EXTRA_SHAPES = [(16, 16384, 256), (64, 4096, 256), (32, 1024, 512), (1, 65536, 64)]
#: float32, time-varying a: the shapes of the comparison with accelerated-scan.
TV_SHAPES = [(8, 4096, 1024), (16, 16384, 256), (1, 65536, 1024)]
COPY_BYTES = 1 << 30
COPY_REPEATS = 20


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


def median_time(fn, *args, repeats: int):
    """Median wall time of ``repeats`` synchronised calls of ``fn(*args)`` after a warm-up."""
    block(fn(*args))
    times = []
    for _ in range(repeats):
        t0 = time.perf_counter()
        block(fn(*args))
        times.append(time.perf_counter() - t0)
    return statistics.median(times)


def pallas_copy(x2d, *, interpret: bool):
    """A plain copy kernel (one read, one write per element) in Pallas: the copy rate a Pallas
    kernel can reach on this device."""
    from jax.experimental import pallas as pl
    rows, cols = x2d.shape
    block = (8, cols)
    params = None
    if not interpret:
        from jax.experimental.pallas import triton as plgpu
        from ..scan.pallas_triton import quiet_triton_deprecation
        quiet_triton_deprecation()
        cls = getattr(plgpu, "CompilerParams", None) or plgpu.TritonCompilerParams
        params = cls(num_warps=8, num_stages=1)

    def kernel(x_ref, y_ref):
        y_ref[...] = x_ref[...]
    spec = pl.BlockSpec(block, lambda i: (i, 0))
    return pl.pallas_call(kernel, out_shape=jax.ShapeDtypeStruct(x2d.shape, x2d.dtype),
                          grid=(rows // block[0],), in_specs=[spec], out_specs=spec,
                          interpret=interpret, compiler_params=params, name="lrnn_copy")(x2d)


def copy_bandwidth(device, nbytes: int = COPY_BYTES, repeats: int = COPY_REPEATS) -> dict:
    """Device copy rate in GB/s, bytes read + bytes written, median of ``repeats`` runs.

    Two copies: XLA's ``x * 1.0001`` and, on a GPU, a Pallas copy kernel; ``GBps`` is the
    higher of the two (the fairer floor for "fraction of copy")."""
    n = max(8 * 1024, nbytes // 4 // (8 * 1024) * (8 * 1024))
    x = jax.device_put(jnp.arange(n, dtype=jnp.float32), device)
    out = {"bytes": 4 * n, "repeats": repeats, "statistic": "median"}
    xla = jax.jit(lambda v: v * 1.0001).lower(x).compile()
    out["xla_mul_GBps"] = 2 * 4 * n / median_time(xla, x, repeats=repeats) / 1e9
    if device.platform == "gpu":
        x2d = x.reshape(-1, 1024)
        try:
            kernel = jax.jit(functools.partial(pallas_copy, interpret=False)).lower(x2d).compile()
            out["pallas_copy_GBps"] = 2 * 4 * n / median_time(kernel, x2d, repeats=repeats) / 1e9
        except Exception as err:                                    # noqa: BLE001
            out["pallas_copy_error"] = f"{type(err).__name__}: {str(err)[:200]}"
    del x
    out["GBps"] = max(v for k, v in out.items() if k.endswith("_GBps"))
    return out


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


#: The first line of the targets table (``bench scan --targets-md``, ``bench targets --out``):
#: how those commands recognise a table they wrote.
TARGETS_HEADER = "| target | shape (B, L, N) | measured | verdict |"


def output_spec(kind: str) -> dict:
    """What ``lrnn bench <kind> --out`` writes and may replace: ``scan`` and ``layer`` a JSON
    file with ``"benchmark": kind``; ``targets`` a Markdown table starting with
    :data:`TARGETS_HEADER`. The keyword arguments of :func:`lrnn._io.output_argument`."""
    if kind == "targets":
        return dict(suffixes=(".md",), owned_by=_io.first_line_is(TARGETS_HEADER),
                    command="lrnn bench (a targets table)")
    return dict(suffixes=(".json",), owned_by=_io.json_field_is("benchmark", kind),
                command=f"lrnn bench {kind}")


def write_text(text, path, *, kind: str, what: str = "--out"):
    """Write ``text`` to ``path`` atomically, after checking once more that ``path`` is new or
    an earlier output of ``lrnn bench <kind>`` (:func:`output_spec`)."""
    _io.replace_own(path, text, what=what, **output_spec(kind))
    print(f"wrote {path}")


def write_json(out, path):
    """``out`` (with ``"benchmark": kind``) as JSON at ``path`` (nothing when ``path`` is
    empty)."""
    if path:
        write_text(json.dumps(out, indent=1) + "\n", path, kind=out["benchmark"])


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


# ----------------------------------------------------------------------------------------
# The command lines' helpers
# ----------------------------------------------------------------------------------------

def git_commit():
    """The commit the code runs from: ``$LRNN_COMMIT`` if set (a copy without .git), else
    ``git rev-parse`` of the package's checkout, with ``+dirty`` for local changes."""
    if os.environ.get("LRNN_COMMIT"):
        return os.environ["LRNN_COMMIT"]
    here = pathlib.Path(__file__).resolve().parent
    try:
        sha = subprocess.run(["git", "rev-parse", "--short", "HEAD"], cwd=here, text=True,
                             capture_output=True, timeout=10).stdout.strip()
        dirty = subprocess.run(["git", "status", "--porcelain", "--untracked-files=no"],
                               cwd=here, text=True, capture_output=True, timeout=10).stdout.strip()
    except (OSError, subprocess.SubprocessError):
        return None
    return (sha + ("+dirty" if dirty else "")) if sha else None


def parse_shapes(text):
    """``"8x1024x256,1x65536x64"`` -> ``[(8, 1024, 256), (1, 65536, 64)]``."""
    shapes = []
    for item in text.split(","):
        parts = item.strip().split("x")
        try:
            shape = tuple(int(v) for v in parts)
        except ValueError:
            shape = ()
        if len(shape) != 3 or min(shape) < 1:
            raise SystemExit(f"--shapes: got {item!r} in {text!r}, expected B×L×N with three "
                             "positive integers, e.g. 8x1024x256")
        shapes.append(shape)
    return shapes


def require_positive(args, *names):
    """``--repeats 0`` or ``--n -4``: a clear error naming the option and the value."""
    for name in names:
        value = getattr(args, name.replace("-", "_"), None)
        values = value if isinstance(value, list) else [value]
        for v in values:
            if v is not None and v < 1:
                raise SystemExit(f"--{name}: got {v!r}, expected a positive integer")
