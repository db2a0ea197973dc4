"""Training: a real learning test, exact resumption, the optimiser's groups, the CLI."""
import json
import os
import subprocess
import sys

import jax
import jax.numpy as jnp
import numpy as np
import optax
import pytest

from lrnn import experiments, model, train


def test_lru_learns_the_adding_problem():
    """LRU on the adding problem, T = 100: test MSE below 0.0167, 10x under the 0.167 of
    predicting the mean (oRNN §5.2). About 15 s of CPU time."""
    cfg = train.TrainConfig(task="adding", seq_len=100, model="lru", depth=1, d_model=32,
                            d_state=32, r_min=0.9, batch_size=32, steps=500, lr=3e-3,
                            eval_every=250, n_test=500, scan_method="sequential", seed=0)
    res = train.train(cfg, progress=False)
    mse = res["final"]["test_mse"]
    assert res["history"]["test_metric"][0] < 0.167
    assert mse < 0.0167, f"test MSE {mse:.4f} not below 0.0167"


def _tiny(tmp_path, **kw):
    base = dict(task="copying", seq_len=6, copy_k=2, model="rotrnn", depth=1, d_model=8,
                d_state=8, n_heads=2, norm="batch", dropout=0.1, batch_size=4, steps=6,
                eval_every=2, n_test=8, clip=1.0, lr_factor=0.5,
                checkpoint=str(tmp_path / "ckpt.npz"))
    base.update(kw)
    return train.TrainConfig(**base)


def _leaves_equal(a, b):
    la, lb = jax.tree_util.tree_leaves(a), jax.tree_util.tree_leaves(b)
    return len(la) == len(lb) and all(np.array_equal(np.asarray(x), np.asarray(y)) for x, y in zip(la, lb))


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


def test_checkpoint_round_trip_and_config_check(tmp_path):
    cfg = _tiny(tmp_path, steps=2, eval_every=2)
    res = train.train(cfg, progress=False)
    task = res["task"]
    mcfg = train.model_config(cfg, task)
    params, state = model.init(jax.random.PRNGKey(123), mcfg)
    tx = train.make_optimizer(cfg, model.recurrent_mask(params, mcfg))
    step, (p, s, o), meta = train.load_checkpoint(cfg.checkpoint, (params, state, tx.init(params)))
    hist, saved = meta["history"], meta["config"]
    assert step == 2 and hist == res["history"] and saved["model"] == "rotrnn"
    assert _leaves_equal(p, res["params"]) and _leaves_equal(s, res["state"])
    path = tmp_path / "again.npz"
    train.save_checkpoint(path, step, p, s, o, hist, saved)
    step2, tree2, _ = train.load_checkpoint(path, (params, state, tx.init(params)))
    assert step2 == 2 and _leaves_equal(tree2, (p, s, o))
    with pytest.raises(ValueError, match="`cfg`"):
        train.train(_tiny(tmp_path, steps=2, eval_every=2, lr=0.5), progress=False)


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


@pytest.mark.parametrize("kw, name", [({"task": "mnist10"}, "`task`"), ({"model": "rnn"}, "`model`"),
                                      ({"steps": 0}, "`steps`"), ({"lr": -1.0}, "`lr`"),
                                      ({"clip": 0.0}, "`clip`")])
def test_config_rejects_bad_arguments(kw, name):
    with pytest.raises(ValueError, match=name):
        train.TrainConfig(**kw)


def test_cli_help_explains_every_flag():
    out = subprocess.run([sys.executable, "-m", "lrnn.train", "--help"], capture_output=True,
                         text=True, check=True).stdout
    for f in train.TrainConfig.__dataclass_fields__:
        assert "--" + f.replace("_", "-") in out
    cfg = train.TrainConfig(task="copying", seq_len=500, model="rotrnn", bidirectional=True,
                            clip=1.0, pool="mean")
    args = train.build_parser().parse_args(train.config_to_argv(cfg))
    assert train.config_from_args(args) == cfg


def test_experiments_list_and_one_stored_run(tmp_path):
    out = subprocess.run([sys.executable, "-m", "lrnn.experiments", "list"], capture_output=True,
                         text=True, check=True).stdout
    assert "gpu-targets" in out and "adding400-lru: python -m lrnn.train" in out
    rec = experiments.run("smoke", str(tmp_path), only=["smoke-lru"], progress=False)[0]
    stored = json.load(open(tmp_path / "smoke__smoke-lru.json"))
    for key in ("command", "config", "device", "wall_time_s", "n_params", "final", "best", "curves"):
        assert key in stored
    assert stored["command"].startswith("python -m lrnn.train") and stored["n_params"] == rec["n_params"]
    assert stored["curves"]["step"] == [2, 4] and stored["device"]["platform"] == jax.devices()[0].platform
