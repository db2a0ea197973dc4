"""The kernel's tuning sweep behind ``lrnn bench plans``: its tiles and chunkings, timed at the
GPU shapes, the data behind ``lrnn.scan.pallas_tuning``.

    python -m lrnn bench plans --device gpu [--out FILE.jsonl]

For each (kind, shape) it times the kernel (planes in and out) for the tiles of
:func:`sweep_tiles` at the table's chunking and at one pass (stage A), then more and fewer chunks
around the two fastest (stage B), the adjoint at the best forward plan, and the XLA methods on
the same problem. Each row is printed, and appended to ``--out`` as one JSON line as it comes:
``--out`` is a new file or a log this sweep wrote (its first record is the run's head,
``"benchmark": "plans"``), never another file. The command line lives in
``lrnn.benchmarks.scan``, the shared helpers in ``lrnn.benchmarks._common``."""
from __future__ import annotations

import dataclasses
import json
import math
import time

import jax
import jax.numpy as jnp
from jax import lax

from .. import _io
from ..scan import linear_scan
from ._common import (COPY_BYTES, COPY_REPEATS, GPU_EXTRA_SHAPES, TV_SHAPES, block,
                            copy_bandwidth, device_info, git_commit, median_time, parse_shapes,
                            pick_device, require_positive)

#: (kind, shape) swept by ``plans``: the complex64 time-invariant shapes and the float32
#: time-varying ones of the GPU issue.
SWEEP_SHAPES = ([("ti-complex", s) for s in GPU_EXTRA_SHAPES]
                + [("tv-real", s) for s in TV_SHAPES])
#: How a log of this sweep starts: its first record holds ``"benchmark": "plans"``.
OWN_LOG = _io.jsonl_first_record_is("benchmark", "plans")
XLA_METHODS = ("sequential", "associative", "chunked")


def sweep_tiles():
    """Stage A of the sweep: tiles tried at the table's chunking and at one pass."""
    from ..scan.pallas_triton import Tiles
    return [Tiles(32, 8), Tiles(32, 16), Tiles(32, 16, prefetch=True), Tiles(32, 32),
            Tiles(32, 32, prefetch=True), Tiles(32, 64), Tiles(64, 16, warps=2),
            Tiles(32, 16, stages=3),
            # the time-parallel design (TUNING.md "Next design"): W sub-blocks per program
            Tiles(32, 16, time_warps=8), Tiles(32, 32, time_warps=8), Tiles(32, 16, time_warps=4),
            Tiles(32, 16, time_warps=16), Tiles(32, 8, time_warps=16)]


def _sweep_inputs(kind, shape, device):
    g, length, n = shape
    keys = jax.random.split(jax.random.PRNGKey(2), 4)
    if kind == "ti-complex":
        r = jax.random.uniform(keys[0], (n,), minval=0.9, maxval=0.999)
        th = jax.random.uniform(keys[1], (n,), maxval=2 * math.pi)
        a = (r * jnp.cos(th), r * jnp.sin(th))
        b = tuple(jax.random.normal(k, shape) for k in keys[2:])
        floor_bytes = 16 * g * length * n
    else:
        a = (jax.random.uniform(keys[0], shape, minval=0.9, maxval=1.0),)
        b = (jax.random.normal(keys[1], shape),)
        floor_bytes = 12 * g * length * n
    return jax.device_put((a, b), device), floor_bytes


def _time_both(compiled, args, repeats):
    """(median of synchronised calls, mean of 10 back-to-back calls between syncs)."""
    synced = median_time(compiled, *args, repeats=repeats)
    block(compiled(*args))
    t0 = time.perf_counter()
    for _ in range(10):
        out = compiled(*args)
    block(out)
    return synced, (time.perf_counter() - t0) / 10


def from_planes_any(planes):
    return lax.complex(*planes) if len(planes) == 2 else planes[0]


def check_plan_args(args) -> list[str]:
    """The sweep's options checked before any work; returns the XLA methods to time."""
    require_positive(args, "repeats", "copy-bytes", "max-tiles")
    if not args.budget_s > 0:                                  # NaN too
        raise SystemExit(f"--budget-s: got {args.budget_s!r}, expected a positive number of "
                         "seconds")
    xla = [m.strip() for m in args.xla_methods.split(",")]
    if not all(m in XLA_METHODS for m in xla):
        raise SystemExit(f"--xla-methods: got {args.xla_methods!r}, expected a comma-separated "
                         f"subset of {', '.join(XLA_METHODS)}")
    return xla


@dataclasses.dataclass
class Problem:
    """One (kind, shape) of the sweep: its inputs as planes, the bytes that must move, and the
    reference result (the associative scan, computed once when first needed)."""
    kind: str
    shape: tuple
    a: tuple
    b: tuple
    floor_bytes: int
    _reference: tuple | None = None

    def reference(self):
        if self._reference is None:
            fn = jax.jit(lambda a, b: linear_scan(a, b, method="associative"))
            x = fn(from_planes_any(self.a), from_planes_any(self.b))
            self._reference = (jnp.real(x), jnp.imag(x)) if len(self.b) == 2 else (x,)
        return self._reference


class Sweep:
    """The state of one run: its options, device, copy rate, clock and log (``--out``)."""

    def __init__(self, args, device, copy):
        self.args, self.device, self.copy = args, device, copy
        self.interpret = device.platform != "gpu"
        self.start = time.perf_counter()
        self.results = []

    def over_budget(self) -> bool:
        return time.perf_counter() - self.start > self.args.budget_s

    def record(self, row):
        self.results.append(row)
        line = json.dumps(row)
        print(line, flush=True)
        if self.args.out:
            _io.append_own_line(self.args.out, line, marker=OWN_LOG)

    def time_plan(self, prob: Problem, tiles, chunk, *, adjoint=False, adjoint_tiles=None):
        """Compile and time the kernel (or, with ``adjoint``, the forward then the adjoint)
        with ``tiles`` and ``chunk``; one row, recorded and returned (``error`` if it fails)."""
        from ..scan import pallas as scan_pallas
        row = {"kind": prob.kind, "shape": list(prob.shape), "tiles": dataclasses.asdict(tiles),
               "chunk": chunk, "adjoint": adjoint}
        if adjoint:
            row["adjoint_tiles"] = dataclasses.asdict(adjoint_tiles or tiles)
        try:
            p = scan_pallas.plan(*prob.shape, kind=prob.kind, tiles=tiles, chunk=chunk)
            row.update(n_chunks=p.n_chunks, chunk=p.chunk)
            fn = _kernel_fn(tiles, chunk, self.interpret, adjoint, adjoint_tiles or tiles)
            t0 = time.perf_counter()
            compiled = jax.jit(fn).lower(prob.a, prob.b).compile()
            row["compile_s"] = time.perf_counter() - t0
            if not adjoint:
                row["rel_err"] = _rel_err(compiled(prob.a, prob.b), prob.reference())
            self._time(row, compiled, (prob.a, prob.b), prob.floor_bytes, pipelined=True)
        except Exception as err:                                      # noqa: BLE001
            row["error"] = f"{type(err).__name__}: {str(err)[:300]}"
        self.record(row)
        return row

    def _time(self, row, compiled, args, floor_bytes, *, pipelined):
        row["synced_s"], row["pipelined_s"] = _time_both(compiled, args, self.args.repeats)
        row["copy_fraction"] = floor_bytes / row["synced_s"] / 1e9 / self.copy["GBps"]
        if pipelined:
            row["copy_fraction_pipelined"] = (floor_bytes / row["pipelined_s"] / 1e9
                                              / self.copy["GBps"])


def _kernel_fn(tiles, chunk, interpret, adjoint, adjoint_tiles):
    from ..scan import pallas as scan_pallas

    def fwd(a, b):
        return scan_pallas.scan_planes(a, b, tiles=tiles, chunk=chunk, interpret=interpret)

    def fwd_adj(a, b):
        x = fwd(a, b)
        return scan_pallas.scan_planes(a, b, reverse=True, x=x, tiles=adjoint_tiles,
                                       chunk=chunk, interpret=interpret)
    return fwd_adj if adjoint else fwd


def _rel_err(x, ref) -> float:
    return float(max(jnp.max(jnp.abs(u - v)) for u, v in zip(x, ref))
                 / max(jnp.max(jnp.abs(v)) for v in ref))


def _fastest(rows):
    return sorted((r for r in rows if "synced_s" in r), key=lambda r: r["synced_s"])


def stage_a(sweep: Sweep, prob: Problem, default):
    """Every tile of :func:`sweep_tiles` within its register budget, at the default chunking,
    at one pass and (time-parallel tiles) at that design's chunking."""
    from ..scan import pallas as scan_pallas
    from ..scan import pallas_tuning
    rows = []
    for tiles in sweep_tiles()[:sweep.args.max_tiles]:
        need = pallas_tuning.registers(tiles, prob.kind, False)
        budget = pallas_tuning.register_budget(tiles)
        if need > budget:
            # ptxas spills these (TUNING.md "Registers from ptxas"), and a time-parallel
            # body that large takes Triton minutes to compile: not worth a sweep step
            sweep.record({"kind": prob.kind, "shape": list(prob.shape),
                          "tiles": dataclasses.asdict(tiles),
                          "skipped": f"registers: about {need} a thread, over the budget of "
                                     f"{budget}"})
            continue
        chunks = {default.chunk, prob.shape[1]}
        if tiles.time_warps > 1:           # the next design's chunking for its W
            with pallas_tuning.design("time-parallel"):
                chunks.add(scan_pallas.plan(*prob.shape, kind=prob.kind, tiles=tiles,
                                            capability="9.0").chunk)
        rows += [sweep.time_plan(prob, tiles, chunk) for chunk in sorted(chunks)]
    return rows


def stage_b(sweep: Sweep, prob: Problem, default, rows):
    """For the two fastest plans of stage A: a quarter, half, twice and four times as many
    chunks (rounded to whole blocks of rows, at least 64 steps each)."""
    for r in _fastest(rows)[:2]:
        if sweep.over_budget():
            break
        tiles = type(default.tiles)(**r["tiles"])
        for factor in (0.25, 0.5, 2.0, 4.0):
            n_chunks = max(1, round(r["n_chunks"] * factor))
            chunk = -(-prob.shape[1] // n_chunks)
            rows_per_block = tiles.unroll * tiles.time_warps
            chunk = -(-chunk // rows_per_block) * rows_per_block
            if n_chunks == r["n_chunks"] or chunk < 64 or \
                    any(x["tiles"] == r["tiles"] and x.get("chunk") == chunk for x in rows):
                continue
            rows.append(sweep.time_plan(prob, tiles, chunk))
    return rows


def time_best(sweep: Sweep, prob: Problem, default, proposed, rows):
    """The adjoint at the best forward plan (its tiles shrunk to the adjoint's register
    budget), then the summary row of the shape."""
    from ..scan import pallas_tuning
    ok = _fastest(rows)
    if not ok:
        return
    best = ok[0]
    best_tiles = type(default.tiles)(**best["tiles"])
    adjoint_tiles = pallas_tuning.fit_registers(best_tiles, prob.kind, True)
    sweep.time_plan(prob, best_tiles, best["chunk"], adjoint=True, adjoint_tiles=adjoint_tiles)
    sweep.record({"kind": prob.kind, "shape": list(prob.shape),
                  "lanes": prob.shape[0] * prob.shape[2], "best": best,
                  "default_plan": dataclasses.asdict(default.tiles) | {"chunk": default.chunk},
                  "time_parallel_plan": dataclasses.asdict(proposed.tiles)
                  | {"chunk": proposed.chunk}})


def time_xla(sweep: Sweep, prob: Problem, methods):
    """The XLA methods (and ``linear_scan(method="pallas")``) on the same problem, arrays in
    and out (complex64 for complex kinds)."""
    full_a, full_b = from_planes_any(prob.a), from_planes_any(prob.b)
    for method in [m for m in methods if m] + ["pallas"]:
        row = {"kind": prob.kind, "shape": list(prob.shape), "method": method}
        try:
            fn = (lambda m: lambda a, b: linear_scan(a, b, method=m))(method)
            t0 = time.perf_counter()
            compiled = jax.jit(fn).lower(full_a, full_b).compile()
            row["compile_s"] = time.perf_counter() - t0
            sweep._time(row, compiled, (full_a, full_b), prob.floor_bytes, pipelined=False)
        except Exception as err:                                      # noqa: BLE001
            row["error"] = f"{type(err).__name__}: {str(err)[:300]}"
        sweep.record(row)


def sweep_shape(sweep: Sweep, kind, shape, xla_methods):
    """Stages A and B, the adjoint and the XLA methods for one (kind, shape)."""
    from ..scan import pallas as scan_pallas
    from ..scan import pallas_tuning
    (a, b), floor_bytes = _sweep_inputs(kind, shape, sweep.device)
    prob = Problem(kind, tuple(shape), a, b, floor_bytes)
    default = scan_pallas.plan(*shape, kind=kind)
    with pallas_tuning.design("time-parallel"):
        proposed = scan_pallas.plan(*shape, kind=kind, capability="9.0")
    rows = stage_b(sweep, prob, default, stage_a(sweep, prob, default))
    time_best(sweep, prob, default, proposed, rows)
    time_xla(sweep, prob, xla_methods)


def run_plans(args):
    """Time the kernel (planes in and out) for a grid of tiles × chunk counts per shape, the
    adjoint at the best forward plan, and the XLA methods on the same problem: the data behind
    ``lrnn.scan.pallas_tuning``. Rows are appended to ``--out`` as JSON lines as they come."""
    xla = check_plan_args(args)
    device = pick_device(args.device)
    if device.platform != "gpu" and not args.interpret:
        raise SystemExit("plans: times the Pallas kernel, which compiles only on a GPU; pass "
                         "--interpret to smoke-test the sweep elsewhere (it then times the "
                         "interpreter, not the kernel)")
    todo = ([(k, s) for k in args.kinds.split(",") for s in parse_shapes(args.shapes)]
            if args.shapes else SWEEP_SHAPES)
    sweep = Sweep(args, device, copy_bandwidth(device, nbytes=args.copy_bytes,
                                               repeats=COPY_REPEATS))
    head = {"benchmark": "plans", "command": "python -m lrnn bench " + " ".join(args.argv),
            "commit": git_commit(), "device": device_info(device), "copy": sweep.copy,
            "interpret": sweep.interpret}
    print(json.dumps(head), flush=True)
    if args.out:
        _io.append_own_line(args.out, json.dumps(head), marker=OWN_LOG)
    for kind, shape in todo:
        if sweep.over_budget():
            sweep.record({"kind": kind, "shape": list(shape), "skipped": "time budget"})
            continue
        sweep_shape(sweep, kind, shape, xla)
    print(f"plans: {len(sweep.results)} rows in {time.perf_counter() - sweep.start:.0f} s")
    return {"head": head, "results": sweep.results}


def add_parser(subparsers):
    pp = subparsers.add_parser("plans", help="the kernel's tuning sweep (tiles × chunks per shape)")
    pp.add_argument("--device", choices=["cpu", "gpu"], default=None)
    _io.output_argument(pp, "--out", default=None, suffixes=(".jsonl", ".json"),
                        owned_by=OWN_LOG, command="lrnn bench plans (a log of its own)",
                        help="append JSON lines here (a new file, or a log this sweep wrote)")
    pp.add_argument("--shapes", default=None, help="default: the GPU issue's shapes")
    pp.add_argument("--kinds", default="ti-complex", help="with --shapes: ti-complex, tv-real, ...")
    pp.add_argument("--xla-methods", default="associative,chunked")
    pp.add_argument("--repeats", type=int, default=10)
    pp.add_argument("--copy-bytes", type=int, default=COPY_BYTES)
    pp.add_argument("--max-tiles", type=int, default=99,
                    help="try only the first tiles of the sweep (smoke tests)")
    pp.add_argument("--budget-s", type=float, default=240.0,
                    help="stop starting new shapes after this many seconds")
    pp.add_argument("--interpret", action="store_true",
                    help="allow a run without a GPU (interpret mode; smoke test only)")
    pp.set_defaults(run=run_plans)
    return pp
