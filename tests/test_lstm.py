"""lrnn.layers.lstm: the fused ``apply`` (input parts of every gate before the scan, one fused
recurrent product per step) equals running the paper's ``cell`` (RotLSTM eqs. 3–10, tested
against NumPy in test_rotlstm.py) step by step, in float64, values and gradients."""
import jax
import jax.numpy as jnp
import numpy as np
import pytest

from lrnn.layers import lstm

pytestmark = pytest.mark.usefixtures("x64")


def cell_by_cell(params, u):
    """The unfused reference: ``cell`` in a scan over time, as lrnn did before the fusion."""
    n = params["W_f"].shape[0]
    zeros = jnp.zeros(u.shape[:-2] + (n,), u.dtype)
    _, hs = jax.lax.scan(lambda c, x: lstm.cell(params, c, x), (zeros, zeros),
                         jnp.moveaxis(u, -2, 0))
    return jnp.moveaxis(hs, 0, -2)


def random_params(rng, d_in, n, rotate):
    p = lstm.init(jax.random.PRNGKey(0), d_in, n, rotate=rotate)
    return {k: jnp.asarray(rng.normal(size=v.shape)) for k, v in p.items()}


@pytest.mark.slow
@pytest.mark.parametrize("rotate", [True, False])
@pytest.mark.parametrize("batch", [(), (3,), (2, 2)])
def test_fused_apply_is_the_cell_by_cell_loop(rng, rotate, batch):
    p = random_params(rng, 3, 6, rotate)
    u = jnp.asarray(rng.normal(size=batch + (9, 3)))
    np.testing.assert_allclose(lstm.apply(p, u), cell_by_cell(p, u), rtol=1e-13, atol=1e-13)
    loss = lambda f: (lambda q, x: jnp.sum(jnp.sin(f(q, x))))
    g_fused = jax.grad(loss(lstm.apply), (0, 1))(p, u)
    g_cell = jax.grad(loss(cell_by_cell), (0, 1))(p, u)
    for a, b in zip(jax.tree_util.tree_leaves(g_fused), jax.tree_util.tree_leaves(g_cell)):
        np.testing.assert_allclose(a, b, rtol=1e-12, atol=1e-12)


def test_one_fused_recurrent_product_per_step(rng):
    """Inside the scan: one dot_general (h_{t-1} times the stacked recurrent weights)."""
    p = random_params(rng, 3, 6, True)
    jaxpr = jax.make_jaxpr(lstm.apply)(p, jnp.ones((2, 5, 3))).jaxpr
    scan = next(e for e in jaxpr.eqns if e.primitive.name == "scan")
    dots = [e for e in scan.params["jaxpr"].jaxpr.eqns if e.primitive.name == "dot_general"]
    assert len(dots) == 1
    assert dots[0].outvars[0].aval.shape == (2, 4 * 6 + 3)       # f, i, o, c and the angles


def test_float32_and_integer_inputs(rng):
    jax.config.update("jax_enable_x64", False)
    p = lstm.init(jax.random.PRNGKey(1), 2, 4)
    h = lstm.apply(p, np.arange(10).reshape(5, 2))              # integers: converted to float
    assert h.dtype == jnp.float32 and h.shape == (5, 4)
    np.testing.assert_allclose(h, lstm.apply(p, np.arange(10.0).reshape(5, 2)), rtol=1e-6)


@pytest.mark.parametrize("rotate", [True, False])
def test_forget_bias_sets_b_f_only(rotate):
    """``forget_bias`` (the oRNN paper's LSTM baseline uses 5, oRNN §5) moves ``b_f`` and
    nothing else: same weights, same other biases as the default initialisation."""
    key = jax.random.PRNGKey(3)
    default = lstm.init(key, 3, 4, rotate=rotate)
    opened = lstm.init(key, 3, 4, rotate=rotate, forget_bias=5)
    np.testing.assert_array_equal(default["b_f"], np.ones(4))
    np.testing.assert_array_equal(opened["b_f"], np.full(4, 5.0))
    for k in default:
        if k != "b_f":
            np.testing.assert_array_equal(default[k], opened[k])


def test_forget_bias_opens_the_gate_as_sigma_predicts():
    """With zero weights the forget gate is σ(b_f) exactly, so from c_0 = 1 and no input the cell
    state after k steps is σ(b_f)^k (the constant-gate estimate of book chapter 7, Problem 3)."""
    p = {k: jnp.zeros_like(v) for k, v in lstm.init(jax.random.PRNGKey(0), 1, 2, rotate=False,
                                                     forget_bias=5.0).items()}
    p["b_f"] = jnp.full((2,), 5.0)
    c = jnp.ones((2,))
    h = jnp.zeros((2,))
    for _ in range(50):
        (h, c), _ = lstm.cell(p, (h, c), jnp.zeros((1,)))
    np.testing.assert_allclose(np.asarray(c), (1 / (1 + np.exp(-5.0))) ** 50, rtol=1e-10)


@pytest.mark.parametrize("bad", [True, float("nan"), float("inf"), "5", None])
def test_forget_bias_must_be_a_finite_number(bad):
    with pytest.raises(ValueError, match="`forget_bias`"):
        lstm.init(jax.random.PRNGKey(0), 2, 2, forget_bias=bad)


def test_model_config_passes_forget_bias_to_lstm_layers_only():
    from lrnn import model
    cfg = model.ModelConfig(layer="rotlstm", d_input=1, d_output=1, d_model=4, d_state=4,
                            depth=1, forget_bias=5.0)
    params, _ = model.init(jax.random.PRNGKey(0), cfg)
    np.testing.assert_array_equal(params["blocks"][0]["layer"]["b_f"], np.full(4, 5.0))
    assert model.applies_to("forget_bias", "lstm") and not model.applies_to("forget_bias", "lru")
