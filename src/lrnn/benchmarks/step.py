"""``lrnn bench step``: online inference, one step at a time, against attention's growing cache.

    python -m lrnn bench step [--device cpu|gpu] [--out FILE.json] [--batch 1] [--d-model 64]
                              [--d-state 64] [--length 1024] [--steps 200]
                              [--attention-steps 1000,10000,100000]

For every registered layer that can step (``Layer.step``), on the machine it runs on:

* ``step_us``: microseconds per step of ``jax.jit(layer.step)`` called once per input, the
  state fed back each time (what online inference does), best over ``--repeats`` runs of
  ``--steps`` steps (the median beside it);
* ``state_bytes``: the bytes of the layer's state (``init_state``) for the batch: the whole
  memory that the recurrence keeps, the same at step 10 and at step 10^6;
* ``scan_us_per_step``: the whole-sequence ``jax.jit(layer.apply)`` over ``--length`` steps,
  divided by the length: what a step costs when the sequence is known in advance.

The peer is single-head causal softmax attention of the same width ``d_model`` decoding with a
key/value cache: at step ``t`` it projects the new input to ``q, k, v``, writes ``k, v`` into
slot ``t`` of the cache (donated, so in place) and attends over the ``t + 1`` positions.
``cache_bytes`` (keys and values) and ``step_us`` at each step of ``--attention-steps`` grow
with ``t``; the recurrent layers' rows do not.

``--out`` writes the table as JSON (device, JAX version, commit); it refuses to replace a file
that an earlier ``lrnn bench step`` did not write.
"""
from __future__ import annotations

import argparse
import datetime as _dt
import json
import math
import statistics
import time

import jax
import jax.numpy as jnp
import numpy as np

from .. import _io, layers
from ._common import block, device_info, git_commit, pick_device

BENCHMARK = "step"


def _int_list(text):
    try:
        values = [int(v) for v in str(text).split(",") if v.strip()]
    except ValueError:
        raise argparse.ArgumentTypeError(f"got {text!r}, expected comma-separated integers")
    if not values or min(values) < 1:
        raise argparse.ArgumentTypeError(f"got {text!r}, expected positive integers")
    return values


def _positive(text):
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"got {text!r}, expected a positive integer")
    if value < 1:
        raise argparse.ArgumentTypeError(f"got {text!r}, expected a positive integer")
    return value


def add_parser(subparsers):
    st = subparsers.add_parser(
        "step", help="µs per step and bytes of state of every layer, against attention with a "
                     "KV cache")
    st.add_argument("--device", choices=["cpu", "gpu"], default=None)
    _io.output_argument(st, "--out", default=None, help="write the results as JSON here",
                        suffixes=(".json",), owned_by=_owned, command="lrnn bench step")
    st.add_argument("--note", default=None, help="a sentence stored with the results (e.g. "
                                                 "what else ran on the machine)")
    st.add_argument("--batch", type=_positive, default=1, help="sequences decoded together")
    st.add_argument("--d-model", type=_positive, default=64)
    st.add_argument("--d-state", type=_positive, default=64)
    st.add_argument("--heads", type=_positive, default=8, help="RotRNN heads")
    st.add_argument("--length", type=_positive, default=1024,
                    help="steps of the whole-sequence apply that the per-step time is set beside")
    st.add_argument("--steps", type=_positive, default=200, help="steps per timed run")
    st.add_argument("--repeats", type=_positive, default=5)
    st.add_argument("--layers", default="all",
                    help=f"all, or a comma-separated subset of {', '.join(layers.names())}")
    st.add_argument("--attention-steps", type=_int_list, default=[1000, 10000, 100000],
                    help="positions t at which attention's decode step is timed")
    st.set_defaults(run=run_step)


def _owned(path) -> bool:
    """An earlier output of ``lrnn bench step``: a JSON object with ``"benchmark": "step"``."""
    with open(path, encoding="utf-8") as f:
        data = json.load(f)
    return isinstance(data, dict) and data.get("benchmark") == BENCHMARK and "layers" in data


def _chosen_layers(text):
    names = [n for n in layers.names() if layers.get(n).stateful]
    if text == "all":
        return names
    chosen = [v.strip() for v in text.split(",") if v.strip()]
    for name in chosen:
        if name not in names:
            raise SystemExit(f"--layers: got {name!r}, expected 'all' or names among {names}")
    return chosen


def _tree_bytes(tree) -> int:
    return int(sum(np.asarray(leaf).nbytes for leaf in jax.tree_util.tree_leaves(tree)))


def _time_steps(step, state, inputs, repeats):
    """Per-step seconds (best, median) of ``repeats`` runs feeding ``state`` through
    ``step(state, u_t)`` for every row of ``inputs`` (``(steps, batch, d)``)."""
    state, _ = step(state, inputs[0])               # compile and warm up
    block(state)
    runs = []
    for _ in range(repeats):
        t0 = time.perf_counter()
        for u_t in inputs:
            state, y = step(state, u_t)
        block((state, y))
        runs.append((time.perf_counter() - t0) / len(inputs))
    return min(runs), statistics.median(runs)


def _time_call(fn, args, repeats):
    block(fn(*args))
    runs = []
    for _ in range(repeats):
        t0 = time.perf_counter()
        block(fn(*args))
        runs.append(time.perf_counter() - t0)
    return min(runs), statistics.median(runs)


def layer_row(name, args, key):
    """The row of one layer: µs per step, bytes of state, whole-sequence µs per step."""
    spec = layers.get(name)
    options = {"n_heads": args.heads} if name == "rotrnn" else {}
    k_p, k_u = jax.random.split(key)
    params = spec.init(k_p, args.d_model, args.d_state, **options)
    width = spec.width(args.d_model, args.d_state)
    steps = jax.random.normal(k_u, (args.steps, args.batch, args.d_model))
    state = spec.init_state(params, (args.batch,))
    step = jax.jit(lambda s, u_t: spec.step(params, s, u_t))
    best, median = _time_steps(step, state, steps, args.repeats)
    u = jax.random.normal(k_u, (args.batch, args.length, args.d_model))
    apply = jax.jit(lambda u: spec.apply(params, u))
    scan_best, scan_median = _time_call(apply, (u,), args.repeats)
    return {"layer": name, "width": width, "state_bytes": _tree_bytes(state),
            "state_shapes": {k: list(np.shape(v)) for k, v in state.items()},
            "step_us": best * 1e6, "step_median_us": median * 1e6,
            "scan_us_per_step": scan_best / args.length * 1e6,
            "scan_median_us_per_step": scan_median / args.length * 1e6}


def attention_init(key, d):
    """Single-head attention parameters: ``W_q, W_k, W_v, W_o`` of shape ``(d, d)``."""
    ks = jax.random.split(key, 4)
    return {name: jax.random.normal(k, (d, d)) / math.sqrt(d)
            for name, k in zip(("W_q", "W_k", "W_v", "W_o"), ks)}


def attention_step(params, cache, x_t, t):
    """One decode step of causal softmax attention at position ``t``: attend from
    ``q_t`` over the cached keys and values of slots ``0 … t-1`` of ``cache = {"k", "v"}``
    (each ``(B, T, d)``, ``T > t``) and the new ``k_t, v_t``, then write ``k_t, v_t`` into slot
    ``t``. Returns ``(cache, y_t)``, ``y_t`` of shape ``(B, d)``. (Reading the cache before the
    write keeps XLA from fusing the write into the products, which made them many times slower
    on a CPU.)"""
    q, k_t, v_t = (x_t @ params[w] for w in ("W_q", "W_k", "W_v"))
    scale = 1.0 / math.sqrt(q.shape[-1])
    past = jnp.einsum("bd,btd->bt", q, cache["k"]) * scale
    past = jnp.where(jnp.arange(cache["k"].shape[1]) < t, past, -jnp.inf)
    now = jnp.sum(q * k_t, axis=-1, keepdims=True) * scale
    top = jnp.maximum(jnp.max(past, axis=-1, keepdims=True), now)
    e_past, e_now = jnp.exp(past - top), jnp.exp(now - top)       # softmax over past and now
    y = (jnp.einsum("bt,btd->bd", e_past, cache["v"]) + e_now * v_t) / (
        jnp.sum(e_past, axis=-1, keepdims=True) + e_now)
    cache = {"k": cache["k"].at[:, t].set(k_t), "v": cache["v"].at[:, t].set(v_t)}
    return cache, y @ params["W_o"]


def attention_row(t, args, key):
    """Attention at step ``t``: a cache of ``t + 1`` positions (the steps so far and this one),
    filled with random keys and values as a decode of ``t`` earlier steps would have left it."""
    k_p, k_c, k_u = jax.random.split(key, 3)
    d = args.d_model
    params = attention_init(k_p, d)
    shape = (args.batch, t + 1, d)
    cache = {"k": jax.random.normal(k_c, shape), "v": jax.random.normal(k_c, shape)}
    inputs = jax.random.normal(k_u, (args.steps, args.batch, d))
    step = jax.jit(lambda c, x_t: attention_step(params, c, x_t, t), donate_argnums=0)
    best, median = _time_steps(step, cache, inputs, args.repeats)
    return {"steps": t, "cache_positions": t + 1, "cache_bytes": 2 * int(np.prod(shape)) * 4,
            "step_us": best * 1e6, "step_median_us": median * 1e6}


def table(result) -> str:
    """The results as Markdown: one row per layer, then attention at each step."""
    s = result["settings"]
    lines = [f"batch {s['batch']}, d_model {s['d_model']}, d_state {s['d_state']}, float32; "
             f"{result['device']['device_kind']} (JAX {result['device']['jax']})", "",
             "| model | state or cache bytes | µs / step (online) | µs / step (whole sequence "
             f"of {s['length']}) |", "|---|---:|---:|---:|"]
    for r in result["layers"]:
        lines.append(f"| {r['layer']} | {r['state_bytes']:,} (any step) | {r['step_us']:.1f} | "
                     f"{r['scan_us_per_step']:.2f} |")
    for r in result["attention"]:
        lines.append(f"| attention, step {r['steps']:,} | {r['cache_bytes']:,} | "
                     f"{r['step_us']:.1f} | |")
    return "\n".join(lines)


def run_step(args):
    out = None
    if args.out:
        out = _io.check_destination(args.out, suffixes=(".json",), what="--out", owned_by=_owned,
                                    command="lrnn bench step")
    chosen = _chosen_layers(args.layers)
    device = pick_device(args.device)
    result = {"benchmark": BENCHMARK,
              "command": "python -m lrnn bench step " + " ".join(getattr(args, "argv", [])[1:]),
              "date_utc": _dt.datetime.now(_dt.timezone.utc).isoformat(timespec="seconds"),
              "device": device_info(device), "commit": git_commit(),
              "settings": {k: getattr(args, k) for k in ("batch", "d_model", "d_state", "heads",
                                                          "length", "steps", "repeats")},
              "definitions": {
                  "step_us": "best over repeats of the mean wall time per call of jax.jit(step), "
                             "called once per input with the state fed back (median beside)",
                  "state_bytes": "bytes of the layer's state (init_state) for the batch",
                  "scan_us_per_step": "best wall time of jax.jit(apply) over the whole "
                                      "sequence, divided by its length",
                  "attention": "single-head causal softmax attention of width d_model, one "
                               "decode step at position t with a donated key/value cache of "
                               "t + 1 positions; cache_bytes counts keys and values (float32)"},
              "layers": [], "attention": []}
    if args.note:
        result["note"] = args.note
    key = jax.random.PRNGKey(0)
    with jax.default_device(device):
        for name in chosen:
            result["layers"].append(layer_row(name, args, key))
            print(f"{name}: {result['layers'][-1]['step_us']:.1f} µs/step", flush=True)
        for t in args.attention_steps:
            result["attention"].append(attention_row(t, args, key))
            print(f"attention at step {t}: {result['attention'][-1]['step_us']:.1f} µs/step",
                  flush=True)
    print(table(result))
    if out is not None:
        _io.atomic_write_text(out, json.dumps(result, indent=1) + "\n")
        print(f"wrote {out}")
    return result
