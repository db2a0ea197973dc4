"""Training: a real learning test, exact resumption, the optimiser's groups, the CLI."""
import dataclasses
import json
import os
import re
import subprocess
import sys

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from lrnn.training import data, experiments, train
from lrnn import model


@pytest.mark.slow
def test_lru_learns_the_adding_problem():
    """LRU on the adding problem, T = 100: test MSE below 0.0167, 10x under the 0.167 of
    predicting the mean (oRNN §5.2). About 15 s of CPU time."""
    cfg = train.TrainConfig(task="adding", seq_len=100, layer="lru", depth=1, d_model=32,
                            d_state=32, r_min=0.9, batch_size=32, steps=500, lr=3e-3,
                            eval_every=250, n_test=500, scan_method="sequential", seed=0)
    res = train.train(cfg, progress=False)
    mse = res["final"]["test_mse"]
    assert res["history"]["test_metric"][0] < 0.167
    assert mse < 0.0167, f"test MSE {mse:.4f} not below 0.0167"


def _tiny(tmp_path, **kw):
    base = dict(task="copying", seq_len=6, copy_k=2, layer="rotrnn", depth=1, d_model=8,
                d_state=8, n_heads=2, norm="batch", dropout=0.1, batch_size=4, steps=6,
                eval_every=2, n_test=8, clip=1.0, lr_factor=0.5,
                checkpoint=str(tmp_path / "ckpt.npz"))
    base.update(kw)
    return train.TrainConfig(**base)


def _leaves_equal(a, b):
    la, lb = jax.tree_util.tree_leaves(a), jax.tree_util.tree_leaves(b)
    return len(la) == len(lb) and all(np.array_equal(np.asarray(x), np.asarray(y)) for x, y in zip(la, lb))


@pytest.mark.slow
def test_resumed_run_ends_where_the_uninterrupted_run_ends(tmp_path):
    (tmp_path / "a").mkdir()
    (tmp_path / "b").mkdir()
    straight = train.train(_tiny(tmp_path / "a"), progress=False)
    cfg = _tiny(tmp_path / "b")
    first = train.train(cfg, progress=False, stop_after=3)
    assert first["steps_run"] == 3 and os.path.exists(cfg.checkpoint)
    resumed = train.train(cfg, progress=False)
    assert resumed["steps_run"] == 3
    assert _leaves_equal(straight["params"], resumed["params"])
    assert _leaves_equal(straight["state"], resumed["state"])        # BatchNorm running stats
    assert straight["history"] == resumed["history"]
    assert not _leaves_equal(first["params"], resumed["params"])


@pytest.mark.slow
def test_checkpoint_round_trip_and_config_check(tmp_path):
    cfg = _tiny(tmp_path, steps=2, eval_every=2)
    res = train.train(cfg, progress=False)
    task = res["task"]
    mcfg = train.model_config(cfg, task)
    params, state = model.init(jax.random.PRNGKey(123), mcfg)
    tx = train.make_optimizer(cfg, model.recurrent_mask(params, mcfg))
    step, (p, s, o), meta = train.load_checkpoint(cfg.checkpoint, (params, state, tx.init(params)))
    hist, saved = meta["history"], meta["config"]
    assert step == 2 and hist == res["history"] and saved["layer"] == "rotrnn"
    assert _leaves_equal(p, res["params"]) and _leaves_equal(s, res["state"])
    path = tmp_path / "again.npz"
    train.save_checkpoint(path, step, p, s, o, hist, saved)
    step2, tree2, _ = train.load_checkpoint(path, (params, state, tx.init(params)))
    assert step2 == 2 and _leaves_equal(tree2, (p, s, o))
    with pytest.raises(ValueError, match=r"ckpt.npz.*`lr` 0.001 \(this run: 0.5\)"):
        train.train(_tiny(tmp_path, steps=2, eval_every=2, lr=0.5), progress=False)


@pytest.mark.slow
def test_more_steps_continue_a_run(tmp_path):
    first = train.train(_tiny(tmp_path, steps=2, eval_every=2), progress=False)
    more = train.train(_tiny(tmp_path, steps=4, eval_every=2), progress=False)
    assert first["steps_run"] == 2 and more["steps_run"] == 2
    assert more["history"]["step"] == [2, 4]
    assert more["history"]["test_loss"][0] == first["history"]["test_loss"][0]
    step, meta, _ = train._read_checkpoint(tmp_path / "ckpt.npz")
    assert step == 4 and meta["config"]["steps"] == 4


def _cli(capsys, argv):
    with pytest.raises(SystemExit) as err:
        train.main(argv)
    out = capsys.readouterr()
    return err.value.code, out.err + (err.value.code if isinstance(err.value.code, str) else "")


TINY_CLI = ["--task", "adding", "--seq-len", "6", "--layer", "lru", "--depth", "1",
            "--d-model", "4", "--d-state", "4", "--batch-size", "4", "--eval-every", "2",
            "--n-test", "8", "--no-progress"]


@pytest.mark.slow
def test_a_changed_option_names_itself_with_both_values_in_one_line(tmp_path, capsys):
    ck = str(tmp_path / "ck.npz")
    train.main(TINY_CLI + ["--steps", "2", "--checkpoint", ck])
    capsys.readouterr()
    before = (tmp_path / "ck.npz").read_bytes()
    code, text = _cli(capsys, TINY_CLI + ["--steps", "2", "--checkpoint", ck, "--lr", "0.01",
                                          "--seed", "3"])
    assert code == 2
    line = [t for t in text.splitlines() if "error" in t]
    assert len(line) == 1, text
    assert "--lr 0.001 (this run: 0.01)" in line[0] and "--seed 0 (this run: 3)" in line[0]
    assert "ck.npz" in line[0] and "--steps" not in line[0]
    assert (tmp_path / "ck.npz").read_bytes() == before


@pytest.mark.parametrize("step, expected", [
    (-3, "field 'step' is -3, expected a step in 0"),
    (9, "field 'step' is 9, past this run's --steps 4. Give --steps 9 or more"),
])
def test_an_impossible_checkpoint_step_names_the_file_and_the_field(tmp_path, capsys, step,
                                                                   expected):
    ck = tmp_path / "ck.npz"
    train.main(TINY_CLI + ["--steps", "2", "--checkpoint", str(ck)])
    capsys.readouterr()
    with np.load(ck) as f:
        arrays = {k: f[k] for k in f.files}
    arrays["step"] = np.int64(step)
    with open(ck, "wb") as f:
        np.savez(f, **arrays)
    code, text = _cli(capsys, TINY_CLI + ["--steps", "4", "--checkpoint", str(ck)])
    assert code == 2 and "ck.npz" in text and expected in text, text
    assert "NaN" not in text and "Traceback" not in text


def test_a_finished_run_prints_no_nan(tmp_path, capsys):
    ck = str(tmp_path / "ck.npz")
    train.main(TINY_CLI + ["--steps", "2", "--checkpoint", ck])
    capsys.readouterr()
    train.main(TINY_CLI + ["--steps", "2", "--checkpoint", ck])
    printed = capsys.readouterr().out
    summary = json.loads(printed[printed.index("{"):])
    assert summary["steps_run"] == 0 and summary["time_per_step_s"] is None
    assert "NaN" not in printed


@pytest.mark.parametrize("argv, expected", [
    (["--task", "copying", "--seq-len", "5", "--copy-k", "6"],
     "--copy-k: got 6, expected at most the delay --seq-len 5"),
    (["--task", "copying", "--copy-k", "501"],
     "--copy-k: got 501, expected at most the delay --seq-len 500 (its default)"),
    (["--task", "adding", "--seq-len", "1"], "--seq-len: got 1, expected at least 2"),
    (["--task", "copying", "--seq-len", "1"], "--seq-len: got 1, expected at least 2"),
    (["--task", "listops", "--seq-len", "3"], "--seq-len: got 3, expected at least 4"),
    (["--task", "smnist", "--seq-len", "100"], "--seq-len: got 100, but --task smnist"),
])
def test_task_sizes_are_refused_in_the_options_words(capsys, monkeypatch, argv, expected):
    monkeypatch.setattr(train, "load_task", lambda *a, **k: pytest.fail("work began"))
    code, text = _cli(capsys, ["--no-progress"] + argv)
    assert code == 2 and expected in text, text
    errors = [t for t in text.splitlines() if "error:" in t]
    assert len(errors) == 1 and " K" not in errors[0] and " T " not in errors[0]


@pytest.mark.slow
def test_ctrl_c_says_what_was_kept_and_exits_130(tmp_path, capsys, monkeypatch):
    real = train._make_fns
    calls = []

    def interrupted(*args, **kwargs):
        step, evaluate = real(*args, **kwargs)

        def step_or_ctrl_c(*a):
            calls.append(1)
            if len(calls) == 5:
                raise KeyboardInterrupt
            return step(*a)
        return step_or_ctrl_c, evaluate

    monkeypatch.setattr(train, "_make_fns", interrupted)
    ck = tmp_path / "ck.npz"
    code, text = _cli(capsys, TINY_CLI + ["--steps", "8", "--checkpoint", str(ck),
                                          "--checkpoint-every", "2"])
    assert code == 130 and "Traceback" not in text
    assert [t for t in text.splitlines() if t.strip()] == [
        f"lrnn train: interrupted; checkpoint at step 4 kept in {ck}; the same command "
        "resumes from there"]
    assert train._read_checkpoint(ck)[0] == 4
    assert sorted(p.name for p in tmp_path.iterdir()) == ["ck.npz", "ck.npz.lock"]


def test_schedule_warmup_and_cosine():
    sched = train.schedule(1e-2, 100, 0.1)
    assert float(sched(0)) == pytest.approx(1e-7, abs=1e-9)
    assert float(sched(10)) == pytest.approx(1e-2)
    assert float(sched(5)) == pytest.approx(1e-7 + 0.5 * (1e-2 - 1e-7))
    assert float(sched(55)) == pytest.approx(1e-7 + 0.5 * (1e-2 - 1e-7), rel=1e-4)   # cosine midpoint
    assert float(sched(100)) == pytest.approx(1e-7, abs=1e-9)


def test_recurrent_group_gets_lr_factor_and_no_weight_decay():
    params = {"a": jnp.ones(3), "b": jnp.ones(3)}
    mask = {"a": False, "b": True}
    cfg = train.TrainConfig(lr=1e-2, lr_factor=0.25, weight_decay=0.1, steps=10, warmup_frac=0.0)
    tx = train.make_optimizer(cfg, mask)
    state = tx.init(params)
    zero = jax.tree_util.tree_map(jnp.zeros_like, params)
    upd, _ = tx.update(zero, state, params)
    np.testing.assert_allclose(upd["a"], -1e-2 * 0.1 * np.ones(3), rtol=1e-5)   # decoupled decay
    np.testing.assert_array_equal(upd["b"], np.zeros(3))                       # no decay
    grads = {"a": jnp.full(3, 0.7), "b": jnp.full(3, 0.7)}
    upd, _ = tx.update(grads, state, params)
    # first Adam step moves by lr (sign of g), plus decay on the regular group
    np.testing.assert_allclose(upd["b"], -0.25 * 1e-2 * np.ones(3), rtol=1e-4)
    np.testing.assert_allclose(upd["a"], -1e-2 * (1 + 0.1) * np.ones(3), rtol=1e-4)


def test_history_files(tmp_path):
    h = {k: [1, 2] for k in train.HISTORY_KEYS}
    train.save_history(h, tmp_path / "h.json")
    assert json.load(open(tmp_path / "h.json")) == h
    train.save_history(h, tmp_path / "h.csv")
    lines = open(tmp_path / "h.csv").read().split()
    assert lines[0] == ",".join(train.HISTORY_KEYS) and len(lines) == 3
    with pytest.raises(ValueError, match="`path`"):
        train.save_history(h, tmp_path / "h.txt")


@pytest.mark.parametrize("kw, name", [({"task": "mnist10"}, "`task`"), ({"layer": "rnn"}, "`layer`"),
                                      ({"steps": 0}, "`steps`"), ({"lr": -1.0}, "`lr`"),
                                      ({"clip": 0.0}, "`clip`")])
def test_config_rejects_bad_arguments(kw, name):
    with pytest.raises(ValueError, match=name):
        train.TrainConfig(**kw)


#: The flags of ``lrnn train`` before the configuration was nested: they must all
#: stay, with their types and defaults (``--model`` is now ``--layer``, and still accepted;
#: ``--pool`` got the choice ``auto`` for the task's default). NEW_FLAGS were added since.
OLD_FLAGS = {
    "task": "adding", "seq_len": None, "copy_k": 10, "n_train": None, "listops_depth": 10,
    "n_test": 1000, "layer": "lru", "depth": 2, "d_model": 64, "d_state": 64, "n_heads": 8,
    "n_reflections": None, "norm": "layer", "pool": "auto", "dropout": 0.0,
    "bidirectional": False, "r_min": 0.0, "r_max": 1.0, "max_phase": 2 * np.pi,
    "gamma_min": 0.9, "gamma_max": 0.999, "scan_method": "auto", "steps": 1000,
    "batch_size": 32, "lr": 1e-3, "lr_factor": 1.0, "weight_decay": 0.05, "warmup_frac": 0.1,
    "clip": None, "eval_every": 100, "eval_batch": 250, "seed": 0, "checkpoint": None,
    "checkpoint_every": 0, "out": None}
NEW_FLAGS = {"formulation": "auto", "activation": "leaky_relu", "forget_bias": 1.0}
#: A value other than the default for every flag (a valid configuration as a whole).
OTHER_VALUES = {
    "task": "copying", "seq_len": 7, "copy_k": 3, "n_train": 50, "listops_depth": 4,
    "n_test": 12, "layer": "ornn", "depth": 3, "d_model": 16, "d_state": 8, "n_heads": 2,
    "n_reflections": 4, "norm": "batch", "pool": "last", "dropout": 0.25,
    "bidirectional": False, "r_min": 0.5, "r_max": 0.9, "max_phase": 0.5,
    "gamma_min": 0.8, "gamma_max": 0.95, "scan_method": "sequential", "steps": 7,
    "batch_size": 5, "lr": 0.02, "lr_factor": 0.5, "weight_decay": 0.0, "warmup_frac": 0.2,
    "clip": 2.0, "eval_every": 3, "eval_batch": 9, "seed": 4, "checkpoint": "c.npz",
    "checkpoint_every": 2, "out": "h.json", "formulation": "dense", "activation": "oplu",
    "forget_bias": 5.0}


def test_cli_flags_are_the_same_and_each_lands_in_the_config():
    out = subprocess.run([sys.executable, "-m", "lrnn.training.train", "--help"],
                         capture_output=True, text=True, check=True).stdout
    listed = set(re.findall(r"^  (--[a-z0-9-]+)", out, flags=re.M)) - {"--help", "--no-progress"}
    assert listed == {"--" + f.replace("_", "-") for f in {**OLD_FLAGS, **NEW_FLAGS}}
    parser = train.build_parser()
    defaults = train.config_from_args(parser.parse_args([]))
    assert defaults == train.TrainConfig()
    assert defaults.to_dict() == pytest.approx({**OLD_FLAGS, **NEW_FLAGS})
    argv = []
    for name, value in OTHER_VALUES.items():
        flag = "--" + name.replace("_", "-")
        argv += [flag] if value is True else [] if value is False else [flag, str(value)]
    cfg = train.config_from_args(parser.parse_args(argv))
    assert cfg.to_dict() == OTHER_VALUES
    assert cfg.network.layer == "ornn" and cfg.network.n_reflections == 4 and cfg.layer == "ornn"
    assert not hasattr(cfg, "model")
    assert train.config_from_args(parser.parse_args(train.config_to_argv(cfg))) == cfg
    flipped = train.config_from_args(parser.parse_args(["--layer", "lru", "--bidirectional"]))
    assert flipped.bidirectional is True and flipped.network.bidirectional is True
    assert train.config_from_args(parser.parse_args(["--pool", "none"])).pool == "none"


def test_old_names_still_work_with_a_notice(capsys):
    parser = train.build_parser()
    args = parser.parse_args(["--model", "rotrnn"])
    assert "--model is deprecated, use --layer" in capsys.readouterr().err
    assert train.config_from_args(args).network.layer == "rotrnn"
    with pytest.warns(DeprecationWarning, match="layer"):
        assert train.TrainConfig(model="gru").layer == "gru"
    with pytest.raises(TypeError, match="both"):
        train.TrainConfig(model="gru", layer="lru")
    old = {"model": "lstm", "pool": None, "seed": 1}
    assert train.upgrade_config(old) == {"layer": "lstm", "pool": "auto", "seed": 1}


def test_config_nests_one_model_config():
    cfg = train.TrainConfig(task="copying", seq_len=500, layer="rotrnn", bidirectional=True,
                            clip=1.0, pool="mean", d_state=16, n_heads=2)
    assert isinstance(cfg.network, model.ModelConfig)
    assert (cfg.network.layer, cfg.network.d_state, cfg.d_state) == ("rotrnn", 16, 16)
    assert not {f.name for f in dataclasses.fields(train.TrainConfig)} & (
        {f.name for f in dataclasses.fields(model.ModelConfig)} - set(train.TASK_FIELDS))
    replaced = dataclasses.replace(cfg, seed=3, d_state=32)
    assert (replaced.seed, replaced.d_state, replaced.n_heads) == (3, 32, 2)
    task = train.load_task(dataclasses.replace(cfg, n_test=4))
    mcfg = train.model_config(cfg, task)
    assert mcfg == dataclasses.replace(cfg.network, d_input=None, vocab_size=task.vocab_size,
                                       d_output=task.d_output, pool="mean")
    args = train.build_parser().parse_args(train.config_to_argv(cfg))
    assert train.config_from_args(args) == cfg
    with pytest.raises(TypeError, match="d_statee"):
        train.TrainConfig(d_statee=3)
    with pytest.raises(ValueError, match="`layer`.*'transformer'.*'rotgru'"):
        train.TrainConfig(layer="transformer")


@pytest.mark.slow
def test_experiments_list_and_one_stored_run(tmp_path):
    out = subprocess.run([sys.executable, "-m", "lrnn.training.experiments", "list"],
                         capture_output=True, text=True, check=True).stdout
    assert "gpu-targets" in out and "adding400-lru: lrnn train" in out
    rec = experiments.run("smoke", str(tmp_path), only=["smoke-lru"], progress=False)[0]
    stored = json.load(open(tmp_path / "smoke__smoke-lru.json"))
    for key in ("command", "config", "device", "wall_time_s", "n_params", "final", "best", "curves"):
        assert key in stored
    assert stored["command"].startswith("lrnn train --") and stored["n_params"] == rec["n_params"]
    assert stored["curves"]["step"] == [2, 4] and stored["device"]["platform"] == jax.devices()[0].platform


def _record(name, seed, best, *, suite="s", task="adding", model="lru", platform="cpu",
            n_params=10, steps=(1, 2), curve=(0.5, 0.1)):
    return {"suite": suite, "name": name, "task": task, "metric": "mse", "baseline": 0.167,
            "config": {"seed": seed, "model": model}, "device": {"platform": platform},
            "n_params": n_params, "best": {"test_mse": best}, "time_per_step_s": 0.1 * (seed + 1),
            "command": f"python -m lrnn train --seed {seed}",
            "curves": {"step": list(steps), "test_metric": list(curve)}}


def test_summarize_groups_seeds_of_one_run():
    records = [_record("a-lru-seed2", 2, 0.3), _record("a-lru-seed0", 0, 0.1),
               _record("a-lru-seed1", 1, 0.7), _record("b-lru", 0, 0.05, task="copying")]
    rows = experiments.summarize(records)
    assert [r["group"] for r in rows] == ["a-lru", "b-lru"]
    a = rows[0]
    assert a["seeds"] == [0, 1, 2] and a["best"] == [0.1, 0.7, 0.3]
    assert (a["median"], a["min"], a["max"]) == (0.3, 0.1, 0.7)
    assert a["time_per_step_s"] == pytest.approx(0.2)
    assert a["command"].endswith("--seed 0")
    assert rows[1]["seeds"] == [0] and rows[1]["median"] == 0.05
    assert experiments.group_name("listops200-rotrnn-seed12") == "listops200-rotrnn"


def test_where_a_stored_run_ran_and_its_length():
    cpu = {**_record("a", 0, 0.1), "device": {"platform": "cpu", "cpu_count": 2}}
    gpu = {**_record("a", 0, 0.1), "device": {"platform": "gpu", "kind": "NVIDIA H100 80GB HBM3"}}
    assert experiments.where_it_ran(cpu) == "CPU (2 cores)"
    assert experiments.where_it_ran(gpu) == "GPU: H100 80GB HBM3"
    assert experiments.sequence_length({"config": {"seq_len": 400}}) == 400
    assert experiments.sequence_length({"config": {"seq_len": None}}) == 784


@pytest.mark.parametrize("bad", [dict(n_params=11), dict(platform="gpu"), dict(model="rotrnn"),
                                 dict(seed=0)])
def test_summarize_rejects_groups_that_are_not_one_run(bad):
    seed = bad.pop("seed", 1)
    records = [_record("a-lru-seed0", 0, 0.1), _record("a-lru-seed1", seed, 0.2, **bad)]
    with pytest.raises(ValueError, match="`records`"):
        experiments.summarize(records)


def test_plot_curves_median_and_band_over_seeds():
    import matplotlib
    matplotlib.use("Agg")
    seeds = [_record("a", s, 0, curve=c) for s, c in enumerate([(1.0, 0.2), (3.0, 0.4), (2.0, 0.9)])]
    ax = train.plot_curves({"lru": seeds, "single": seeds[0]})
    median, single = ax.get_lines()
    assert list(median.get_ydata()) == [2.0, 0.4] and list(single.get_ydata()) == [1.0, 0.2]
    (band,) = ax.collections
    ys = band.get_paths()[0].vertices[:, 1]
    assert ys.min() == 0.2 and ys.max() == 3.0
    with pytest.raises(ValueError, match="`runs`"):
        train.plot_curves({"x": [seeds[0], _record("b", 1, 0, steps=(1, 3))]})


def test_every_target_names_a_run_of_the_gpu_suite_with_its_metric():
    runs = experiments.suite("gpu-targets")
    metric = {"adding": "test_mse"}
    for name, key, _, _ in experiments.TARGETS:
        assert name in runs
        assert key == metric.get(runs[name].task, "test_accuracy")


def test_targets_use_only_gpu_runs_of_the_gpu_suite():
    def rec(name, best, platform="gpu", suite="gpu-targets"):
        r = _record(name, 0, 0.0, suite=suite, platform=platform)
        r["best"] = best
        r["device"]["kind"] = "H100"
        return r
    records = [rec("adding400-lru", {"test_mse": 0.004}),
               rec("adding400-rotrnn", {"test_mse": 0.02}),
               rec("copying500-lru", {"test_accuracy": 0.99}),
               rec("listops1000-gru", {"test_accuracy": 0.37}),
               rec("smnist-lru", {"test_accuracy": 0.99}, platform="cpu"),
               rec("psmnist-lru", {"test_accuracy": 0.99}, suite="cpu-small")]
    t = {row["run"]: row for row in experiments.targets(records)}
    assert t["adding400-lru"]["passed"] is True and t["adding400-rotrnn"]["passed"] is False
    assert t["copying500-lru"]["passed"] is True
    assert t["listops1000-gru"]["measured"] == 0.37 and t["listops1000-gru"]["passed"] is None
    assert t["smnist-lru"]["measured"] is None and t["psmnist-lru"]["measured"] is None
    md = experiments.targets_markdown(list(t.values()))
    assert "| `adding400-rotrnn` | MSE < 0.0100 | 0.0200 | **no** | H100 |" in md
    assert "| `smnist-lru` | accuracy ≥ 95.0% | not measured | – | – |" in md


@pytest.mark.slow
@pytest.mark.parametrize("name", list(experiments.suite("gpu-targets")))
def test_every_gpu_target_config_builds_and_traces(name):
    # The GPU suite cannot run in CI, but a typo in one of its configurations must not cost a
    # GPU run: trace every model at its full size, initialisation and a forward pass on 32 steps
    # of its task (jax.eval_shape: every shape and dtype is checked, nothing is compiled; that
    # the layers and the model compute the right values is tested at small sizes elsewhere).
    import dataclasses
    cfg = experiments.suite("gpu-targets")[name]
    small_data = dict(n_test=4, **({"n_train": 8} if cfg.task == "listops" else {}))
    task = train.load_task(dataclasses.replace(cfg, **small_data))
    mcfg = train.model_config(cfg, task)
    params, state = jax.eval_shape(lambda key: model.init(key, mcfg), jax.random.PRNGKey(0))
    x = task.test[0][:2, :32]
    out, _ = jax.eval_shape(
        lambda p, s, x: model.apply(p, s, x, dataclasses.replace(mcfg, scan_method="sequential")),
        params, state, x)
    expected = (2, 32, task.d_output) if mcfg.pool == "none" else (2, task.d_output)
    assert out.shape == expected and out.dtype == jnp.float32
    assert model.count_params(params) > 0


def test_experiments_resume_a_run_split_over_sessions(tmp_path):
    """``--checkpoint-dir``: a run interrupted after 2 of its 4 steps ends, when started again,
    with the record of the uninterrupted run (same curves, config and command)."""
    import dataclasses
    cfg = experiments.suite("smoke")["smoke-lru"]
    ck = tmp_path / "ck"
    ck.mkdir()
    first = dataclasses.replace(cfg, checkpoint=str(ck / "smoke__smoke-lru.npz"),
                                checkpoint_every=cfg.eval_every)
    train.train(first, progress=False, stop_after=2)                 # the first session
    resumed = experiments.run("smoke", str(tmp_path / "a"), only=["smoke-lru"],
                              checkpoint_dir=str(ck), progress=False)[0]
    straight = experiments.run("smoke", str(tmp_path / "b"), only=["smoke-lru"],
                               progress=False)[0]
    assert resumed["resumed"] and not straight["resumed"]
    for key in ("curves", "config", "command", "final", "best"):
        assert resumed[key] == straight[key], key


def test_regression_targets_that_would_broadcast_are_refused():
    # (B, 1) targets against (B,) predictions would make a (B, B) error matrix: the mean of
    # every prediction against every target, a loss whose minimum is the batch mean
    import numpy as np
    from lrnn.training import data as data_lib, train as train_lib

    def batch(n, rng):
        x = rng.normal(size=(n, 8, 1)).astype(np.float32)
        return x, x[:, -1, :]                       # shape (n, 1): one too many axes

    task = data_lib.Task("last", "regression", 8, 1, None, 1, "mse", 1.0,
                         batch(16, np.random.default_rng(0)),
                         lambda step, bs, seed: batch(bs, np.random.default_rng([seed, step])))
    cfg = train_lib.TrainConfig(task="adding", seq_len=8, depth=1, d_model=4, d_state=4,
                                batch_size=4, steps=2, eval_every=1)
    with pytest.raises(ValueError, match=r"`y`: got .*\(4, 1\).*expected regression targets "
                                         r"of shape \(4,\)"):
        train_lib.train(cfg, task=task, progress=False)
    assert train_lib.loss_and_metric(jnp.ones((4, 1)), jnp.ones(4), "regression")[0] == 0.0


@pytest.mark.slow
def test_runs_that_differ_only_in_initial_values_share_one_compilation():
    from lrnn import layers
    used = set()
    for name in layers.names():
        spec = layers.get(name)
        assert not set(train.INIT_VALUE_FIELDS) & (set(spec.apply_options.values())
                                                   | set(getattr(spec, "step_options", {}).values())), name
        used |= set(spec.init_options.values())
    assert set(train.INIT_VALUE_FIELDS) <= used      # each one sets some layer's initial values
    base = train.TrainConfig(task="adding", seq_len=16, layer="lstm", depth=1, d_model=4,
                             d_state=4, batch_size=4, steps=3, eval_every=3, n_test=8)
    train._FNS_CACHE.clear()
    alone = train.train(dataclasses.replace(base, forget_bias=5.0), progress=False)
    train._FNS_CACHE.clear()
    train.train(base, progress=False)
    compiled = len(train._FNS_CACHE)
    shared = train.train(dataclasses.replace(base, forget_bias=5.0), progress=False)
    assert len(train._FNS_CACHE) == compiled == 1
    assert shared["history"] == alone["history"]
    assert not np.allclose(shared["history"]["test_loss"],
                           train.train(base, progress=False)["history"]["test_loss"])


@pytest.mark.slow
@pytest.mark.parametrize("task, channels", [("recall", 1), ("recall_marked", 2)])
def test_the_recall_tasks_train_from_their_names(task, channels):
    """`TrainConfig(task="recall")` loads the task itself: its test set, its batches, and a
    model with as many input channels as the task has."""
    cfg = train.TrainConfig(task=task, seq_len=12, depth=1, d_model=4, d_state=4, batch_size=4,
                            steps=2, eval_every=2, n_test=8, pool="last")
    run = train.train(cfg, progress=False)
    assert run["task"].d_input == channels
    assert np.array_equal(run["task"].test[1], data.recall_problem(8, 12, seed=[0, 10_000])[1])
    assert run["params"]["encoder"]["W"].shape[0] == channels
    assert np.isfinite(run["history"]["test_metric"][-1])
