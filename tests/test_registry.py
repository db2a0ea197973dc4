"""The layer registry (``lrnn.layers``): one init/apply signature for every layer, the deep model
built through it, and every registered layer in the model-step benchmark."""
import inspect
import json

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import lrnn
from lrnn.benchmarks import scan as bench
from lrnn import layers, model
from lrnn.benchmarks import layer as bench_layer

KEY = jax.random.PRNGKey(0)
OPTIONS = {"n_heads": 2, "n_reflections": 3, "r_min": 0.5, "r_max": 0.9, "max_phase": 1.0,
           "gamma_min": 0.9, "gamma_max": 0.99, "bidirectional": False,
           "scan_method": "sequential", "formulation": "dense", "activation": "leaky_relu",
           "forget_bias": 5.0}


def test_the_registry_holds_every_layer_of_the_course():
    assert layers.names() == model.LAYERS == ("lru", "rotrnn", "ornn", "lstm", "rotlstm", "gru",
                                              "rotgru")
    assert model.BIDIRECTIONAL_LAYERS == ("lru", "rotrnn")
    with pytest.raises(ValueError, match="`layer`: got 'rnn'.*'lru', 'rotrnn', 'ornn'"):
        layers.get("rnn")


@pytest.mark.slow
@pytest.mark.parametrize("name", layers.names())
def test_every_layer_has_the_same_signature(name):
    """``init(key, d_in, d_state, **options)`` and ``apply(params, u, **options)``, options
    named after ModelConfig fields; output width as declared; recurrent keys exist."""
    spec = layers.get(name)
    init_opts = {arg: OPTIONS[field] for arg, field in spec.init_options.items()}
    apply_opts = {arg: OPTIONS[field] for arg, field in spec.apply_options.items()}
    for field in (*spec.init_options.values(), *spec.apply_options.values()):
        assert field in model.ModelConfig.__dataclass_fields__
    d_in, d_state = 6, 4
    params = spec.init(KEY, d_in, d_state, **init_opts)
    y = spec.apply(params, jnp.ones((2, 5, d_in)), **apply_opts)
    assert y.shape == (2, 5, spec.width(d_in, d_state))
    assert set(spec.recurrent_keys) - {"u1"} <= set(params)
    first = list(inspect.signature(spec.init).parameters)[:3]
    assert first == ["key", "d_model", "d_state"]          # one naming scheme for every layer
    # options keep their ModelConfig name all the way down
    assert all(arg == field for arg, field in {**spec.init_options, **spec.apply_options}.items())


@pytest.mark.parametrize("name", ["ornn", "lstm", "rotlstm", "gru", "rotgru"])
def test_old_size_keywords_still_work_with_a_warning(name):
    spec = layers.get(name)
    new = spec.init(KEY, d_model=3, d_state=4)
    with pytest.warns(DeprecationWarning, match="d_in=.*use d_model"):
        old = spec.init(KEY, d_in=3, d_state=4)
    assert jax.tree_util.tree_all(jax.tree_util.tree_map(lambda a, b: bool(jnp.all(a == b)),
                                                         new, old))
    with pytest.raises(TypeError, match="both"):
        spec.init(KEY, d_in=3, d_model=3, d_state=4)


@pytest.mark.parametrize("name", ["lru", "rotrnn"])
def test_old_method_keyword_still_works_with_a_warning(name):
    mod = getattr(layers, name)
    params = layers.get(name).init(KEY, 4, 4, **({"n_heads": 2} if name == "rotrnn" else {}))
    u = jnp.ones((3, 4))
    with pytest.warns(DeprecationWarning, match="method=.*use scan_method"):
        old = mod.apply(params, u, method="sequential")
    np.testing.assert_array_equal(old, mod.apply(params, u, scan_method="sequential"))
    with pytest.raises(ValueError, match="`scan_method`: got 'nosuch'"):
        mod.apply(params, u, scan_method="nosuch")


def test_the_registry_is_read_live():
    spec = layers.Layer("late", layers.get("lru").init, layers.get("lru").apply, ("nu_log",),
                        output="d_model", bidirectional=True)
    layers.register(spec)
    try:
        assert "late" in model.LAYERS and "late" in model.BIDIRECTIONAL_LAYERS
        assert model.RECURRENT_KEYS["late"] == ("nu_log",)
        model.ModelConfig(layer="late", bidirectional=True)
    finally:
        layers._REGISTRY.pop("late")
    assert "late" not in model.LAYERS and "late" not in model.RECURRENT_KEYS


@pytest.mark.parametrize("kw, match", [
    (dict(init=None), "`layer.init`"), (dict(apply="apply"), "`layer.apply`"),
    (dict(name=""), "`layer.name`"), (dict(name=3), "`layer.name`"),
    (dict(recurrent_keys="W"), "`layer.recurrent_keys`"),
    (dict(init_options=["r_min"]), "`layer.init_options`"),
    (dict(apply_options={"method": 1}), "`layer.apply_options`"),
    (dict(output="width"), "`layer.output`"), (dict(bidirectional="no"), "`layer.bidirectional`"),
])
def test_register_refuses_a_layer_it_cannot_run(kw, match):
    base = dict(name="bad", init=layers.get("gru").init, apply=layers.get("gru").apply,
                recurrent_keys=("W_z",))
    with pytest.raises(ValueError, match=match):
        layers.register(layers.Layer(**{**base, **kw}))
    assert "bad" not in layers.names()


def test_which_options_apply_to_which_layer():
    assert model.applies_to("r_min", "lru") and not model.applies_to("r_min", "ornn")
    assert model.applies_to("scan_method", "rotrnn") and not model.applies_to("scan_method", "gru")
    assert model.applies_to("n_reflections", "ornn") and model.applies_to("depth", "gru")


def test_the_model_is_built_through_the_registry():
    """A layer registered from outside runs in the deep model, with its options and its
    recurrent keys (the model knows no layer by name)."""
    def init(key, d_in, d_state, *, scale):
        return {"A": jax.random.normal(key, (d_state, d_state)) * scale,
                "B": jnp.ones((d_state, d_in)), "bias": jnp.zeros(d_state)}

    def apply(params, u, *, method):
        assert method == "sequential"               # a layer of its own may name it its way
        def step(h, x):
            h = jnp.tanh(h @ params["A"].T + x @ params["B"].T + params["bias"])
            return h, h
        _, hs = jax.lax.scan(step, jnp.zeros(u.shape[:-2] + params["A"].shape[:1]),
                             jnp.moveaxis(u, -2, 0))
        return jnp.moveaxis(hs, 0, -2)

    spec = layers.Layer("toy", init, apply, ("A", "B"), {"scale": "max_phase"},
                        {"method": "scan_method"})
    layers.register(spec)
    try:
        with pytest.raises(ValueError, match="not registered yet"):
            layers.register(spec)
        cfg = model.ModelConfig(layer="toy", d_model=4, d_state=3, max_phase=0.5,
                                scan_method="sequential")
        params, state = model.init(KEY, cfg)
        assert params["blocks"][0]["layer"]["A"].shape == (3, 3)
        assert params["blocks"][0]["glu"]["W"].shape == (3, 8)          # width d_state
        out, _ = model.apply(params, state, jnp.ones((2, 7, 1)), cfg)
        assert out.shape == (2, 1) and np.all(np.isfinite(out))
        mask = model.recurrent_mask(params, cfg)["blocks"][0]["layer"]
        assert mask == {"A": True, "B": True, "bias": False}
    finally:
        layers._REGISTRY.pop("toy")
    with pytest.raises(ValueError, match="`layer`: got 'toy'"):
        model.ModelConfig(layer="toy")


def test_model_and_layers_pick_no_layer_by_name():
    source = inspect.getsource(model)
    assert "importlib" not in source and "cfg.layer ==" not in source
    assert "cfg.layer in" not in source


@pytest.mark.slow
def test_the_model_step_benchmark_has_a_row_for_every_layer(tmp_path):
    assert {r["layer"] for r in bench_layer.MODEL_ROWS.values()} == set(layers.names())
    out = bench.main(["layer", "--device", "cpu", "--layers", "none",
                      "--models", "lstm,ornn-dense", "--d-model", "4", "--d-state", "4",
                      "--length", "5", "--sweep-batches", "1,2", "--sweep-reflections", "1",
                      "--repeats", "1", "--out", str(tmp_path / "l.json")])
    stored = json.loads((tmp_path / "l.json").read_text())
    assert stored["results"] == [] and stored["device"]["platform"] == "cpu"
    rows = {r["model"]: r for r in stored["model_steps"]}
    assert set(rows) == {"lstm", "ornn-dense"}
    assert rows["ornn-dense"]["formulation"] == "dense" and rows["ornn-dense"]["batch"] == 64
    for r in stored["model_steps"] + stored["ornn_batch_sweep"]:
        assert r["step_s"] > 0 and r["n_params"] > 0 and r["length"] == 5
    sweep = [(r["batch"], r["formulation"], r["n_reflections"]) for r in stored["ornn_batch_sweep"]]
    assert sweep == [(1, "dense", 1), (1, "reflections", 1), (2, "dense", 1), (2, "reflections", 1)]
    (target,) = out["model_targets"]
    assert target["measured"] == pytest.approx(rows["ornn-dense"]["step_s"] / rows["lstm"]["step_s"])
    assert lrnn.layers.ornn.choose_formulation(64, 4, 4, "cpu")[0] == "dense"
