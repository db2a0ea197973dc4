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

METHODS = ["sequential", "associative", "chunked", "pallas"]     # "auto" picks one of these


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


CASES = [(False, False, False), (False, True, False), (False, False, True),
         (False, True, True), (True, True, False), (True, False, True)]


@pytest.mark.slow
@pytest.mark.parametrize("method", METHODS)
@pytest.mark.parametrize("reverse,complex_,time_varying", CASES)
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


@pytest.mark.slow
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


@pytest.mark.slow
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


@pytest.mark.slow
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
    (np.zeros((3,), np.float32), r"`initial`: got an array of shape \(3,\).*shape \(2, 3\)"),
    (np.zeros((2, 5, 3), np.float32), r"`initial`: got an array of shape \(2, 5, 3\).*\(2, 3\)"),
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


# ----------------------------------------------------------------------------------------
# The layers
# ----------------------------------------------------------------------------------------

LAYERS = layers.names()
D_MODEL, D_STATE, BATCH, LENGTH = 3, 4, 2, 12


def _layer(name, dtype=np.float32, **init):
    spec = layers.get(name)
    options = {"n_heads": 2} if name == "rotrnn" else {}
    params = spec.init(jax.random.PRNGKey(3), D_MODEL, D_STATE, **options, **init)
    if name == "lru":           # eigenvalues away from the unit circle: a well-scaled state
        params = dict(params, nu_log=params["nu_log"] + 0.5)
    params = jax.tree_util.tree_map(lambda v: jnp.asarray(v, dtype), params)
    return spec, params


def _inputs(dtype=np.float32, length=LENGTH):
    return jnp.asarray(np.random.default_rng(7).normal(size=(BATCH, length, D_MODEL)), dtype)


def _random_state(state, seed=11):
    """A non-zero state of the structure of ``state`` (complex where it is complex)."""
    rng = np.random.default_rng(seed)

    def draw(v):
        r = rng.normal(size=v.shape) * 0.5
        if jnp.iscomplexobj(v):
            r = r + 1j * rng.normal(size=v.shape) * 0.5
        return jnp.asarray(r, v.dtype)

    return jax.tree_util.tree_map(draw, state)


def _assert_trees_close(got, want, tol):
    for g, w in zip(jax.tree_util.tree_leaves(got), jax.tree_util.tree_leaves(want)):
        np.testing.assert_allclose(g, w, rtol=tol, atol=tol)


@pytest.mark.slow
@pytest.mark.parametrize("name", LAYERS)
@pytest.mark.parametrize("start", ["zero", "random"])
def test_layer_step_by_step_is_apply(name, start):
    spec, params = _layer(name)
    u = _inputs()
    state = spec.init_state(params, (BATCH,))
    if start == "random":
        state = _random_state(state)
    y, final = spec.apply(params, u, state=None if start == "zero" else state,
                          return_state=True)
    if start == "zero":
        np.testing.assert_array_equal(y, spec.apply(params, u))
    s, ys = state, []
    step = jax.jit(spec.step)
    for t in range(LENGTH):
        s, y_t = step(params, s, u[:, t])
        ys.append(y_t)
    np.testing.assert_allclose(jnp.stack(ys, 1), y, rtol=2e-5, atol=2e-5)
    _assert_trees_close(s, final, 2e-5)
    assert jax.tree_util.tree_structure(s) == jax.tree_util.tree_structure(state)


@pytest.mark.parametrize("name", LAYERS)
@pytest.mark.parametrize("chunk", [1, 5, pytest.param(4, marks=pytest.mark.slow),
                                   pytest.param(7, marks=pytest.mark.slow)])
def test_layer_chunks_carrying_the_state_are_one_pass(name, chunk):
    spec, params = _layer(name)
    u = _inputs()
    state0 = _random_state(spec.init_state(params, (BATCH,)))
    y, final = spec.apply(params, u, state=state0, return_state=True)
    apply = jax.jit(lambda s, u_c: spec.apply(params, u_c, state=s, return_state=True))
    s, parts = state0, []
    for lo in range(0, LENGTH, chunk):
        y_c, s = apply(s, u[:, lo:lo + chunk])
        parts.append(y_c)
    np.testing.assert_allclose(jnp.concatenate(parts, 1), y, rtol=2e-5, atol=2e-5)
    _assert_trees_close(s, final, 2e-5)


@pytest.mark.slow
@pytest.mark.parametrize("name", LAYERS)
def test_layer_gradient_of_the_initial_state_is_finite_differences(x64, name):
    spec, params = _layer(name, np.float64)
    u = _inputs(np.float64, length=5)
    state0 = _random_state(spec.init_state(params, (BATCH,)))
    leaves, tree = jax.tree_util.tree_flatten(state0)
    # complex leaves are differentiated through their real and imaginary parts
    parts = [p for v in leaves for p in ((v.real, v.imag) if jnp.iscomplexobj(v) else (v,))]
    w = np.random.default_rng(5).normal(size=(BATCH, 5, spec.width(D_MODEL, D_STATE)))

    def loss(parts):
        it = iter(parts)
        state = tree.unflatten([next(it) + 1j * next(it) if jnp.iscomplexobj(v) else next(it)
                                for v in leaves])
        y, final = spec.apply(params, u, state=state, return_state=True)
        return jnp.sum(w * jnp.sin(y)) + sum(jnp.sum(jnp.abs(f) ** 2)
                                             for f in jax.tree_util.tree_leaves(final))

    loss_jit = jax.jit(loss)
    grads = jax.jit(jax.grad(loss))(parts)
    eps = 1e-6
    for i, p in enumerate(parts):
        for idx in list(np.ndindex(p.shape))[::3]:
            plus = [q.at[idx].add(eps) if j == i else q for j, q in enumerate(parts)]
            minus = [q.at[idx].add(-eps) if j == i else q for j, q in enumerate(parts)]
            fd = (loss_jit(plus) - loss_jit(minus)) / (2 * eps)
            np.testing.assert_allclose(grads[i][idx], fd, rtol=1e-6, atol=1e-8)
    assert any(np.abs(g).max() > 1e-3 for g in grads)


def _count_traces(fn):
    count = {"n": 0}

    def counted(*args):
        count["n"] += 1                 # a Python side effect: runs once per trace, not per call
        return fn(*args)

    return jax.jit(counted), count


@pytest.mark.parametrize("name", LAYERS)
def test_jitted_layer_step_compiles_once(name):
    spec, params = _layer(name)
    u = _inputs()
    step, count = _count_traces(lambda p, s, u_t: spec.step(p, s, u_t))
    s = spec.init_state(params, (BATCH,))
    for t in range(LENGTH):
        s, _ = step(params, s, u[:, t])
    assert count["n"] == 1


@pytest.mark.parametrize("name", ["lru", "rotrnn"])
def test_bidirectional_layer_refuses_state(name):
    spec, params = _layer(name, bidirectional=True)
    u = _inputs()
    with pytest.raises(ValueError, match=r"`params`: a bidirectional"):
        spec.init_state(params, (BATCH,))
    state = {"x": jnp.zeros((BATCH, D_STATE) if name == "lru" else (BATCH, 2, 2), jnp.float32)}
    with pytest.raises(ValueError, match=r"`step`: a bidirectional .* reads the future"):
        spec.step(params, state, u[:, 0])
    with pytest.raises(ValueError, match=r"`state`: a bidirectional"):
        spec.apply(params, u, state=state)
    with pytest.raises(ValueError, match=r"`return_state`: a bidirectional"):
        spec.apply(params, u, return_state=True)


@pytest.mark.parametrize("name", LAYERS)
def test_bad_state_is_a_value_error(name):
    spec, params = _layer(name)
    u = _inputs()
    state = spec.init_state(params, (BATCH,))
    key = next(iter(state))
    wrong_batch = dict(state, **{key: state[key][:1]})
    with pytest.raises(ValueError, match=rf"`state\['{key}'\]`: got an array of shape"):
        spec.apply(params, u, state=wrong_batch)
    with pytest.raises(ValueError, match=rf"`state\['{key}'\]`: got an array of shape"):
        spec.step(params, wrong_batch, u[:, 0])
    with pytest.raises(ValueError, match=r"`state`: got a dict with keys \['y'\]"):
        spec.step(params, {"y": state[key]}, u[:, 0])
    with pytest.raises(ValueError, match=r"`u_t`: got"):
        spec.step(params, state, u[:, 0, :2])
    with pytest.raises(ValueError, match=r"`batch_shape`: got"):
        spec.init_state(params, (2.5,))


def test_rotrnn_refuses_scale_first_state_with_a_carried_state():
    spec, params = _layer("rotrnn")
    state = spec.init_state(params, (BATCH,))
    with pytest.raises(ValueError, match=r"`scale_first_state`: got True, expected False"):
        spec.apply(params, _inputs(), state=state, scale_first_state=True)


def test_ornn_state_starts_from_the_learnt_h0():
    spec, params = _layer("ornn", learn_h0=True)
    state = spec.init_state(params, (BATCH,))
    np.testing.assert_array_equal(state["h"], jnp.broadcast_to(params["h0"], (BATCH, D_STATE)))
    np.testing.assert_array_equal(spec.apply(params, _inputs(), state=state), spec.apply(params,
                                                                                     _inputs()))


# ----------------------------------------------------------------------------------------
# The model
# ----------------------------------------------------------------------------------------

def _model(layer="lru", pool="none", **kw):
    cfg = model.ModelConfig(layer=layer, d_input=2, d_output=3, depth=2, d_model=4, d_state=4,
                            n_heads=2, pool=pool, **kw)
    params, bn = model.init(jax.random.PRNGKey(0), cfg)
    x = jnp.asarray(np.random.default_rng(2).normal(size=(BATCH, LENGTH, 2)), jnp.float32)
    return cfg, params, bn, x


@pytest.mark.slow
@pytest.mark.parametrize("layer", ["lru", "rotrnn", "ornn", "rotlstm", "gru"])
@pytest.mark.parametrize("pool", ["none", "last"])
def test_model_step_by_step_is_apply(layer, pool):
    cfg, params, bn, x = _model(layer, pool)
    out, _ = model.apply(params, bn, x, cfg)
    step = jax.jit(lambda c, x_t: model.step(params, bn, c, x_t, cfg))
    carry, outs = model.init_carry(params, cfg, (BATCH,)), []
    for t in range(LENGTH):
        carry, o = step(carry, x[:, t])
        outs.append(o)
    outs = jnp.stack(outs, 1)
    np.testing.assert_allclose(outs if pool == "none" else outs[:, -1], out, rtol=2e-5,
                               atol=2e-5)
    _, _, final = model.apply(params, bn, x, cfg, return_carry=True)
    _assert_trees_close(carry, final, 2e-5)


@pytest.mark.parametrize("chunk", [1, 5, LENGTH])
def test_model_chunks_carrying_the_state_are_one_pass(chunk):
    cfg, params, bn, x = _model("lru", "none", norm="batch")
    out, _ = model.apply(params, bn, x, cfg)
    run = jax.jit(lambda c, x_c: model.apply(params, bn, x_c, cfg, carry=c, return_carry=True))
    carry, parts = model.init_carry(params, cfg, (BATCH,)), []
    for lo in range(0, LENGTH, chunk):
        o, _, carry = run(carry, x[:, lo:lo + chunk])
        parts.append(o)
    np.testing.assert_allclose(jnp.concatenate(parts, 1), out, rtol=2e-5, atol=2e-5)


@pytest.mark.slow
def test_model_tokens_step_by_step_is_apply():
    cfg = model.ModelConfig(layer="gru", d_input=None, vocab_size=5, d_output=2, depth=1,
                            d_model=4, d_state=4, pool="last")
    params, bn = model.init(jax.random.PRNGKey(1), cfg)
    tokens = jnp.asarray(np.random.default_rng(0).integers(0, 5, (BATCH, 6)))
    out, _ = model.apply(params, bn, tokens, cfg)
    carry = model.init_carry(params, cfg, (BATCH,))
    for t in range(6):
        carry, o = model.step(params, bn, carry, tokens[:, t], cfg)
    np.testing.assert_allclose(o, out, rtol=2e-5, atol=2e-5)


@pytest.mark.slow
def test_model_gradient_of_the_carry_is_finite_differences(x64):
    cfg, params, bn, x = _model("rotrnn", "last")
    params = jax.tree_util.tree_map(lambda v: jnp.asarray(v, jnp.float64), params)
    x = x.astype(jnp.float64)
    carry = _random_state(model.init_carry(params, cfg, (BATCH,)))

    def loss(c):
        out, _, final = model.apply(params, bn, x, cfg, carry=c, return_carry=True)
        return jnp.sum(out ** 2) + jnp.sum(final["blocks"][1]["x"] ** 2)

    grad = jax.jit(jax.grad(loss))(carry)
    loss_jit = jax.jit(loss)
    eps = 1e-6
    for block in range(cfg.depth):
        v = carry["blocks"][block]["x"]
        for idx in list(np.ndindex(v.shape))[::7]:
            def shifted(d):
                c = jax.tree_util.tree_map(lambda a: a, carry)
                c["blocks"][block] = {"x": v.at[idx].add(d)}
                return c
            fd = (loss_jit(shifted(eps)) - loss_jit(shifted(-eps))) / (2 * eps)
            np.testing.assert_allclose(grad["blocks"][block]["x"][idx], fd, rtol=1e-6,
                                       atol=1e-8)


def test_jitted_model_step_compiles_once():
    cfg, params, bn, x = _model("lru", "last")
    step, count = _count_traces(lambda c, x_t: model.step(params, bn, c, x_t, cfg))
    carry = model.init_carry(params, cfg, (BATCH,))
    for t in range(LENGTH):
        carry, _ = step(carry, x[:, t])
    assert count["n"] == 1


def test_model_refuses_what_cannot_run_online():
    cfg, params, bn, x = _model("lru", "mean")
    with pytest.raises(ValueError, match=r"`cfg.pool`: got 'mean', expected 'last' or 'none'"):
        model.init_carry(params, cfg, (BATCH,))
    with pytest.raises(ValueError, match=r"`cfg.pool`: got 'mean'"):
        model.apply(params, bn, x, cfg, return_carry=True)
    cfg, params, bn, x = _model("rotrnn", "last", bidirectional=True)
    with pytest.raises(ValueError, match=r"`cfg.bidirectional`: got True, expected False"):
        model.step(params, bn, {"blocks": [{}, {}]}, x[:, 0], cfg)
    cfg, params, bn, x = _model("lru", "none", norm="batch")
    carry = model.init_carry(params, cfg, (BATCH,))
    with pytest.raises(ValueError, match=r"`train`: got True, expected False when a carry"):
        model.apply(params, bn, x, cfg, carry=carry, train=True)
    with pytest.raises(ValueError, match=r"`carry`: got .*depth = 2"):
        model.step(params, bn, {"blocks": carry["blocks"][:1]}, x[:, 0], cfg)
    with pytest.raises(ValueError, match=r"`x_t`: got an array of shape \(2, 12, 1\)"):
        model.step(params, bn, carry, x[..., :1], cfg)


def test_lru_step_is_the_papers_equation_in_float64(x64):
    """LRU eq. 3 with Λ = diag(λ), the §3.4 normalisation and y = Re(C x) + D u, by NumPy."""
    spec, params = _layer("lru", np.float64)
    p = {k: np.asarray(v) for k, v in params.items()}
    state = _random_state(spec.init_state(params, (BATCH,)))
    u_t = np.random.default_rng(1).normal(size=(BATCH, D_MODEL))
    lam = np.exp(-np.exp(p["nu_log"]) + 1j * np.exp(p["theta_log"]))
    gamma = np.exp(p["gamma_log"])
    x = lam * np.asarray(state["x"]) + (gamma[:, None] * (p["B_re"] + 1j * p["B_im"]) @ u_t.T).T
    y = (x @ (p["C_re"] + 1j * p["C_im"]).T).real + p["D"] * u_t
    new, y_t = spec.step(params, state, u_t)
    np.testing.assert_allclose(new["x"], x, rtol=1e-12, atol=1e-12)
    np.testing.assert_allclose(y_t, y, rtol=1e-12, atol=1e-12)


def test_rotrnn_step_is_the_papers_equation_in_float64(x64):
    """RotRNN eq. 6, x_t = γ P D(θ) Pᵀ x_{t-1} + ξ B u_t, with P = expm(M - Mᵀ), by NumPy/SciPy."""
    scipy_linalg = pytest.importorskip("scipy.linalg")
    spec, params = _layer("rotrnn", np.float64)
    p = {k: np.asarray(v) for k, v in params.items()}
    state = _random_state(spec.init_state(params, (BATCH,)))
    u_t = np.random.default_rng(1).normal(size=(BATCH, D_MODEL))
    gam = np.exp(-np.exp(p["nu_log"]))
    xi = np.sqrt((1 - gam ** 2) / np.sum(p["B"] ** 2, axis=(1, 2)))
    x_new = np.zeros((BATCH, 2, 2))
    for h in range(2):
        P = scipy_linalg.expm(p["M"][h] - p["M"][h].T)
        c, s = np.cos(p["theta"][h, 0]), np.sin(p["theta"][h, 0])
        A = P @ np.array([[c, -s], [s, c]]) @ P.T
        x_new[:, h] = (gam[h] * A @ np.asarray(state["x"])[:, h].T).T + xi[h] * u_t @ p["B"][h].T
    y = x_new.reshape(BATCH, 4) @ p["C"].T + p["D"] * u_t
    new, y_t = spec.step(params, state, u_t)
    np.testing.assert_allclose(new["x"], x_new, rtol=1e-10, atol=1e-12)
    np.testing.assert_allclose(y_t, y, rtol=1e-10, atol=1e-12)
