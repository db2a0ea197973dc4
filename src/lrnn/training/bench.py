"""Benchmarks: ``python -m lrnn.bench scan`` and ``python -m lrnn.bench layer``.

    python -m lrnn.bench scan    [--device cpu|gpu] [--out FILE.json] [--lengths 1024,4096,16384]
    python -m lrnn.bench layer   [--device cpu|gpu] [--out FILE.json] [--d-model 256] ...
    python -m lrnn.bench targets --scan FILE.json [--layer FILE.json]
    python -m lrnn.bench plans   [--device gpu] [--block-n 32,64,128] [--chunks 256,512,...]

``scan`` times every ``linear_scan`` method and the papers' code on complex64 inputs
``(B, L, N)`` with a time-invariant λ (the LRU/RotRNN case):

* ``paper: associative_scan`` — LRU appendix A: λ repeated for every step (``jnp.repeat``),
  ``jax.lax.associative_scan`` with the diagonal operator, differentiated by JAX autodiff;
* ``paper: lax.scan`` — a plain ``lax.scan`` loop, differentiated by autodiff.

For each it reports compile time (lowering + XLA compilation, separately), forward time and
forward+backward time (a ``jax.vjp`` with a fixed cotangent: the cost of one training step of
the scan), both the best and the median of ``--repeats`` runs after a warm-up call; elements
per second; GB/s counting the bytes that must move (``b`` read and ``x`` written, plus ``a``
when it is time-varying) and that rate as a fraction of a device-to-device copy measured in the
same run; and memory.

Memory ("peak") is XLA's static buffer assignment of the compiled executable
(``jax.jit(f).lower(...).compile().memory_analysis()``): ``argument + output + temp − alias``
bytes, i.e. everything the executable holds at once at most. It is exact for what XLA
allocates and needs no run; it does not include the allocator's fragmentation. XLA's own
``peak_memory_in_bytes`` is stored beside it.

``--device gpu`` adds the shapes of the GPU issue ((16, 16384, 256), (1, 65536, 64),
(32, 1024, 512)) and the ``pallas`` method; on a CPU ``pallas`` would run in interpret mode,
which measures the interpreter, not the kernel, so it is left out there.

``targets`` evaluates the GPU issue's targets (:data:`SCAN_TARGETS`, compile time, accuracy at
L = 65 536, layer speed-up) on stored results and prints which are met; a target the results
do not measure is printed as "not measured", never estimated. ``scan`` and ``layer`` store the
same evaluation in their JSON under ``"targets"``. ``plans`` times the Pallas kernel for a
grid of plans (channels per program × time steps per chunk) at each shape, next to the plan
``scan_pallas.plan`` picks, which is what tuning ``TARGET_PROGRAMS`` and ``MIN_CHUNK`` needs.
"""
from __future__ import annotations

import argparse
import datetime as _dt
import json
import math
import platform
import statistics
import sys
import time

import jax
import jax.numpy as jnp
from jax import lax

from ..scan import binary_operator, choose_method, linear_scan

GPU_EXTRA_SHAPES = [(16, 16384, 256), (1, 65536, 64), (32, 1024, 512)]


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


def scan_rows(device_kind: str):
    """(label, method or None, function(lam, bu)) for every row of the scan table."""
    methods = ["sequential", "associative", "chunked", "auto"]
    if device_kind == "gpu":
        methods.insert(3, "pallas")
    rows = [(m, m, (lambda m: lambda lam, bu: linear_scan(lam, bu, method=m))(m))
            for m in methods]
    rows.append(("paper: associative_scan", None, paper_associative_scan))
    rows.append(("paper: lax.scan", None, paper_lax_scan))
    return rows


# ----------------------------------------------------------------------------------------
# Measuring
# ----------------------------------------------------------------------------------------

def _block(tree):
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


def time_call(compiled, *args, repeats: int):
    """Best and median wall time of ``repeats`` calls after one warm-up call."""
    _block(compiled(*args))
    times = []
    for _ in range(repeats):
        t0 = time.perf_counter()
        _block(compiled(*args))
        times.append(time.perf_counter() - t0)
    return min(times), statistics.median(times)


def copy_bandwidth(device, nbytes: int = 1 << 28, repeats: int = 5) -> float:
    """Device-to-device copy rate in GB/s (bytes read + bytes written per second)."""
    n = nbytes // 4
    x = jax.device_put(jnp.arange(n, dtype=jnp.float32), device)
    copy = jax.jit(lambda v: v + 0.0).lower(x).compile()    # one read, one write per element
    best, _ = time_call(copy, x, repeats=repeats)
    return 2 * n * 4 / best / 1e9


def make_inputs(shape, device, seed=0):
    """λ on the LRU ring (|λ| in [0.9, 0.999]) and unit complex Gaussian inputs, complex64."""
    b_, length, n = shape
    key_r, key_t, key_b = jax.random.split(jax.random.PRNGKey(seed), 3)
    r = jax.random.uniform(key_r, (n,), minval=0.9, maxval=0.999)
    theta = jax.random.uniform(key_t, (n,), maxval=2 * math.pi)
    lam = (r * jnp.exp(1j * theta)).astype(jnp.complex64)
    parts = jax.random.normal(key_b, (2, b_, length, n), jnp.float32)
    bu = lax.complex(parts[0], parts[1]) / math.sqrt(2)
    return jax.device_put(lam, device), jax.device_put(bu, device)


def time_interleaved(calls, *, repeats: int):
    """Best and median wall time of each ``(compiled, args)`` in ``calls``, timed round-robin
    (one call of each per round, after a warm-up round) so that a change in the machine's load
    during the run hits every row alike."""
    for compiled, args in calls:
        _block(compiled(*args))
    times = [[] for _ in calls]
    for _ in range(repeats):
        for i, (compiled, args) in enumerate(calls):
            t0 = time.perf_counter()
            _block(compiled(*args))
            times[i].append(time.perf_counter() - t0)
    return [(min(t), statistics.median(t)) for t in times]


def bench_scan_shape(shape, rows, device, *, repeats, copy_gbps, backward=True):
    lam, bu = make_inputs(shape, device)
    g = jax.device_put(jnp.conj(bu) * 0.5, device)            # a fixed cotangent
    elements = math.prod(shape)
    moved = 2 * elements * bu.dtype.itemsize                   # read b, write x
    results, fwd, fwdbwd = [], [], []
    reference = None
    for label, method, fn in rows:
        row = {"shape": list(shape), "dtype": "complex64", "a": "time-invariant (N,)",
               "label": label, "method": method}
        if method == "auto":
            row["auto_picks"] = choose_method(shape, backend=device.platform)
        compiled, row["compile_fwd_s"], row["memory_fwd"] = compile_and_memory(fn, lam, bu)
        x = compiled(lam, bu)
        if reference is None:
            reference = x
        scale = float(jnp.max(jnp.abs(reference)))
        row["max_abs_err_vs_first_row"] = float(jnp.max(jnp.abs(x - reference))) / scale
        del x
        fwd.append((compiled, (lam, bu)))
        if backward:
            def fwd_bwd(lam, bu, g, fn=fn):
                _, vjp = jax.vjp(fn, lam, bu)
                return vjp(g)
            compiled, row["compile_fwdbwd_s"], row["memory_fwdbwd"] = \
                compile_and_memory(fwd_bwd, lam, bu, g)
            fwdbwd.append((compiled, (lam, bu, g)))
        results.append(row)
    del reference
    for row, (best, median) in zip(results, time_interleaved(fwd, repeats=repeats)):
        row["fwd_s"], row["fwd_median_s"] = best, median
        row["elements_per_s"] = elements / best
        row["fwd_GBps"] = moved / best / 1e9
        row["fwd_copy_fraction"] = row["fwd_GBps"] / copy_gbps
    del fwd
    if backward:
        for row, (best, median) in zip(results, time_interleaved(fwdbwd, repeats=repeats)):
            row["fwdbwd_s"], row["fwdbwd_median_s"] = best, median
    for row in results:
        print(_format_row(row), flush=True)
    return results


def _format_row(row):
    mem = lambda d: f"{d['peak_bytes'] / 2**20:9.1f}" if d else "      n/a"   # noqa: E731
    label = row["label"] + (f" → {row['auto_picks']}" if "auto_picks" in row else "")
    fb = f"{row['fwdbwd_s'] * 1e3:10.2f}" if "fwdbwd_s" in row else "       n/a"
    fbmem = mem(row.get("memory_fwdbwd"))
    return (f"{str(tuple(row['shape'])):>18} {label:<26} {row['compile_fwd_s']:7.2f} "
            f"{row['fwd_s'] * 1e3:10.2f} {fb} {row['elements_per_s'] / 1e9:8.3f} "
            f"{row['fwd_GBps']:7.2f} {row['fwd_copy_fraction']:6.2f} {mem(row['memory_fwd'])} "
            f"{fbmem}")


HEADER = (f"{'shape (B,L,N)':>18} {'method':<26} {'compile':>7} {'fwd ms':>10} {'fwd+bwd ms':>10} "
          f"{'Gelem/s':>8} {'GB/s':>7} {'copy%':>6} {'fwd MiB':>9} {'f+b MiB':>9}")


def scan_checks(results):
    """Issue 2's criteria, evaluated on the measurements."""
    checks = []
    for shape in sorted({tuple(r["shape"]) for r in results}):
        rows = [r for r in results if tuple(r["shape"]) == shape]
        methods = [r for r in rows if r["method"] not in (None, "auto")]
        auto = next((r for r in rows if r["method"] == "auto"), None)
        paper = next((r for r in rows if r["label"] == "paper: associative_scan"), None)
        entry = {"shape": list(shape)}
        for key in ("fwd_s", "fwdbwd_s"):
            if auto is None or key not in auto:
                continue
            fastest = min(methods, key=lambda r: r[key])
            entry[f"{key}_fastest_method"] = fastest["method"]
            entry[f"{key}_auto_over_fastest"] = auto[key] / fastest[key]
            entry[f"{key}_auto_within_10pct"] = auto[key] <= 1.10 * fastest[key]
            # "auto" runs the same code as the method it picks; whether that method is within
            # 10% of the fastest is the decision's quality without the noise of a second timing.
            picked = next((r for r in methods if r["method"] == auto.get("auto_picks")), None)
            if picked is not None:
                entry[f"{key}_picked_over_fastest"] = picked[key] / fastest[key]
                entry[f"{key}_picked_within_10pct"] = picked[key] <= 1.10 * fastest[key]
        if auto is not None and paper is not None and auto.get("memory_fwdbwd") \
                and paper.get("memory_fwdbwd"):
            entry["fwdbwd_peak_auto_bytes"] = auto["memory_fwdbwd"]["peak_bytes"]
            entry["fwdbwd_peak_paper_associative_bytes"] = paper["memory_fwdbwd"]["peak_bytes"]
            entry["fwdbwd_memory_below_paper_associative"] = (
                auto["memory_fwdbwd"]["peak_bytes"] < paper["memory_fwdbwd"]["peak_bytes"])
        checks.append(entry)
    return checks


# The GPU issue's targets: (name, shape, kind, threshold). "copy": fraction of the measured
# copy bandwidth reached by the pallas forward; "fwd"/"fwdbwd": time of the papers'
# associative scan over the pallas time.
SCAN_TARGETS = [
    ("forward at ≥ 60% of copy bandwidth", (16, 16384, 256), "copy", 0.60),
    ("forward ≥ 5× paper associative_scan", (16, 16384, 256), "fwd", 5.0),
    ("forward+backward ≥ 4× paper associative_scan", (16, 16384, 256), "fwdbwd", 4.0),
    ("forward ≥ 3× paper associative_scan", (1, 65536, 64), "fwd", 3.0),
]
LAYER_TARGET = 2.0           # layer step: auto at least 2× the papers' associative scan
COMPILE_TARGET_S = 5.0       # every compile of the pallas rows
#: max |x_pallas - x_sequential| / max |x_sequential| at L = 65 536: float32 accuracy.
ACCURACY_TARGET = 2e-4


def _target(target, shape, measured, threshold, passed):
    return {"target": target, "shape": list(shape) if shape else None, "measured": measured,
            "threshold": threshold, "passed": None if measured is None else bool(passed)}


def _on_gpu(results) -> bool:
    return bool(results) and results["device"]["platform"] == "gpu"


def scan_targets(scan=None):
    """The scan targets of :func:`gpu_targets`, from ``python -m lrnn.bench scan`` JSON."""
    rows = scan["results"] if _on_gpu(scan) else []

    def find(shape, pred):
        return next((r for r in rows if tuple(r["shape"]) == shape and pred(r)), None)

    out = []
    for name, shape, kind, threshold in SCAN_TARGETS:
        ours = find(shape, lambda r: r["method"] == "pallas")
        paper = find(shape, lambda r: r["label"] == "paper: associative_scan")
        measured = None
        if kind == "copy" and ours is not None:
            measured = ours["fwd_copy_fraction"]
        elif ours is not None and paper is not None and f"{kind}_s" in ours and f"{kind}_s" in paper:
            measured = paper[f"{kind}_s"] / ours[f"{kind}_s"]
        out.append(_target(name, shape, measured, threshold,
                           measured is not None and measured >= threshold))
    pallas_rows = [r for r in rows if r["method"] == "pallas"]
    compiles = [r[k] for r in pallas_rows for k in ("compile_fwd_s", "compile_fwdbwd_s") if k in r]
    slowest = max(compiles) if compiles else None
    out.append(_target("every pallas compile < 5 s", None, slowest, COMPILE_TARGET_S,
                       slowest is not None and slowest < COMPILE_TARGET_S))
    long_rows = [r for r in pallas_rows if r["shape"][1] >= 65536]
    err = max(r["max_abs_err_vs_first_row"] for r in long_rows) if long_rows else None
    if long_rows and rows[0]["method"] != "sequential":
        err = None                       # the error column is relative to the first row
    out.append(_target("matches sequential at L = 65 536 (relative error)", (1, 65536, 64), err,
                       ACCURACY_TARGET, err is not None and err <= ACCURACY_TARGET))
    return out


def layer_targets(layer=None):
    """The layer targets of :func:`gpu_targets`, from ``python -m lrnn.bench layer`` JSON."""
    speed = {}
    if _on_gpu(layer) and all(r["d_model"] == 256 and r["d_state"] == 256 and r["batch"] == 32
                              and r["length"] == 4096 for r in layer["results"]):
        speed = layer["speedup_auto_over_paper"]
    return [_target(f"{name} layer step ≥ 2× paper associative_scan", None, speed.get(name),
                    LAYER_TARGET, speed.get(name) is not None and speed[name] >= LAYER_TARGET)
            for name in ("lru", "rotrnn")]


def gpu_targets(scan=None, layer=None):
    """The GPU issue's targets evaluated on stored benchmark results.

    Args:
      scan: the JSON dict written by ``python -m lrnn.bench scan`` (or ``None``).
      layer: the JSON dict written by ``python -m lrnn.bench layer`` (or ``None``).

    Returns:
      a list of dicts ``{"target", "shape", "measured", "threshold", "passed"}``, one per
      target; ``measured`` and ``passed`` are ``None`` where the results hold no measurement
      of it. The targets are GPU targets: results from another platform, and layer results
      at other sizes than the issue's, measure none of them. Never estimates.
    """
    return scan_targets(scan) + layer_targets(layer)


def targets_markdown(targets, device=None):
    """``gpu_targets`` as a Markdown table (for the chapter and the command line)."""
    lines = ["| target | shape (B, L, N) | measured | met |", "|---|---|---|---|"]
    for t in targets:
        shape = "×".join(map(str, t["shape"])) if t["shape"] else "–"
        if t["measured"] is None:
            measured, met = "not measured", "–"
        else:
            measured = (f"{t['measured']:.1%}" if "bandwidth" in t["target"]
                        else f"{t['measured']:.2e}" if "error" in t["target"]
                        else f"{t['measured']:.2f} s" if "compile" in t["target"]
                        else f"{t['measured']:.2f}×")
            met = "yes" if t["passed"] else "**no**"
        lines.append(f"| {t['target']} | {shape} | {measured} | {met} |")
    if device:
        lines.append(f"\nResults read from: {device}.")
    return "\n".join(lines)


def device_info(device):
    info = {"platform": device.platform, "device_kind": device.device_kind,
            "jax": jax.__version__, "host": platform.node(), "machine": platform.machine(),
            "processor": platform.processor() or platform.machine()}
    cc = getattr(device, "compute_capability", None)
    if cc is not None:
        info["compute_capability"] = str(cc)
    import os
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


def _parse_shapes(text):
    """``"8x1024x256,1x65536x64"`` -> ``[(8, 1024, 256), (1, 65536, 64)]``."""
    return [tuple(int(v) for v in shape.split("x")) for shape in text.split(",")]


def run_scan(args):
    device = _device(args.device)
    shapes = (_parse_shapes(args.shapes) if args.shapes else
              [(args.batch, length, args.n) for length in args.lengths])
    if args.device == "gpu" and not args.shapes:
        shapes += GPU_EXTRA_SHAPES
    rows = scan_rows(device.platform)
    if args.methods:
        keep = set(args.methods.split(","))
        rows = [r for r in rows if r[0] in keep or (r[1] in keep)]
    load_start = _loadavg()
    copy_gbps = copy_bandwidth(device, nbytes=args.copy_bytes)
    print(f"device: {device.platform} ({device.device_kind}); copy bandwidth "
          f"{copy_gbps:.1f} GB/s; times are the best of {args.repeats} after a warm-up")
    print(HEADER)
    results = []
    with jax.default_device(device):
        for shape in shapes:
            results += bench_scan_shape(shape, rows, device, repeats=args.repeats,
                                        copy_gbps=copy_gbps, backward=not args.no_backward)
    out = {
        "benchmark": "scan",
        "command": "python -m lrnn.bench " + " ".join(args.argv),
        "date_utc": _dt.datetime.now(_dt.timezone.utc).isoformat(timespec="seconds"),
        "device": device_info(device),
        "load_average_at_start": load_start,
        "copy_bandwidth_GBps": copy_gbps,
        "repeats": args.repeats,
        "definitions": {
            "fwd_s": "best wall time of `repeats` forward calls after a warm-up (median beside); "
                     "the rows of one shape are timed round-robin",
            "fwdbwd_s": "best wall time of jax.vjp(scan)(cotangent): forward + backward",
            "compile_fwd_s": "jax.jit(f).lower(...).compile() wall time, forward",
            "fwd_GBps": "2·B·L·N·8 bytes (b read, x written; complex64) / fwd_s",
            "peak_bytes": "argument + output + temp - alias bytes of XLA's buffer assignment "
                          "(compiled.memory_analysis())",
            "max_abs_err_vs_first_row": "max |x - x_sequential| / max |x_sequential|",
        },
        "results": results,
        "checks": scan_checks(results),
    }
    out["targets"] = scan_targets(out)
    for c in out["checks"]:
        print("check", json.dumps(c))
    for t in out["targets"]:
        if t["measured"] is not None:
            print("target", json.dumps(t))
    _write(out, args.out)
    return out


# ----------------------------------------------------------------------------------------
# Plan sweep: the Pallas kernel's cut into programs (block_n channels × chunk steps), timed.
# ----------------------------------------------------------------------------------------

def run_plans(args):
    """Time ``method="pallas"`` forward for every (block_n, chunk) on a grid, per shape, beside
    the plan that ``scan_pallas.plan`` picks: the data for tuning ``TARGET_PROGRAMS`` and
    ``MIN_CHUNK`` on a GPU."""
    from ..scan import pallas as scan_pallas
    device = _device(args.device)
    if device.platform != "gpu" and not args.interpret:
        raise SystemExit("plans: times the Pallas kernel, which compiles only on a GPU; pass "
                         "--interpret to smoke-test the sweep elsewhere (it then times the "
                         "interpreter, not the kernel)")
    interpret = device.platform != "gpu"
    shapes = _parse_shapes(args.shapes) if args.shapes else GPU_EXTRA_SHAPES
    print(f"device: {device.platform} ({device.device_kind}); pallas forward, complex64, best of "
          f"{args.repeats}{' (interpret mode: not kernel timings)' if interpret else ''}")
    print(f"{'shape (B,L,N)':>18} {'block_n':>7} {'chunk':>6} {'chunks':>6} {'programs':>8} "
          f"{'compile s':>9} {'fwd ms':>9} {'GB/s':>8} {'rel. err':>9}")
    results, best = [], {}
    with jax.default_device(device):
        for shape in shapes:
            lam, bu = make_inputs(shape, device)
            reference = linear_scan(lam, bu, method="sequential")
            scale = float(jnp.max(jnp.abs(reference)))
            default = scan_pallas.plan(*shape)
            grid = {default}
            for block_n in args.block_n:
                for chunk in args.chunks + [shape[1]]:
                    grid.add(scan_pallas.plan(*shape, block_n=block_n, chunk=chunk))
            calls, rows = [], []
            for block_n, chunk, n_chunks in sorted(grid):
                fn = (lambda bn, ch: lambda lam, bu: scan_pallas.pallas_scan(
                    lam, bu, False, block_n=bn, chunk=ch, interpret=interpret))(block_n, chunk)
                compiled, compile_s, _ = compile_and_memory(fn, lam, bu)
                err = float(jnp.max(jnp.abs(compiled(lam, bu) - reference))) / scale
                programs = shape[0] * -(-shape[2] // block_n) * n_chunks
                rows.append({"shape": list(shape), "block_n": block_n, "chunk": chunk,
                             "n_chunks": n_chunks, "programs": programs,
                             "default": (block_n, chunk, n_chunks) == default,
                             "compile_s": compile_s, "rel_err_vs_sequential": err})
                calls.append((compiled, (lam, bu)))
            moved = 2 * math.prod(shape) * bu.dtype.itemsize
            for row, (t, median) in zip(rows, time_interleaved(calls, repeats=args.repeats)):
                row["fwd_s"], row["fwd_median_s"], row["fwd_GBps"] = t, median, moved / t / 1e9
            for row in sorted(rows, key=lambda r: r["fwd_s"]):
                print(f"{str(tuple(shape)):>18} {row['block_n']:7d} {row['chunk']:6d} "
                      f"{row['n_chunks']:6d} {row['programs']:8d} {row['compile_s']:9.2f} "
                      f"{row['fwd_s'] * 1e3:9.3f} {row['fwd_GBps']:8.1f} "
                      f"{row['rel_err_vs_sequential']:9.1e}{'  <- default plan' if row['default'] else ''}",
                      flush=True)
            fastest = min(rows, key=lambda r: r["fwd_s"])
            chosen = next(r for r in rows if r["default"])
            best["x".join(map(str, shape))] = {
                "fastest": {k: fastest[k] for k in ("block_n", "chunk", "n_chunks", "fwd_s")},
                "default": {k: chosen[k] for k in ("block_n", "chunk", "n_chunks", "fwd_s")},
                "default_over_fastest": chosen["fwd_s"] / fastest["fwd_s"]}
            results += rows
    for shape, b in best.items():
        print(f"{shape}: default plan {b['default_over_fastest']:.2f}x the fastest "
              f"(block_n={b['fastest']['block_n']}, chunk={b['fastest']['chunk']})")
    out = {"benchmark": "plans", "command": "python -m lrnn.bench " + " ".join(args.argv),
           "date_utc": _dt.datetime.now(_dt.timezone.utc).isoformat(timespec="seconds"),
           "device": device_info(device), "interpret": interpret, "repeats": args.repeats,
           "constants": {"TARGET_PROGRAMS": scan_pallas.TARGET_PROGRAMS,
                         "MIN_CHUNK": scan_pallas.MIN_CHUNK, "MAX_BLOCK_N": scan_pallas.MAX_BLOCK_N},
           "results": results, "best": best}
    _write(out, args.out)
    return out


# ----------------------------------------------------------------------------------------

def _loadavg():
    import os
    return [round(v, 2) for v in os.getloadavg()] if hasattr(os, "getloadavg") else None


def _device(kind):
    if kind is None:
        return jax.devices()[0]
    try:
        return jax.devices(kind)[0]
    except RuntimeError as err:
        raise SystemExit(f"--device {kind}: no such device here ({err}). "
                         f"Available: {[d.platform for d in jax.devices()]}")


def _write(out, path):
    if path:
        with open(path, "w") as f:
            json.dump(out, f, indent=1)
            f.write("\n")
        print(f"wrote {path}")


def parser():
    p = argparse.ArgumentParser(prog="python -m lrnn.bench", description=__doc__.split("\n")[0])
    sub = p.add_subparsers(dest="what", required=True)
    s = sub.add_parser("scan", help="time and memory of every linear_scan method")
    s.add_argument("--device", choices=["cpu", "gpu"], default=None)
    s.add_argument("--out", default=None, help="write the results as JSON here")
    s.add_argument("--batch", type=int, default=8)
    s.add_argument("--n", type=int, default=256, help="channels N (complex64)")
    s.add_argument("--lengths", type=lambda v: [int(x) for x in v.split(",")],
                   default=[1024, 4096, 16384])
    s.add_argument("--shapes", default=None, help="e.g. 8x1024x256,1x65536x64 (replaces the above)")
    s.add_argument("--methods", default=None, help="comma-separated subset of the row labels")
    s.add_argument("--repeats", type=int, default=5)
    s.add_argument("--copy-bytes", type=int, default=1 << 28)
    s.add_argument("--no-backward", action="store_true")
    s.set_defaults(run=run_scan)
    from . import bench_layer
    bench_layer.add_parser(sub)
    pp = sub.add_parser("plans", help="time the Pallas kernel's plans (block_n × chunk) per shape")
    pp.add_argument("--device", choices=["cpu", "gpu"], default=None)
    pp.add_argument("--out", default=None)
    pp.add_argument("--shapes", default=None, help="default: the GPU issue's three shapes")
    pp.add_argument("--block-n", type=lambda v: [int(x) for x in v.split(",")],
                    default=[32, 64, 128], help="channels per program (powers of two)")
    pp.add_argument("--chunks", type=lambda v: [int(x) for x in v.split(",")],
                    default=[128, 256, 512, 1024, 2048, 4096],
                    help="time steps per chunk (the sequence length, single pass, is always added)")
    pp.add_argument("--repeats", type=int, default=5)
    pp.add_argument("--interpret", action="store_true",
                    help="allow a run without a GPU (interpret mode; smoke test only)")
    pp.set_defaults(run=run_plans)
    t = sub.add_parser("targets", help="the GPU issue's targets, evaluated on stored JSON results")
    t.add_argument("--scan", default=None, help="JSON written by `lrnn.bench scan --out`")
    t.add_argument("--layer", default=None, help="JSON written by `lrnn.bench layer --out`")
    t.set_defaults(run=run_targets)
    return p


def run_targets(args):
    loaded = {}
    for name in ("scan", "layer"):
        path = getattr(args, name)
        if path:
            with open(path) as f:
                loaded[name] = json.load(f)
    targets = gpu_targets(loaded.get("scan"), loaded.get("layer"))
    devices = sorted({d["device"]["device_kind"] for d in loaded.values()})
    print(targets_markdown(targets, ", ".join(devices) or None))
    return targets


def main(argv=None):
    argv = list(sys.argv[1:] if argv is None else argv)
    args = parser().parse_args(argv)
    args.argv = argv
    return args.run(args)


def __getattr__(name):
    if name in ("papers_scan", "run_layer"):          # the layer benchmark lives in bench_layer
        from . import bench_layer
        return getattr(bench_layer, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


if __name__ == "__main__":
    main()
