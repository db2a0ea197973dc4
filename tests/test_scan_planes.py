"""lrnn.scan.linear_scan_planes and the layers built on it ("planes end to end").

The planes scan must be ``linear_scan`` on ``b_re + i b_im`` for every method, values and
gradients; the LRU and RotRNN layers must give the numbers of their complex formulation
(LRU §3.3: y = Re(C x) + D u; RotRNN App. B.1: the rotated basis, pairs as complex numbers);
and with ``method="pallas"`` no complex array with a time axis may appear in a layer's forward
or backward pass: that is what "no complex array split or joined around the kernel" means."""
import jax
import jax.numpy as jnp
import numpy as np
import pytest

from lrnn.layers import lru, rotrnn
from lrnn.scan import linear_scan, linear_scan_planes

METHODS = ("sequential", "associative", "chunked", "pallas")   # pallas: interpret mode on CPU


def _decay(rng, shape, complex_=True):
    a = rng.uniform(0.5, 0.99, shape) * np.exp(1j * rng.uniform(0, 3, shape))
    return a.astype(np.complex64) if complex_ else a.real.astype(np.float32)


CASES = {                                           # b shape, reverse, a time-varying, complex a
    "wide": ((3, 9, 8), False, False, True),
    "reverse": ((2, 7, 5), True, False, True),
    "time-varying": ((2, 6, 3), False, True, True),
    "real-a": ((5, 4), False, False, False),
    "batch-dims-reverse-tv": ((2, 3, 6, 3), True, True, True),
}


@pytest.mark.slow
@pytest.mark.parametrize("method", METHODS)
@pytest.mark.parametrize("case", CASES)
def test_planes_are_the_complex_scan_values_and_gradients(case, method):
    shape, reverse, varying, complex_a = CASES[case]
    rng = np.random.default_rng(sum(map(ord, case)))
    a = _decay(rng, shape if varying else shape[-1:], complex_a)
    b_re, b_im, w_re, w_im = (rng.standard_normal(shape).astype(np.float32) for _ in range(4))

    def planes_loss(a, b_re, b_im):
        x_re, x_im = linear_scan_planes(a, b_re, b_im, reverse=reverse, method=method)
        return jnp.sum(w_re * x_re) + jnp.sum(w_im * x_im ** 2)

    def complex_loss(a, b_re, b_im):
        x = linear_scan(a, jax.lax.complex(b_re, b_im), reverse=reverse, method="sequential")
        return jnp.sum(w_re * jnp.real(x)) + jnp.sum(w_im * jnp.imag(x) ** 2)

    x_re, x_im = linear_scan_planes(a, b_re, b_im, reverse=reverse, method=method)
    x = linear_scan(a, jax.lax.complex(b_re, b_im), reverse=reverse, method="sequential")
    assert x_re.dtype == x_im.dtype == jnp.float32 and x_re.shape == shape
    np.testing.assert_allclose(x_re, jnp.real(x), rtol=1e-5, atol=1e-5)
    np.testing.assert_allclose(x_im, jnp.imag(x), rtol=1e-5, atol=1e-5)
    got = jax.grad(planes_loss, argnums=(0, 1, 2))(a, b_re, b_im)
    want = jax.grad(complex_loss, argnums=(0, 1, 2))(a, b_re, b_im)
    for g, w in zip(got, want):
        assert g.dtype == w.dtype
        np.testing.assert_allclose(g, w, rtol=1e-4, atol=1e-4 * float(jnp.max(jnp.abs(w))))


def test_planes_against_the_float64_reference():
    from lrnn.scan import reference
    rng = np.random.default_rng(3)
    a = _decay(rng, (6,))
    b_re, b_im = (rng.standard_normal((2, 11, 6)).astype(np.float32) for _ in range(2))
    want = reference.linear_scan(a, b_re + 1j * b_im)
    for method in METHODS:
        x_re, x_im = linear_scan_planes(a, b_re, b_im, method=method)
        np.testing.assert_allclose(np.asarray(x_re) + 1j * np.asarray(x_im), want, rtol=1e-5,
                                   atol=1e-5, err_msg=method)


@pytest.mark.parametrize("kwargs, match", [
    (dict(b_im=np.zeros((2, 5, 3), np.float32)), "`b_im`: .*the shape of b_re"),
    (dict(b_im=np.zeros((2, 5, 4), np.float16)), "`b_im`: .*the dtype of b_re"),
    (dict(b_re=np.zeros((2, 5, 4), np.int32), b_im=np.zeros((2, 5, 4), np.int32)),
     "`b_re`: .*real floating-point"),
    (dict(b_re=np.zeros((2, 5, 4), np.complex64), b_im=np.zeros((2, 5, 4), np.complex64)),
     "`b_re`: .*real floating-point"),
    (dict(a=np.ones((3,), np.complex64)), "`a`: .*shape \\(4,\\)"),
    (dict(b_re=np.zeros((2, 0, 4), np.float32), b_im=np.zeros((2, 0, 4), np.float32)),
     "`b_re`: .*at least one time step"),
    (dict(method="fast"), "`method`: got 'fast'"),
    (dict(reverse="yes"), "`reverse`: got 'yes'"),
])
def test_bad_planes_are_refused_by_name(kwargs, match):
    args = dict(a=np.full((4,), 0.9 + 0.1j, np.complex64), b_re=np.zeros((2, 5, 4), np.float32),
                b_im=np.zeros((2, 5, 4), np.float32))
    args.update(kwargs)
    options = {k: args.pop(k) for k in ("method", "reverse") if k in args}
    with pytest.raises(ValueError, match=match):
        linear_scan_planes(args["a"], args["b_re"], args["b_im"], **options)


# ------------------------------------------------------------------------ the layers on planes

def lru_through_complex(params, u, method):
    """The LRU layer as it was written before the planes: complex B u, complex x, Re(C x)."""
    b = lru.normalized_B(params)
    bu = jnp.einsum("...lh,nh->...ln", u, b)
    lam = lru.eigenvalues(params)
    x = linear_scan(lam, bu, method=method)
    if params["C_re"].shape[1] == 2 * lam.shape[0]:                 # bidirectional
        x = jnp.concatenate([x, linear_scan(lam, bu, reverse=True, method=method)], axis=-1)
    c = params["C_re"] + 1j * params["C_im"]
    return jnp.einsum("...ln,hn->...lh", x, c).real + params["D"] * u


def rotrnn_through_pairs(params, u, method):
    """The RotRNN layer through ``rotation_scan`` on interleaved pairs (its former path)."""
    from lrnn import rotation_scan
    h, n = params["theta"].shape[0], params["M"].shape[-1]
    k = u.shape[-1]
    p = rotrnn.P(params)
    b_rot = jnp.swapaxes(p, -1, -2) @ params["B"]
    drive = jnp.einsum("hnk,...lk->...lhn", b_rot, u) * rotrnn.xi(params)[:, None]
    flat = drive.reshape(*drive.shape[:-2], h * n)
    g = jnp.repeat(rotrnn.gamma(params), n // 2)
    z = rotation_scan(g, params["theta"].reshape(-1), flat, method=method)
    z = z.reshape(*z.shape[:-1], h, n)
    c_rot = jnp.einsum("khi,hij->khj", params["C"].reshape(k, h, n), p)
    return jnp.einsum("khj,...lhj->...lk", c_rot, z) + params["D"] * u


def _random_params(params, rng):
    out = {}
    for key, v in params.items():
        out[key] = v if key in ("nu_log", "theta_log", "gamma_log", "theta") else \
            jnp.asarray(rng.standard_normal(v.shape).astype(np.float32) * 0.5)
    return out


LAYERS = {
    "lru": (lambda key: lru.init(key, 4, 6, r_min=0.5, r_max=0.95), lru.apply,
            lru_through_complex),
    "lru-bidirectional": (lambda key: lru.init(key, 4, 6, r_min=0.5, r_max=0.95,
                                               bidirectional=True), lru.apply,
                          lru_through_complex),
    "rotrnn": (lambda key: rotrnn.init(key, 4, 8, 2), rotrnn.apply, rotrnn_through_pairs),
}


@pytest.mark.slow
@pytest.mark.parametrize("method", METHODS)
@pytest.mark.parametrize("layer", LAYERS)
def test_layers_on_planes_give_the_complex_formulation(layer, method):
    init, apply, former = LAYERS[layer]
    rng = np.random.default_rng(5)
    params = _random_params(init(jax.random.PRNGKey(1)), rng)
    u = jnp.asarray(rng.standard_normal((2, 9, 4)).astype(np.float32))
    w = jnp.asarray(rng.standard_normal((2, 9, 4)).astype(np.float32))
    np.testing.assert_allclose(apply(params, u, scan_method=method), former(params, u, method),
                               rtol=1e-5, atol=1e-5)
    loss = lambda f: lambda p, u: jnp.sum(w * f(p, u))                        # noqa: E731
    got = jax.grad(loss(lambda p, u: apply(p, u, scan_method=method)), argnums=(0, 1))(params, u)
    want = jax.grad(loss(lambda p, u: former(p, u, "sequential")), argnums=(0, 1))(params, u)
    flat_got, flat_want = jax.tree_util.tree_leaves(got), jax.tree_util.tree_leaves(want)
    for g, v in zip(flat_got, flat_want):
        np.testing.assert_allclose(g, v, rtol=1e-4, atol=1e-4 * (1 + float(jnp.max(jnp.abs(v)))))


def _complex_arrays(closed_jaxpr):
    """Shapes of every complex value the program computes, sub-programs included."""
    found = []

    def walk(jaxpr):
        for eqn in jaxpr.eqns:
            for var in eqn.outvars:
                aval = getattr(var, "aval", None)
                if aval is not None and jnp.issubdtype(aval.dtype, jnp.complexfloating):
                    found.append(tuple(aval.shape))
            for param in eqn.params.values():
                for sub in (param if isinstance(param, (list, tuple)) else [param]):
                    inner = getattr(sub, "jaxpr", sub)
                    if hasattr(inner, "eqns"):
                        walk(inner)
    walk(closed_jaxpr.jaxpr)
    return found


@pytest.mark.parametrize("layer", LAYERS)
def test_no_complex_array_with_a_time_axis_around_the_kernel(layer):
    """With the kernel, the only complex values are parameter-sized (the eigenvalues, γ ⊙ B and
    their gradients); the complex path (any other method) builds (B, L, N) complex arrays, so
    the test can fail."""
    init, apply, _ = LAYERS[layer]
    params = init(jax.random.PRNGKey(2))
    u = jnp.ones((2, 9, 4), jnp.float32)

    def forward_and_backward(method):
        loss = lambda p, u: jnp.sum(apply(p, u, scan_method=method) ** 2)   # noqa: E731
        return jax.make_jaxpr(jax.grad(loss, argnums=(0, 1)))(params, u)

    length = u.shape[-2]                              # 9: no parameter has a 9 in its shape
    with_time_axis = [s for s in _complex_arrays(forward_and_backward("pallas")) if length in s]
    assert not with_time_axis, with_time_axis
    assert any(length in s for s in _complex_arrays(forward_and_backward("sequential")))


def test_complex_arrays_restores_the_split_and_join_for_the_benchmark():
    from lrnn.scan import complex_arrays
    init, apply, _ = LAYERS["lru"]
    params = init(jax.random.PRNGKey(2))
    u = jnp.ones((2, 9, 4), jnp.float32)
    with complex_arrays():
        jaxpr = jax.make_jaxpr(lambda p, u: apply(p, u, scan_method="pallas"))(params, u)
        y = apply(params, u, scan_method="pallas")
    assert any(9 in s for s in _complex_arrays(jaxpr))
    np.testing.assert_allclose(y, apply(params, u, scan_method="pallas"), rtol=1e-6, atol=1e-6)
    jaxpr = jax.make_jaxpr(lambda p, u: apply(p, u, scan_method="pallas"))(params, u)
    assert not any(9 in s for s in _complex_arrays(jaxpr))                # undone on exit
