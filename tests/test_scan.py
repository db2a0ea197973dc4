"""linear_scan / rotation_scan against the float64 loop of x_t = a_t x_{t-1} + b_t
(``lrnn.scan.reference``, which the doctor uses too)."""
import jax
import jax.numpy as jnp
import numpy as np
import pytest
from jax.test_util import check_grads

import lrnn
from lrnn import scan
from lrnn.scan import reference

METHODS = ["sequential", "associative", "chunked", "auto"]


def test_reference_is_the_recurrence_by_hand():
    a, b = np.array([0.5]), np.array([[1.0], [2.0], [4.0]])
    np.testing.assert_allclose(reference.linear_scan(a, b)[:, 0], [1.0, 2.5, 5.25])
    np.testing.assert_allclose(reference.linear_scan(a, b, reverse=True)[:, 0], [3.0, 4.0, 4.0])
    assert reference.linear_scan(np.float32(0.5) + 0j, b.astype(np.float32)).dtype == np.complex128


def test_reference_rotation_is_a_quarter_turn_by_hand():
    b = np.zeros((3, 2))
    b[0] = [1.0, 0.0]                          # x_0 = e_1, then x_t = 0.5 R(π/2) x_{t-1}
    x = reference.rotation_scan([0.5], [np.pi / 2], b)
    np.testing.assert_allclose(x, [[1, 0], [0, 0.5], [-0.25, 0]], atol=1e-15)


def test_reference_vjp_is_the_gradient_by_finite_differences(rng):
    a, b, g = rng.uniform(0.5, 0.9, 2), rng.normal(size=(5, 2)), rng.normal(size=(5, 2))
    da, db = reference.linear_scan_vjp(a, reference.linear_scan(a, b), g)
    loss = lambda a_, b_: np.sum(g * reference.linear_scan(a_, b_))    # noqa: E731
    eps = 1e-6
    for i in range(2):
        e = np.eye(2)[i] * eps
        np.testing.assert_allclose(da[i], (loss(a + e, b) - loss(a - e, b)) / (2 * eps), rtol=1e-6)
    e = np.zeros_like(b)
    e[2, 1] = eps
    np.testing.assert_allclose(db[2, 1], (loss(a, b + e) - loss(a, b - e)) / (2 * eps), rtol=1e-6)


def random_problem(rng, shape, *, complex_, time_varying):
    n = shape[-1]
    b = rng.normal(size=shape)
    if complex_:
        b = b + 1j * rng.normal(size=shape)
        a = rng.uniform(0.5, 0.99, n) * np.exp(1j * rng.uniform(0, 2 * np.pi, n))
    else:
        a = rng.uniform(-0.99, 0.99, n)
    if time_varying:
        a = rng.uniform(0.0, 1.0, shape) if not complex_ else (
            rng.uniform(0, 1, shape) * np.exp(1j * rng.uniform(0, 6, shape)))
    return a, b


@pytest.mark.slow
@pytest.mark.parametrize("method", METHODS)
@pytest.mark.parametrize("reverse", [False, True])
@pytest.mark.parametrize("complex_", [False, True])
@pytest.mark.parametrize("time_varying", [False, True])
@pytest.mark.parametrize("shape", [(1, 3), (37, 4), (2, 3, 29, 2), (64, 5)])
def test_matches_naive_loop(x64, rng, method, reverse, complex_, time_varying, shape):
    a, b = random_problem(rng, shape, complex_=complex_, time_varying=time_varying)
    x = lrnn.linear_scan(a, b, reverse=reverse, method=method)
    assert x.shape == b.shape
    assert jnp.iscomplexobj(x) == complex_
    np.testing.assert_allclose(x, reference.linear_scan(a, b, reverse), rtol=1e-10, atol=1e-10)


@pytest.mark.parametrize("method", ["sequential", "associative", "chunked"])
def test_broadcastable_time_varying_decay(x64, rng, method):
    b = rng.normal(size=(2, 11, 3))
    a = rng.uniform(0, 1, size=(11, 1))            # one decay per step, shared by channels
    np.testing.assert_allclose(lrnn.linear_scan(a, b, method=method), reference.linear_scan(a, b), rtol=1e-12)


@pytest.mark.slow
@pytest.mark.parametrize("method", ["sequential", "associative", "chunked"])
@pytest.mark.parametrize("reverse", [False, True])
def test_long_sequence_float32_stays_close_to_float64(rng, method, reverse):
    """L = 16 384 with |λ| close to 1 (long memory): float32 error stays at float32 level."""
    length, n = 16384, 8
    lam = (1 - np.logspace(-4, -1, n)) * np.exp(1j * np.linspace(0.01, 3, n))
    b = (rng.normal(size=(length, n)) + 1j * rng.normal(size=(length, n))).astype(np.complex64)
    x32 = np.asarray(lrnn.linear_scan(lam.astype(np.complex64), b, reverse=reverse, method=method))
    x64_ = reference.linear_scan(lam, b.astype(np.complex128), reverse)
    scale = np.abs(x64_).max()
    assert x32.dtype == np.complex64
    assert np.abs(x32 - x64_).max() / scale < 2e-4


@pytest.mark.slow
@pytest.mark.parametrize("method", METHODS)
@pytest.mark.parametrize("reverse", [False, True])
def test_rotation_scan_is_the_dense_rotation_recurrence(x64, rng, method, reverse):
    gamma = rng.uniform(0.5, 0.99, 3)
    theta = rng.uniform(-np.pi, np.pi, 3)
    b = rng.normal(size=(2, 23, 6))
    x = lrnn.rotation_scan(gamma, theta, b, reverse=reverse, method=method)
    assert x.shape == b.shape and not jnp.iscomplexobj(x)
    np.testing.assert_allclose(x, reference.rotation_scan(gamma, theta, b, reverse), rtol=1e-10, atol=1e-12)


def test_pairs_complex_round_trip(rng):
    x = rng.normal(size=(4, 10)).astype(np.float32)
    z = scan.pairs_to_complex(x)
    np.testing.assert_array_equal(np.real(z), x[:, 0::2])
    np.testing.assert_array_equal(np.imag(z), x[:, 1::2])
    np.testing.assert_array_equal(scan.complex_to_pairs(z), x)


def test_binary_operator_is_associative(x64, rng):
    e = [(rng.normal() + 1j * rng.normal(), rng.normal() + 1j * rng.normal()) for _ in range(3)]
    op = scan.binary_operator
    left = op(op(e[0], e[1]), e[2])
    right = op(e[0], op(e[1], e[2]))
    np.testing.assert_allclose(left, right, rtol=1e-12)
    # Composing the two steps equals applying them one after the other to any state.
    x0 = 0.3 - 0.2j
    a, b = op(e[0], e[1])
    np.testing.assert_allclose(a * x0 + b, e[1][0] * (e[0][0] * x0 + e[0][1]) + e[1][1])


# ---------------------------------------------------------------------------------------------
# Gradients: the custom VJP (a reverse scan) against autodiff of the plain sequential loop.
# ---------------------------------------------------------------------------------------------

def reference_scan(a, b, reverse):
    """lax.scan written directly, differentiated by JAX's own autodiff."""
    a = jnp.broadcast_to(a, b.shape)
    def step(x, ab):
        x = ab[0] * x + ab[1]
        return x, x
    _, x = jax.lax.scan(step, jnp.zeros(b.shape[:-2] + b.shape[-1:], b.dtype),
                        (jnp.moveaxis(a, -2, 0), jnp.moveaxis(b, -2, 0)), reverse=reverse)
    return jnp.moveaxis(x, 0, -2)


def weighted_loss(scan_fn):
    def loss(a, b):
        x = scan_fn(a, b)
        w = jnp.linspace(0.5, 2.0, x.shape[-2])[:, None]
        return jnp.sum(w * jnp.abs(x) ** 2) + jnp.sum(jnp.real(x))
    return loss


@pytest.mark.slow
@pytest.mark.parametrize("method", ["sequential", "associative", "chunked"])
@pytest.mark.parametrize("reverse", [False, True])
@pytest.mark.parametrize("complex_", [False, True])
@pytest.mark.parametrize("time_varying", [False, True])
def test_gradients_match_autodiff_of_sequential(x64, rng, method, reverse, complex_, time_varying):
    a, b = random_problem(rng, (2, 19, 3), complex_=complex_, time_varying=time_varying)
    a, b = jnp.asarray(a), jnp.asarray(b)
    ours = jax.grad(weighted_loss(lambda a, b: lrnn.linear_scan(a, b, reverse=reverse, method=method)),
                    argnums=(0, 1))(a, b)
    ref = jax.grad(weighted_loss(lambda a, b: reference_scan(a, b, reverse)), argnums=(0, 1))(a, b)
    for g, r in zip(ours, ref):
        assert g.shape == r.shape and g.dtype == r.dtype
        np.testing.assert_allclose(g, r, rtol=1e-9, atol=1e-9)


def test_gradient_for_real_decay_with_complex_inputs_is_real(x64, rng):
    a = jnp.asarray(rng.uniform(0.1, 0.9, 4))
    b = jnp.asarray(rng.normal(size=(9, 4)) + 1j * rng.normal(size=(9, 4)))
    g = jax.grad(weighted_loss(lambda a, b: lrnn.linear_scan(a, b, method="chunked")))(a, b)
    r = jax.grad(weighted_loss(lambda a, b: reference_scan(a, b, False)))(a, b)
    assert g.dtype == a.dtype
    np.testing.assert_allclose(g, r, rtol=1e-9)


@pytest.mark.slow
@pytest.mark.parametrize("method", ["sequential", "chunked"])
def test_check_grads_finite_differences(x64, rng, method):
    a, b = random_problem(rng, (7, 3), complex_=False, time_varying=True)
    check_grads(lambda a, b: lrnn.linear_scan(a, b, method=method), (jnp.asarray(a), jnp.asarray(b)),
                order=1, modes=["rev"])
    gamma, theta = rng.uniform(0.5, 0.9, 2), rng.uniform(0, 3, 2)
    check_grads(lambda g, t, b: lrnn.rotation_scan(g, t, b, method=method),
                (jnp.asarray(gamma), jnp.asarray(theta), jnp.asarray(rng.normal(size=(6, 4)))),
                order=1, modes=["rev"])


def test_backward_pass_stores_only_a_and_x():
    """The residuals of the custom VJP are O(L·N): the decay and the states, nothing per level."""
    b = jnp.ones((1024, 8), jnp.complex64)
    a = jnp.full((8,), 0.9 + 0.1j, jnp.complex64)
    _, vjp = jax.vjp(lambda b: lrnn.linear_scan(a, b, method="associative"), b)
    sizes = [leaf.size for leaf in jax.tree_util.tree_leaves(vjp)]
    assert sum(sizes) <= b.size + a.size + 16


# ---------------------------------------------------------------------------------------------
# Bad input, and what happens to non-finite values.
# ---------------------------------------------------------------------------------------------

def test_errors_name_argument_value_and_expectation():
    b = jnp.ones((5, 4))
    with pytest.raises(ValueError, match=r"`method`: got 'fast', expected one of"):
        lrnn.linear_scan(jnp.ones(4), b, method="fast")
    with pytest.raises(ValueError, match=r"`a`: got an array of shape \(3,\).*\(4,\)"):
        lrnn.linear_scan(jnp.ones(3), b)
    with pytest.raises(ValueError, match=r"`a`: got an array of shape \(6, 4\)"):
        lrnn.linear_scan(jnp.ones((6, 4)), b)
    with pytest.raises(ValueError, match=r"`b`: got an array of shape \(5,\).*\(\.\.\., L, N\)"):
        lrnn.linear_scan(jnp.ones(5), jnp.ones(5))
    with pytest.raises(ValueError, match=r"`b`.*L >= 1"):
        lrnn.linear_scan(jnp.ones(4), jnp.ones((0, 4)))
    with pytest.raises(ValueError, match=r"`b`.*\(5, 3\).*even"):
        lrnn.rotation_scan(jnp.ones(1), jnp.ones(1), jnp.ones((5, 3)))
    with pytest.raises(ValueError, match=r"`gamma`.*\(3,\).*\(2,\)"):
        lrnn.rotation_scan(jnp.ones(3), jnp.ones(2), b)
    with pytest.raises(ValueError, match=r"`theta`.*\(2, 1\)"):
        lrnn.rotation_scan(jnp.ones(2), jnp.ones((2, 1)), b)


@pytest.mark.parametrize("method", ["sequential", "associative", "chunked"])
def test_nan_propagates_forward_and_is_not_zeroed(method):
    b = np.ones((10, 2), np.float32)
    b[4, 0] = np.nan
    x = np.asarray(lrnn.linear_scan(jnp.full(2, 0.5), b, method=method))
    assert np.isfinite(x[:4]).all() and np.isfinite(x[:, 1]).all()
    assert np.isnan(x[4:, 0]).all()
    xr = np.asarray(lrnn.linear_scan(jnp.full(2, 0.5), b, reverse=True, method=method))
    assert np.isnan(xr[:5, 0]).all() and np.isfinite(xr[5:, 0]).all()


def test_auto_and_describe():
    assert scan.choose_method((8, 16, 4), backend="cpu") in scan.available_methods()
    text = scan.describe((8, 4096, 256))
    assert "auto" in text and scan.choose_method((8, 4096, 256)) in text
