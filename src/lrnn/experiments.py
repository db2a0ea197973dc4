"""Named suites of training runs, each run stored as one JSON file.

    python -m lrnn.experiments list
    python -m lrnn.experiments run cpu-small --out book/data/results
    python -m lrnn.experiments run gpu-targets --only adding400-lru

Each JSON holds the suite and run name, the equivalent ``python -m lrnn.train`` command, the
configuration, the device it ran on, wall time and time per step, the parameter count, the
final and best test metrics, the baseline of the task and the learning curves.
Results are only ever what a run measured; :func:`load_results` reads them back.
"""
from __future__ import annotations

import argparse
import dataclasses
import datetime
import glob
import json
import os
import platform
import sys

from .train import TrainConfig, config_to_argv, train

_ADD = dict(task="adding")
# Small models the 2-core CPU can train in about a minute each (the stored cpu-small results).
_CPU = dict(depth=1, d_model=32, d_state=32, n_heads=4, batch_size=32, lr=3e-3,
            scan_method="sequential", eval_every=50, n_test=500)
_CPU_LRU = dict(r_min=0.9)
_CPU_ROT = dict(gamma_min=0.9, gamma_max=0.999)


def _cpu_suite():
    runs = {}
    for m, extra in (("lru", _CPU_LRU), ("rotrnn", _CPU_ROT), ("ornn", {}), ("lstm", {}),
                     ("rotlstm", {}), ("gru", {})):
        runs[f"adding100-{m}"] = TrainConfig(**_ADD, seq_len=100, model=m, steps=500,
                                             **{**_CPU, **extra})
    for m, extra in (("lru", _CPU_LRU), ("rotrnn", _CPU_ROT)):
        runs[f"copying50-{m}"] = TrainConfig(task="copying", seq_len=50, model=m, steps=600,
                                             **{**_CPU, **extra, "depth": 2})
        runs[f"smnist-{m}"] = TrainConfig(task="smnist", model=m, steps=600,
                                          **{**_CPU, **extra, "eval_every": 100})
        runs[f"listops200-{m}"] = TrainConfig(task="listops", seq_len=200, n_train=2000,
                                              model=m, steps=300,
                                              **{**_CPU, **extra, "eval_every": 100})
    return runs


# The GPU targets (test MSE < 0.01 on adding T=400, >= 99% copying T=500, >= 95%
# sMNIST, >= 90% psMNIST, ListOps vs 10% chance), sized to take a few minutes each on a GPU.
_GPU = dict(depth=4, d_model=128, d_state=128, n_heads=16, batch_size=64, lr=2e-3,
            lr_factor=0.5, eval_every=250, scan_method="auto")
_GPU_LRU = dict(r_min=0.9)
_GPU_ROT = dict(gamma_min=0.9, gamma_max=0.999)
_GATED = dict(depth=2, d_state=128, lr_factor=1.0, clip=1.0)


def _gpu_suite():
    runs = {}
    for m, extra in (("lru", _GPU_LRU), ("rotrnn", _GPU_ROT), ("ornn", dict(_GATED)),
                     ("lstm", _GATED), ("rotlstm", _GATED)):
        runs[f"adding400-{m}"] = TrainConfig(**_ADD, seq_len=400, model=m, steps=5000,
                                             **{**_GPU, **extra})
    for m, extra in (("lru", dict(r_min=0.99)), ("rotrnn", dict(gamma_min=0.99, gamma_max=0.9999))):
        runs[f"copying500-{m}"] = TrainConfig(task="copying", seq_len=500, model=m, steps=8000,
                                              **{**_GPU, **extra})
        for t in ("smnist", "psmnist"):
            runs[f"{t}-{m}"] = TrainConfig(task=t, model=m, steps=6000, dropout=0.1,
                                           norm="batch", **{**_GPU, **extra})
    for m in ("lru", "rotrnn", "ornn", "lstm", "rotlstm", "gru", "rotgru"):
        extra = {"lru": dict(r_min=0.5), "rotrnn": dict(gamma_min=0.5, max_phase=0.0314)}.get(m, _GATED)
        runs[f"listops1000-{m}"] = TrainConfig(task="listops", seq_len=1000, model=m, steps=5000,
                                               **{**_GPU, "lr": 1e-3, **extra})
    return runs


def _smoke_suite():
    return {"smoke-lru": TrainConfig(task="adding", seq_len=8, model="lru", steps=4, depth=1,
                                     d_model=4, d_state=4, batch_size=4, eval_every=2, n_test=8),
            "smoke-rotrnn": TrainConfig(task="copying", seq_len=4, copy_k=2, model="rotrnn",
                                        steps=3, depth=1, d_model=4, d_state=4, n_heads=2,
                                        batch_size=4, eval_every=3, n_test=8)}


SUITES = {
    "cpu-small": (_cpu_suite, "small CPU runs (stored in book/data/results, device cpu)"),
    "gpu-targets": (_gpu_suite, "the issue's GPU targets: adding T=400, copying T=500, "
                                "sMNIST/psMNIST, ListOps L<=1000"),
    "smoke": (_smoke_suite, "two tiny runs that test the machinery in seconds"),
}


def suite(name: str) -> dict:
    """The runs of a suite: ``{run name: TrainConfig}``."""
    if name not in SUITES:
        raise ValueError(f"`suite`: got {name!r}, expected one of {sorted(SUITES)}.")
    return SUITES[name][0]()


def device_info() -> dict:
    import jax
    d = jax.devices()[0]
    return {"platform": d.platform, "kind": d.device_kind, "jax": jax.__version__,
            "host": platform.machine(), "cpu_count": os.cpu_count()}


def command(cfg: TrainConfig) -> str:
    return " ".join(["python -m lrnn.train", *config_to_argv(cfg)])


def run_one(suite_name: str, name: str, cfg: TrainConfig, out_dir: str, *, progress=True) -> dict:
    """Train one configuration and write ``out_dir/<suite>__<name>.json``; returns the record."""
    res = train(cfg, progress=progress)
    task = res["task"]
    record = {
        "suite": suite_name, "name": name, "command": command(cfg),
        "config": dataclasses.asdict(cfg), "model_config": dataclasses.asdict(res["model_config"]),
        "device": device_info(), "date": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
        "task": task.name, "metric": task.metric, "baseline": task.baseline,
        "n_params": res["n_params"], "wall_time_s": res["wall_time_s"],
        "time_per_step_s": res["time_per_step_s"], "final": res["final"], "best": res["best"],
        "curves": res["history"],
    }
    os.makedirs(out_dir, exist_ok=True)
    path = os.path.join(out_dir, f"{suite_name}__{name}.json")
    with open(path, "w") as f:
        json.dump(record, f, indent=1)
    return record


def run(suite_name: str, out_dir: str, *, only=None, progress=True) -> list:
    """Run (a subset ``only`` of) a suite, one JSON per run; returns the records."""
    runs = suite(suite_name)
    names = list(runs) if not only else list(only)
    for n in names:
        if n not in runs:
            raise ValueError(f"`only`: got {n!r}, expected run names of {suite_name!r}: {list(runs)}.")
    return [run_one(suite_name, n, runs[n], out_dir, progress=progress) for n in names]


def load_results(path_or_dir: str) -> list:
    """All stored run records in a directory (sorted by file name)."""
    files = sorted(glob.glob(os.path.join(path_or_dir, "*.json")))
    out = []
    for p in files:
        with open(p) as f:
            out.append(json.load(f))
    return out


def main(argv=None):
    p = argparse.ArgumentParser(prog="python -m lrnn.experiments",
                                description="Run named suites of training runs; one JSON per run.")
    sub = p.add_subparsers(dest="cmd", required=True)
    sub.add_parser("list", help="list the suites and their runs with the equivalent commands")
    r = sub.add_parser("run", help="run a suite")
    r.add_argument("suite", help=f"one of {', '.join(SUITES)}")
    r.add_argument("--out", default=os.path.join("book", "data", "results"),
                   help="directory for the JSON files")
    r.add_argument("--only", nargs="*", default=None, help="run only these run names")
    r.add_argument("--no-progress", action="store_true", help="hide progress bars")
    args = p.parse_args(argv)
    if args.cmd == "list":
        for name, (fn, desc) in SUITES.items():
            print(f"{name}: {desc}")
            for run_name, cfg in fn().items():
                print(f"  {run_name}: {command(cfg)}")
        return None
    records = run(args.suite, args.out, only=args.only, progress=not args.no_progress)
    for rec in records:
        print(json.dumps({"name": rec["name"], "best": rec["best"], "n_params": rec["n_params"],
                          "wall_time_s": round(rec["wall_time_s"], 1)}))
    return records


if __name__ == "__main__":
    main(sys.argv[1:])
