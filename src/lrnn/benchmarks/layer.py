"""The layer benchmark behind ``python -m lrnn bench layer``. Three parts, one JSON file:

* ``results``: forward+backward of an LRU and a RotRNN layer, ``lrnn``'s scan (``"auto"``)
  against the papers' ``lax.associative_scan`` (``--layers``; sizes ``--d-model``, ...).
* ``model_steps``: one training step (value and gradient of a loss) of the deep model
  (``lrnn.model``) for every recurrent model of the course (``--models``): the oRNN in both
  formulations, LSTM, GRU, RotLSTM, RotGRU, LRU and RotRNN, at L = 400, hidden size 128,
  depth 2, batch 64 unless ``--length``/``--d-state``/``--batch`` are given. The oRNN's
  target: its step at most 1.2× the LSTM's (``model_targets``).
* ``ornn_batch_sweep``: the same step for both oRNN formulations over batches
  ``--sweep-batches`` and reflection counts ``--sweep-reflections``: where the paper's §6
  claim (its method pays off for mini-batches near 1) holds on this device; and
  ``w_construction``: the two ways of forming W (reflections applied to the identity, compact
  WY), timed and compared with float64 (values, orthogonality, gradients).

The command line lives in ``lrnn.benchmarks.scan``, the shared helpers in ``lrnn.benchmarks._common``."""
from __future__ import annotations

import contextlib
import datetime as _dt
import json

import jax
import jax.numpy as jnp
import numpy as np

from .. import layers, model as model_lib, orthogonal
from .. import scan as scan_lib
from ..layers import ornn
from ..scan import choose_method, pallas_tuning
from .. import _io
from ._common import (compile_and_memory, device_info, git_commit, on_gpu, output_spec,
                      paper_scan, pick_device, target_row, time_interleaved, want_pallas_rows,
                      write_json)


# ----------------------------------------------------------------------------------------
# Layer benchmark: LRU and RotRNN forward+backward, auto versus the papers' associative scan.
# ----------------------------------------------------------------------------------------

def papers_scan():
    """Context manager: inside it every ``linear_scan``/``rotation_scan`` runs as the papers'
    code does (λ repeated per step, ``lax.associative_scan``, differentiated by autodiff
    instead of ``lrnn``'s custom VJP), through ``lrnn.scan.override``. Used only to benchmark
    the layers against it."""
    return scan_lib.override(paper_scan)


#: The layers of the scan comparison (``--layers``): the two whose recurrence is a linear scan.
SCAN_LAYERS = ("lru", "rotrnn")
#: The rows of the model-step benchmark (``--models``): row name -> ModelConfig options.
MODEL_ROWS = {
    "ornn-dense": dict(layer="ornn", formulation="dense"),
    "ornn-reflections": dict(layer="ornn", formulation="reflections"),
    "lstm": dict(layer="lstm"),
    "gru": dict(layer="gru"),
    "rotlstm": dict(layer="rotlstm"),
    "rotgru": dict(layer="rotgru"),
    "lru": dict(layer="lru"),
    "rotrnn": dict(layer="rotrnn"),
}
#: The layer target: fwd+bwd with ``auto`` at least this many times faster than the papers' scan.
LAYER_TARGET = 1.5
#: Target of the oRNN issue: the oRNN training step at most this many times the LSTM's.
ORNN_OVER_LSTM_TARGET = 1.2


def _comma_list(name, text, known, *, allow_all=True):
    """``"a,b"`` -> ``["a", "b"]``, each in ``known``; ``"all"``/``"none"`` when allowed."""
    if allow_all and text == "all":
        return list(known)
    if allow_all and text == "none":
        return []
    items = [t for t in text.split(",") if t]
    bad = [t for t in items if t not in known]
    if bad or not items:
        extra = " (or all, none)" if allow_all else ""
        raise SystemExit(f"lrnn bench layer: error: --{name}: got {text!r}, expected a "
                         f"comma-separated list of {list(known)}{extra}")
    return items


def _positive_ints(name, text):
    try:
        values = [int(t) for t in text.split(",") if t]
    except ValueError:
        values = []
    if not values or min(values) < 1:
        raise SystemExit(f"lrnn bench layer: error: --{name}: got {text!r}, expected "
                         "a comma-separated list of positive integers")
    return values


def run_layer(args):
    device = pick_device(args.device)
    for name in ("d_model", "d_state", "batch", "length", "heads", "repeats"):
        value = getattr(args, name)
        if value is not None and value < 1:
            raise SystemExit(f"lrnn bench layer: error: --{name.replace('_', '-')}: "
                             f"got {value}, expected a positive integer")
    scan_layers = _comma_list("layers", args.layers, SCAN_LAYERS)
    model_rows = _comma_list("models", args.models, MODEL_ROWS)
    sweep_batches = [] if args.batch else _positive_ints("sweep-batches", args.sweep_batches)
    sweep_m = _positive_ints("sweep-reflections", args.sweep_reflections) if sweep_batches else []
    out = {
        "benchmark": "layer",
        "command": "python -m lrnn bench " + " ".join(args.argv),
        "commit": git_commit(),
        "date_utc": _dt.datetime.now(_dt.timezone.utc).isoformat(timespec="seconds"),
        "device": device_info(device),
        "repeats": args.repeats,
        "definitions": {
            "step_s": "best wall time of value_and_grad(mean(apply(params, u)**2)) after a "
                      "warm-up (median beside)",
            "model_steps.step_s": "best wall time of jit(value_and_grad(loss)) of the deep model "
                                  "(lrnn.model: encoder, depth x [norm, layer, GELU, GLU], mean "
                                  "pool, decoder; MSE loss) after a warm-up, rows timed "
                                  "round-robin (median beside)",
        },
    }
    with jax.default_device(device):
        out.update(_scan_rows(args, device, scan_layers))
        if model_rows or sweep_batches:
            out.update(_model_rows(args, device, model_rows, sweep_batches, sweep_m))
        if args.construction:
            out["w_construction"] = w_construction(device, n=args.d_state or 128,
                                                   repeats=args.repeats)
    out["targets"] = layer_targets(out)
    for t in out["targets"] + out.get("model_targets", []):
        print("target", json.dumps(t))
    write_json(out, args.out)
    return out


# ----------------------------------------------------------------------------------------
# LRU and RotRNN layers: auto against the papers' associative scan.
# ----------------------------------------------------------------------------------------

#: The layouts of the rows: what the scan reads and writes around it.
PLANES = "planes"
COMPLEX_ARRAYS = "complex arrays"


#: the layer row of the kernel's time-parallel design (predicted, not yet measured)
TIME_PARALLEL = "pallas, time-parallel"


def layer_scan_rows(with_pallas: bool) -> list[dict]:
    """The rows of the layer table, in print order: ``scan`` (the label), ``method``,
    ``layout`` and ``headline``. With the kernel, its row on planes (what the layers run) is
    the headline and the same kernel on complex arrays (XLA's split and join around it, the
    layers' former path) sits beside it; ``auto`` and the papers' scan follow."""
    rows = []
    if with_pallas:
        rows += [dict(scan="pallas", method="pallas", layout=PLANES, headline=True),
                 dict(scan="pallas, complex arrays", method="pallas", layout=COMPLEX_ARRAYS,
                      headline=False),
                 # the kernel's next design (TUNING.md), planned by design("time-parallel")
                 dict(scan=TIME_PARALLEL, method="pallas", layout=PLANES, headline=False,
                      design="time-parallel")]
    rows += [dict(scan="auto", method="auto", layout=None, headline=not with_pallas),
             dict(scan="paper: associative_scan", method=None, layout=COMPLEX_ARRAYS,
                  headline=False)]
    return rows


def _layout_of(method_picked: str) -> str:
    return PLANES if method_picked == "pallas" else COMPLEX_ARRAYS


def _row_context(spec):
    if spec["method"] is None:
        return papers_scan()
    if spec["layout"] == COMPLEX_ARRAYS:
        return scan_lib.complex_arrays()
    if spec.get("design"):
        return pallas_tuning.design(spec["design"])
    return contextlib.nullcontext()


def _scan_rows(args, device, names):
    gpu = device.platform == "gpu"
    d_model = args.d_model or (256 if gpu else 64)
    d_state = args.d_state or (256 if gpu else 64)
    batch = args.batch or (32 if gpu else 4)
    length = args.length or (4096 if gpu else 1024)
    heads = args.heads
    if not names:
        return {"results": [], "speedup_auto_over_paper": {}}
    specs = [s for s in layer_scan_rows(want_pallas_rows(args.pallas, device.platform))
             if not (getattr(args, "no_time_parallel", False) and s.get("design"))]
    print(f"device: {device.platform} ({device.device_kind}); d_model={d_model} "
          f"d_state={d_state} B={batch} L={length} RotRNN heads={heads}")
    key = jax.random.PRNGKey(0)
    u = jax.device_put(jax.random.normal(key, (batch, length, d_model)), device)
    chosen = []
    for name in names:
        mod = layers.get(name)
        options = {"n_heads": heads} if name == "rotrnn" else {}
        params = mod.init(jax.random.PRNGKey(1), d_model, d_state, **options)
        chosen.append((name, mod, jax.device_put(params, device)))
    results = []
    print(f"  {'layer':<8} {'scan':<26} {'layout':<15} {'compile s':>9} {'step ms':>9} "
          f"{'median ms':>9} {'f+b MiB':>9}")
    for name, mod, params in chosen:
        calls = []
        for spec in specs:
            method = spec["method"] or "auto"

            def loss(p, u, mod=mod, method=method):
                return jnp.mean(mod.apply(p, u, scan_method=method) ** 2)
            step = jax.value_and_grad(loss)      # a new function: jit must not reuse a trace
            row = {"layer": name, "scan": spec["scan"], "layout": spec["layout"],
                   "headline": spec["headline"], "d_model": d_model, "d_state": d_state,
                   "batch": batch, "length": length}
            if name == "rotrnn":
                row["heads"] = heads
            if spec["method"] == "auto":
                row["auto_picks"] = choose_method((batch, length, d_state // 2 if name == "rotrnn"
                                                   else d_state), backend=device.platform)
                row["layout"] = _layout_of(row["auto_picks"])
            with _row_context(spec):
                compiled, row["compile_s"], row["memory_fwdbwd"] = \
                    compile_and_memory(step, params, u)
            calls.append((compiled, (params, u)))
            results.append(row)
        for row, (best, median) in zip(results[-len(specs):],
                                       time_interleaved(calls, repeats=args.repeats)):
            row["step_s"], row["step_median_s"] = best, median
            memory = row["memory_fwdbwd"]
            mem = memory["peak_bytes"] / 2**20 if memory else float("nan")
            mark = "★" if row["headline"] else " "
            print(f"{mark} {name:<8} {row['scan']:<26} {row['layout']:<15} "
                  f"{row['compile_s']:9.2f} {row['step_s'] * 1e3:9.2f} "
                  f"{row['step_median_s'] * 1e3:9.2f} {mem:9.1f}", flush=True)
    print("★ the headline row: the kernel on planes where it runs, else auto")
    speedups = {}
    for name, _, _ in chosen:
        a = next(r for r in results if r["layer"] == name and r["scan"] == "auto")
        p = next(r for r in results
                 if r["layer"] == name and r["scan"] == "paper: associative_scan")
        speedups[name] = p["step_s"] / a["step_s"]
        print(f"{name}: auto is {speedups[name]:.2f}x the speed of the papers' associative scan")
        planes = [r for r in results if r["layer"] == name and r["scan"] == "pallas"]
        arrays = [r for r in results
                  if r["layer"] == name and r["scan"] == "pallas, complex arrays"]
        if planes and arrays:
            ratio = arrays[0]["step_s"] / planes[0]["step_s"]
            print(f"{name}: the kernel on planes is {ratio:.2f}x the speed of the kernel on "
                  "complex arrays")
        proposed = [r for r in results if r["layer"] == name and r["scan"] == TIME_PARALLEL]
        if planes and proposed:
            ratio = planes[0]["step_s"] / proposed[0]["step_s"]
            print(f"{name}: the kernel's time-parallel design is {ratio:.2f}x the speed of its "
                  "measured table (TUNING.md predicts it)")
    return {"results": results, "speedup_auto_over_paper": speedups}


# ----------------------------------------------------------------------------------------
# Training steps of the deep model, every recurrent model of the course.
# ----------------------------------------------------------------------------------------

def model_config(row: str, *, hidden: int, d_model: int, depth: int, n_reflections=None,
                 **changes) -> model_lib.ModelConfig:
    """The ModelConfig of a row of :data:`MODEL_ROWS`: hidden size ``hidden`` for the oRNN and
    the gated cells; the LRU with ``hidden`` complex states; the RotRNN with the LRU's real
    state size ``2·hidden`` in heads of 8 (as in the gpu-targets suite); adding-problem inputs
    (2 channels), one output, mean pooling."""
    options = {**MODEL_ROWS[row], **changes}
    if options["layer"] == "rotrnn":
        options.update(d_state=2 * hidden, n_heads=max(1, 2 * hidden // 8))
    else:
        options["d_state"] = hidden
    if options["layer"] == "ornn":
        options["n_reflections"] = n_reflections or hidden
    return model_lib.ModelConfig(d_input=2, d_output=1, d_model=d_model, depth=depth,
                                 pool="mean", **options)


def _step_fn(cfg):
    def loss(params, state, x, y):
        out, _ = model_lib.apply(params, state, x, cfg, train=True)
        return jnp.mean((out[..., 0] - y) ** 2)
    return jax.value_and_grad(loss)


def _compile_step(cfg, batch, length, device):
    params, state = model_lib.init(jax.random.PRNGKey(0), cfg)
    x = jax.random.uniform(jax.random.PRNGKey(1), (batch, length, 2))
    y = jnp.sum(x[..., 0], axis=-1) / length
    args = jax.device_put((params, state, x, y), device)
    compiled, compile_s, memory = compile_and_memory(_step_fn(cfg), *args)
    return compiled, args, {"compile_s": compile_s, "memory_fwdbwd": memory,
                            "n_params": model_lib.count_params(params)}


def _timed(entries, repeats):
    """Compile and time ``[(row dict, cfg, batch, length)]`` round-robin; fills the rows."""
    calls = []
    for row, cfg, batch, length, device in entries:
        compiled, args, info = _compile_step(cfg, batch, length, device)
        row.update(info)
        calls.append((compiled, args))
    for (row, *_), (best, median) in zip(entries, time_interleaved(calls, repeats=repeats)):
        row["step_s"], row["step_median_s"] = best, median


def _model_rows(args, device, rows, sweep_batches, sweep_m):
    length = args.length or 400
    hidden = args.d_state or 128
    d_model = args.d_model or 128
    batch = args.batch or 64
    depth = args.depth
    m_default = args.ornn_reflections or hidden
    print(f"\nmodel training step: L={length} hidden={hidden} d_model={d_model} depth={depth} "
          f"B={batch} (oRNN m={m_default}); rows timed round-robin, best of {args.repeats}")
    out = {"model_steps": [], "ornn_batch_sweep": []}
    entries = []
    for name in rows:
        cfg = model_config(name, hidden=hidden, d_model=d_model, depth=depth,
                           n_reflections=m_default)
        row = {"model": name, "layer": cfg.layer, "length": length, "batch": batch,
               "d_model": d_model, "d_state": cfg.d_state, "depth": depth}
        if cfg.layer == "ornn":
            row.update(formulation=cfg.formulation, n_reflections=cfg.n_reflections)
        if cfg.layer == "rotrnn":
            row["heads"] = cfg.n_heads
        out["model_steps"].append(row)
        entries.append((row, cfg, batch, length, device))
    if entries:
        _timed(entries, args.repeats)
    print(f"{'model':<18} {'params':>8} {'compile s':>9} {'step ms':>9} {'median ms':>9}")
    for row in out["model_steps"]:
        print(f"{row['model']:<18} {row['n_params']:8d} {row['compile_s']:9.2f} "
              f"{row['step_s'] * 1e3:9.2f} {row['step_median_s'] * 1e3:9.2f}", flush=True)
    for m in sweep_m:
        entries = []
        for b in sweep_batches:
            for form in ("dense", "reflections"):
                cfg = model_config(f"ornn-{form}", hidden=hidden, d_model=d_model, depth=depth,
                                   n_reflections=min(m, hidden))
                row = {"n_reflections": cfg.n_reflections, "batch": b, "formulation": form,
                       "length": length, "d_state": hidden, "d_model": d_model, "depth": depth,
                       "auto_picks": ornn.choose_formulation(b, hidden, cfg.n_reflections,
                                                             device.platform)[0]}
                out["ornn_batch_sweep"].append(row)
                entries.append((row, cfg, b, length, device))
        _timed(entries, args.repeats)
    if out["ornn_batch_sweep"]:
        print(f"\noRNN batch sweep (step ms): {'m':>4} {'batch':>5} {'dense':>9} "
              f"{'reflections':>11} {'faster':>12} {'auto picks':>11}")
    for dense, refl in zip(out["ornn_batch_sweep"][::2], out["ornn_batch_sweep"][1::2]):
        faster = "dense" if dense["step_s"] <= refl["step_s"] else "reflections"
        print(f"{'':28}{dense['n_reflections']:4d} {dense['batch']:5d} "
              f"{dense['step_s'] * 1e3:9.2f} {refl['step_s'] * 1e3:11.2f} {faster:>12} "
              f"{dense['auto_picks']:>11}", flush=True)
    out["model_targets"] = model_targets(out, device.platform)
    return out


def layer_targets(layer=None):
    """The layer targets, from ``lrnn bench layer`` JSON (the issue's sizes only)."""
    speed = {}
    if on_gpu(layer) and all(r["d_model"] == 256 and r["d_state"] == 256 and r["batch"] == 32
                             and r["length"] == 4096 for r in layer["results"]):
        speed = layer["speedup_auto_over_paper"]
    return [target_row(f"{name} layer fwd+bwd ≥ 1.5× paper associative_scan", None,
                       speed.get(name), LAYER_TARGET,
                       speed.get(name) is not None and speed[name] >= LAYER_TARGET, "×")
            for name in ("lru", "rotrnn")]


def model_targets(out, platform=None):
    """The oRNN issue's speed target on ``model_steps`` rows: the oRNN step (the formulation
    ``"auto"`` picks at that size) at most 1.2× the LSTM step. ``measured`` is ``None`` when
    the rows are missing."""
    rows = {r["model"]: r for r in out.get("model_steps", [])}
    lstm = rows.get("lstm")
    targets = []
    for name in ("ornn-dense", "ornn-reflections"):
        r = rows.get(name)
        if r is None:
            continue
        picks = ornn.choose_formulation(r["batch"], r["d_state"], r["n_reflections"],
                                        platform or out["device"]["platform"])[0]
        if picks != r["formulation"]:
            continue
        ratio = r["step_s"] / lstm["step_s"] if lstm else None
        targets.append({"target": f"oRNN step (auto: {picks}) <= {ORNN_OVER_LSTM_TARGET}x LSTM "
                                  "step", "measured": ratio, "threshold": ORNN_OVER_LSTM_TARGET,
                        "passed": None if ratio is None else ratio <= ORNN_OVER_LSTM_TARGET})
    return targets


# ----------------------------------------------------------------------------------------
# Forming W: reflections applied to the identity against the compact WY form.
# ----------------------------------------------------------------------------------------

def _w_np(cols):
    W = np.eye(cols.shape[0])
    for j in range(cols.shape[1]):
        u = cols[:, j]
        W = W @ (np.eye(len(u)) - 2 * np.outer(u, u) / (u @ u))
    return W


@contextlib.contextmanager
def _float64():
    previous = jax.config.jax_enable_x64
    jax.config.update("jax_enable_x64", True)
    try:
        yield
    finally:
        jax.config.update("jax_enable_x64", previous)


def w_construction(device, *, n=128, ms=None, repeats=5, seed=0):
    """Both ways of forming W in float32, against float64: ``orthogonal.reflect_identity``
    (the m reflections applied to the identity one at a time, used on a CPU) and
    ``orthogonal.compact_wy`` (``I - U T⁻¹ Uᵀ``, oRNN Prop. 1, used on a GPU). Reports
    max |W - W64|, ‖WᵀW - I‖₂, the relative max error of the gradient of ``sum(sin(W R))``
    with respect to ``U``, and forward and forward+backward times."""
    rng = np.random.default_rng(seed)
    builders = {"reflect_identity": orthogonal.reflect_identity,
                "compact_wy": orthogonal.compact_wy}
    rows = []
    for m in ms or (16, n - 1):
        cols = rng.uniform(-1, 1, (n, m)) * np.asarray(orthogonal.eq9_mask(n, m))
        R = rng.normal(size=(n, n))
        W64 = _w_np(cols)
        with _float64():
            g64 = np.asarray(jax.grad(lambda c: jnp.sum(jnp.sin(
                orthogonal.reflect_identity(c) @ R)))(jnp.asarray(cols)))
        c32 = jax.device_put(jnp.asarray(cols, jnp.float32), device)
        R32 = jax.device_put(jnp.asarray(R, jnp.float32), device)
        calls = []
        for name, build in builders.items():
            fwd = jax.jit(build).lower(c32).compile()
            grad = jax.jit(jax.grad(lambda c, R, b=build: jnp.sum(jnp.sin(b(c) @ R)))).lower(
                c32, R32).compile()
            W = np.asarray(fwd(c32), np.float64)
            g = np.asarray(grad(c32, R32), np.float64)
            rows.append({"builder": name, "n": n, "m": m,
                         "max_abs_err_W": float(np.abs(W - W64).max()),
                         "orthogonality_2norm": float(np.linalg.norm(W.T @ W - np.eye(n), 2)),
                         "grad_rel_err": float(np.abs(g - g64).max() / np.abs(g64).max())})
            calls += [(fwd, (c32,)), (grad, (c32, R32))]
        times = time_interleaved(calls, repeats=repeats)
        for row, (fwd_t, grad_t) in zip(rows[-len(builders):], zip(times[::2], times[1::2])):
            row["fwd_s"], row["fwdbwd_s"] = fwd_t[0], grad_t[0]
    print("\nforming W (float32 against float64):")
    for r in rows:
        print(f"  {r['builder']:<17} n={r['n']} m={r['m']:<4} |W-W64| {r['max_abs_err_W']:.1e}  "
              f"|WtW-I| {r['orthogonality_2norm']:.1e}  grad err {r['grad_rel_err']:.1e}  "
              f"fwd {r['fwd_s'] * 1e3:.3f} ms  fwd+bwd {r['fwdbwd_s'] * 1e3:.3f} ms")
    return rows


def add_parser(subparsers):
    la = subparsers.add_parser(
        "layer", help="LRU/RotRNN layers against the papers' scan, and a training step of every "
                      "recurrent model of the course")
    la.add_argument("--device", choices=["cpu", "gpu"], default=None)
    _io.output_argument(la, "--out", default=None, help="write the results as JSON here",
                        **output_spec("layer"))
    la.add_argument("--d-model", type=int, default=None,
                    help="layer rows: default 256 on GPU, 64 on CPU; model rows: 128")
    la.add_argument("--d-state", type=int, default=None,
                    help="layer rows: default 256 on GPU, 64 on CPU; model rows: the hidden "
                         "size, 128")
    la.add_argument("--batch", type=int, default=None,
                    help="layer rows: default 32 on GPU, 4 on CPU; model rows: 64. Given, it "
                         "fixes the batch of every row and skips the batch sweep")
    la.add_argument("--length", type=int, default=None,
                    help="layer rows: default 4096 on GPU, 1024 on CPU; model rows: 400")
    la.add_argument("--heads", type=int, default=8, help="RotRNN heads (layer rows)")
    la.add_argument("--layers", default="lru,rotrnn",
                    help=f"layer rows: all, none, or a comma-separated subset of "
                         f"{', '.join(SCAN_LAYERS)}")
    la.add_argument("--models", default="all",
                    help=f"model rows: all, none, or a comma-separated subset of "
                         f"{', '.join(MODEL_ROWS)}")
    la.add_argument("--depth", type=int, default=2, help="model rows: residual blocks")
    la.add_argument("--ornn-reflections", type=int, default=None,
                    help="model rows: the oRNN's m (default: the hidden size)")
    la.add_argument("--sweep-batches", default="1,4,16,64",
                    help="oRNN batch sweep: batches (skipped when --batch is given)")
    la.add_argument("--sweep-reflections", default="4,16,128",
                    help="oRNN batch sweep: numbers of reflections m (capped at the hidden size)")
    la.add_argument("--construction", action="store_true",
                    help="also time and check the two ways of forming W (w_construction)")
    la.add_argument("--pallas", choices=["auto", "yes", "no"], default="auto",
                    help="layer rows: the kernel's rows, on planes (the headline) and on complex "
                         "arrays; auto: on a GPU where it runs; yes: also on a CPU, in Pallas "
                         "interpret mode (slow, for testing)")
    la.add_argument("--no-time-parallel", action="store_true",
                    help="leave out the row of the kernel's time-parallel design (Triton "
                         "compiles each of its passes in up to a minute)")
    la.add_argument("--repeats", type=int, default=5)
    la.set_defaults(run=run_layer)
