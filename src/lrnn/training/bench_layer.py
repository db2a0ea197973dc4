"""The layer benchmark behind ``python -m lrnn.bench layer``: forward+backward of a layer, on
``lrnn``'s scan against the papers' ``lax.associative_scan``. The command line and the shared
timing helpers live in ``lrnn.training.bench``."""
from __future__ import annotations

import datetime as _dt
import importlib
import json

import jax
import jax.numpy as jnp
from jax import lax

from ..scan import _api as _scan_mod
from ..scan import binary_operator, choose_method
from .bench import (_device, _write, compile_and_memory, device_info, layer_targets,
                    paper_associative_scan, time_interleaved)


# ----------------------------------------------------------------------------------------
# Layer benchmark: LRU and RotRNN forward+backward, auto versus the papers' associative scan.
# ----------------------------------------------------------------------------------------

class papers_scan:
    """Context manager: inside it every ``linear_scan``/``rotation_scan`` runs as the papers'
    code does (λ repeated per step, ``lax.associative_scan``, differentiated by autodiff
    instead of ``lrnn``'s custom VJP). Used only to benchmark the layers against it."""

    def __enter__(self):
        self._saved = _scan_mod._scan

        def _scan(a, b, reverse, method):
            if a.ndim == 1:
                return paper_associative_scan(a, b, reverse)
            _, x = lax.associative_scan(binary_operator, (a, b), reverse=reverse,
                                        axis=b.ndim - 2)
            return x
        _scan_mod._scan = _scan
        return self

    def __exit__(self, *exc):
        _scan_mod._scan = self._saved
        return False


def run_layer(args):
    device = _device(args.device)
    gpu = device.platform == "gpu"
    d_model = args.d_model or (256 if gpu else 64)
    d_state = args.d_state or (256 if gpu else 64)
    batch = args.batch or (32 if gpu else 4)
    length = args.length or (4096 if gpu else 1024)
    heads = args.heads
    print(f"device: {device.platform} ({device.device_kind}); d_model={d_model} "
          f"d_state={d_state} B={batch} L={length} RotRNN heads={heads}")
    key = jax.random.PRNGKey(0)
    u = jax.device_put(jax.random.normal(key, (batch, length, d_model)), device)
    layers = []
    for name in args.layers.split(","):
        mod = importlib.import_module(f"lrnn.{name}")
        if name == "rotrnn":
            params = mod.init(jax.random.PRNGKey(1), d_model, d_state, heads)
        else:
            params = mod.init(jax.random.PRNGKey(1), d_model, d_state)
        layers.append((name, mod, jax.device_put(params, device)))
    results = []
    print(f"{'layer':<8} {'scan':<26} {'compile s':>9} {'step ms':>9} {'median ms':>9} {'f+b MiB':>9}")
    for name, mod, params in layers:
        calls = []
        for label in ("auto", "paper: associative_scan"):
            def loss(p, u, mod=mod):
                return jnp.mean(mod.apply(p, u) ** 2)
            step = jax.value_and_grad(loss)      # a new function: jit must not reuse a trace
            row = {"layer": name, "scan": label, "d_model": d_model, "d_state": d_state,
                   "batch": batch, "length": length}
            if name == "rotrnn":
                row["heads"] = heads
            if label == "auto":
                row["auto_picks"] = choose_method((batch, length, d_state // 2 if name == "rotrnn"
                                                   else d_state), backend=device.platform)
                compiled, row["compile_s"], row["memory_fwdbwd"] = compile_and_memory(step, params, u)
            else:
                with papers_scan():
                    compiled, row["compile_s"], row["memory_fwdbwd"] = \
                        compile_and_memory(step, params, u)
            calls.append((compiled, (params, u)))
            results.append(row)
        for row, (best, median) in zip(results[-2:], time_interleaved(calls, repeats=args.repeats)):
            row["step_s"], row["step_median_s"] = best, median
            label = row["scan"]
            mem = row["memory_fwdbwd"]["peak_bytes"] / 2**20 if row["memory_fwdbwd"] else float("nan")
            print(f"{name:<8} {label:<26} {row['compile_s']:9.2f} {row['step_s'] * 1e3:9.2f} "
                  f"{row['step_median_s'] * 1e3:9.2f} {mem:9.1f}", flush=True)
    speedups = {}
    for name, _, _ in layers:
        a = next(r for r in results if r["layer"] == name and r["scan"] == "auto")
        p = next(r for r in results if r["layer"] == name and r["scan"] != "auto")
        speedups[name] = p["step_s"] / a["step_s"]
        print(f"{name}: auto is {speedups[name]:.2f}x the speed of the papers' associative scan")
    out = {
        "benchmark": "layer",
        "command": "python -m lrnn.bench " + " ".join(args.argv),
        "date_utc": _dt.datetime.now(_dt.timezone.utc).isoformat(timespec="seconds"),
        "device": device_info(device),
        "repeats": args.repeats,
        "definitions": {"step_s": "best wall time of value_and_grad(mean(apply(params, u)**2)) "
                                  "after a warm-up (median beside)"},
        "results": results,
        "speedup_auto_over_paper": speedups,
    }
    out["targets"] = layer_targets(out)
    for t in out["targets"]:
        print("target", json.dumps(t))
    _write(out, args.out)
    return out


def add_parser(subparsers):
    la = subparsers.add_parser("layer", help="LRU and RotRNN forward+backward step time")
    la.add_argument("--device", choices=["cpu", "gpu"], default=None)
    la.add_argument("--out", default=None)
    la.add_argument("--d-model", type=int, default=None, help="default 256 on GPU, 64 on CPU")
    la.add_argument("--d-state", type=int, default=None, help="default 256 on GPU, 64 on CPU")
    la.add_argument("--batch", type=int, default=None, help="default 32 on GPU, 4 on CPU")
    la.add_argument("--length", type=int, default=None, help="default 4096 on GPU, 1024 on CPU")
    la.add_argument("--heads", type=int, default=8, help="RotRNN heads")
    la.add_argument("--layers", default="lru,rotrnn")
    la.add_argument("--repeats", type=int, default=5)
    la.set_defaults(run=run_layer)
