"""Bad inputs to the layers, the deep model, the data, the training loop and their command lines:
each is a clear error that names the argument, the value and what was expected,
never a silent result, a NaN run to the end, or a raw internal error."""
import subprocess
import sys

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from lrnn.benchmarks import scan as bench
from lrnn.training import experiments, train
from lrnn.layers import lru, ornn, rotrnn
from lrnn import model
from lrnn.layers import gru, lstm
from lrnn.training import data

KEY = jax.random.PRNGKey(0)


def _layers(d_in=4):
    """(name, params, apply) for every layer, small sizes."""
    return [("lru", lru.init(KEY, d_in, 4), lru.apply),
            ("rotrnn", rotrnn.init(KEY, d_in, 4, 2), rotrnn.apply),
            ("ornn", ornn.init(KEY, d_in, 4, 2), ornn.apply),
            ("rotlstm", lstm.init(KEY, d_in, 4), lstm.apply),
            ("lstm", lstm.init(KEY, d_in, 4, rotate=False), lstm.apply),
            ("rotgru", gru.init(KEY, d_in, 4), gru.apply),
            ("gru", gru.init(KEY, d_in, 4, rotate=False), gru.apply)]


LAYERS = _layers()


# ---------------------------------------------------------------- the layers

def test_lru_ring_on_the_unit_circle_is_rejected():
    """r_min = r_max = 1: |λ| = 1, γ = 0, every state zero. Rejected; r_max = 1 alone is fine."""
    with pytest.raises(ValueError, match="`r_min`: got 1.0.*below 1.*γ"):
        lru.init(KEY, 4, 4, r_min=1.0, r_max=1.0)
    p = lru.init(KEY, 4, 4, r_min=0.5, r_max=1.0)
    assert np.all(np.isfinite(lru.hidden_states(p, jnp.ones((3, 4)))))


@pytest.mark.parametrize("name,params,apply", LAYERS, ids=[n for n, *_ in LAYERS])
def test_every_layer_rejects_an_empty_sequence(name, params, apply):
    with pytest.raises(ValueError, match=r"`u`: got an array of shape \(2, 0, 4\).*L >= 1"):
        apply(params, jnp.ones((2, 0, 4)))


@pytest.mark.parametrize("name,params,apply", LAYERS, ids=[n for n, *_ in LAYERS])
def test_every_layer_rejects_complex_boolean_and_non_numeric_input(name, params, apply):
    with pytest.raises(ValueError, match="`u`.*complex64.*real"):
        apply(params, jnp.ones((3, 4), jnp.complex64))
    with pytest.raises(ValueError, match="`u`.*bool.*real numeric"):
        apply(params, np.ones((3, 4), bool))
    with pytest.raises(ValueError, match="`u`.*real numeric"):
        apply(params, [["a"] * 4] * 3)
    with pytest.raises(ValueError, match="`u`.*real numeric"):
        apply(params, [[1.0, 2.0], [3.0]])                         # ragged


@pytest.mark.parametrize("name,params,apply", LAYERS, ids=[n for n, *_ in LAYERS])
def test_every_layer_takes_integer_input_as_floats(name, params, apply):
    ints = np.arange(12).reshape(3, 4) % 3
    np.testing.assert_allclose(apply(params, ints), apply(params, ints.astype(np.float32)),
                               rtol=1e-6)


def test_ornn_step_rejects_complex_state():
    p = ornn.init(KEY, 2, 4, 2)
    with pytest.raises(ValueError, match="`h`.*real"):
        ornn.step(p, jnp.ones(4, jnp.complex64), jnp.ones(2))


@pytest.mark.parametrize("bad", [None, 0, 7, 1.5, "key", np.zeros(3)])
def test_every_init_rejects_what_is_not_a_prng_key(bad):
    inits = [lambda k: lru.init(k, 4, 4), lambda k: rotrnn.init(k, 4, 4, 2),
             lambda k: ornn.init(k, 2, 4, 2), lambda k: lstm.init(k, 2, 4),
             lambda k: gru.init(k, 2, 4), lambda k: lru.ring_init(k, 4),
             lambda k: model.init(k, model.ModelConfig(d_state=4, d_model=4))]
    for init in inits:
        with pytest.raises(ValueError, match="`key`.*PRNG key"):
            init(bad)
    assert lru.init(jax.random.key(0), 4, 4)["D"].shape == (4,)        # typed keys work


@pytest.mark.parametrize("name,params,apply,missing",
                         [(n, p, a, k) for n, p, a in LAYERS for k in ("D", "W_f", "W_z", "U", "M")
                          if k in p])
def test_every_layer_names_a_missing_parameter(name, params, apply, missing):
    incomplete = {k: v for k, v in params.items() if k != missing}
    with pytest.raises(ValueError, match=f"`params`.*expected a dict with the key '{missing}'"):
        apply(incomplete, jnp.ones((3, 4)))
    with pytest.raises(ValueError, match="`params`.*a dict of parameters"):
        apply(list(params.values()), jnp.ones((3, 4)))


def test_lru_apply_without_D():
    p = lru.init(KEY, 4, 4)
    del p["D"]
    with pytest.raises(ValueError, match="`params`: got a dict with keys .* the key 'D' "
                                         r"\(from lrnn.layers.lru.init\)"):
        lru.apply(p, jnp.ones((3, 4)))
    lru.hidden_states(p, jnp.ones((3, 4)))                              # D is not needed there


def test_gated_weights_of_the_wrong_shape():
    p = lstm.init(KEY, 2, 4)
    with pytest.raises(ValueError, match=r"`params\['W_i'\]`.*shape \(4, 6\)"):
        lstm.apply({**p, "W_i": p["W_i"][:, :5]}, jnp.ones((3, 2)))
    with pytest.raises(ValueError, match=r"`params`.*'b_rot'"):
        lstm.apply({k: v for k, v in p.items() if k != "b_rot"}, jnp.ones((3, 2)))


# ---------------------------------------------------------------- model and data

def test_out_of_range_tokens_are_errors_not_remapped():
    cfg = model.ModelConfig(layer="lstm", d_input=None, vocab_size=5, d_model=4, d_state=4)
    params, state = model.init(KEY, cfg)
    for bad in ([[0, 1, 5]], [[0, -1, 2]]):
        with pytest.raises(ValueError, match=r"`x`.*tokens in 0 \.\. vocab_size - 1 = 4"):
            model.apply(params, state, np.array(bad), cfg)
    out, _ = model.apply(params, state, np.array([[0, 1, 4]]), cfg)
    assert np.all(np.isfinite(out))
    # Under jit there are no values to check: an out-of-range token reads NaN, never a
    # valid row (JAX would clamp an index to the last row).
    jitted, _ = jax.jit(lambda x: model.apply(params, state, x, cfg))(jnp.array([[0, 1, 5]]))
    assert np.all(np.isnan(jitted))
    with pytest.raises(ValueError, match=r"`ids`.*token ids in 0 \.\. 15 \(found -1\)"):
        data.listops_decode(np.array([11, 3, -1, 15]))
    with pytest.raises(ValueError, match=r"`ids`.*found 16"):
        data.listops_decode([16])
    assert data.listops_decode([11, 3, 4, 15, 0]) == ["[MIN", "2", "3", "]"]


def test_unknown_layer_names_list_the_known_ones():
    with pytest.raises(ValueError, match="`layer`: got 'transformer'.*'lru'.*'rotgru'"):
        model.ModelConfig(layer="transformer")
    with pytest.raises(ValueError, match="`layer`: got 'rnn'.*'ornn'"):
        train.TrainConfig(layer="rnn")


# ---------------------------------------------------------------- training

@pytest.mark.parametrize("kw, name", [
    ({"lr": float("inf")}, "`lr`: got inf"), ({"lr": float("nan")}, "`lr`"),
    ({"lr": 0.0}, "`lr`"), ({"weight_decay": -5.0}, "`weight_decay`: got -5.0"),
    ({"weight_decay": float("inf")}, "`weight_decay`"), ({"lr_factor": float("inf")}, "`lr_factor`"),
    ({"clip": float("inf")}, "`clip`"), ({"warmup_frac": float("nan")}, "`warmup_frac`"),
    ({"seed": -1}, "`seed`"), ({"seed": 1.5}, "`seed`"), ({"checkpoint_every": -1}, "`checkpoint_every`"),
    ({"seq_len": 0}, "`seq_len`"), ({"pool": "max"}, "`pool`"), ({"dropout": 1.0}, "`dropout`"),
    ({"activation": "relu"}, "`activation`"), ({"formulation": "wy"}, "`formulation`")])
def test_train_config_rejects(kw, name):
    with pytest.raises(ValueError, match=name):
        train.TrainConfig(**kw)


def _tiny_run(tmp_path, **kw):
    base = dict(task="adding", seq_len=6, layer="ornn", depth=1, d_model=4, d_state=4,
                batch_size=4, steps=5, eval_every=5, n_test=8, warmup_frac=0.0,
                checkpoint=str(tmp_path / "c.npz"))
    return train.TrainConfig(**{**base, **kw})


@pytest.mark.slow
def test_training_that_turns_nan_stops_and_names_the_step(tmp_path):
    cfg = _tiny_run(tmp_path, lr=1e30)
    with pytest.raises(train.TrainingDiverged, match=r"step [1-5] of 5.*lower learning rate"):
        train.train(cfg, progress=False)
    assert not (tmp_path / "c.npz").exists()                          # nothing NaN was saved
    out = subprocess.run([sys.executable, "-m", "lrnn.training.train", *train.config_to_argv(cfg),
                          "--no-progress"], capture_output=True, text=True, timeout=300)
    assert out.returncode == 1
    assert "training diverged" in out.stderr and "lower learning rate" in out.stderr
    assert "test_mse" not in out.stdout


# ---------------------------------------------------------------- command lines

def _cli(*args):
    return subprocess.run([sys.executable, "-m", *args], capture_output=True, text=True,
                          timeout=300)


@pytest.mark.slow
def test_experiments_only_without_names_and_missing_dirs(tmp_path):
    out = _cli("lrnn.training.experiments", "run", "smoke", "--only", "--out", str(tmp_path))
    assert out.returncode == 2 and "--only" in out.stderr
    assert list(tmp_path.iterdir()) == []                               # nothing ran
    out = _cli("lrnn.training.experiments", "run", "smoke", "--only", "nosuch", "--out", str(tmp_path))
    assert out.returncode == 2 and "nosuch" in out.stderr
    out = _cli("lrnn.training.experiments", "run", "nosuite")
    assert out.returncode == 2 and "'smoke'" in out.stderr
    out = _cli("lrnn.training.experiments", "targets", "--dir", str(tmp_path / "nonexistent"))
    assert out.returncode == 2 and "not a directory" in out.stderr
    out = _cli("lrnn.training.experiments", "targets", "--dir", str(tmp_path))
    assert out.returncode == 2 and "no stored results" in out.stderr
    with pytest.raises(ValueError, match="`only`"):
        experiments.run("smoke", str(tmp_path), only=[])
    with pytest.raises(ValueError, match="`path_or_dir`"):
        experiments.load_results(str(tmp_path / "nonexistent"))


@pytest.mark.parametrize("argv, message", [
    (["--layers", "foo"], "--layers: got 'foo'.*'lru', 'rotrnn'"),
    (["--models", "lstm,foo"], "--models: got 'lstm,foo'.*'ornn-dense'"),
    (["--sweep-batches", "0,4"], "--sweep-batches"),
    (["--repeats", "0"], "--repeats: got 0"),
    (["--length", "-4"], "--length: got -4")])
def test_bench_layer_rejects_unknown_names_and_sizes(argv, message):
    with pytest.raises(SystemExit, match=message):
        bench.main(["layer", "--device", "cpu", *argv])
