"""State in, state out: the scans from an initial state with their final state, every layer's
``init_state``/``step``/``apply(state=..., return_state=True)``, and the model's carry.

Every check compares two computations that share no code path (one step at a time against
one pass, chunks against one pass, the scans against the float64 NumPy loop), so each can
fail."""
import jax
import jax.numpy as jnp
import numpy as np
import pytest

import lrnn
from lrnn import layers, model
from lrnn.scan import reference

METHODS = ["sequential", "associative", "chunked", "pallas", "auto"]


# ----------------------------------------------------------------------------------------
# The scans
# ----------------------------------------------------------------------------------------

def _problem(rng, shape, complex_, time_varying):
    n = shape[-1]
    b = rng.normal(size=shape)
    h0 = rng.normal(size=shape[:-2] + (n,))
    if complex_:
        b = b + 1j * rng.normal(size=shape)
        h0 = h0 + 1j * rng.normal(size=h0.shape)
        a = rng.uniform(0.5, 0.99, n) * np.exp(1j * rng.uniform(0, 2 * np.pi, n))
    else:
        a = rng.uniform(-0.99, 0.99, n)
    if time_varying:
        a = rng.uniform(0.2, 1.0, shape) * (np.exp(1j * rng.uniform(0, 6, shape)) if complex_
                                            else 1.0)
    dt = np.complex64 if complex_ else np.float32
    return a.astype(dt), b.astype(dt), h0.astype(dt)


@pytest.mark.parametrize("method", METHODS)
@pytest.mark.parametrize("reverse", [False, True])
@pytest.mark.parametrize("complex_,time_varying", [(False, False), (True, False), (False, True),
                                                   (True, True)])
def test_linear_scan_from_an_initial_state_is_the_float64_loop(rng, method, reverse, complex_,
                                                               time_varying):
    a, b, h0 = _problem(rng, (2, 13, 3), complex_, time_varying)
    x, final = lrnn.linear_scan(a, b, initial=h0, return_final=True, reverse=reverse,
                                method=method)
    want = reference.linear_scan(a, b, reverse=reverse, initial=h0)
    np.testing.assert_allclose(x, want, rtol=2e-5, atol=2e-5)
    np.testing.assert_allclose(final, want[..., 0 if reverse else -1, :], rtol=2e-5, atol=2e-5)
    assert final.shape == (2, 3) and x.dtype == final.dtype == b.dtype


@pytest.mark.parametrize("method", METHODS)
@pytest.mark.parametrize("reverse", [False, True])
def test_planes_from_an_initial_state_are_the_float64_loop(rng, method, reverse):
    a, b, h0 = _problem(rng, (2, 11, 4), True, False)
    (x_re, x_im), (f_re, f_im) = lrnn.scan.linear_scan_planes(
        a, b.real, b.imag, initial=(h0.real, h0.imag), return_final=True, reverse=reverse,
        method=method)
    want = reference.linear_scan(a, b, reverse=reverse, initial=h0)
    np.testing.assert_allclose(x_re + 1j * x_im, want, rtol=2e-5, atol=2e-5)
    np.testing.assert_allclose(f_re + 1j * f_im, want[..., 0 if reverse else -1, :], rtol=2e-5,
                               atol=2e-5)


@pytest.mark.parametrize("method", METHODS)
@pytest.mark.parametrize("reverse", [False, True])
def test_rotation_scan_from_an_initial_state_is_the_float64_loop(rng, method, reverse):
    gamma, theta = rng.uniform(0.5, 0.99, 2), rng.uniform(0, 6, 2)
    b, h0 = rng.normal(size=(3, 9, 4)), rng.normal(size=(3, 4))
    x, final = lrnn.rotation_scan(gamma.astype(np.float32), theta.astype(np.float32),
                                  b.astype(np.float32), initial=h0.astype(np.float32),
                                  return_final=True, reverse=reverse, method=method)
    want = reference.rotation_scan(gamma, theta, b, reverse=reverse, initial=h0)
    np.testing.assert_allclose(x, want, rtol=2e-5, atol=2e-5)
    np.testing.assert_allclose(final, want[..., 0 if reverse else -1, :], rtol=2e-5, atol=2e-5)


@pytest.mark.parametrize("method", ["sequential", "associative", "chunked", "pallas"])
@pytest.mark.parametrize("reverse", [False, True])
def test_chunks_carrying_the_final_state_are_one_scan(rng, method, reverse):
    a, b, _ = _problem(rng, (2, 17, 3), True, False)
    whole = lrnn.linear_scan(a, b, method=method, reverse=reverse)
    edges = [0, 5, 6, 13, 17]
    spans = list(zip(edges[:-1], edges[1:]))
    h, parts = None, {}
    for lo, hi in (reversed(spans) if reverse else spans):
        parts[lo], h = lrnn.linear_scan(a, b[:, lo:hi], initial=h, return_final=True,
                                        method=method, reverse=reverse)
    got = jnp.concatenate([parts[lo] for lo, _ in spans], axis=1)
    np.testing.assert_allclose(got, whole, rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("method", ["sequential", "associative", "chunked", "pallas"])
@pytest.mark.parametrize("reverse", [False, True])
def test_initial_state_gradient_is_finite_differences(rng, method, reverse):
    a, b, h0 = _problem(rng, (2, 7, 3), False, method != "pallas")
    g = rng.normal(size=b.shape).astype(np.float32)
    gf = rng.normal(size=h0.shape).astype(np.float32)

    def loss(h):
        x, f = lrnn.linear_scan(a, b, initial=h, return_final=True, method=method,
                                reverse=reverse)
        return jnp.sum(g * x) + jnp.sum(gf * f)

    loss = jax.jit(loss)
    grad = jax.jit(jax.grad(loss))(jnp.asarray(h0))
    # The loss is linear in h: central differences with a unit step are exact up to rounding
    # of the float32 loss (|loss| ~ 10, so ~1e-5 absolute), which sets the tolerance.
    fd = np.zeros_like(h0)
    for idx in np.ndindex(h0.shape):
        e = np.zeros_like(h0)
        e[idx] = 1.0
        fd[idx] = (loss(h0 + e) - loss(h0 - e)) / 2
    np.testing.assert_allclose(grad, fd, rtol=1e-4, atol=1e-4)
    # and the float64 loop: the loss is linear in h, so its gradient's entry i is
    # loss(e_i) - loss(0), each from reference.linear_scan.
    def loss64(h):
        x = reference.linear_scan(a, b, reverse=reverse, initial=h)
        return np.sum(g * x) + np.sum(gf * x[..., 0 if reverse else -1, :])

    zero = loss64(np.zeros(h0.shape))
    want = np.zeros(h0.shape)
    for idx in np.ndindex(h0.shape):
        e = np.zeros(h0.shape)
        e[idx] = 1.0
        want[idx] = loss64(e) - zero
    np.testing.assert_allclose(grad, want, rtol=1e-4, atol=1e-4)


def test_gradient_of_initial_state_in_float64(x64, rng):
    a, b, h0 = (v.astype(np.complex128) for v in _problem(rng, (2, 6, 3), True, False))
    for method in ("sequential", "associative", "chunked"):
        def loss(h_re, h_im):
            x, f = lrnn.linear_scan(a, b, initial=h_re + 1j * h_im, return_final=True,
                                    method=method)
            return jnp.sum(jnp.abs(x) ** 2) + jnp.sum(jnp.real(f) * jnp.imag(f))

        h_re, h_im = jnp.asarray(h0.real), jnp.asarray(h0.imag)
        g_re, g_im = jax.jit(jax.grad(loss, argnums=(0, 1)))(h_re, h_im)
        loss = jax.jit(loss)
        eps = 1e-6
        for idx in np.ndindex(h0.shape):
            e = np.zeros(h0.shape)
            e[idx] = eps
            np.testing.assert_allclose(g_re[idx], (loss(h_re + e, h_im) - loss(h_re - e, h_im))
                                       / (2 * eps), rtol=1e-6, atol=1e-8)
            np.testing.assert_allclose(g_im[idx], (loss(h_re, h_im + e) - loss(h_re, h_im - e))
                                       / (2 * eps), rtol=1e-6, atol=1e-8)


def test_no_initial_is_a_zero_initial(rng):
    a, b, _ = _problem(rng, (2, 5, 3), False, False)
    x0 = lrnn.linear_scan(a, b)
    x, final = lrnn.linear_scan(a, b, initial=np.zeros((2, 3), np.float32), return_final=True)
    np.testing.assert_array_equal(x, x0)
    np.testing.assert_array_equal(final, x0[:, -1])


@pytest.mark.parametrize("bad,match", [
    (np.zeros((3,), np.float32), r"`initial`: got an array of shape \(3,\).*expected shape \(2, 3\)"),
    (np.zeros((2, 5, 3), np.float32), r"`initial`: got an array of shape \(2, 5, 3\).*shape \(2, 3\)"),
    (np.zeros((1, 3), np.float32), r"`initial`.*\(1, 3\).*expected shape \(2, 3\)"),
    (np.zeros((2, 3), np.complex64), r"`initial`.*complex64.*promotes into the scan's float32"),
    (np.zeros((2, 3), bool), r"`initial`.*not booleans"),
    ("zero", r"`initial`"),
])
def test_bad_initial_is_a_value_error(bad, match):
    a, b = np.full(3, 0.5, np.float32), np.ones((2, 4, 3), np.float32)
    with pytest.raises(ValueError, match=match):
        lrnn.linear_scan(a, b, initial=bad)


def test_bad_initial_planes_and_rotation_are_value_errors():
    a = np.full(2, 0.5 + 0.1j, np.complex64)
    b = np.ones((3, 4, 2), np.float32)
    with pytest.raises(ValueError, match=r"`initial`: got .*expected a pair \(h_re, h_im\)"):
        lrnn.scan.linear_scan_planes(a, b, b, initial=np.zeros((3, 2), np.float32))
    with pytest.raises(ValueError, match=r"`initial\[1\]`: got an array of shape \(2,\)"):
        lrnn.scan.linear_scan_planes(a, b, b, initial=(np.zeros((3, 2), np.float32),
                                                       np.zeros((2,), np.float32)))
    with pytest.raises(ValueError, match=r"`initial`: got an array of shape \(3, 3\)"):
        lrnn.rotation_scan(np.full(1, 0.5), np.zeros(1), b, initial=np.zeros((3, 3)))
    with pytest.raises(ValueError, match=r"`return_final`: got 'yes'"):
        lrnn.linear_scan(np.full(2, 0.5), b, return_final="yes")
