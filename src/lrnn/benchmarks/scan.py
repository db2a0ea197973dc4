"""Benchmarks: ``python -m lrnn bench scan``, ``layer``, ``targets`` and ``plans``.

    python -m lrnn bench scan    [--device cpu|gpu] [--out FILE.json] [--targets-md FILE.md]
    python -m lrnn bench layer   [--device cpu|gpu] [--out FILE.json] [--d-model 256] ...
    python -m lrnn bench targets [--scan FILE.json] [--layer FILE.json] [--out FILE.md]
    python -m lrnn bench plans   --device gpu [--out FILE.jsonl]    (the kernel's tuning sweep)
    python -m lrnn bench gpu     --budget-s 420 --out DIR           (every GPU measurement)

``scan`` times every ``linear_scan`` method and the papers' code on complex64 inputs
``(B, L, N)`` with a time-invariant λ (the LRU/RotRNN case):

* ``paper: associative_scan`` — LRU appendix A: λ repeated for every step (``jnp.repeat``),
  ``jax.lax.associative_scan`` with the diagonal operator, differentiated by JAX autodiff;
* ``paper: lax.scan`` — a plain ``lax.scan`` loop, differentiated by autodiff (CPU only: on a
  GPU a step costs microseconds whatever its size);
* on a GPU, ``pallas kernel (re/im planes)``, the headline row (★): ``linear_scan_planes(...,
  method="pallas")``, planes in and out with its VJP on planes, which is what the LRU and RotRNN
  layers run; and beside it ``pallas`` (``linear_scan(..., method="pallas")`` on complex64
  arrays: XLA splits them into real and imaginary planes before the kernel and joins them
  after, 48 bytes moved per element instead of 16). Each row records its ``layout``.

For each it reports compile time, forward and forward+backward time (a ``jax.vjp`` with a fixed
cotangent), best and median of ``--repeats`` runs after a warm-up, the rows of one shape timed
round-robin; elements per second; GB/s counting the bytes that must move (``b`` read and ``x``
written) and that rate as a fraction of the copy bandwidth measured in the same run; the error
against ``method="sequential"``; and memory (``argument + output + temp − alias`` bytes of XLA's
buffer assignment, ``compiled.memory_analysis()``).

On a GPU it also times the float32 time-varying scans of the GPU issue against the peers, in the
same process, on the same data converted to their layouts, with their outputs checked against
ours: accelerated-scan's Triton kernel and flash-linear-attention's chunked HGRN, both PyTorch
(``pip install "lrnn[peers]"``; skipped with a one-line notice when absent).

The copy baseline moves 1 GiB (read + write counted), median of at least 20 runs, through XLA
(``x * 1.0001``) and, on a GPU, through a Pallas copy kernel; the higher rate is "copy".

``targets`` evaluates the GPU issue's targets on stored results and prints each as met, not met
or not measured (never estimated). ``plans`` times the kernel's tiles and chunkings at the GPU
shapes: the data behind ``lrnn.scan.pallas_tuning`` (``lrnn.benchmarks.plans``).

Every output (``--out``, ``--targets-md``) is checked as the command line is parsed, before any
work (``lrnn._io.output_argument``): a new file, or one this benchmark wrote (its JSON says
``"benchmark": <name>``; a targets table starts with :data:`TARGETS_HEADER`; a plans log's
first record is its head), written atomically; anything else is refused in one line. A new
subcommand registers its parser in :func:`parser` and its outputs the same way.
"""
from __future__ import annotations

import argparse
import dataclasses
import datetime as _dt
import json
import math
import os
import pathlib
import sys

import jax
import jax.numpy as jnp
from jax import lax

from ..scan import choose_method, linear_scan, linear_scan_planes
from .. import _io
from ._common import (COPY_BYTES, COPY_REPEATS, GPU_EXTRA_SHAPES,  # noqa: F401
                            TARGETS_HEADER, TV_SHAPES, block, compile_and_memory,
                            copy_bandwidth, device_info, git_commit, on_gpu, output_spec,
                            pallas_runs_here, paper_associative_scan, paper_lax_scan,
                            pick_device, target_row, time_interleaved, want_pallas_rows,
                            write_json, write_text)
from ._common import median_time as _median_time  # noqa: F401
from ._common import pallas_copy as _pallas_copy  # noqa: F401
from ._common import parse_shapes as _parse_shapes
from ._common import require_positive as _require_positive
from . import gpu as bench_gpu, layer as bench_layer, plans as bench_plans, step as bench_step
from .layer import layer_targets, papers_scan, run_layer  # noqa: F401 (lrnn bench layer)
from .plans import run_plans  # noqa: F401 (lrnn bench plans)

# ----------------------------------------------------------------------------------------
# Rows of the complex64 table
# ----------------------------------------------------------------------------------------

@dataclasses.dataclass
class Row:
    """One row: ``fwd(*args)`` and ``fwdbwd(*args, g)``; ``prepare(lam, bu, g)`` builds the
    arguments once, outside the timing; ``output`` turns ``fwd``'s result into ``x``."""
    label: str
    method: str | None
    fwd: object
    fwdbwd: object = None
    prepare: object = None
    output: object = None
    layout: str = "complex arrays"
    headline: bool = False


def _vjp_of(fn):
    def fwd_bwd(*args):
        *inputs, g = args
        _, vjp = jax.vjp(fn, *inputs)
        return vjp(g)
    return fwd_bwd


def _array_row(label, method, fn):
    return Row(label, method, fn, _vjp_of(fn), lambda lam, bu, g: ((lam, bu), (lam, bu, g)),
               lambda x: x)


#: the label of the rows that time the kernel's next design (TUNING.md "Next design"), planned
#: with ``pallas_tuning.design("time-parallel")``: predicted, not yet measured
TIME_PARALLEL = "pallas, time-parallel design"
TIME_PARALLEL_PLANES = "pallas kernel, time-parallel (planes)"


def in_design(fn, name: str):
    """``fn`` traced with the kernel planned by design ``name`` (``pallas_tuning.design``): the
    plan is read at trace time, so the whole call, its VJP included, runs inside."""
    from ..scan import pallas_tuning

    def traced(*args):
        with pallas_tuning.design(name):
            return fn(*args)
    return traced


def _planes_row(label="pallas kernel (re/im planes)", design="measured"):
    """``linear_scan_planes(..., method="pallas")``: planes in and out, forward and forward +
    VJP on planes, as the LRU and RotRNN layers run it (no split or join by XLA)."""
    def fwd(lam, b_re, b_im):
        return linear_scan_planes(lam, b_re, b_im, method="pallas")

    def prepare(lam, bu, g):
        planes = [jax.block_until_ready(v) for v in (jnp.real(bu), jnp.imag(bu))]
        # JAX's cotangent of x = x_re + i x_im is g_re - i g_im: the same linear functional
        cotangent = tuple(jax.block_until_ready(v) for v in (jnp.real(g), -jnp.imag(g)))
        return (lam, *planes), (lam, *planes, cotangent)

    return Row(label, "pallas", in_design(fwd, design), in_design(_vjp_of(fwd), design),
               prepare, lambda x: lax.complex(*x), layout="planes",
               headline=design == "measured")


def scan_rows(platform_: str, pallas: str = "auto"):
    """The rows of the complex64 table on this platform (on a GPU where the kernel cannot run,
    the pallas rows are left out with a notice). ``pallas="yes"`` adds the kernel's rows on a
    CPU too (Pallas interpret mode: slow, for testing); ``"no"`` leaves them out."""
    with_pallas = want_pallas_rows(pallas, platform_)
    methods = ["associative", "chunked", "auto"] if platform_ == "gpu" else \
        ["sequential", "associative", "chunked", "auto"]
    if with_pallas:
        methods.insert(methods.index("auto"), "pallas")
    rows = [_array_row(m, m, (lambda m: lambda lam, bu: linear_scan(lam, bu, method=m))(m))
            for m in methods]
    if with_pallas:
        rows.insert(methods.index("pallas"), _planes_row())   # the headline, then on arrays
        # the next design beside them (planes), to confirm or refute TUNING.md's predictions
        rows.insert(methods.index("pallas") + 2,
                    _planes_row(TIME_PARALLEL_PLANES, "time-parallel"))
    rows.append(_array_row("paper: associative_scan", None, paper_associative_scan))
    if platform_ != "gpu":
        rows.append(_array_row("paper: lax.scan", None, paper_lax_scan))
    return rows


# ----------------------------------------------------------------------------------------
# Measuring
# ----------------------------------------------------------------------------------------

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


def bench_scan_shape(shape, rows, device, *, repeats, copy_gbps, backward=True):
    lam, bu = make_inputs(shape, device)
    g = jax.device_put(jnp.conj(bu) * 0.5, device)            # a fixed cotangent
    elements = math.prod(shape)
    moved = 2 * elements * bu.dtype.itemsize                   # read b, write x
    reference = jax.jit(lambda lam, bu: linear_scan(lam, bu, method="sequential"))(lam, bu)
    scale = float(jnp.max(jnp.abs(reference)))
    results, fwd, fwdbwd = [], [], []
    for row_def in rows:
        row = {"shape": list(shape), "dtype": "complex64", "a": "time-invariant (N,)",
               "label": row_def.label, "method": row_def.method, "layout": row_def.layout,
               "headline": row_def.headline}
        if row_def.method == "auto":
            row["auto_picks"] = choose_method(shape, backend=device.platform,
                                              dtype=jnp.complex64)
        fwd_args, fwdbwd_args = row_def.prepare(lam, bu, g)
        compiled, row["compile_fwd_s"], row["memory_fwd"] = \
            compile_and_memory(row_def.fwd, *fwd_args)
        x = row_def.output(compiled(*fwd_args)).reshape(bu.shape)
        row["err_vs_sequential"] = float(jnp.max(jnp.abs(x - reference))) / scale
        del x
        fwd.append((compiled, fwd_args))
        if backward:
            compiled, row["compile_fwdbwd_s"], row["memory_fwdbwd"] = \
                compile_and_memory(row_def.fwdbwd, *fwdbwd_args)
            fwdbwd.append((compiled, fwdbwd_args))
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
            row["fwdbwd_over_fwd"] = best / row["fwd_s"]
    for row in results:
        print(_format_row(row), flush=True)
    return results


def _format_row(row):
    mem = lambda d: f"{d['peak_bytes'] / 2**20:9.1f}" if d else "      n/a"   # noqa: E731
    label = ("★ " if row.get("headline") else "") + row["label"] \
        + (f" → {row['auto_picks']}" if "auto_picks" in row else "")
    fb = f"{row['fwdbwd_s'] * 1e3:10.3f}" if "fwdbwd_s" in row else "       n/a"
    fbmem = mem(row.get("memory_fwdbwd"))
    return (f"{str(tuple(row['shape'])):>18} {label:<34} {row['compile_fwd_s']:7.2f} "
            f"{row['fwd_s'] * 1e3:10.3f} {fb} {row['elements_per_s'] / 1e9:8.3f} "
            f"{row['fwd_GBps']:7.1f} {row['fwd_copy_fraction']:6.2f} {mem(row['memory_fwd'])} "
            f"{fbmem}")


HEADER = (f"{'shape (B,L,N)':>18} {'method':<34} {'compile':>7} {'fwd ms':>10} {'fwd+bwd ms':>10} "
          f"{'Gelem/s':>8} {'GB/s':>7} {'copy%':>6} {'fwd MiB':>9} {'f+b MiB':>9}")


# ----------------------------------------------------------------------------------------
# Float32, time-varying a: lrnn against the peers (PyTorch), same data, same process
# ----------------------------------------------------------------------------------------

def make_tv_inputs(shape, device, seed=1):
    """Gates in [0.9, 1) and unit Gaussian inputs, float32, (B, L, N)."""
    key_a, key_b, key_g = jax.random.split(jax.random.PRNGKey(seed), 3)
    a = jax.random.uniform(key_a, shape, minval=0.9, maxval=1.0)
    b = jax.random.normal(key_b, shape)
    g = jax.random.normal(key_g, shape)
    return tuple(jax.device_put(v, device) for v in (a, b, g))


def bench_tv_shape(shape, device, *, repeats, copy_gbps, peers):
    from . import peers as bench_peers
    a, b, g = make_tv_inputs(shape, device)
    elements = math.prod(shape)
    moved = 3 * elements * 4                                    # read a and b, write x
    kernel = device.platform == "gpu" and pallas_runs_here()[0]
    methods = ((["associative"] + (["pallas", TIME_PARALLEL] if kernel else []) + ["auto"])
               if device.platform == "gpu" else ["sequential", "associative", "auto"])
    ours, calls, results = None, [], []
    for label in methods:
        method = "pallas" if label == TIME_PARALLEL else label
        fn = (lambda m: lambda a, b: linear_scan(a, b, method=m))(method)
        if label == TIME_PARALLEL:
            fn = in_design(fn, "time-parallel")
        row = {"shape": list(shape), "dtype": "float32", "a": "time-varying (B, L, N)",
               "label": label, "method": method}
        if method == "auto":
            row["auto_picks"] = choose_method(shape, backend=device.platform,
                                              time_invariant=False, dtype=jnp.float32)
        compiled, row["compile_fwd_s"], _ = compile_and_memory(fn, a, b)
        x = compiled(a, b)
        if ours is None:
            ours = x
        row["err_vs_first_row"] = float(jnp.max(jnp.abs(x - ours)) / jnp.max(jnp.abs(ours)))
        fb, row["compile_fwdbwd_s"], _ = compile_and_memory(_vjp_of(fn), a, b, g)
        calls.append(((compiled, (a, b)), (fb, (a, b, g))))
        results.append(row)
    fwd_times = time_interleaved([c[0] for c in calls], repeats=repeats)
    fb_times = time_interleaved([c[1] for c in calls], repeats=repeats)
    for row, (best, median), (fb_best, fb_median) in zip(results, fwd_times, fb_times):
        row.update(fwd_s=best, fwd_median_s=median, fwdbwd_s=fb_best, fwdbwd_median_s=fb_median)
    for peer in peers:
        results.append(bench_peers.time_peer(peer, a, b, g, ours, repeats=repeats))
    for row in results:
        if "fwd_s" in row:
            row["fwd_GBps"] = moved / row["fwd_s"] / 1e9
            row["fwd_copy_fraction"] = row["fwd_GBps"] / copy_gbps
        print(f"{str(tuple(shape)):>18} {row['label'] + (' → ' + row['auto_picks'] if 'auto_picks' in row else ''):<34} "
              + (f"{row['fwd_s'] * 1e3:10.3f} {row['fwdbwd_s'] * 1e3:10.3f} {row['fwd_GBps']:7.1f} "
                 f"{row['fwd_copy_fraction']:6.2f}  err {row.get('err_vs_first_row', float('nan')):.1e}"
                 if "fwd_s" in row else f"skipped: {row.get('error', '')}"), flush=True)
    return results


# ----------------------------------------------------------------------------------------
# Checks and targets
# ----------------------------------------------------------------------------------------

def scan_checks(results):
    """Per shape: is ``auto`` (and the method it picks) within 10% of the fastest method?"""
    checks = []
    for shape in sorted({tuple(r["shape"]) for r in results}):
        rows = [r for r in results if tuple(r["shape"]) == shape]
        methods = [r for r in rows if r["method"] not in (None, "auto")
                   and not r["label"].startswith("pallas kernel")]
        auto = next((r for r in rows if r["method"] == "auto"), None)
        paper = next((r for r in rows if r["label"] == "paper: associative_scan"), None)
        entry = {"shape": list(shape)}
        for key in ("fwd_s", "fwdbwd_s"):
            if auto is None or key not in auto or not methods:
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


#: The GPU targets of the course. Each: (name, shape, kind, threshold).
#: "copy"/"copy-planes": fraction of the run's copy bandwidth reached by the pallas forward on
#: complex64 arrays / on planes; "peer": accelerated-scan's time over ours (float32,
#: time-varying); "paper": the papers' associative_scan time over ours.
BANDWIDTH_SHAPES = [(16, 16384, 256), (64, 4096, 256), (32, 1024, 512)]
SCAN_TARGETS = (
    [("forward ≥ 80% of copy, kernel on re/im planes", s, "copy-planes", 0.80)
     for s in BANDWIDTH_SHAPES]
    + [("forward ≥ 80% of copy, linear_scan on complex64 arrays", s, "copy", 0.80)
       for s in BANDWIDTH_SHAPES]
    + [("forward ≥ 1.0× accelerated-scan (Triton), float32 time-varying", s, "peer", 1.0)
       for s in TV_SHAPES]
    + [("forward ≥ 4× lax.associative_scan", (1, 65536, 64), "paper", 4.0)]
)
FWDBWD_TARGET = 2.5          # forward + backward at most 2.5× the forward (pallas rows)
COMPILE_TARGET_S = 5.0       # every compile of the pallas rows
#: max |x_pallas - x_sequential| / max |x_sequential| at L = 65 536: float32 accuracy.
ACCURACY_TARGET = 2e-4
PEER_TRITON = "peer: accelerated-scan (Triton)"


def scan_targets(scan=None):
    """The scan targets, from ``python -m lrnn bench scan`` JSON (``None``: not measured)."""
    rows = scan.get("results", []) if on_gpu(scan) else []
    tv_rows = scan.get("tv_results", []) if on_gpu(scan) else []

    def find(table, shape, pred):
        return next((r for r in table if tuple(r["shape"]) == tuple(shape) and pred(r)
                     and "fwd_s" in r), None)

    out = []
    for name, shape, kind, threshold in SCAN_TARGETS:
        measured, unit = None, "×"
        if kind in ("copy", "copy-planes"):
            label = "pallas kernel (re/im planes)" if kind == "copy-planes" else "pallas"
            ours = find(rows, shape, lambda r: r["label"] == label)
            measured, unit = (ours["fwd_copy_fraction"] if ours else None), "of copy"
        elif kind == "peer":
            ours = find(tv_rows, shape, lambda r: r["label"] == "pallas")
            peer = find(tv_rows, shape, lambda r: r["label"] == PEER_TRITON)
            if ours and peer:
                measured = peer["fwd_s"] / ours["fwd_s"]
        elif kind == "paper":
            ours = find(rows, shape, lambda r: r["label"] == "pallas")
            paper = find(rows, shape, lambda r: r["label"] == "paper: associative_scan")
            if ours and paper:
                measured = paper["fwd_s"] / ours["fwd_s"]
        out.append(target_row(name, shape, measured, threshold,
                           measured is not None and measured >= threshold, unit))
    pallas_rows = [r for r in rows if r["method"] == "pallas" and "fwdbwd_s" in r]
    ratios = [r["fwdbwd_s"] / r["fwd_s"] for r in pallas_rows]
    worst = max(ratios) if ratios else None
    out.append(target_row("forward+backward ≤ 2.5× forward (pallas rows, worst shape)", None,
                       worst, FWDBWD_TARGET, worst is not None and worst <= FWDBWD_TARGET, "×"))
    compiles = [r[k] for r in rows + tv_rows if r.get("method") == "pallas"
                for k in ("compile_fwd_s", "compile_fwdbwd_s") if k in r]
    slowest = max(compiles) if compiles else None
    out.append(target_row("every pallas compile < 5 s", None, slowest, COMPILE_TARGET_S,
                       slowest is not None and slowest < COMPILE_TARGET_S, "s"))
    long_rows = [r for r in rows if r["label"] == "pallas" and r["shape"][1] >= 65536
                 and "err_vs_sequential" in r]
    err = max(r["err_vs_sequential"] for r in long_rows) if long_rows else None
    out.append(target_row("matches sequential at L = 65 536 (relative error)", (1, 65536, 64), err,
                       ACCURACY_TARGET, err is not None and err <= ACCURACY_TARGET, "error"))
    checks = [c for c in scan.get("checks", []) if "fwd_s_picked_within_10pct" in c] \
        if on_gpu(scan) else []
    bad = [c["shape"] for c in checks if not c["fwd_s_picked_within_10pct"]]
    out.append(target_row("auto picks a method within 10% of the fastest (forward), every shape",
                       None, (len(checks) - len(bad)) / len(checks) if checks else None, 1.0,
                       not bad, "of shapes"))
    return out


def gpu_targets(scan=None, layer=None):
    """The GPU issue's targets evaluated on stored benchmark results.

    Args:
      scan: the JSON dict written by ``python -m lrnn bench scan`` (or ``None``).
      layer: the JSON dict written by ``python -m lrnn bench layer`` (or ``None``).

    Returns:
      a list of dicts ``{"target", "shape", "measured", "threshold", "unit", "passed"}``;
      ``measured`` and ``passed`` are ``None`` where the results hold no measurement of it.
      Results from another platform, and layer results at other sizes than the issue's,
      measure none of them. Never estimates.
    """
    return scan_targets(scan or {}) + layer_targets(layer)


def _format_measured(t):
    unit, v = t["unit"], t["measured"]
    if unit in ("of copy", "of shapes"):
        return f"{v:.1%} {unit}"
    if unit == "error":
        return f"{v:.2e}"
    if unit == "s":
        return f"{v:.2f} s"
    return f"{v:.2f}×"


def targets_markdown(targets, source=None):
    """``gpu_targets`` as a Markdown table: met / not met / not measured."""
    lines = [TARGETS_HEADER, "|---|---|---|---|"]
    for t in targets:
        shape = "×".join(map(str, t["shape"])) if t["shape"] else "–"
        if t["measured"] is None:
            measured, met = "–", "not measured"
        else:
            measured, met = _format_measured(t), ("met" if t["passed"] else "**not met**")
        lines.append(f"| {t['target']} | {shape} | {measured} | {met} |")
    if source:
        lines.append(f"\nResults read from: {source}.")
    return "\n".join(lines)


def describe_source(*results):
    """"NVIDIA H100 80GB HBM3, JAX 0.11.2, commit abc1234, 2026-11-23" for the footer."""
    parts = []
    for r in results:
        if r:
            d = r["device"]
            parts.append(f"{d['device_kind']} (JAX {d['jax']}, commit {r.get('commit') or '?'}, "
                         f"{r.get('date_utc', '?')[:10]}, `{r.get('command', '?')}`"
                         + (f"; {r['note']}" if r.get("note") else "") + ")")
    return "; ".join(parts) or None


def _int_list(text):
    try:
        return [int(v) for v in text.split(",")]
    except ValueError:
        raise argparse.ArgumentTypeError(f"got {text!r}, expected comma-separated integers")


def load_result(path, flag, kind):
    """The JSON that ``lrnn bench <kind> --out`` wrote at ``path``, or a clear error naming
    ``flag``, the file and what was expected (before any work)."""
    if not pathlib.Path(path).is_file():
        raise SystemExit(f"{flag}: got {path!r}, which is not a file")
    try:
        with open(path) as f:
            data = json.load(f)
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as err:
        raise SystemExit(f"{flag}: got {path!r}, which is not readable JSON ({err}); expected "
                         f"the JSON written by `lrnn bench {kind} --out`")
    found = data.get("benchmark") if isinstance(data, dict) else None
    if found != kind:
        what = f"a {found!r} benchmark result" if found else "no benchmark result"
        raise SystemExit(f"{flag}: got {path!r}, which holds {what}; expected the JSON written "
                         f"by `lrnn bench {kind} --out` (\"benchmark\": \"{kind}\")")
    return data


#: What the numbers of ``lrnn bench scan``'s JSON mean (stored with them).
SCAN_DEFINITIONS = {
    "fwd_s": "best wall time of `repeats` forward calls after a warm-up (median beside), "
             "each call synchronised; the rows of one shape are timed round-robin",
    "fwdbwd_s": "best wall time of jax.vjp(scan)(cotangent): forward + backward",
    "compile_fwd_s": "jax.jit(f).lower(...).compile() wall time, forward",
    "fwd_GBps": "bytes that must move / fwd_s: 16 per complex64 element (b read, x "
                "written); 12 per float32 element with a time-varying a (a, b read)",
    "fwd_copy_fraction": "fwd_GBps / copy_bandwidth_GBps (the faster of XLA's and a "
                         "Pallas copy of 1 GiB, median of >= 20 runs)",
    "peak_bytes": "argument + output + temp - alias bytes of XLA's buffer assignment "
                  "(compiled.memory_analysis())",
    "err_vs_sequential": "max |x - x_sequential| / max |x_sequential|",
}


def chosen_rows(rows, methods, platform_):
    """The rows named by ``--methods`` (labels or methods; ``None``: all)."""
    if methods is None:
        return rows
    known = [r.label for r in rows]
    keep = [m.strip() for m in methods.split(",")]
    unknown = [m for m in keep if m not in known and m not in {r.method for r in rows}]
    if not any(keep):
        raise SystemExit(f"--methods: got {methods!r}, expected a comma-separated "
                         f"subset of {known} (the rows on {platform_})")
    if unknown:
        raise SystemExit(f"--methods: got {unknown!r}, expected a comma-separated subset of "
                         f"{known} (the rows on {platform_})")
    return [r for r in rows if r.label in keep or r.method in keep]


def run_scan(args):
    _require_positive(args, "batch", "n", "lengths", "repeats", "copy-bytes")
    layer = load_result(args.layer, "--layer", "layer") if args.layer else None
    if args.device == "gpu":        # leave room for the peers (PyTorch) beside JAX
        os.environ.setdefault("XLA_PYTHON_CLIENT_MEM_FRACTION", "0.6")
    device = pick_device(args.device)
    gpu = device.platform == "gpu"
    shapes = (_parse_shapes(args.shapes) if args.shapes else
              GPU_EXTRA_SHAPES + [(8, 4096, 256)] if gpu else
              [(args.batch, length, args.n) for length in args.lengths])
    rows = chosen_rows(scan_rows(device.platform, args.pallas), args.methods, device.platform)
    tv_shapes = ([] if args.no_tv else _parse_shapes(args.tv_shapes) if args.tv_shapes
                 else TV_SHAPES if gpu else [])
    load_start = _loadavg()
    copy = copy_bandwidth(device, nbytes=args.copy_bytes, repeats=max(args.repeats, COPY_REPEATS))
    copy_gbps = copy["GBps"]
    print(f"device: {device.platform} ({device.device_kind}); JAX {jax.__version__}; copy "
          f"{copy_gbps:.0f} GB/s ({', '.join(f'{k} {v:.0f}' for k, v in copy.items() if k.endswith('_GBps') and k != 'GBps')}); "
          f"times: best of {args.repeats} after a warm-up")
    print(HEADER)
    results = []
    with jax.default_device(device):
        for shape in shapes:
            results += bench_scan_shape(shape, rows, device, repeats=args.repeats,
                                        copy_gbps=copy_gbps, backward=not args.no_backward)
        tv_results = []
        if tv_shapes:
            from . import peers as bench_peers
            peers, notices = bench_peers.load_peers()
            for notice in notices:
                print(notice)
            for shape in tv_shapes:
                tv_results += bench_tv_shape(shape, device, repeats=args.repeats,
                                             copy_gbps=copy_gbps, peers=peers)
    out = {
        "benchmark": "scan",
        "command": "python -m lrnn bench " + " ".join(args.argv),
        "commit": git_commit(),
        "date_utc": _dt.datetime.now(_dt.timezone.utc).isoformat(timespec="seconds"),
        "device": device_info(device),
        "load_average_at_start": load_start,
        "copy": copy,
        "copy_bandwidth_GBps": copy_gbps,
        "repeats": args.repeats,
        "definitions": SCAN_DEFINITIONS,
        "results": results,
        "tv_results": tv_results,
        "checks": scan_checks(results) + scan_checks(tv_results),
    }
    out["targets"] = gpu_targets(out, layer)
    for c in out["checks"]:
        if len(c) > 1:
            print("check", json.dumps(c))
    md = targets_markdown(out["targets"], describe_source(out, layer))
    if gpu or args.targets_md:
        print(md)
    else:
        print(f"targets: the GPU issue's targets are not measured on {device.platform} "
              "(python -m lrnn bench targets prints them from a stored GPU run)")
    write_json(out, args.out)
    if args.targets_md:
        write_text(md + "\n", args.targets_md, kind="targets", what="--targets-md")
    return out


# ----------------------------------------------------------------------------------------
# The command line
# ----------------------------------------------------------------------------------------

def _loadavg():
    return [round(v, 2) for v in os.getloadavg()] if hasattr(os, "getloadavg") else None


def parser():
    """``lrnn bench``'s parser: one subparser per benchmark, each registered by its module
    (``scan`` and ``targets`` here; ``layer``, ``plans``, ``step`` and ``gpu`` in the modules
    of those names)."""
    p = argparse.ArgumentParser(prog="lrnn bench", description=__doc__.split("\n")[0])
    sub = p.add_subparsers(dest="what", required=True)
    add_scan_parser(sub)
    bench_layer.add_parser(sub)
    bench_plans.add_parser(sub)
    bench_step.add_parser(sub)
    bench_gpu.add_parser(sub, sys.modules[__name__])
    add_targets_parser(sub)
    return p


build_parser = parser


def add_scan_parser(sub):
    s = sub.add_parser("scan", help="time and memory of every linear_scan method")
    s.add_argument("--device", choices=["cpu", "gpu"], default=None)
    _io.output_argument(s, "--out", default=None, help="write the results as JSON here",
                        **output_spec("scan"))
    _io.output_argument(s, "--targets-md", default=None,
                        help="write the targets table (Markdown) here", **output_spec("targets"))
    s.add_argument("--layer", default=None,
                   help="`lrnn bench layer` JSON to evaluate the layer targets with")
    s.add_argument("--batch", type=int, default=8)
    s.add_argument("--n", type=int, default=256, help="channels N (complex64)")
    s.add_argument("--lengths", type=_int_list, default=[1024, 4096, 16384])
    s.add_argument("--shapes", default=None, help="e.g. 8x1024x256,1x65536x64 (replaces the above)")
    s.add_argument("--tv-shapes", default=None,
                   help="float32 time-varying shapes of the peer comparison (GPU only)")
    s.add_argument("--no-tv", action="store_true", help="skip the time-varying table and peers")
    s.add_argument("--methods", default=None, help="comma-separated subset of the row labels")
    s.add_argument("--repeats", type=int, default=5)
    s.add_argument("--copy-bytes", type=int, default=COPY_BYTES)
    s.add_argument("--no-backward", action="store_true")
    s.add_argument("--pallas", choices=["auto", "yes", "no"], default="auto",
                   help="the kernel's rows (on planes, the headline, and on complex arrays); "
                        "auto: on a GPU where it runs; yes: also on a CPU, in Pallas interpret "
                        "mode (slow, for testing)")
    s.set_defaults(run=run_scan)


def add_targets_parser(sub):
    t = sub.add_parser("targets", help="the GPU issue's targets, evaluated on stored JSON results")
    t.add_argument("--scan", default=None,
                   help="JSON written by `lrnn bench scan --out` (default: "
                        "book/data/bench_scan_gpu.json if present)")
    t.add_argument("--layer", default=None,
                   help="JSON written by `lrnn bench layer --out` (default: "
                        "book/data/bench_layer_gpu.json if present)")
    _io.output_argument(t, "--out", default=None, help="also write the table (Markdown) here",
                        **output_spec("targets"))
    t.set_defaults(run=run_targets)


def run_targets(args):
    loaded = {}
    for name in ("scan", "layer"):
        path = getattr(args, name)
        if path is None:
            default = pathlib.Path("book/data") / f"bench_{name}_gpu.json"
            path = str(default) if default.exists() else None
        if path:
            loaded[name] = load_result(path, f"--{name}", name)
    targets = gpu_targets(loaded.get("scan"), loaded.get("layer"))
    md = targets_markdown(targets, describe_source(loaded.get("scan"), loaded.get("layer")))
    print(md)
    if args.out:
        write_text(md + "\n", args.out, kind="targets")
    return targets


def main(argv=None):
    argv = list(sys.argv[1:] if argv is None else argv)
    args = parser().parse_args(argv)
    args.argv = argv
    return args.run(args)


if __name__ == "__main__":
    main()
