"""lrnn.layers.gru: the fused ``apply`` equals running the paper's ``cell`` (RotGRU eqs. 11–17,
tested against NumPy in test_rotlstm.py) step by step, in float64, values and gradients."""
import jax
import jax.numpy as jnp
import numpy as np
import pytest

from lrnn.layers import gru

pytestmark = pytest.mark.usefixtures("x64")


def cell_by_cell(params, u):
    n = params["W_z"].shape[0]
    _, hs = jax.lax.scan(lambda h, x: gru.cell(params, h, x), jnp.zeros(u.shape[:-2] + (n,)),
                         jnp.moveaxis(u, -2, 0))
    return jnp.moveaxis(hs, 0, -2)


@pytest.mark.slow
@pytest.mark.parametrize("rotate", [True, False])
@pytest.mark.parametrize("batch", [(), (3,)])
def test_fused_apply_is_the_cell_by_cell_loop(rng, rotate, batch):
    p = gru.init(jax.random.PRNGKey(0), 3, 6, rotate=rotate)
    p = {k: jnp.asarray(rng.normal(size=v.shape)) for k, v in p.items()}
    u = jnp.asarray(rng.normal(size=batch + (8, 3)))
    np.testing.assert_allclose(gru.apply(p, u), cell_by_cell(p, u), rtol=1e-13, atol=1e-13)
    loss = lambda f: (lambda q, x: jnp.sum(jnp.sin(f(q, x))))
    g_fused = jax.grad(loss(gru.apply), (0, 1))(p, u)
    g_cell = jax.grad(loss(cell_by_cell), (0, 1))(p, u)
    for a, b in zip(jax.tree_util.tree_leaves(g_fused), jax.tree_util.tree_leaves(g_cell)):
        np.testing.assert_allclose(a, b, rtol=1e-12, atol=1e-12)


def test_two_recurrent_products_per_step(rng):
    """Per step: h_{t-1} times the stacked z/r/angle weights, then r_t times W_h's r columns."""
    p = gru.init(jax.random.PRNGKey(0), 3, 6)
    jaxpr = jax.make_jaxpr(gru.apply)(p, jnp.ones((2, 5, 3))).jaxpr
    scan = next(e for e in jaxpr.eqns if e.primitive.name == "scan")
    dots = [e for e in scan.params["jaxpr"].jaxpr.eqns if e.primitive.name == "dot_general"]
    assert [d.outvars[0].aval.shape for d in dots] == [(2, 6 + 6 + 3), (2, 6)]
