"""Bad inputs to the deep model: booleans are booleans, every choice is one of its
values, params and state must agree with the config, and tokens have the token layout."""
import jax
import jax.numpy as jnp
import numpy as np
import pytest

from lrnn import model
from lrnn.layers import lru, rotrnn

KEY = jax.random.PRNGKey(0)
SMALL = dict(depth=2, d_model=8, d_state=8, n_heads=2)


@pytest.mark.parametrize("field, value, match", [
    ("bidirectional", "no", "`bidirectional`: got 'no', expected True or False"),
    ("bidirectional", 1, "`bidirectional`: got 1"), ("bidirectional", None, "`bidirectional`"),
    ("dropout", "0.5", "`dropout`: got '0.5'"), ("dropout", float("nan"), "`dropout`"),
    ("dropout", 1.0, "`dropout`"), ("dropout", True, "`dropout`"),
    ("scan_method", "nosuch", "`scan_method`: got 'nosuch'"),
    ("scan_method", None, "`scan_method`"), ("norm", "Layer", "`norm`"),
    ("pool", None, "`pool`"), ("pool", "max", "`pool`"), ("layer", "LRU", "`layer`"),
    ("layer", ["lru"], "`layer`"), ("formulation", "qr", "`formulation`"),
    ("activation", "relu", "`activation`"), ("r_min", 2, "`r_min`: got 2"),
    ("r_max", -0.1, "`r_max`"), ("max_phase", 0.0, "`max_phase`"),
    ("gamma_min", 1.0, "`gamma_min`"), ("gamma_max", "0.9", "`gamma_max`"),
    ("depth", 2.0, "`depth`"), ("d_model", True, "`d_model`"), ("n_heads", 0, "`n_heads`"),
])
def test_model_config_refuses(field, value, match):
    with pytest.raises(ValueError, match=match):
        model.ModelConfig(**{field: value})


def test_options_of_another_layer_are_still_checked():
    """The oRNN ignores r_min, but a wrong value is refused: no typo waits for a switch."""
    with pytest.raises(ValueError, match="`r_min`"):
        model.ModelConfig(layer="ornn", r_min=2)
    with pytest.raises(ValueError, match="`scan_method`"):
        model.ModelConfig(layer="ornn", scan_method="nosuch")


@pytest.mark.parametrize("fn", [
    lambda: lru.init(KEY, 4, 4, bidirectional="no"),
    lambda: lru.init(KEY, 4, 4, bidirectional=0),
    lambda: rotrnn.init(KEY, 4, 4, 2, bidirectional="False"),
])
def test_layer_booleans_are_booleans(fn):
    with pytest.raises(ValueError, match="`bidirectional`.*True or False"):
        fn()


@pytest.fixture(scope="module")
def built():
    cfg = model.ModelConfig(**SMALL)
    return cfg, *model.init(KEY, cfg)


@pytest.mark.parametrize("change, match", [
    (dict(depth=1), r"`params\['blocks'\]`.*depth = 1"),
    (dict(depth=3), r"`params\['blocks'\]`.*depth = 3"),
    (dict(d_model=16), r"`params\['encoder'\]\['W'\]`.*\(1, 16\)"),
    (dict(d_input=3), r"`params\['encoder'\]\['W'\]`.*d_input"),
    (dict(d_output=2), r"`params\['decoder'\]\['W'\]`"),
    (dict(layer="ornn", d_state=6), r"glu.*layer 'ornn'"),
    (dict(d_state=4), r"`params\['blocks'\]\[0\]\['layer'\]\['B_im'\]`.*\(4, 8\)"),
    (dict(bidirectional=True), r"\['C_im'\]`.*\(8, 16\)"),
    (dict(layer="rotrnn"), r"`params\['blocks'\]\[0\]\['layer'\]`.*'M'.*layer 'rotrnn'"),
    (dict(r_min=0.5), None),                      # an init option: the same shapes, accepted
])
def test_params_and_config_must_agree(built, change, match):
    cfg, params, state = built
    other = model.ModelConfig(**{**SMALL, **change})
    x = jnp.ones((2, 5, other.d_input))
    if match is None:
        assert model.apply(params, state, x, other)[0].shape == (2, 1)
        return
    with pytest.raises(ValueError, match=match):
        model.apply(params, state, x, other)


def test_apply_refuses_a_missing_state_and_non_boolean_train(built):
    cfg, params, state = built
    x = jnp.ones((2, 5, 1))
    with pytest.raises(ValueError, match="`state`: got None"):
        model.apply(params, None, x, cfg)
    with pytest.raises(ValueError, match="`train`: got 'yes'"):
        model.apply(params, state, x, cfg, train="yes")
    with pytest.raises(ValueError, match="`key`"):
        model.apply(params, state, x, cfg, key=3)
    with pytest.raises(ValueError, match="`params`"):
        model.apply({"blocks": []}, state, x, cfg)
    with pytest.raises(ValueError, match="`x`.*real numbers"):
        model.apply(params, state, np.array([[["a"]] * 5] * 2), cfg)
    with pytest.raises(ValueError, match="`cfg`"):
        model.apply(params, state, x, SMALL)


def test_the_checks_run_under_jit_without_values(built):
    cfg, params, state = built
    out, _ = jax.jit(lambda p, x: model.apply(p, state, x, cfg))(params, jnp.ones((2, 5, 1)))
    assert out.shape == (2, 1)


def test_tokens_have_the_token_layout():
    cfg = model.ModelConfig(d_input=None, vocab_size=5, depth=1, d_model=8, d_state=8)
    params, state = model.init(KEY, cfg)
    with pytest.raises(ValueError, match=r"`x`.*\(2, 5, 1\).*\(batch, L\)"):
        model.apply(params, state, np.ones((2, 5, 1), int), cfg)
    with pytest.raises(ValueError, match="`x`.*integer tokens"):
        model.apply(params, state, np.ones((2, 5)), cfg)
    assert model.apply(params, state, np.ones((2, 5), int), cfg)[0].shape == (2, 1)
