"""Training loop for the deep model on the tasks of :mod:`lrnn.training.data`.

* optax AdamW with a linear warm-up from 1e-7 over the first ``warmup_frac`` of training and
  cosine annealing back to 1e-7 (LRU App. D.2);
* the recurrent parameters (:func:`lrnn.model.recurrent_mask`) get ``lr · lr_factor`` and no
  weight decay (LRU App. D.2; RotRNN Tab. 2 "FLR"), via ``optax.multi_transform``;
* optional global-norm gradient clipping;
* a ``tqdm.auto`` bar with the live loss and test metric, evaluation every ``eval_every`` steps;
* seeded and deterministic: the batch of step ``s`` and its dropout key depend only on
  ``(seed, s)``, so a run resumed from a checkpoint (``.npz`` with parameters, BatchNorm
  state, optimiser state and history) ends exactly where the uninterrupted run ends.

Command line (``lrnn train --help`` explains every flag)::

    lrnn train --task adding --seq-len 400 --layer rotrnn --steps 5000

Before any step is trained the run checks where it will write (``--out``, ``--checkpoint``):
the folder exists, the suffix is right, and an existing file there is an earlier output of
``lrnn train``; the checkpoint is locked while the run uses it. Writes are atomic.

Resuming means continuing: a run started again with its ``--checkpoint`` goes on from the
checkpoint's step, and with more ``--steps`` it continues past its old end (the learning-rate
schedule is then the new run's, from that step on). Any other option that differs from the
checkpoint's is refused before any work, in one line naming it with the stored and the new
value. Ctrl-C stops a run with one line saying which checkpoint was kept (exit status 130).
"""
from __future__ import annotations

import argparse
import csv
import dataclasses
import json
import math
import numbers
import os
import re
import sys
import time
import zipfile

import jax
import jax.numpy as jnp
import numpy as np
import optax

from . import data as data_lib
from .. import _aliases, _io
from .. import model as model_lib
from .._validate import fail, require_choice, require_finite, require_positive_int


def _f(default, help):
    return dataclasses.field(default=default, metadata={"help": help})


#: ModelConfig fields that a run takes from its task, not from a flag (``pool`` has its own
#: TrainConfig field: ``"auto"`` lets the task decide).
TASK_FIELDS = ("d_output", "d_input", "vocab_size", "pool")
#: The model flags of a run: every ModelConfig field outside :data:`TASK_FIELDS`, under its
#: own name (``--layer`` is ``ModelConfig.layer``). Help texts and defaults are ModelConfig's.
MODEL_FLAGS = {f.name: f.name for f in dataclasses.fields(model_lib.ModelConfig)
               if f.name not in TASK_FIELDS}
#: Old names of options, still accepted with a DeprecationWarning: ``{old: new}``.
RENAMED = {"model": "layer"}
#: ``pool`` choices of a run: the model's, or ``auto`` (none for a label per step, else mean).
POOL_CHOICES = ("auto",) + model_lib.POOLS
#: The largest number of steps a run accepts (JAX counts steps in int32).
MAX_STEPS = 10**9
#: Other integer options stay below this bound.
MAX_INT = 2**31 - 1


@dataclasses.dataclass(frozen=True, init=False)
class TrainConfig:
    """Everything that defines a run; each field is a ``--flag`` of the command line.

    The model is one nested :class:`lrnn.model.ModelConfig`, ``network``, whose fields are
    flags too, under the same names (``--layer`` is ``layer``; see :data:`MODEL_FLAGS`). They
    are passed and read flat: ``TrainConfig(layer="lru", d_state=32).d_state == 32``; its task
    fields (:data:`TASK_FIELDS`) are set from the task by :func:`model_config`. ``to_dict()``
    gives the flat dictionary stored with results and checkpoints. The old name ``model`` of
    ``layer`` is still accepted (:data:`RENAMED`, with a DeprecationWarning), and stored configs
    that use it are read by :func:`upgrade_config`.

    Every value is checked here, whichever layer it applies to; the command line also refuses
    a model flag that the chosen layer does not use (``--r-min`` with ``--layer ornn``).
    """
    task: str = _f("adding", f"task: one of {', '.join(data_lib.TASKS)}")
    seq_len: int | None = _f(None, "adding: T; copying: delay T; listops: max length; "
                                   "MNIST: 784 (default: the task's own)")
    copy_k: int = _f(10, "copying: number of symbols K to remember")
    n_train: int | None = _f(None, "listops: number of training expressions (default 10000)")
    listops_depth: int = _f(10, "listops: maximum tree depth (LRA uses 10)")
    n_test: int = _f(1000, "size of the test set (synthetic tasks and listops)")
    network: model_lib.ModelConfig = dataclasses.field(default_factory=model_lib.ModelConfig)
    pool: str = _f("auto", "mean, last, none, or auto: none for a label per step (copying), "
                           "mean otherwise")
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
    checkpoint: str | None = _f(None, "checkpoint file (.npz): resumed from if it exists (more "
                                      "--steps continue the run), written every "
                                      "--checkpoint-every steps")
    checkpoint_every: int = _f(0, "write the checkpoint every this many steps (0: only at the end)")
    out: str | None = _f(None, "write the metrics history here (.json or .csv)")

    def __init__(self, network: model_lib.ModelConfig | None = None, **options):
        own = {f.name: f for f in dataclasses.fields(self) if f.name != "network"}
        for old, new in RENAMED.items():
            if old in options:
                if new in options:
                    raise TypeError(f"TrainConfig() got both {new!r} and its old name {old!r}")
                _aliases.warn_keyword("TrainConfig", old, new)
                options[new] = options.pop(old)
        unknown = sorted(set(options) - set(own) - set(MODEL_FLAGS))
        if unknown:
            raise TypeError(f"TrainConfig() got unexpected keyword arguments {unknown}; "
                            f"expected fields of TrainConfig or model flags {list(MODEL_FLAGS)}")
        if network is None:
            network = model_lib.ModelConfig()
        elif not isinstance(network, model_lib.ModelConfig):
            fail("network", network, "an lrnn.model.ModelConfig")
        if "layer" in options:
            require_choice("layer", options["layer"], model_lib.layers.names())
        if options.get("pool", "auto") is None:     # older configs: None let the task decide
            options["pool"] = "auto"
        changes = {MODEL_FLAGS[k]: options.pop(k) for k in list(options) if k in MODEL_FLAGS}
        object.__setattr__(self, "network", dataclasses.replace(network, **changes))
        for name, f in own.items():
            object.__setattr__(self, name, options.get(name, f.default))
        self._check()

    def __getattr__(self, name):
        """The model flags, read flat: ``cfg.d_state`` is ``cfg.network.d_state``."""
        if name in MODEL_FLAGS and "network" in self.__dict__:
            return getattr(self.__dict__["network"], MODEL_FLAGS[name])
        raise AttributeError(f"'TrainConfig' object has no attribute {name!r}")

    def to_dict(self) -> dict:
        """Every flag and its value, flat (the ``config`` of stored results and checkpoints)."""
        return {name: getattr(self, name) for name in FLAGS}

    def _check(self):
        require_choice("task", self.task, data_lib.TASKS)
        for name in ("steps", "batch_size", "eval_every", "eval_batch", "n_test", "copy_k",
                     "listops_depth"):
            require_positive_int(name, getattr(self, name))
        for name in ("seq_len", "n_train"):
            if getattr(self, name) is not None:
                require_positive_int(name, getattr(self, name))
        for name in ("batch_size", "eval_every", "eval_batch", "n_test", "copy_k",
                     "listops_depth", "seq_len", "n_train"):
            if getattr(self, name) is not None and getattr(self, name) > MAX_INT:
                fail(name, getattr(self, name), f"a positive integer at most {MAX_INT}")
        if self.steps > MAX_STEPS:
            fail("steps", self.steps, f"a positive integer at most {MAX_STEPS:.0e}")
        require_choice("pool", self.pool, POOL_CHOICES)
        if self.pool == "none" and self.network.bidirectional:
            fail("pool", self.pool, "'mean', 'last' or 'auto' for a bidirectional (non-causal) model")
        for name, value in (("checkpoint", self.checkpoint), ("out", self.out)):
            if value is not None and not isinstance(value, (str, os.PathLike)):
                fail(name, value, "a file name (str or path) or None")
        require_finite("lr", self.lr, low=0.0, strict=True)
        require_finite("lr_factor", self.lr_factor, low=0.0, strict=True)
        require_finite("weight_decay", self.weight_decay, low=0.0)
        if not 0.0 <= require_finite("warmup_frac", self.warmup_frac) < 1.0:
            fail("warmup_frac", self.warmup_frac, "a fraction in [0, 1)")
        if self.clip is not None:
            require_finite("clip", self.clip, low=0.0, strict=True)
        if not isinstance(self.seed, numbers.Integral) or isinstance(self.seed, bool) \
                or not 0 <= self.seed < MAX_INT:
            fail("seed", self.seed, f"an integer in 0 .. {MAX_INT - 1}")
        if not isinstance(self.checkpoint_every, numbers.Integral) \
                or isinstance(self.checkpoint_every, bool) \
                or not 0 <= self.checkpoint_every <= MAX_STEPS:
            fail("checkpoint_every", self.checkpoint_every, "a non-negative integer (0: only at "
                 "the end)")


def _flags():
    """``{flag name: dataclasses.Field}`` in command-line order; ``network`` is expanded into
    the model flags at its place."""
    out = {}
    model_fields = {f.name: f for f in dataclasses.fields(model_lib.ModelConfig)}
    for f in dataclasses.fields(TrainConfig):
        if f.name == "network":
            out.update({flag: model_fields[field] for flag, field in MODEL_FLAGS.items()})
        else:
            out[f.name] = f
    return out


#: Every flag of ``lrnn train`` (underscores for dashes) and the dataclass field
#: that declares it (TrainConfig's own, or ModelConfig's for the model flags).
FLAGS = _flags()


def load_task(cfg: TrainConfig) -> data_lib.Task:
    return data_lib.load(cfg.task, seq_len=cfg.seq_len, seed=cfg.seed, n_test=cfg.n_test,
                         n_train=cfg.n_train, K=cfg.copy_k, max_depth=cfg.listops_depth)


def model_config(cfg: TrainConfig, task: data_lib.Task) -> model_lib.ModelConfig:
    """``cfg.network`` completed by the task: its input (real channels or tokens), its output
    size, and the pooling (``cfg.pool``, or the task's default: none for a label per step)."""
    pool = cfg.pool if cfg.pool != "auto" else ("none" if task.kind == "sequence" else "mean")
    return dataclasses.replace(cfg.network, d_output=task.d_output, d_input=task.d_input,
                               vocab_size=task.vocab_size, pool=pool)


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
    want = out.shape[:-1]
    if kind == "regression" and (jnp.shape(y) != want or out.shape[-1] != 1):
        # (B, 1) targets against (B,) predictions would broadcast to a (B, B) error matrix
        fail("y", y, f"regression targets of shape {want}, one per sequence, for model outputs "
                     f"of shape {out.shape} (d_output 1)")
    if kind != "regression" and jnp.shape(y) != want:
        fail("y", y, f"integer labels of shape {want} for model outputs of shape {out.shape}")
    if kind == "regression":
        err = jnp.mean((out[..., 0] - y) ** 2)
        return err, err
    ce = optax.softmax_cross_entropy_with_integer_labels(out, y).mean()
    hit = jnp.argmax(out, -1) == y
    if kind == "sequence":
        hit = hit[..., -score_last:]
    return ce, hit.mean()


_FNS_CACHE: dict = {}

#: ModelConfig fields that only set the initial parameters' values, never their shapes or the
#: forward pass (each layer's ``init_options``; see :func:`lrnn.model.applies_to`).
INIT_VALUE_FIELDS = ("r_min", "r_max", "max_phase", "gamma_min", "gamma_max", "forget_bias")


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
    meta = {"history": history, "config": config, "pending": pending or {"loss": [], "metric": []}}
    with _io.atomic_open(path, "wb") as f:        # a unique temporary file, then os.replace
        np.savez(f, step=np.int64(step), meta=np.array(json.dumps(meta)), **arrays)


class CheckpointError(ValueError):
    """A checkpoint file that cannot be read: the message names the file and the problem."""


def _bad_checkpoint(path, problem: str):
    raise CheckpointError(f"checkpoint {str(path)!r}: {problem}. It was not changed; move it "
                          "away (or pass another --checkpoint) to start afresh.")


def _read_checkpoint(path):
    """``(step, meta, {name: array})`` of a checkpoint file, or a CheckpointError saying which
    file and what is wrong (empty, truncated, not a checkpoint, bad metadata)."""
    if os.path.getsize(path) == 0:
        _bad_checkpoint(path, "the file is empty")
    if not zipfile.is_zipfile(path):
        _bad_checkpoint(path, "not a .npz checkpoint written by lrnn train (not a zip archive; "
                              "truncated or another kind of file)")
    try:
        with np.load(path, allow_pickle=False) as f:
            if "step" not in f.files or "meta" not in f.files:
                _bad_checkpoint(path, f"not a checkpoint written by lrnn train (it holds "
                                      f"{sorted(f.files)[:5]}, not 'step' and 'meta')")
            arrays = {k: f[k] for k in f.files}
    except CheckpointError:
        raise
    except (OSError, EOFError, ValueError, KeyError, zipfile.BadZipFile) as err:
        _bad_checkpoint(path, f"cannot be read, it is damaged or truncated ({type(err).__name__}: "
                              f"{err})")
    try:
        meta = json.loads(str(arrays.pop("meta")))
        step = int(arrays.pop("step"))
    except (ValueError, TypeError) as err:
        _bad_checkpoint(path, f"its metadata cannot be read ({err})")
    if not isinstance(meta, dict) or not {"history", "config", "pending"} <= set(meta):
        _bad_checkpoint(path, "its metadata lacks 'history', 'config' or 'pending'")
    if not 0 <= step <= MAX_STEPS:
        _bad_checkpoint(path, f"its field 'step' is {step}, expected a step in 0 .. {MAX_STEPS:.0e}")
    if not isinstance(meta["config"], dict):
        _bad_checkpoint(path, "its field 'config' is not a dictionary of options")
    return step, meta, arrays


def is_checkpoint(path) -> bool:
    """Whether ``path`` is a checkpoint that :func:`save_checkpoint` wrote."""
    try:
        _read_checkpoint(path)
    except (CheckpointError, OSError):
        return False
    return True


def load_checkpoint(path, template):
    """Read a checkpoint written by :func:`save_checkpoint`. ``template`` is a
    ``(params, state, opt_state)`` of the same structure (e.g. freshly initialised).
    Returns ``(step, (params, state, opt_state), meta)`` with ``meta`` holding ``history``,
    ``config`` and ``pending``. A file that is empty, truncated, not a checkpoint or one for
    another model raises a :class:`CheckpointError` (a ValueError) naming the file."""
    step, meta, arrays = _read_checkpoint(path)
    leaves_t, treedef = jax.tree_util.tree_flatten(template)
    n = sum(1 for k in arrays if k.startswith("leaf_"))
    if n != len(leaves_t):
        _bad_checkpoint(path, f"it holds {n} arrays, but this model has {len(leaves_t)}")
    leaves = []
    for i, t in enumerate(leaves_t):
        a = arrays.get(f"leaf_{i:05d}")
        if a is None or a.shape != np.shape(t):
            _bad_checkpoint(path, f"array {i} has shape {None if a is None else a.shape}, "
                                  f"this model's has {np.shape(t)}")
        leaves.append(jnp.asarray(a, dtype=jnp.asarray(t).dtype))
    return step, jax.tree_util.tree_unflatten(treedef, leaves), meta


def upgrade_config(config: dict) -> dict:
    """A stored run's flat config in today's names (``model`` -> ``layer``; pool ``None`` ->
    ``"auto"``), so that results and checkpoints of older versions still load."""
    config = dict(config)
    for old, new in RENAMED.items():
        if old in config and new not in config:
            config[new] = config.pop(old)
    if "pool" in config and config["pool"] is None:
        config["pool"] = "auto"
    return config


# ------------------------------------------------------------------------------------------
# History
# ------------------------------------------------------------------------------------------

HISTORY_KEYS = ("step", "train_loss", "train_metric", "test_loss", "test_metric", "lr")


HISTORY_SUFFIXES = (".json", ".csv")


def is_history(path) -> bool:
    """Whether ``path`` is a history that :func:`save_history` wrote (its CSV header, or a
    JSON object with every key of :data:`HISTORY_KEYS`)."""
    if str(path).lower().endswith(".csv"):
        return _io.first_line_is(",".join(HISTORY_KEYS))(path)
    return _io.json_has_keys(*HISTORY_KEYS)(path)


#: Options that may change between the run that wrote a checkpoint and the run that resumes
#: it: where it writes, and (:func:`check_resume`) ``steps``, which continues the run.
RESUMABLE = ("checkpoint", "checkpoint_every", "out", "steps")


def config_changes(saved: dict, cfg: TrainConfig) -> list[tuple[str, object, object]]:
    """``(option, stored value, this run's value)`` for every option of ``cfg`` that differs
    from the ``saved`` config of a checkpoint, outside :data:`RESUMABLE` (a flag added since
    the checkpoint was written counts at its default)."""
    saved = {**TrainConfig().to_dict(), **upgrade_config(saved)}
    now = cfg.to_dict()
    return [(k, saved.get(k), v) for k, v in now.items()
            if k not in RESUMABLE and saved.get(k) != v]


def check_resume(cfg: TrainConfig, step: int, saved: dict):
    """A checkpoint at ``step`` with config ``saved`` can be resumed by ``cfg``: the same
    options but for :data:`RESUMABLE` (more ``steps`` continue the run), and a step no later
    than ``cfg.steps``. Else a CheckpointError naming the file, the option, the stored and the
    new value."""
    changes = config_changes(saved, cfg)
    if changes:
        listed = "; ".join(f"`{k}` {_show(old)} (this run: {_show(new)})"
                           for k, old, new in changes)
        _bad_checkpoint(cfg.checkpoint, f"it was written by a run with {listed}. Give the "
                                         "stored value to resume it")
    if step > cfg.steps:
        _bad_checkpoint(cfg.checkpoint, f"its field 'step' is {step}, past this run's `steps` "
                                         f"{cfg.steps}. Give `steps` {step} or more to resume "
                                         "it")


def _show(value) -> str:
    return "none" if value is None else str(value).lower() if isinstance(value, bool) \
        else str(value)


def check_outputs(cfg: TrainConfig):
    """Check ``cfg.out`` and ``cfg.checkpoint`` before any work (see :mod:`lrnn._io`): each
    in an existing, writable folder, with the right suffix, not a folder, and, if it exists,
    an earlier output of ``lrnn train`` (a checkpoint is read back, so a damaged one is
    named now rather than after training)."""
    if cfg.out is not None:
        _io.check_destination(cfg.out, suffixes=HISTORY_SUFFIXES, what="out",
                              owned_by=is_history, command="lrnn train (a history)")
    if cfg.checkpoint is not None:
        _io.check_destination(cfg.checkpoint, suffixes=(".npz",), what="checkpoint",
                              owned_by=lambda p: True, command="lrnn train")
        if os.path.exists(cfg.checkpoint):
            step, meta, _ = _read_checkpoint(cfg.checkpoint)
            check_resume(cfg, step, meta["config"])
        if cfg.out is not None and os.path.abspath(cfg.out) == os.path.abspath(cfg.checkpoint):
            fail("out", cfg.out, "a file other than --checkpoint")


def save_history(history: dict, path):
    """Write the history (a dict of equal-length lists) to ``.json`` or ``.csv``, atomically."""
    if str(path).lower().endswith(".csv"):
        with _io.atomic_open(path, "w", newline="") as f:
            w = csv.writer(f)
            w.writerow(HISTORY_KEYS)
            w.writerows(zip(*(history[k] for k in HISTORY_KEYS)))
    elif str(path).lower().endswith(".json"):
        _io.atomic_write_text(path, json.dumps(history, indent=1))
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

class TrainingDiverged(FloatingPointError):
    """The training loss became NaN or infinite; the message names the step."""


class _NoBar:
    """What ``train`` updates when no bar is shown: creating a tqdm, even a disabled one,
    starts tqdm's monitor thread in the process."""

    def update(self, n=1):
        pass

    def set_postfix(self, *args, **kwargs):
        pass

    def close(self):
        pass


def _progress_bar(progress: bool, **options):
    if not progress:
        return _NoBar()
    from tqdm.auto import tqdm
    return tqdm(leave=True, dynamic_ncols=True, **options)


def train(cfg: TrainConfig, *, task: data_lib.Task | None = None, progress: bool = True,
          callback=None, stop_after: int | None = None) -> dict:
    """Train a model as configured; returns a dict with ``params``, ``state``, ``history``,
    ``final`` / ``best`` test metrics, ``n_params``, ``wall_time_s``, ``time_per_step_s``,
    ``steps_run`` and the ``model_config``.

    ``callback(step, params, state)`` is called after each evaluation. ``stop_after``: stop
    (and checkpoint) after this many steps of the schedule, as if interrupted; a later call
    with the same config resumes from ``cfg.checkpoint``.

    Raises :class:`TrainingDiverged` (naming the step) as soon as the training loss is NaN or
    infinite, before anything is checkpointed."""
    if not isinstance(cfg, TrainConfig):
        fail("cfg", cfg, "a TrainConfig")
    if stop_after is not None:
        require_positive_int("stop_after", stop_after)
    check_outputs(cfg)                         # before any work: nothing trained is lost
    with (_io.lock(cfg.checkpoint, what="checkpoint") if cfg.checkpoint
          else _no_lock()):
        return _train(cfg, task=task, progress=progress, callback=callback,
                      stop_after=stop_after)


def _no_lock():
    import contextlib
    return contextlib.nullcontext()


def _train(cfg, *, task, progress, callback, stop_after):
    t_start = time.perf_counter()
    task = task or load_task(cfg)
    mcfg = model_config(cfg, task)
    params, state = model_lib.init(jax.random.PRNGKey(cfg.seed), mcfg)
    tx = make_optimizer(cfg, model_lib.recurrent_mask(params, mcfg))
    start, (params, state, opt_state), history, pending = _resume(cfg, params, state, tx)
    config_dict = cfg.to_dict()
    # Fields that only set initial values (not shapes) do not change the compiled step: runs
    # that differ only there (a forget bias, a ring) share one compilation.
    computed = dataclasses.replace(mcfg, **{f: getattr(model_lib.ModelConfig, f)
                                            for f in INIT_VALUE_FIELDS})
    key = (computed, task.kind, task.score_last, cfg.lr, cfg.lr_factor, cfg.weight_decay,
           cfg.warmup_frac, cfg.steps, cfg.clip)
    train_step, eval_batch = _make_fns(computed, task, tx, key)
    sched = schedule(cfg.lr, cfg.steps, cfg.warmup_frac)
    dropout_key = jax.random.PRNGKey(cfg.seed + 1)
    end = cfg.steps if stop_after is None else min(cfg.steps, stop_after)

    bar = _progress_bar(progress, total=cfg.steps, initial=start, desc=f"{cfg.layer}/{cfg.task}")
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
        loss_value = float(loss)                 # waits for the step, as timing needs anyway
        if not math.isfinite(loss_value):
            bar.close()
            raise TrainingDiverged(
                f"training diverged: the training loss is {loss_value} at step {done} of "
                f"{cfg.steps} (learning rate {float(sched(step)):.3g} there, peak lr = "
                f"{cfg.lr:g}). Try a lower learning rate (--lr) or gradient clipping (--clip). "
                "No checkpoint or history was written for this step.")
        if done % 10 == 0 or done == end:
            postfix["loss"] = f"{loss_value:.4g}"
            bar.set_postfix(postfix, refresh=False)
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
    result = {
        "params": params, "state": state, "history": history, "model_config": mcfg,
        "task": task, "n_params": model_lib.count_params(params), "steps_run": end - start,
        **_final_and_best(history, task.metric),
        "wall_time_s": time.perf_counter() - t_start,
        "time_per_step_s": step_time / timed_steps if timed_steps else float("nan"),
    }
    return result


def _resume(cfg, params, state, tx):
    """``(start step, (params, state, opt_state), history, pending losses)``: fresh, or read
    from ``cfg.checkpoint`` when it exists (more ``steps`` continue the run)."""
    opt_state = tx.init(params)
    if not (cfg.checkpoint and os.path.exists(cfg.checkpoint)):
        return 0, (params, state, opt_state), {k: [] for k in HISTORY_KEYS}, \
            {"loss": [], "metric": []}
    start, trees, meta = load_checkpoint(cfg.checkpoint, (params, state, opt_state))
    check_resume(cfg, start, meta["config"])
    return start, trees, meta["history"], meta["pending"]


def _final_and_best(history, metric: str) -> dict:
    """The last evaluation and the best test metric of ``history`` (empty before any)."""
    values = history["test_metric"]
    if not values:
        return {"final": {}, "best": {}}
    best = min if metric == "mse" else max
    return {"final": {"step": history["step"][-1], "test_loss": history["test_loss"][-1],
                      f"test_{metric}": values[-1]},
            "best": {f"test_{metric}": best(values)}}


# ------------------------------------------------------------------------------------------
# Command line
# ------------------------------------------------------------------------------------------

def _parse_optional(kind):
    def parse(s):
        return None if s.lower() == "none" else kind(s)
    return parse


class _DeprecatedFlag(argparse.Action):
    """An old flag name: stores into the new one's destination after a one-line notice."""

    def __call__(self, parser, namespace, values, option_string=None):
        new = "--" + self.dest.replace("_", "-")
        print(f"{parser.prog}: note: {option_string} is deprecated, use {new} {_aliases.GOES}",
              file=sys.stderr)
        setattr(namespace, self.dest, values)


def _int_arg(s: str) -> int:
    try:
        return int(s)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected an integer, got {s!r}") from None


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="lrnn train",
        description="Train a deep recurrent model (LRU Fig. 1 / RotRNN Fig. 2) on a long-range "
                    "task and print its final test metrics as JSON.",
        formatter_class=argparse.ArgumentDefaultsHelpFormatter)
    for name, f in FLAGS.items():
        flag = "--" + name.replace("_", "-")
        if f.type in ("bool", bool):
            p.add_argument(flag, action="store_true", help=f.metadata["help"])
            continue
        base = f.type if not isinstance(f.type, str) else f.type.split(" |")[0]
        kind = {"int": _int_arg, "float": float, "str": str}[base]
        parse = _parse_optional(kind) if "None" in str(f.type) else kind
        if name in OUTPUT_SPECS:           # checked as it is parsed: lrnn._io.output_argument
            _io.output_argument(p, flag, default=f.default, help=f.metadata["help"],
                                **OUTPUT_SPECS[name])
            continue
        p.add_argument(flag, type=parse, default=f.default, help=f.metadata["help"])
    for old, new in RENAMED.items():
        p.add_argument("--" + old, dest=new, action=_DeprecatedFlag, help=argparse.SUPPRESS)
    p.add_argument("--no-progress", action="store_true", help="hide the progress bar")
    return p


#: ``--out`` and ``--checkpoint``: what each accepts (:func:`lrnn._io.output_argument`). A
#: checkpoint that exists is read by :func:`check_outputs`, which names what is wrong with it.
OUTPUT_SPECS = {
    "out": dict(suffixes=HISTORY_SUFFIXES, owned_by=is_history,
                command="lrnn train (a history)"),
    "checkpoint": dict(suffixes=(".npz",), owned_by=lambda path: True, command="lrnn train"),
}


def task_size_problem(cfg: TrainConfig) -> str | None:
    """What is wrong with the task's sizes, in the command line's words (``--seq-len``,
    ``--copy-k``), or None; checked before any work (``lrnn.training.data`` checks the same
    with the library's names)."""
    T = cfg.seq_len
    if cfg.task in ("smnist", "psmnist"):
        if T not in (None, 784):
            return (f"--seq-len: got {T}, but --task {cfg.task} reads MNIST pixel by pixel: "
                    "its length is 784 (leave --seq-len out)")
        return None
    if cfg.task == "listops":
        if T is not None and T < 4:
            return f"--seq-len: got {T}, expected at least 4 for --task listops (its longest expression)"
        return None
    if T is not None and T < 2:
        what = "the delay between the symbols and the marker" if cfg.task == "copying" else \
            "the number of steps"
        return f"--seq-len: got {T}, expected at least 2 for --task {cfg.task} ({what})"
    delay = 500 if T is None else T
    if cfg.task == "copying" and cfg.copy_k > delay:
        return (f"--copy-k: got {cfg.copy_k}, expected at most the delay --seq-len "
                f"{delay}{' (its default)' if T is None else ''} for --task copying")
    return None


_BACKTICKED = re.compile(r"`(\w+)`")


def as_flags(message: str) -> str:
    """A library message in the command line's words: `` `seq_len` `` -> ``--seq-len``."""
    return _BACKTICKED.sub(lambda m: "--" + m[1].replace("_", "-") if m[1] in FLAGS
                           else m.group(0), message)


def _refuse_unused_flags(parser, argv, cfg: TrainConfig):
    """A model flag given on the command line that the chosen layer does not use is an error
    (``--r-min 2 --layer ornn`` would otherwise be ignored)."""
    given = {a.split("=", 1)[0][2:].replace("-", "_") for a in argv if a.startswith("--")}
    for name in sorted(given & set(MODEL_FLAGS)):
        if not model_lib.applies_to(MODEL_FLAGS[name], cfg.layer):
            users = [n for n in model_lib.layers.names() if model_lib.applies_to(name, n)]
            parser.error(f"--{name.replace('_', '-')} does not apply to --layer {cfg.layer} "
                         f"(it applies to {', '.join(users) or 'no layer'}); leave it out")


def config_from_args(args) -> TrainConfig:
    return TrainConfig(**{name: getattr(args, name) for name in FLAGS})


def config_to_argv(cfg: TrainConfig) -> list:
    """The command-line flags that reproduce ``cfg`` (only those that differ from defaults)."""
    argv = []
    for name, v in cfg.to_dict().items():
        if v == FLAGS[name].default:
            continue
        flag = "--" + name.replace("_", "-")
        if isinstance(v, bool):
            argv.append(flag)
        else:
            argv += [flag, str(v)]
    return argv


def main(argv=None) -> dict:
    parser = build_parser()
    argv = list(sys.argv[1:] if argv is None else argv)
    args = parser.parse_args(argv)
    try:
        cfg = config_from_args(args)
        _refuse_unused_flags(parser, argv, cfg)
        problem = task_size_problem(cfg)
        if problem:
            parser.error(problem)
        check_outputs(cfg)
    except ValueError as err:
        parser.error(as_flags(str(err)))
    try:
        result = train(cfg, progress=not args.no_progress)
    except (TrainingDiverged, _io.DestinationError, CheckpointError) as err:
        raise SystemExit(f"lrnn train: error: {as_flags(str(err))}")
    except KeyboardInterrupt:
        print(f"\nlrnn train: interrupted; {kept_after_interrupt(cfg)}", file=sys.stderr)
        raise SystemExit(130) from None
    per_step = result["time_per_step_s"]
    summary = {"n_params": result["n_params"], "final": result["final"], "best": result["best"],
               "steps_run": result["steps_run"], "wall_time_s": round(result["wall_time_s"], 2),
               "time_per_step_s": per_step if math.isfinite(per_step) else None,
               "device": jax.devices()[0].device_kind}
    print(json.dumps(summary, indent=1))
    return result


def kept_after_interrupt(cfg: TrainConfig) -> str:
    """One line: what an interrupted run leaves (its checkpoint, written atomically, is the
    last one complete)."""
    if not cfg.checkpoint:
        return "nothing was kept (no --checkpoint); the run starts from step 0 next time"
    try:
        step, _, _ = _read_checkpoint(cfg.checkpoint)
    except (CheckpointError, OSError):
        return f"no checkpoint was written yet ({cfg.checkpoint} holds none)"
    return (f"checkpoint at step {step} kept in {cfg.checkpoint}; the same command resumes "
            "from there")


if __name__ == "__main__":
    main(sys.argv[1:])
