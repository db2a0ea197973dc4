"""``python -m lrnn bench gpu``: what the course measures on a GPU, in one command, one budget.

    python -m lrnn bench gpu --budget-s 420 --out DIR [--pack FILE.tgz] [--dry-run]

The parts, most wanted first (``PARTS``):

1. ``environment``: versions, the device, the kernel's status, fingerprint and plans, and what
   ``method="auto"`` picks at the benchmark shapes and why;
2. ``kernel-check``: the Pallas kernel (the design ``method="pallas"`` plans with) against the
   float64 NumPy reference, forward and backward, at the scan part's shapes;
3. ``scan``: the kernel on planes (the headline) against the copy bandwidth, ``associative`` and,
   when installed, the peers (accelerated-scan, flash-linear-attention), compile times apart;
   and the predictions of ``lrnn.scan.pallas_tuning.PREDICTIONS`` with the measured column;
4. ``layer``: ``lrnn bench layer`` for the LRU and the RotRNN;
5. ``grading``: every solution graded at the GPU's default precision (``lrnn doctor``'s grading
   part: TF32 matmuls where the GPU uses them by default);
6. ``notebooks``: every notebook timed (``lrnn doctor``'s notebook part), if time is left.

Each part has an estimated cost (``Part.estimate_s``, on an H100); a part whose estimate exceeds
the time left is skipped and recorded as such, with the reason. Each runs in its own process,
stopped when the budget is spent. After each part ``DIR`` holds ``PART.json`` and ``PART.md``,
and ``bench_gpu.json`` and ``bench_gpu.md`` sum up every part so far: each names the device, the
JAX version, the commit (``git rev-parse``, ``$LRNN_COMMIT`` in a copy without ``.git``, else the
package version) and the kernel's fingerprint (``lrnn.scan.pallas.kernel_fingerprint``), so that
whatever the run reached is a complete, readable result. ``--pack`` also writes ``DIR`` as one
archive after each part. Only the default design of the kernel is compiled: the tuning sweep
is ``lrnn bench plans``.

``--dry-run`` runs every part on this machine's CPU at tiny sizes, the kernel in Pallas interpret
mode, the doctor's parts in ``--quick`` mode: a check that each part starts and writes its
results, not a measurement.
"""
from __future__ import annotations

import contextlib
import dataclasses
import datetime as _dt
import json
import math
import os
import pathlib
import shutil
import signal
import subprocess
import sys
import tarfile
import time
import traceback

from .. import _io

#: the file that marks a results folder as this command's own (it may then be written again)
MARKER = ".lrnn-bench-gpu"
SUMMARY = "bench_gpu"
#: seconds a part's process may run past the budget before it is stopped (to write its files)
GRACE_S = 10.0


@dataclasses.dataclass(frozen=True)
class Part:
    name: str
    title: str
    #: estimated seconds on an H100 machine (process start and JAX's start included) and, for
    #: ``--dry-run``, on two shared CPU cores
    estimate_s: float
    dry_estimate_s: float
    #: False: run only if time is left (not counted in the plan that must fit the budget)
    required: bool = True

    def estimate(self, dry_run: bool) -> float:
        return self.dry_estimate_s if dry_run else self.estimate_s


PARTS = (
    # Estimates from the two H200 runs of 2026-11-27 (book/data/bench_gpu_h200_2026-11-27*.json):
    # environment 7-8 s, kernel-check 47-51 s, scan 55-63 s, layer 43 s, grading 177-198 s;
    # the notebooks did not finish in 324 s, so they get a call of their own (GPU.md).
    Part("environment", "environment and kernel status", 15, 10),
    # compile of the default design: 2-5 s a pass (TUNING.md), 4 shapes forward and backward,
    # plus the float64 NumPy reference (a loop over L) at each
    Part("kernel-check", "the kernel against the float64 reference, forward and backward", 60, 45),
    # copy (1 GiB, 20 runs), 4 shapes x (kernel, associative) x (fwd, fwd+bwd) compiled and
    # timed 20 times, the peers' Triton compiles
    Part("scan", "bench scan: the kernel against copy, associative and the peers", 85, 75),
    Part("layer", "bench layer: LRU and RotRNN", 50, 70),
    Part("grading", "the solutions graded at the GPU's default precision", 210, 30),
    Part("notebooks", "notebook timings", 480, 25, required=False),
)
PART_NAMES = tuple(p.name for p in PARTS)

#: the scan part's shapes: complex64 with a time-invariant λ, and float32 with a time-varying a
SCAN_SHAPES = [(16, 16384, 256), (64, 4096, 256), (1, 65536, 64)]
TV_SHAPES = [(8, 4096, 1024)]
DRY_SCAN_SHAPES = [(2, 40, 16)]
DRY_TV_SHAPES = [(1, 40, 16)]
HEADLINE = "pallas kernel (re/im planes)"
#: kernel against the float64 reference: max |x - x_ref| / max |x_ref| allowed per output
TOLERANCE = {"x": 2e-4, "db": 2e-4, "da": 1e-3}


def planned_seconds(dry_run: bool = False) -> float:
    """The estimate of the parts that must fit the budget (every part but the optional ones)."""
    return sum(p.estimate(dry_run) for p in PARTS if p.required)


# ----------------------------------------------------------------------------------------
# What every result names
# ----------------------------------------------------------------------------------------

#: ``lrnn.benchmarks.scan``, which registers this command (``add_parser``) and whose scan
#: benchmark the parts call: handed over, not imported, so that the two modules form no cycle
_SCAN_BENCH = None


def _bench():
    if _SCAN_BENCH is None:
        raise RuntimeError("lrnn bench gpu runs through `python -m lrnn bench gpu` (the scan "
                           "benchmark registers it)")
    return _SCAN_BENCH


def commit() -> str:
    """``$LRNN_COMMIT``, else ``git rev-parse`` of the checkout (``+dirty``), else the version
    of the installed package."""
    import lrnn
    return _bench().git_commit() or f"lrnn {lrnn.__version__} (no git checkout)"


def jax_version() -> str:
    import jax                       # importing JAX does not start a backend
    return jax.__version__


def _device_here() -> dict:
    import jax
    from ._common import device_info
    return device_info(jax.devices()[0])


def _kernel_here(device: dict) -> dict:
    from ..scan import pallas, pallas_tuning
    cc = device.get("compute_capability")
    return {"capability": cc, "design": pallas_tuning.DEFAULT_DESIGN,
            "fingerprint": pallas.kernel_fingerprint(cc)}


def _known(out: pathlib.Path, key: str, fallback):
    """``device`` or ``kernel`` as the environment part recorded it (no GPU started here)."""
    try:
        return json.loads((out / "environment.json").read_text())[key]
    except (OSError, ValueError, KeyError):
        return fallback


def header(part: str, device: dict, kernel: dict | None, dry_run: bool) -> dict:
    return {"benchmark": "gpu", "part": part, "command": "python -m lrnn bench gpu",
            "date_utc": _dt.datetime.now(_dt.timezone.utc).isoformat(timespec="seconds"),
            "device": device, "jax": jax_version(), "commit": commit(), "kernel": kernel,
            "dry_run": dry_run}


def header_md(result: dict) -> str:
    d, k = result["device"] or {}, result.get("kernel") or {}
    cc = f", compute capability {d['compute_capability']}" if d.get("compute_capability") else ""
    dry = " **Dry run (CPU, tiny sizes): not a measurement.**" if result.get("dry_run") else ""
    return (f"{d.get('device_kind', 'unknown device')} ({d.get('platform', '?')}{cc}), "
            f"JAX {result['jax']}, commit `{result['commit']}`, "
            f"kernel `{k.get('fingerprint', '?')}` "
            f"(design {k.get('design', '?')}), {result['date_utc']}.{dry}")


def _write(out: pathlib.Path, name: str, result: dict, body: str):
    """``name.json`` and ``name.md``, each complete, written atomically (JSON first)."""
    _io.atomic_write_text(out / f"{name}.json", json.dumps(result, indent=1, default=str) + "\n")
    title = result.get("title", name)
    md = (f"# lrnn bench gpu: {title}\n\n{header_md(result)}\n\n"
          f"Status: **{result['status']}**" + (f" ({result['reason']})" if result.get("reason")
                                               else "") + "\n\n" + body.strip() + "\n")
    _io.atomic_write_text(out / f"{name}.md", md)


def _ms(seconds) -> str:
    return "–" if seconds is None else f"{seconds * 1e3:.3f}"


def _table(head, rows) -> str:
    lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    lines += ["| " + " | ".join(str(c) for c in r) + " |" for r in rows]
    return "\n".join(lines)


# ----------------------------------------------------------------------------------------
# The parts (each runs in its own process: ``--part NAME``)
# ----------------------------------------------------------------------------------------

def part_environment(ctx):
    import importlib.metadata as md
    import platform
    import jax
    import jax.numpy as jnp
    from ..scan import describe, pallas, pallas_tuning
    device = ctx["device"]
    versions = {"python": platform.python_version()}
    for name in ("jax", "jaxlib", "jax-cuda12-plugin", "jax-cuda13-plugin", "numpy", "torch",
                 "triton", "accelerated-scan", "fla-core", "nbclient", "ipykernel", "mlxtend"):
        try:
            versions[name] = md.version(name)
        except md.PackageNotFoundError:
            pass
    ok, why = pallas.kernel_status()
    cc = device.get("compute_capability")
    plans = []
    for kind, (g, length, n) in pallas.FINGERPRINT_SHAPES:
        for adjoint in (False, True):
            p = pallas.plan(g, length, n, kind=kind, capability=cc, adjoint=adjoint)
            plans.append({"kind": kind, "shape": [g, length, n], "adjoint": adjoint,
                          "tiles": dataclasses.asdict(p.tiles), "chunk": p.chunk,
                          "n_chunks": p.n_chunks, "source": p.source})
    auto = [{"shape": list(s), "dtype": dt, "describe": describe(s, dtype=dt,
                                                                 time_invariant=ti)}
            for s, dt, ti in [(s, "complex64", True) for s in SCAN_SHAPES]
            + [(s, "float32", False) for s in TV_SHAPES]]
    data = {"versions": versions, "devices": [d.device_kind for d in jax.devices()],
            "backend": jax.default_backend(), "kernel_status": {"ok": ok, "why": why},
            "plans": plans, "auto": auto, "x64": bool(jnp.zeros(1).dtype == jnp.float64)}
    body = "\n\n".join([
        "Versions: " + ", ".join(f"{k} {v}" for k, v in versions.items()) + ".",
        f"Kernel status: {'runs' if ok else '**does not run**'}: {why}.",
        "What `method=\"auto\"` picks:\n\n" + "\n".join(f"* {a['describe']}" for a in auto),
        "Plans of the default design (forward):\n\n" + _table(
            ["kind", "shape", "tiles (block_n, U, warps, W)", "chunks"],
            [(p["kind"], "×".join(map(str, p["shape"])),
              f"{p['tiles']['block_n']}, {p['tiles']['unroll']}, {p['tiles']['warps']}, "
              f"{p['tiles']['time_warps']}", p["n_chunks"]) for p in plans if not p["adjoint"]]),
    ])
    return ("ok" if ok else "failed"), data, body


def _relative_error(got, want) -> float:
    import numpy as np
    scale = float(np.max(np.abs(want))) or 1.0
    return float(np.max(np.abs(np.asarray(got, want.dtype) - want))) / scale


def _check_complex(shape, device):
    """Forward on planes (the layers' path) and forward + VJP on complex arrays, against the
    float64 transcription; JAX transposes without conjugation, so db is the reverse scan of g
    with λ and dλ = Σ db_t x_{t-1}."""
    import jax
    import jax.numpy as jnp
    import numpy as np
    from jax import lax
    from ..scan import linear_scan, linear_scan_planes, reference
    make_inputs = _bench().make_inputs
    lam, bu = make_inputs(shape, device)
    g = jax.device_put(jnp.conj(bu) * 0.5, device)
    t0 = time.perf_counter()
    planes = jax.jit(lambda l, r, i: linear_scan_planes(l, r, i, method="pallas"))
    x_planes = lax.complex(*planes(lam, jnp.real(bu), jnp.imag(bu)))

    def fwd_bwd(lam, bu, g):
        x, vjp = jax.vjp(lambda l, b: linear_scan(l, b, method="pallas"), lam, bu)
        return x, vjp(g)
    x, (dlam, db) = jax.jit(fwd_bwd)(lam, bu, g)
    jax.block_until_ready((x_planes, x, dlam, db))
    seconds = time.perf_counter() - t0
    lam64, b64, g64 = (np.asarray(v).astype(np.complex128) for v in (lam, bu, g))
    x_ref = reference.linear_scan(lam64, b64)
    da_ref, db_ref = reference.linear_scan_vjp(lam64, x_ref, g64)
    return seconds, {"x (planes)": _relative_error(x_planes, x_ref),
                     "x": _relative_error(x, x_ref), "db": _relative_error(db, db_ref),
                     "da": _relative_error(dlam, da_ref)}


def _check_time_varying(shape, device):
    import jax
    import numpy as np
    from ..scan import linear_scan, reference
    make_tv_inputs = _bench().make_tv_inputs
    a, b, g = make_tv_inputs(shape, device)
    t0 = time.perf_counter()

    def fwd_bwd(a, b, g):
        x, vjp = jax.vjp(lambda a, b: linear_scan(a, b, method="pallas"), a, b)
        return x, vjp(g)
    x, (da, db) = jax.jit(fwd_bwd)(a, b, g)
    jax.block_until_ready((x, da, db))
    seconds = time.perf_counter() - t0
    a64, b64, g64 = (np.asarray(v, np.float64) for v in (a, b, g))
    x_ref = reference.linear_scan(a64, b64)
    db_ref = reference.linear_scan(np.concatenate([a64[..., 1:, :], np.zeros_like(a64[..., :1, :])],
                                                  axis=-2), g64, reverse=True)
    x_prev = np.concatenate([np.zeros_like(x_ref[..., :1, :]), x_ref[..., :-1, :]], axis=-2)
    return seconds, {"x": _relative_error(x, x_ref), "db": _relative_error(db, db_ref),
                     "da": _relative_error(da, db_ref * x_prev)}


def part_kernel_check(ctx):
    import jax
    device = jax.devices()[0]
    shapes = [("complex64", s) for s in (DRY_SCAN_SHAPES if ctx["dry_run"] else SCAN_SHAPES)]
    shapes += [("float32 a(t)", s) for s in (DRY_TV_SHAPES if ctx["dry_run"] else TV_SHAPES)]
    rows, ok = [], True
    for kind, shape in shapes:
        row = {"kind": kind, "shape": list(shape)}
        try:
            check = _check_complex if kind == "complex64" else _check_time_varying
            row["compile_and_run_s"], row["rel_err"] = check(shape, device)
            row["passed"] = all(v <= TOLERANCE[k.split()[0]] for k, v in row["rel_err"].items())
        except Exception as err:                                  # noqa: BLE001
            row["error"] = f"{type(err).__name__}: {str(err)[:300]}"
            row["passed"] = False
        ok &= row["passed"]
        rows.append(row)
        print(json.dumps(row), flush=True)
    body = ("Relative error max |got − ref| / max |ref| against the float64 NumPy "
            f"transcription (tolerance: {', '.join(f'{k} {v:g}' for k, v in TOLERANCE.items())}"
            "); x on planes is the layers' path, the rest `linear_scan(..., method=\"pallas\")` "
            "and its VJP.\n\n" + _table(
                ["kind", "shape", "x (planes)", "x", "db", "da", "compile + run s", "verdict"],
                [(r["kind"], "×".join(map(str, r["shape"])),
                  *(f"{r['rel_err'][k]:.1e}" if k in r.get("rel_err", {}) else "–"
                    for k in ("x (planes)", "x", "db", "da")),
                  f"{r['compile_and_run_s']:.1f}" if "compile_and_run_s" in r else "–",
                  "pass" if r["passed"] else "**fail** " + r.get("error", ""))
                 for r in rows]))
    return ("ok" if ok else "failed"), {"tolerance": TOLERANCE, "rows": rows}, body


def _with_vjp(fn):
    """``fn``'s forward and backward for a fixed cotangent (the last argument)."""
    import jax

    def fwd_bwd(*args):
        *inputs, g = args
        _, vjp = jax.vjp(fn, *inputs)
        return vjp(g)
    return fwd_bwd


def _tv_rows(shape, device, *, repeats, copy_gbps, peers, kernel):
    """The float32 time-varying table: ``associative``, the kernel (default design) and the
    peers on the same data, forward and forward + VJP."""
    import jax.numpy as jnp
    from ..scan import linear_scan
    from . import peers as bench_peers
    bench = _bench()
    from ._common import compile_and_memory, time_interleaved
    a, b, g = bench.make_tv_inputs(shape, device)
    moved = 3 * math.prod(shape) * 4
    methods = ["associative"] + (["pallas"] if kernel else [])
    ours, calls, rows = None, [], []
    for method in methods:
        fn = (lambda m: lambda a, b: linear_scan(a, b, method=m))(method)
        row = {"shape": list(shape), "dtype": "float32", "a": "time-varying (B, L, N)",
               "label": method, "method": method}
        compiled, row["compile_fwd_s"], _ = compile_and_memory(fn, a, b)
        x = compiled(a, b)
        ours = x if ours is None else ours
        row["err_vs_first_row"] = float(jnp.max(jnp.abs(x - ours)) / jnp.max(jnp.abs(ours)))
        fb, row["compile_fwdbwd_s"], _ = compile_and_memory(_with_vjp(fn), a, b, g)
        calls.append(((compiled, (a, b)), (fb, (a, b, g))))
        rows.append(row)
    for row, (best, median), (fb_best, fb_median) in zip(
            rows, time_interleaved([c[0] for c in calls], repeats=repeats),
            time_interleaved([c[1] for c in calls], repeats=repeats)):
        row.update(fwd_s=best, fwd_median_s=median, fwdbwd_s=fb_best, fwdbwd_median_s=fb_median)
    for peer in peers:
        rows.append(bench_peers.time_peer(peer, a, b, g, ours, repeats=repeats))
    for row in rows:
        if "fwd_s" in row:
            row["fwd_GBps"] = moved / row["fwd_s"] / 1e9
            row["fwd_copy_fraction"] = row["fwd_GBps"] / copy_gbps
    return rows


def measured_predictions(results, tv_results):
    """``pallas_tuning.PREDICTIONS`` with the measured fraction of copy and ratio to
    ``associative`` (forward) from this run's rows; ``None`` where a row is missing."""
    from ..scan import pallas_tuning
    out = []
    for p in pallas_tuning.PREDICTIONS:
        table, label = (results, HEADLINE) if p.kind == "ti-complex" else (tv_results, "pallas")
        find = lambda lab: next((r for r in table if tuple(r["shape"]) == p.shape  # noqa: E731
                                 and r["label"] == lab and "fwd_s" in r), None)
        ours, assoc = find(label), find("associative")
        out.append({"shape": list(p.shape), "kind": p.kind,
                    "predicted_copy_fraction": p.copy_fraction,
                    "predicted_vs_associative": p.vs_associative,
                    "measured_copy_fraction": ours["fwd_copy_fraction"] if ours else None,
                    "measured_vs_associative": (assoc["fwd_s"] / ours["fwd_s"]
                                                if ours and assoc else None)})
    return out


def predictions_markdown(rows) -> str:
    def pair(pred, got, fmt):
        return f"{fmt.format(pred)}", ("–" if got is None else fmt.format(got))
    lines = []
    for r in rows:
        pc, mc = pair(r["predicted_copy_fraction"], r["measured_copy_fraction"], "{:.0%}")
        pa, ma = pair(r["predicted_vs_associative"], r["measured_vs_associative"], "{:.2f}×")
        lines.append(("×".join(map(str, r["shape"])), r["kind"], pc, pa, f"{mc}, {ma}"))
    return _table(["shape (B, L, N)", "kind", "predicted fraction of copy",
                   "predicted ratio to `associative`", "measured (fraction, ratio)"], lines)


def _scan_markdown(data) -> str:
    rows = [r for r in data["results"] + data["tv_results"] if "fwd_s" in r]
    table = _table(["shape", "dtype", "row", "fwd ms", "fwd+bwd ms", "fraction of copy"],
                   [("×".join(map(str, r["shape"])), r["dtype"], r["label"], _ms(r["fwd_s"]),
                     _ms(r.get("fwdbwd_s")), f"{r['fwd_copy_fraction']:.0%}") for r in rows])
    compiles = _table(["shape", "row", "compile fwd s", "compile fwd+bwd s"],
                      [("×".join(map(str, r["shape"])), r["label"],
                        f"{r['compile_fwd_s']:.2f}" if "compile_fwd_s" in r else "–",
                        f"{r['compile_fwdbwd_s']:.2f}" if "compile_fwdbwd_s" in r else "–")
                       for r in rows if "compile_fwd_s" in r])
    parts = [f"Copy: {data['copy']['GBps']:.0f} GB/s (the faster of XLA's and a Pallas copy, "
             f"median of {data['copy']['repeats']} runs). Times: best of {data['repeats']} "
             "after a warm-up, the rows of one shape timed round-robin.",
             table, "Compile times (apart from the timings):", compiles,
             "Predictions (TUNING.md, written before the run) and what this run measured "
             "(forward):", predictions_markdown(data["predictions"])]
    parts += [f"* {n}" for n in data.get("notices", [])]
    if data.get("skipped_shapes"):
        parts.append("Not reached within the budget: " + ", ".join(
            "×".join(map(str, s)) for s in data["skipped_shapes"]) + ".")
    return "\n\n".join(parts)


def part_scan(ctx):
    import jax
    from . import peers as bench_peers
    bench = _bench()
    from ._common import pallas_runs_here
    device = jax.devices()[0]
    dry, out = ctx["dry_run"], ctx["out"]
    gpu = device.platform == "gpu"
    kernel, notices = True, []
    if gpu:
        kernel, why = pallas_runs_here()
        if not kernel:
            notices.append(f"the kernel's rows are left out: {why}")
    rows = [r for r in bench.scan_rows(device.platform, "yes" if kernel else "no")
            if r.label in (HEADLINE, "associative")]
    repeats = 1 if dry else 20
    copy = bench.copy_bandwidth(device, nbytes=65536 if dry else bench.COPY_BYTES,
                                repeats=1 if dry else bench.COPY_REPEATS)
    peers, peer_notices = bench_peers.load_peers()
    notices += peer_notices
    data = {"copy": copy, "repeats": repeats, "results": [], "tv_results": [],
            "notices": notices, "skipped_shapes": []}
    todo = [("ti", s) for s in (DRY_SCAN_SHAPES if dry else SCAN_SHAPES)]
    todo += [("tv", s) for s in (DRY_TV_SHAPES if dry else TV_SHAPES)]
    status = "ok"
    for i, (kind, shape) in enumerate(todo):
        if time.time() > ctx["deadline"] - (5 if dry else 30):
            data["skipped_shapes"] += [list(s) for _, s in todo[i:]]
            data["reason"] = f"{len(todo) - i} shapes not reached within the budget"
            status = "partial"
            break
        with jax.default_device(device):
            if kind == "ti":
                data["results"] += bench.bench_scan_shape(shape, rows, device, repeats=repeats,
                                                          copy_gbps=copy["GBps"])
            else:
                data["tv_results"] += _tv_rows(shape, device, repeats=repeats,
                                               copy_gbps=copy["GBps"], peers=peers,
                                               kernel=kernel)
        data["predictions"] = measured_predictions(data["results"], data["tv_results"])
        if i < len(todo) - 1:                # after each shape: a complete, readable result
            ctx["write"]("partial", data, _scan_markdown(data), "shapes still running")
    data["predictions"] = measured_predictions(data["results"], data["tv_results"])
    _write_scan_record(ctx, device, data)
    return status, data, _scan_markdown(data) + "\n\nThe same rows as `lrnn bench scan` " \
        "writes them: `bench_scan.json` (for `lrnn bench targets --scan` and chapter 6)."


def _write_scan_record(ctx, device, data):
    """``bench_scan.json`` in the format of ``lrnn bench scan --out``, with its checks and the
    GPU targets these rows measure (the others: not measured)."""
    bench = _bench()
    from ._common import device_info
    record = {"benchmark": "scan", "command": "python -m lrnn bench gpu (scan part)",
              "commit": commit(),
              "date_utc": _dt.datetime.now(_dt.timezone.utc).isoformat(timespec="seconds"),
              "device": device_info(device), "copy": data["copy"],
              "copy_bandwidth_GBps": data["copy"]["GBps"], "repeats": data["repeats"],
              "results": data["results"], "tv_results": data["tv_results"],
              "checks": bench.scan_checks(data["results"]) + bench.scan_checks(data["tv_results"])}
    record["targets"] = bench.gpu_targets(record)
    _io.atomic_write_text(ctx["out"] / "bench_scan.json", json.dumps(record, indent=1) + "\n")


def part_layer(ctx):
    bench = _bench()
    out = ctx["out"] / "bench_layer.json"
    argv = ["layer", "--models", "none", "--no-time-parallel", "--out", str(out)]
    argv += (["--layers", "lru", "--d-model", "8", "--d-state", "16", "--batch", "1",
              "--length", "32", "--repeats", "1", "--pallas", "yes"] if ctx["dry_run"] else
             ["--batch", "32", "--length", "4096", "--repeats", "10"])
    args = bench.parser().parse_args(argv)
    args.argv = argv
    result = args.run(args)
    rows = result["results"]
    body = _table(["layer", "scan", "layout", "compile s", "step ms (fwd+bwd)"],
                  [(r["layer"],
                    r["scan"] + (f" → {r['auto_picks']}" if "auto_picks" in r else ""),
                    r["layout"], f"{r['compile_s']:.2f}", _ms(r["step_s"])) for r in rows])
    body += "\n\n" + "\n".join(f"* {k}: `auto` is {v:.2f}× the speed of the papers' "
                               "associative scan" for k, v in
                               result["speedup_auto_over_paper"].items())
    body += "\n\nThe whole result: `bench_layer.json` (as written by `lrnn bench layer`)."
    return "ok", {"results": rows, "speedup_auto_over_paper": result["speedup_auto_over_paper"],
                  "file": out.name}, body


def _repo_root():
    import lrnn
    root = pathlib.Path(lrnn.__file__).resolve().parents[2]
    return root if (root / "solutions").is_dir() and (root / "book").is_dir() else None


def _doctor(ctx, keep: str):
    """``lrnn doctor`` with only its ``keep`` part, its reports in ``DIR/<keep>/``, stopped at
    the deadline."""
    folder = ctx["out"] / keep
    folder.mkdir(exist_ok=True)
    skip = [s for s in ("library", "grading", "notebooks", "gpu") if s != keep]
    cmd = [sys.executable, "-m", "lrnn", "doctor", "--skip", *skip, "--out-dir", str(folder)]
    if ctx["dry_run"]:
        cmd.append("--quick")
    root = _repo_root()
    if root is not None:
        cmd += ["--repo", str(root)]
    env = dict(os.environ, XLA_PYTHON_CLIENT_PREALLOCATE="false")
    left = max(1.0, ctx["deadline"] - time.time())
    print("+", " ".join(cmd), flush=True)
    # The doctor prints one line as each notebook or solution ends; written to a file as it
    # goes, those lines outlive a stop at the budget.
    log = folder / "doctor.log"
    with open(log, "w") as out:
        proc = subprocess.Popen(cmd, env=env, stdout=out, stderr=subprocess.STDOUT, text=True,
                                start_new_session=True)
        try:
            proc.wait(timeout=left)
        except subprocess.TimeoutExpired:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
            done = finished_lines(log.read_text(errors="replace"), keep)
            body = (f"`lrnn doctor` did not finish in the {left:.0f} s left of the budget; "
                    f"{len(done)} finished before the stop")
            body += (":\n\n```\n" + "\n".join(done) + "\n```") if done else "."
            return "stopped", {"command": cmd, "finished": done,
                               "log": f"{keep}/{log.name}"}, body
    text = log.read_text(errors="replace")
    print(text[-6000:], flush=True)
    reports = sorted(folder.glob("doctor*.json"))
    if not reports:
        return "failed", {"command": cmd, "rc": proc.returncode}, \
            "No doctor report:\n\n```\n" + text[-1500:] + "\n```"
    report = json.loads(reports[0].read_text())
    wanted = [r for r in report["results"] if r["section"] in (keep, "grading", "notebooks")]
    body = _table(["status", "check", "result", "seconds"],
                  [(r["status"], r["name"], str(r["detail"]).replace("|", "\\|")[:200],
                    "" if r["seconds"] is None else f"{r['seconds']:.1f}") for r in wanted])
    if report.get("slowest_cells"):
        body += "\n\nSlowest cells:\n\n" + _table(
            ["seconds", "notebook", "cell"],
            [(f"{c['seconds']:.1f}", c["notebook"], c["cell"])
             for c in report["slowest_cells"][:10]])
    body += f"\n\nThe doctor's own reports: `{keep}/{reports[0].name}` and `.md`."
    data = {"command": cmd, "rc": proc.returncode, "counts": report["counts"],
            "results": wanted, "slowest_cells": report.get("slowest_cells", []),
            "report": f"{keep}/{reports[0].name}",
            "tf32_by_default": next((r.get("data", {}).get("tf32_by_default")
                                     for r in report["results"]
                                     if isinstance(r.get("data"), dict)
                                     and "tf32_by_default" in r["data"]), None)}
    return ("ok" if report["ok"] else "failed"), data, body


def finished_lines(text: str, section: str) -> list[str]:
    """The doctor's result lines (``STATUS  section name: detail``) of ``section`` in its
    printed output."""
    statuses = ("PASS", "FAIL", "WARN", "MISS", "SKIP", "INFO")
    return [line.rstrip() for line in text.splitlines()
            if line.split()[:2] in ([s, section] for s in statuses)]


def part_grading(ctx):
    return _doctor(ctx, "grading")


def part_notebooks(ctx):
    return _doctor(ctx, "notebooks")


RUNNERS = {"environment": part_environment, "kernel-check": part_kernel_check,
           "scan": part_scan, "layer": part_layer, "grading": part_grading,
           "notebooks": part_notebooks}


def run_part(args):
    """One part, in this process: writes ``PART.json`` and ``PART.md`` (also when it fails)."""
    out = pathlib.Path(args.out)
    part = next(p for p in PARTS if p.name == args.part)
    doctor = part.name in ("grading", "notebooks")
    if doctor:                   # the doctor's processes need the GPU's memory, not this one
        os.environ["XLA_PYTHON_CLIENT_PREALLOCATE"] = "false"
    device = (_known(out, "device", None) if doctor else None) or _device_here()
    kernel = _kernel_here(device)
    t0 = time.perf_counter()

    def write(status, data, body, reason=None):
        result = header(part.name, device, kernel, args.dry_run) | {
            "title": part.title, "status": status, "reason": reason,
            "estimate_s": part.estimate(args.dry_run),
            "seconds": round(time.perf_counter() - t0, 1), "data": data}
        _write(out, part.name, result, body)
        return result

    ctx = {"out": out, "dry_run": args.dry_run, "deadline": args.deadline, "write": write,
           "device": device}
    try:
        status, data, body = RUNNERS[part.name](ctx)
    except Exception as err:                                      # noqa: BLE001
        tb = traceback.format_exc()
        print(tb, file=sys.stderr)
        write("failed", {"error": f"{type(err).__name__}: {err}", "traceback": tb[-4000:]},
              "```\n" + tb[-2000:] + "\n```", reason=f"{type(err).__name__}: {str(err)[:200]}")
        return 1
    write(status, data, body, reason=data.get("reason") if isinstance(data, dict) else None)
    return 0


# ----------------------------------------------------------------------------------------
# The run: parts in order, under the budget
# ----------------------------------------------------------------------------------------

def _owned_archive(path):
    with tarfile.open(path) as tar:
        return any(pathlib.PurePath(n).name == MARKER for n in tar.getnames())


def check_out(out, pack=None) -> pathlib.Path:
    """Before any work: ``out`` is a new or empty folder, or one this command made (it holds
    ``MARKER``); ``pack`` a new file or an archive this command wrote."""
    folder = _io.check_folder(out, what="--out", create=True)
    if folder.is_dir() and any(folder.iterdir()) and not (folder / MARKER).exists():
        raise _io.DestinationError(
            f"`--out`: got {str(out)!r}, a folder that is not empty and was not made by `lrnn "
            "bench gpu` (it has no .lrnn-bench-gpu); nothing was run: choose a new or empty "
            "folder")
    if pack:
        _io.check_destination(pack, suffixes=(".tgz",), what="--pack", owned_by=_owned_archive,
                              command="lrnn bench gpu")
        if pathlib.Path(pack).resolve().parent == folder.resolve():
            raise _io.DestinationError(f"`--pack`: got {str(pack)!r}, inside --out; expected a "
                                       "file outside the results folder")
    return folder


def _prepare(folder: pathlib.Path):
    """Make the folder ours; clear what an earlier run of this command left there."""
    folder.mkdir(exist_ok=True)
    for p in PARTS:
        for suffix in (".json", ".md", ".log"):
            (folder / f"{p.name}{suffix}").unlink(missing_ok=True)
    for name in (f"{SUMMARY}.json", f"{SUMMARY}.md", "bench_layer.json", "bench_scan.json"):
        (folder / name).unlink(missing_ok=True)
    for sub in ("grading", "notebooks"):                   # the doctor's reports
        shutil.rmtree(folder / sub, ignore_errors=True)
    _io.atomic_write_text(folder / MARKER, "written by `lrnn bench gpu`\n")


def _pack(folder: pathlib.Path, pack):
    if not pack:
        return
    with _io.atomic_open(pack, "wb") as f, tarfile.open(fileobj=f, mode="w:gz") as tar:
        tar.add(folder, arcname=".")


def _child_env(dry_run: bool) -> dict:
    import lrnn
    env = dict(os.environ, PYTHONUNBUFFERED="1", MPLBACKEND="Agg")
    src = str(pathlib.Path(lrnn.__file__).resolve().parents[1])
    env["PYTHONPATH"] = src + (os.pathsep + env["PYTHONPATH"] if env.get("PYTHONPATH") else "")
    if dry_run:
        env["JAX_PLATFORMS"] = "cpu"
    else:                              # leave room beside JAX for the peers (PyTorch)
        env.setdefault("XLA_PYTHON_CLIENT_MEM_FRACTION", "0.6")
    return env


def _run_child(part: Part, folder: pathlib.Path, deadline: float, dry_run: bool):
    """(rc, stopped at the budget?) of ``--part`` in its own process group."""
    cmd = [sys.executable, "-m", "lrnn", "bench", "gpu", "--part", part.name, "--out",
           str(folder), "--deadline", repr(deadline)] + (["--dry-run"] if dry_run else [])
    with open(folder / f"{part.name}.log", "w") as log:
        proc = subprocess.Popen(cmd, stdout=log, stderr=subprocess.STDOUT,
                                env=_child_env(dry_run), start_new_session=True)
        try:
            return proc.wait(timeout=max(1.0, deadline - time.time() + GRACE_S)), False
        except subprocess.TimeoutExpired:
            for sig, wait in ((signal.SIGTERM, 5), (signal.SIGKILL, 5)):
                try:
                    os.killpg(proc.pid, sig)
                    return proc.wait(timeout=wait), True
                except (ProcessLookupError, subprocess.TimeoutExpired):
                    continue
            return -9, True


def _summary_markdown(summary: dict, folder: pathlib.Path) -> str:
    rows = [(p["name"], p["title"], p["status"] + (f": {p['reason']}" if p.get("reason") else ""),
             f"{p['estimate_s']:.0f}", "–" if p.get("seconds") is None else f"{p['seconds']:.0f}",
             ", ".join(f"`{f}`" for f in p.get("files", [])))
            for p in summary["parts"]]
    md = [f"# lrnn bench gpu: {summary['device'].get('device_kind', 'unknown device')}", "",
          header_md(summary), "",
          f"Budget {summary['budget_s']:.0f} s, used {summary['elapsed_s']:.0f} s "
          f"(parts that must fit: {summary['planned_s']:.0f} s estimated).", "",
          _table(["part", "what", "status", "estimate s", "seconds", "files"], rows)]
    scan = folder / "scan.json"
    if scan.exists():
        data = json.loads(scan.read_text()).get("data") or {}
        if data.get("predictions"):
            md += ["", "## Predictions and the measured column (forward, `scan` part)", "",
                   predictions_markdown(data["predictions"]), "",
                   "Update TUNING.md's table and `pallas_tuning.TABLE` from the stored "
                   "`bench_gpu.json` in one commit (GPU.md)."]
    return "\n".join(md) + "\n"


def run_gpu(args):
    if args.part:
        return run_part(args)
    if not args.budget_s > 0 or math.isinf(args.budget_s):
        raise SystemExit(f"--budget-s: got {args.budget_s!r}, expected a positive number of "
                         "seconds")
    if not args.out:
        raise SystemExit("--out: expected a folder for the results (new, empty, or one an "
                         "earlier `lrnn bench gpu` wrote)")
    try:
        folder = check_out(args.out, args.pack)
    except _io.DestinationError as err:
        raise SystemExit(str(err))
    _prepare(folder)
    start = time.time()
    deadline = start + args.budget_s
    summary = {"benchmark": "gpu", "budget_s": args.budget_s,
               "planned_s": planned_seconds(args.dry_run), "parts": []}

    def refresh():
        device = _known(folder, "device", {"device_kind": "unknown (no environment part)"})
        summary.update(header(SUMMARY, device, _known(folder, "kernel", None), args.dry_run))
        summary["elapsed_s"] = round(time.time() - start, 1)
        parts = {}
        for p in summary["parts"]:
            try:
                parts[p["name"]] = json.loads((folder / f"{p['name']}.json").read_text())
            except (OSError, ValueError):
                pass
        summary["results"] = parts           # every part's own result, in one file
        _io.atomic_write_text(folder / f"{SUMMARY}.json",
                              json.dumps(summary, indent=1, default=str) + "\n")
        _io.atomic_write_text(folder / f"{SUMMARY}.md", _summary_markdown(summary, folder))
        _pack(folder, args.pack)

    for part in PARTS:
        if args.parts and part.name not in args.parts:
            continue
        left = deadline - time.time()
        entry = {"name": part.name, "title": part.title, "estimate_s": part.estimate(args.dry_run),
                 "files": [f"{part.name}.json", f"{part.name}.md"]}
        if entry["estimate_s"] > left:
            _skip(part, folder, entry, left, args.dry_run)
        else:
            print(f"+ {part.name}: {part.title} (estimate {entry['estimate_s']:.0f} s, "
                  f"{left:.0f} s left)", flush=True)
            _run_and_record(part, folder, entry, deadline, args.dry_run)
            print(f"= {part.name}: {entry['status']}"
                  + (f" ({entry['reason']})" if entry.get("reason") else "")
                  + f" in {entry['seconds']:.0f} s", flush=True)
        summary["parts"].append(entry)
        refresh()
    print(_summary_markdown(summary, folder))
    print(f"results: {folder}" + (f" (packed into {args.pack})" if args.pack else ""))
    return 0 if all(p["status"] in ("ok", "skipped") for p in summary["parts"]) else 1


def _unknown_header(part, folder, dry_run) -> dict:
    device = _known(folder, "device", {"device_kind": "unknown (no environment part)"})
    return header(part.name, device, _known(folder, "kernel", None), dry_run)


def _skip(part, folder, entry, left, dry_run):
    """Record ``part`` as skipped: its estimate exceeds the ``left`` seconds of the budget."""
    entry.update(status="skipped", reason=f"estimated {entry['estimate_s']:.0f} s, "
                                           f"{max(left, 0):.0f} s of the budget left")
    result = _unknown_header(part, folder, dry_run)
    result.update(title=part.title, status="skipped", reason=entry["reason"],
                  estimate_s=entry["estimate_s"], seconds=None, data=None)
    _write(folder, part.name, result, "Not run.")


def _run_and_record(part, folder, entry, deadline, dry_run):
    """Run ``part`` in its own process; where it was stopped or failed without saying so, its
    result says so (what it wrote before stays, with the tail of its log)."""
    t0 = time.time()
    rc, stopped = _run_child(part, folder, deadline, dry_run)
    entry["seconds"] = round(time.time() - t0, 1)
    entry["files"].append(f"{part.name}.log")
    written = _known_result(folder, part.name)
    if written is not None and not stopped and rc == 0:
        entry.update(status=written["status"], reason=written.get("reason"))
        return
    why = (f"stopped when the budget ran out, after {entry['seconds']:.0f} s" if stopped
           else f"its process exited with {rc}")
    said = written is not None and written["status"] == "failed" and not stopped
    result = written or _unknown_header(part, folder, dry_run) | {
        "title": part.title, "data": None, "estimate_s": entry["estimate_s"]}
    if not said:
        tail = (folder / f"{part.name}.log").read_text(errors="replace")[-1500:]
        result.update(status="stopped" if stopped else "failed", reason=why,
                      seconds=entry["seconds"])
        _write(folder, part.name, result, _body_of(folder / f"{part.name}.md")
               + f"\n\n{why}. Tail of `{part.name}.log`:\n\n```\n{tail}\n```")
    entry.update(status=result["status"], reason=result.get("reason"))


def _body_of(md_path) -> str:
    """What a part's Markdown said below its status line (the rows it reached), or nothing."""
    try:
        text = md_path.read_text()
    except OSError:
        return ""
    return text.split("\n\n", 3)[3] if text.count("\n\n") >= 3 else ""


def _known_result(folder, name):
    try:
        return json.loads((folder / f"{name}.json").read_text())
    except (OSError, ValueError):
        return None


def _parts_list(text):
    names = [n.strip() for n in text.split(",") if n.strip()]
    bad = [n for n in names if n not in PART_NAMES]
    if bad or not names:
        raise SystemExit(f"--parts: got {text!r}, expected a comma-separated subset of "
                         f"{', '.join(PART_NAMES)}")
    return names


def add_parser(sub, scan_bench):
    """``lrnn bench gpu`` in the subcommands of ``lrnn bench``; ``scan_bench`` is the module
    ``lrnn.benchmarks.scan`` (its scan benchmark, layer parser and commit)."""
    global _SCAN_BENCH
    _SCAN_BENCH = scan_bench
    g = sub.add_parser("gpu", help="every GPU measurement of the course, in one budget")
    g.add_argument("--budget-s", type=float, default=420.0,
                   help="stop starting parts whose estimate exceeds what is left (default 420)")
    g.add_argument("--out", default=None, help="results folder (new, empty, or its own)")
    _io.output_argument(g, "--pack", default=None, suffixes=(".tgz",), owned_by=_owned_archive,
                        command="lrnn bench gpu",
                        help="also write the results folder as this .tgz after every part")
    g.add_argument("--dry-run", action="store_true",
                   help="every part on the CPU at tiny sizes (the kernel in interpret mode)")
    g.add_argument("--parts", type=_parts_list, default=None,
                   help=f"a subset of the parts ({', '.join(PART_NAMES)}), in the same order")
    g.add_argument("--part", choices=PART_NAMES, default=None, help=argparse_suppress())
    g.add_argument("--deadline", type=float, default=math.inf, help=argparse_suppress())
    g.set_defaults(run=run_gpu)
    return g


def argparse_suppress():
    import argparse
    return argparse.SUPPRESS
