"""Training loop for the deep model on the tasks of :mod:`lrnn.data`.

* optax AdamW with a linear warm-up from 1e-7 over the first ``warmup_frac`` of training and
  cosine annealing back to 1e-7 (LRU App. D.2);
* the recurrent parameters (:func:`lrnn.model.recurrent_mask`) get ``lr · lr_factor`` and no
  weight decay (LRU App. D.2; RotRNN Tab. 2 "FLR"), via ``optax.multi_transform``;
* optional global-norm gradient clipping;
* a ``tqdm.auto`` bar with the live loss and test metric, evaluation every ``eval_every`` steps;
* seeded and deterministic: the batch of step ``s`` and its dropout key depend only on
  ``(seed, s)``, so a run resumed from a checkpoint (``.npz`` with parameters, BatchNorm
  state, optimiser state and history) ends exactly where the uninterrupted run ends.

Command line (``python -m lrnn.train --help`` explains every flag)::

    python -m lrnn.train --task adding --seq-len 400 --model rotrnn --steps 5000
"""
from __future__ import annotations

import argparse
import csv
import dataclasses
import json
import math
import os
import sys
import time

import jax
import jax.numpy as jnp
import numpy as np
import optax

from . import data as data_lib
from .. import model as model_lib
from .._validate import fail, require_choice, require_positive_int


def _f(default, help):
    return dataclasses.field(default=default, metadata={"help": help})


@dataclasses.dataclass
class TrainConfig:
    """Everything that defines a run; each field is a ``--flag`` of the command line."""
    task: str = _f("adding", f"task: one of {', '.join(data_lib.TASKS)}")
    seq_len: int | None = _f(None, "adding: T; copying: delay T; listops: max length; "
                                   "MNIST: 784 (default: the task's own)")
    copy_k: int = _f(10, "copying: number of symbols K to remember")
    n_train: int | None = _f(None, "listops: number of training expressions (default 10000)")
    listops_depth: int = _f(10, "listops: maximum tree depth (LRA uses 10)")
    n_test: int = _f(1000, "size of the test set (synthetic tasks and listops)")
    model: str = _f("lru", f"recurrent layer: one of {', '.join(model_lib.LAYERS)}")
    depth: int = _f(2, "number of residual blocks")
    d_model: int = _f(64, "model width H")
    d_state: int = _f(64, "LRU states N / RotRNN total state / hidden size of oRNN, (Rot)LSTM, (Rot)GRU")
    n_heads: int = _f(8, "RotRNN heads (d_state must be n_heads times an even number)")
    n_reflections: int | None = _f(None, "oRNN Householder reflections m (default d_state)")
    norm: str = _f("layer", "normalisation in each block: layer or batch")
    pool: str | None = _f(None, "mean, last or none (default: none for copying, mean otherwise)")
    dropout: float = _f(0.0, "dropout rate after each GLU")
    bidirectional: bool = _f(False, "bidirectional recurrent layers (lru and rotrnn only)")
    r_min: float = _f(0.0, "LRU: smallest initial eigenvalue modulus (Lemma 3.2)")
    r_max: float = _f(1.0, "LRU: largest initial eigenvalue modulus")
    max_phase: float = _f(2 * math.pi, "LRU/RotRNN: initial phases uniform in [0, max_phase]")
    gamma_min: float = _f(0.9, "RotRNN: smallest initial decay γ")
    gamma_max: float = _f(0.999, "RotRNN: largest initial decay γ")
    scan_method: str = _f("auto", "scan backend of LRU/RotRNN layers: auto, sequential, associative, chunked")
    steps: int = _f(1000, "number of optimisation steps")
    batch_size: int = _f(32, "sequences per step")
    lr: float = _f(1e-3, "peak learning rate")
    lr_factor: float = _f(1.0, "learning-rate factor for the recurrent parameters (LRU D.2, RotRNN FLR)")
    weight_decay: float = _f(0.05, "AdamW weight decay (not applied to recurrent parameters)")
    warmup_frac: float = _f(0.1, "fraction of steps with linear warm-up from 1e-7")
    clip: float | None = _f(None, "clip gradients to this global norm (default: no clipping)")
    eval_every: int = _f(100, "evaluate on the test set every this many steps (and at the end)")
    eval_batch: int = _f(250, "batch size for evaluation")
    seed: int = _f(0, "random seed (parameters, data, dropout)")
    checkpoint: str | None = _f(None, "checkpoint file (.npz): resumed from if it exists, written every --checkpoint-every steps")
    checkpoint_every: int = _f(0, "write the checkpoint every this many steps (0: only at the end)")
    out: str | None = _f(None, "write the metrics history here (.json or .csv)")

    def __post_init__(self):
        require_choice("task", self.task, data_lib.TASKS)
        require_choice("model", self.model, model_lib.LAYERS)
        for name in ("steps", "batch_size", "eval_every", "eval_batch", "n_test", "copy_k"):
            require_positive_int(name, getattr(self, name))
        if not self.lr > 0:
            fail("lr", self.lr, "a positive learning rate")
        if not self.lr_factor > 0:
            fail("lr_factor", self.lr_factor, "a positive factor")
        if not 0.0 <= self.warmup_frac < 1.0:
            fail("warmup_frac", self.warmup_frac, "a fraction in [0, 1)")
        if self.clip is not None and not self.clip > 0:
            fail("clip", self.clip, "a positive norm or None")


def load_task(cfg: TrainConfig) -> data_lib.Task:
    return data_lib.load(cfg.task, seq_len=cfg.seq_len, seed=cfg.seed, n_test=cfg.n_test,
                         n_train=cfg.n_train, K=cfg.copy_k, max_depth=cfg.listops_depth)


def model_config(cfg: TrainConfig, task: data_lib.Task) -> model_lib.ModelConfig:
    pool = cfg.pool or ("none" if task.kind == "sequence" else "mean")
    return model_lib.ModelConfig(
        layer=cfg.model, d_output=task.d_output, d_input=task.d_input, vocab_size=task.vocab_size,
        d_model=cfg.d_model, d_state=cfg.d_state, depth=cfg.depth, n_heads=cfg.n_heads,
        n_reflections=cfg.n_reflections, norm=cfg.norm, pool=pool, dropout=cfg.dropout,
        bidirectional=cfg.bidirectional, r_min=cfg.r_min, r_max=cfg.r_max,
        max_phase=cfg.max_phase, gamma_min=cfg.gamma_min, gamma_max=cfg.gamma_max,
        scan_method=cfg.scan_method)


def schedule(peak: float, steps: int, warmup_frac: float):
    """Linear warm-up from 1e-7 to ``peak`` over ``warmup_frac · steps``, then cosine decay to
    1e-7 at ``steps`` (LRU App. D.2)."""
    warmup = int(warmup_frac * steps)
    return optax.warmup_cosine_decay_schedule(init_value=1e-7, peak_value=peak,
                                              warmup_steps=warmup, decay_steps=max(steps, warmup + 1),
                                              end_value=1e-7)


def make_optimizer(cfg: TrainConfig, mask):
    """AdamW on the regular parameters, AdamW with ``lr · lr_factor`` and no weight decay on
    those where ``mask`` is True; optional clipping of the global gradient norm first."""
    labels = jax.tree_util.tree_map(lambda m: "recurrent" if m else "regular", mask)
    tx = optax.multi_transform(
        {"regular": optax.adamw(schedule(cfg.lr, cfg.steps, cfg.warmup_frac),
                                weight_decay=cfg.weight_decay),
         "recurrent": optax.adamw(schedule(cfg.lr * cfg.lr_factor, cfg.steps, cfg.warmup_frac),
                                  weight_decay=0.0)},
        labels)
    if cfg.clip is not None:
        tx = optax.chain(optax.clip_by_global_norm(cfg.clip), tx)
    return tx


# ------------------------------------------------------------------------------------------
# Losses and metrics
# ------------------------------------------------------------------------------------------

def loss_and_metric(out, y, kind: str, score_last: int | None = None):
    """Mean loss and metric of a batch. ``regression``: MSE (metric MSE); ``classification``:
    cross-entropy (metric accuracy); ``sequence``: cross-entropy over every step (metric:
    accuracy on the last ``score_last`` steps)."""
    if kind == "regression":
        err = jnp.mean((out[..., 0] - y) ** 2)
        return err, err
    ce = optax.softmax_cross_entropy_with_integer_labels(out, y).mean()
    hit = jnp.argmax(out, -1) == y
    if kind == "sequence":
        hit = hit[..., -score_last:]
    return ce, hit.mean()


_FNS_CACHE: dict = {}


def _make_fns(mcfg, task, tx, cache_key=None):
    """Jitted ``train_step`` and ``eval_batch``; reused for equal ``cache_key`` so that
    repeated runs in one process (resuming, notebooks, tests) compile once."""
    if cache_key is not None and cache_key in _FNS_CACHE:
        return _FNS_CACHE[cache_key]
    kind, score_last = task.kind, task.score_last

    def loss_fn(params, state, x, y, key):
        out, new_state = model_lib.apply(params, state, x, mcfg, train=True, key=key)
        loss, metric = loss_and_metric(out, y, kind, score_last)
        return loss, (new_state, metric)

    @jax.jit
    def train_step(params, state, opt_state, x, y, key):
        (loss, (state, metric)), grads = jax.value_and_grad(loss_fn, has_aux=True)(
            params, state, x, y, key)
        updates, opt_state = tx.update(grads, opt_state, params)
        params = optax.apply_updates(params, updates)
        return params, state, opt_state, loss, metric

    @jax.jit
    def eval_batch(params, state, x, y):
        out, _ = model_lib.apply(params, state, x, mcfg, train=False)
        return loss_and_metric(out, y, kind, score_last)

    if cache_key is not None:
        if len(_FNS_CACHE) > 16:
            _FNS_CACHE.clear()
        _FNS_CACHE[cache_key] = (train_step, eval_batch)
    return train_step, eval_batch


def evaluate(eval_batch, params, state, test, batch_size):
    """Mean test loss and metric, weighting batches by size."""
    x, y = test
    total_loss = total_metric = 0.0
    for i in range(0, len(x), batch_size):
        loss, metric = eval_batch(params, state, x[i:i + batch_size], y[i:i + batch_size])
        n = len(x[i:i + batch_size])
        total_loss += float(loss) * n
        total_metric += float(metric) * n
    return total_loss / len(x), total_metric / len(x)


# ------------------------------------------------------------------------------------------
# Checkpoints
# ------------------------------------------------------------------------------------------

def save_checkpoint(path, step: int, params, state, opt_state, history: dict, config: dict,
                    pending: dict | None = None):
    """Write ``(params, state, opt_state)`` leaves, the step, the history, the config and the
    ``pending`` training losses of the current evaluation interval to ``.npz``."""
    leaves = jax.tree_util.tree_leaves((params, state, opt_state))
    arrays = {f"leaf_{i:05d}": np.asarray(leaf) for i, leaf in enumerate(leaves)}
    tmp = str(path) + ".tmp.npz"
    meta = {"history": history, "config": config, "pending": pending or {"loss": [], "metric": []}}
    np.savez(tmp, step=np.int64(step), meta=np.array(json.dumps(meta)), **arrays)
    os.replace(tmp, path)


def load_checkpoint(path, template):
    """Read a checkpoint written by :func:`save_checkpoint`. ``template`` is a
    ``(params, state, opt_state)`` of the same structure (e.g. freshly initialised).
    Returns ``(step, (params, state, opt_state), meta)`` with ``meta`` holding ``history``,
    ``config`` and ``pending``."""
    with np.load(path) as f:
        leaves_t, treedef = jax.tree_util.tree_flatten(template)
        n = sum(1 for k in f.files if k.startswith("leaf_"))
        if n != len(leaves_t):
            fail("path", path, f"a checkpoint with {len(leaves_t)} arrays for this model, not {n}")
        leaves = []
        for i, t in enumerate(leaves_t):
            a = f[f"leaf_{i:05d}"]
            if a.shape != np.shape(t):
                fail("path", path, f"array {i} of shape {np.shape(t)}, found {a.shape}")
            leaves.append(jnp.asarray(a, dtype=jnp.asarray(t).dtype))
        tree = jax.tree_util.tree_unflatten(treedef, leaves)
        return int(f["step"]), tree, json.loads(str(f["meta"]))


# ------------------------------------------------------------------------------------------
# History
# ------------------------------------------------------------------------------------------

HISTORY_KEYS = ("step", "train_loss", "train_metric", "test_loss", "test_metric", "lr")


def save_history(history: dict, path):
    """Write the history (a dict of equal-length lists) to ``.json`` or ``.csv``."""
    if str(path).endswith(".csv"):
        with open(path, "w", newline="") as f:
            w = csv.writer(f)
            w.writerow(HISTORY_KEYS)
            w.writerows(zip(*(history[k] for k in HISTORY_KEYS)))
    elif str(path).endswith(".json"):
        with open(path, "w") as f:
            json.dump(history, f, indent=1)
    else:
        fail("path", path, "a file name ending in .json or .csv")


def plot_curves(runs: dict, *, key: str = "test_metric", ax=None, title=None, ylabel=None,
                logy: bool = False):
    """Plot ``key`` against the step for several runs: ``runs`` maps a label to a history
    dict (or a stored result with a ``"curves"`` entry), or to a list of them (the same run
    with different seeds), drawn as the median over the list with its min–max band shaded.
    Returns the matplotlib axes."""
    import matplotlib.pyplot as plt
    if ax is None:
        _, ax = plt.subplots(figsize=(6, 3.5))
    for label, h in runs.items():
        histories = [x.get("curves", x) for x in (h if isinstance(h, (list, tuple)) else [h])]
        steps = histories[0]["step"]
        if any(list(x["step"]) != list(steps) for x in histories):
            fail("runs", label, "histories evaluated at the same steps (one run, several seeds)")
        values = np.asarray([x[key] for x in histories], dtype=float)
        if len(histories) == 1:
            ax.plot(steps, values[0], label=label, marker=".")
            continue
        line, = ax.plot(steps, np.median(values, axis=0), marker=".",
                        label=f"{label} (median of {len(histories)} seeds)")
        ax.fill_between(steps, values.min(0), values.max(0), color=line.get_color(), alpha=0.2,
                        linewidth=0)
    ax.set_xlabel("training step")
    ax.set_ylabel(ylabel or key.replace("_", " "))
    if logy:
        ax.set_yscale("log")
    ax.set_title(title or f"{key.replace('_', ' ')} during training")
    ax.legend(fontsize=8)
    ax.grid(alpha=0.3)
    return ax


# ------------------------------------------------------------------------------------------
# The loop
# ------------------------------------------------------------------------------------------

def train(cfg: TrainConfig, *, task: data_lib.Task | None = None, progress: bool = True,
          callback=None, stop_after: int | None = None) -> dict:
    """Train a model as configured; returns a dict with ``params``, ``state``, ``history``,
    ``final`` / ``best`` test metrics, ``n_params``, ``wall_time_s``, ``time_per_step_s``,
    ``steps_run`` and the ``model_config``.

    ``callback(step, params, state)`` is called after each evaluation. ``stop_after``: stop
    (and checkpoint) after this many steps of the schedule, as if interrupted; a later call
    with the same config resumes from ``cfg.checkpoint``."""
    if not isinstance(cfg, TrainConfig):
        fail("cfg", cfg, "a TrainConfig")
    t_start = time.perf_counter()
    task = task or load_task(cfg)
    mcfg = model_config(cfg, task)
    params, state = model_lib.init(jax.random.PRNGKey(cfg.seed), mcfg)
    tx = make_optimizer(cfg, model_lib.recurrent_mask(params, mcfg))
    opt_state = tx.init(params)
    history = {k: [] for k in HISTORY_KEYS}
    start, pending = 0, {"loss": [], "metric": []}
    config_dict = dataclasses.asdict(cfg)
    if cfg.checkpoint and os.path.exists(cfg.checkpoint):
        start, (params, state, opt_state), meta = load_checkpoint(
            cfg.checkpoint, (params, state, opt_state))
        history, saved, pending = meta["history"], meta["config"], meta["pending"]
        keep = ("checkpoint", "checkpoint_every", "out")
        if {k: v for k, v in saved.items() if k not in keep} != \
                {k: v for k, v in config_dict.items() if k not in keep}:
            fail("cfg", "a different configuration", f"the configuration saved in {cfg.checkpoint}")
    key = (mcfg, task.kind, task.score_last, cfg.lr, cfg.lr_factor, cfg.weight_decay,
           cfg.warmup_frac, cfg.steps, cfg.clip)
    train_step, eval_batch = _make_fns(mcfg, task, tx, key)
    sched = schedule(cfg.lr, cfg.steps, cfg.warmup_frac)
    dropout_key = jax.random.PRNGKey(cfg.seed + 1)
    end = cfg.steps if stop_after is None else min(cfg.steps, stop_after)

    from tqdm.auto import tqdm
    bar = tqdm(total=cfg.steps, initial=start, disable=not progress, desc=f"{cfg.model}/{cfg.task}",
               leave=True, dynamic_ncols=True)
    losses, metrics = list(pending["loss"]), list(pending["metric"])
    step_time, timed_steps = 0.0, 0
    postfix = {}

    def checkpoint(step):
        if cfg.checkpoint:
            save_checkpoint(cfg.checkpoint, step, params, state, opt_state, history, config_dict,
                            {"loss": [float(v) for v in losses], "metric": [float(v) for v in metrics]})

    for step in range(start, end):
        x, y = task.train_batch(step, cfg.batch_size, cfg.seed)
        t0 = time.perf_counter()
        params, state, opt_state, loss, metric = train_step(
            params, state, opt_state, x, y, jax.random.fold_in(dropout_key, step))
        losses.append(loss)
        metrics.append(metric)
        done = step + 1
        if done % 10 == 0 or done == end:
            postfix["loss"] = f"{float(loss):.4g}"
            bar.set_postfix(postfix, refresh=False)
        else:
            loss.block_until_ready()
        if step > start:                      # the first step of a run includes compilation
            step_time += time.perf_counter() - t0
            timed_steps += 1
        bar.update(1)
        if done % cfg.eval_every == 0 or done == cfg.steps:
            test_loss, test_metric = evaluate(eval_batch, params, state, task.test, cfg.eval_batch)
            history["step"].append(done)
            history["train_loss"].append(float(np.mean([float(v) for v in losses])))
            history["train_metric"].append(float(np.mean([float(v) for v in metrics])))
            history["test_loss"].append(test_loss)
            history["test_metric"].append(test_metric)
            history["lr"].append(float(sched(step)))
            losses, metrics = [], []
            postfix[f"test_{task.metric}"] = f"{test_metric:.4g}"
            bar.set_postfix(postfix)
            if callback is not None:
                callback(done, params, state)
        if cfg.checkpoint_every and done % cfg.checkpoint_every == 0:
            checkpoint(done)
    bar.close()
    if end > start or not os.path.exists(cfg.checkpoint or ""):
        checkpoint(end)
    if cfg.out:
        save_history(history, cfg.out)
    metric_hist = history["test_metric"]
    best_fn = min if task.metric == "mse" else max
    result = {
        "params": params, "state": state, "history": history, "model_config": mcfg,
        "task": task, "n_params": model_lib.count_params(params), "steps_run": end - start,
        "final": ({"step": history["step"][-1], "test_loss": history["test_loss"][-1],
                   f"test_{task.metric}": metric_hist[-1]} if metric_hist else {}),
        "best": ({f"test_{task.metric}": best_fn(metric_hist)} if metric_hist else {}),
        "wall_time_s": time.perf_counter() - t_start,
        "time_per_step_s": step_time / timed_steps if timed_steps else float("nan"),
    }
    return result


# ------------------------------------------------------------------------------------------
# Command line
# ------------------------------------------------------------------------------------------

def _parse_optional(kind):
    def parse(s):
        return None if s.lower() == "none" else kind(s)
    return parse


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="python -m lrnn.train",
        description="Train a deep recurrent model (LRU Fig. 1 / RotRNN Fig. 2) on a long-range "
                    "task and print its final test metrics as JSON.",
        formatter_class=argparse.ArgumentDefaultsHelpFormatter)
    for f in dataclasses.fields(TrainConfig):
        flag = "--" + f.name.replace("_", "-")
        if f.type in ("bool", bool):
            p.add_argument(flag, action="store_true", help=f.metadata["help"])
            continue
        base = f.type if not isinstance(f.type, str) else f.type.split(" |")[0]
        kind = {"int": int, "float": float, "str": str}[base]
        parse = _parse_optional(kind) if "None" in str(f.type) else kind
        p.add_argument(flag, type=parse, default=f.default, help=f.metadata["help"])
    p.add_argument("--no-progress", action="store_true", help="hide the progress bar")
    return p


def config_from_args(args) -> TrainConfig:
    return TrainConfig(**{f.name: getattr(args, f.name) for f in dataclasses.fields(TrainConfig)})


def config_to_argv(cfg: TrainConfig) -> list:
    """The command-line flags that reproduce ``cfg`` (only those that differ from defaults)."""
    argv = []
    for f in dataclasses.fields(TrainConfig):
        v = getattr(cfg, f.name)
        if v == f.default:
            continue
        flag = "--" + f.name.replace("_", "-")
        if isinstance(v, bool):
            argv.append(flag)
        else:
            argv += [flag, str(v)]
    return argv


def main(argv=None) -> dict:
    args = build_parser().parse_args(argv)
    cfg = config_from_args(args)
    result = train(cfg, progress=not args.no_progress)
    summary = {"n_params": result["n_params"], "final": result["final"], "best": result["best"],
               "wall_time_s": round(result["wall_time_s"], 2),
               "time_per_step_s": result["time_per_step_s"], "device": jax.devices()[0].device_kind}
    print(json.dumps(summary, indent=1))
    return result


if __name__ == "__main__":
    main(sys.argv[1:])
