"""lrnn.layers.ornn against a naive float64 NumPy transcription of the oRNN (oRNN eqs. 6–9 for W,
h_t = φ(W h_{t-1} + V x_t + b) with φ(z) = max(z/10, z), §5)."""
import jax
import jax.numpy as jnp
import numpy as np
import pytest
from jax.test_util import check_grads

from lrnn.layers import ornn

pytestmark = pytest.mark.usefixtures("x64")


def transition_np(U, u1=None):
    """oRNN eqs. 6–9 with dense matrices: W = H_n(u_n) ⋯ H_{n-m+1}(u_{n-m+1}), the vectors
    read from below the diagonal of U; for m = n the last factor is H_1(±1) (eq. 7), with
    the sign convention of §5 (u_1 <= 0 -> -1)."""
    U = np.asarray(U, np.float64)
    n, m = U.shape
    W = np.eye(n)
    for j in range(m):
        F = np.eye(n)
        if n - j >= 2:
            u = U[j:, j]
            F[j:, j:] -= 2 * np.outer(u, u) / (u @ u)
        else:
            F[-1, -1] = 1.0 if u1 > 0 else -1.0
        W = W @ F
    return W


def apply_np(p, u):
    """The oRNN recurrence, one time step and one sequence at a time."""
    p = {k: np.asarray(v, np.float64) for k, v in p.items()}
    W = transition_np(p["U"], p.get("u1"))
    n = W.shape[0]
    u = np.asarray(u, np.float64)
    flat = u.reshape(-1, *u.shape[-2:])
    out = np.zeros(flat.shape[:2] + (n,))
    for s, seq in enumerate(flat):
        h = p.get("h0", np.zeros(n))
        for t, x_t in enumerate(seq):
            z = W @ h + p["V"] @ x_t + p["b"]
            h = np.maximum(z / 10, z)
            out[s, t] = h
    return out.reshape(u.shape[:-1] + (n,))


def random_params(rng, d_in, n, m, *, h0=True, u1=-0.3):
    """Arbitrary values (including the part of U above the diagonal, which must be ignored)."""
    p = {"U": rng.normal(size=(n, m)), "V": rng.normal(size=(n, d_in)) / np.sqrt(d_in),
         "b": rng.normal(size=n) * 0.1}
    if h0:
        p["h0"] = rng.normal(size=n)
    if m == n:
        p["u1"] = np.float64(u1)
    return p


@pytest.mark.parametrize("m", [1, 3, 6])
@pytest.mark.parametrize("learn_h0", [False, True])
def test_init(m, learn_h0):
    n, d_in = 6, 2
    p = ornn.init(jax.random.PRNGKey(0), d_in, n, m, learn_h0=learn_h0)
    expected = {"U", "V", "b"} | ({"h0"} if learn_h0 else set()) | ({"u1"} if m == n else set())
    assert set(p) == expected
    assert p["U"].shape == (n, m) and p["V"].shape == (n, d_in) and p["b"].shape == (n,)
    U = np.asarray(p["U"])
    np.testing.assert_array_equal(U, np.tril(U))                       # eq. 9 layout
    if m == n:
        assert p["u1"].shape == () and float(p["u1"]) == 1.0
        assert np.all(U[:, -1] == 0)                                   # u_1 lives in `u1`
    assert np.all(np.diag(U)[: min(m, n - 1)] != 0)
    np.testing.assert_array_equal(p["b"], 0)
    if learn_h0:
        assert p["h0"].shape == (n,)
    again = ornn.init(jax.random.PRNGKey(0), d_in, n, m, learn_h0=learn_h0)
    for k in p:
        np.testing.assert_array_equal(p[k], again[k])
    W = np.asarray(ornn.transition(p), np.float64)
    np.testing.assert_allclose(W @ W.T, np.eye(n), atol=1e-5)


@pytest.mark.parametrize("n,m", [(5, 1), (5, 4), (5, 5), (1, 1)])
@pytest.mark.parametrize("u1", [-0.3, 0.0, 2.0])
def test_transition_orthogonal_for_any_parameters(rng, n, m, u1):
    p = random_params(rng, 2, n, m, u1=u1)
    W = np.asarray(ornn.transition(p))
    np.testing.assert_allclose(W, transition_np(p["U"], p.get("u1")), atol=1e-12)
    np.testing.assert_allclose(W @ W.T, np.eye(n), atol=1e-12)
    sign = (1.0 if u1 > 0 else -1.0) if m == n else 1.0
    det = (-1.0) ** (n - 1) * sign if m == n else (-1.0) ** m
    assert np.linalg.det(W) == pytest.approx(det, abs=1e-10)


@pytest.mark.slow
@pytest.mark.parametrize("n,m", [(6, 2), (6, 6)])
@pytest.mark.parametrize("batch", [(), (2, 3)])
def test_apply_matches_numpy_loop(rng, n, m, batch):
    d_in, L = 3, 7
    p = random_params(rng, d_in, n, m, h0=bool(batch))
    u = rng.normal(size=batch + (L, d_in))
    h = np.asarray(ornn.apply(p, u))
    assert h.shape == batch + (L, n)
    ref = apply_np(p, u)
    assert np.any(ref < 0)                                              # leaky branch used
    np.testing.assert_allclose(h, ref, atol=1e-12)
    h_j = jax.jit(ornn.apply)(p, u)
    np.testing.assert_allclose(h_j, h, atol=1e-13)


def test_step_matches_apply(rng):
    n, m, d_in = 5, 3, 2
    p = random_params(rng, d_in, n, m)
    u = rng.normal(size=(4, 3, d_in))
    h_all = np.asarray(ornn.apply(p, u))
    h = np.broadcast_to(p["h0"], (4, n))
    for t in range(3):
        h = ornn.step(p, h, u[:, t])
        np.testing.assert_allclose(h, h_all[:, t], atol=1e-12)


def test_float32_default(rng):
    u = rng.normal(size=(3, 5, 2)).astype(np.float32)
    jax.config.update("jax_enable_x64", False)       # the x64 fixture restores it afterwards
    p = ornn.init(jax.random.PRNGKey(1), 2, 8, 4)
    h = ornn.apply(p, u)
    assert h.dtype == jnp.float32 and p["U"].dtype == jnp.float32
    jax.config.update("jax_enable_x64", True)
    np.testing.assert_allclose(h, apply_np(p, u), atol=1e-5)


@pytest.mark.slow
def test_gradients(rng):
    n, m, d_in, L = 4, 2, 2, 3
    p = random_params(rng, d_in, n, m)
    u = rng.normal(size=(2, L, d_in))
    loss = lambda q, x: jnp.sum(jnp.sin(ornn.apply(q, x)))
    check_grads(loss, (p, u), order=1, modes=["rev"])
    g = jax.grad(loss)(p, u)                                            # eq. 9 mask
    assert np.all(np.asarray(g["U"])[np.triu_indices(n, 1, m)] == 0)


@pytest.mark.slow
def test_gradients_full_m_and_u1(rng):
    """m = n: every parameter but u1 by finite differences; u1 gets the straight-through
    gradient, i.e. the derivative with respect to the entry of H_1(u_1) = diag(1, …, u_1)."""
    n, d_in, L = 3, 2, 3
    p = random_params(rng, d_in, n, n, u1=-0.4)
    u = rng.normal(size=(L, d_in))
    u1 = p.pop("u1")
    loss = lambda q, x, s: jnp.sum(jnp.sin(ornn.apply({**q, "u1": s}, x)))
    check_grads(lambda q, x: loss(q, x, u1), (p, u), order=1, modes=["rev"])

    def dense_loss(s):                                  # H_1(s) with s free, at s = -1
        W = jnp.asarray(transition_np(p["U"], 1.0)).at[:, -1].multiply(s)   # W · H_1(s)
        h, total = jnp.asarray(p["h0"]), 0.0
        for x_t in u:
            z = W @ h + p["V"] @ x_t + p["b"]
            h = jnp.maximum(z / 10, z)
            total = total + jnp.sum(jnp.sin(h))
        return total

    assert float(jax.grad(loss, 2)(p, u, u1)) == pytest.approx(float(jax.grad(dense_loss)(-1.0)),
                                                               rel=1e-10)


def test_project(rng):
    p = random_params(rng, 2, 4, 4, u1=0.2)
    q = ornn.project(p)
    np.testing.assert_array_equal(q["U"], np.tril(p["U"]) * (np.arange(4) < 3))
    assert float(q["u1"]) == 1.0
    assert float(ornn.project({**p, "u1": 0.0})["u1"]) == -1.0
    u = rng.normal(size=(5, 2))
    np.testing.assert_allclose(ornn.apply(q, u), ornn.apply(p, u), atol=1e-14)


def _shapes(jaxpr):
    out = []
    for eqn in jaxpr.eqns:
        out += [tuple(v.aval.shape) for v in eqn.outvars if hasattr(v.aval, "shape")]
        for prm in eqn.params.values():
            for sub in (prm if isinstance(prm, (tuple, list)) else (prm,)):
                inner = getattr(sub, "jaxpr", sub)
                if hasattr(inner, "eqns"):
                    out += _shapes(inner)
    return out


def _forms_W(fn, *args, n):
    return any(s.count(n) >= 2 for s in _shapes(jax.make_jaxpr(fn)(*args).jaxpr))


# ---------------------------------------------------------------- the two formulations

@pytest.mark.parametrize("n,m,u1", [(7, 3, None), (7, 6, None), (6, 6, -0.3), (6, 6, 0.8),
                                    (6, 6, 0.0), (1, 1, -2.0)])
@pytest.mark.parametrize("formulation", ["dense", "reflections"])
def test_formulations_match_the_paper(rng, n, m, u1, formulation):
    """Values against the NumPy loop (eqs. 6–9, §5), m < n and m = n with every sign of u1."""
    d_in, L = 2, 6
    p = random_params(rng, d_in, n, m, u1=u1 if u1 is not None else -0.3)
    u = rng.normal(size=(3, L, d_in))
    h = np.asarray(ornn.apply(p, u, formulation=formulation))
    np.testing.assert_allclose(h, apply_np(p, u), atol=1e-12)


@pytest.mark.slow
@pytest.mark.parametrize("n,m", [(6, 2), (6, 5), (5, 5)])
def test_dense_gradients_equal_the_reflection_reference(rng, n, m):
    """The gradient through W's construction (dense) equals the reflection-by-reflection
    gradient (oRNN Algorithm 1 / Theorem 2) in float64, for every parameter (u1 straight
    through), and both pass a finite-difference check."""
    d_in, L = 3, 5
    p = random_params(rng, d_in, n, m, u1=-0.4)
    u = rng.normal(size=(2, L, d_in))

    def loss(q, x, formulation):
        return jnp.sum(jnp.sin(ornn.apply(q, x, formulation=formulation)))

    g_dense = jax.grad(loss, (0, 1))(p, u, "dense")
    g_refl = jax.grad(loss, (0, 1))(p, u, "reflections")
    for a, b in zip(jax.tree_util.tree_leaves(g_dense), jax.tree_util.tree_leaves(g_refl)):
        np.testing.assert_allclose(a, b, rtol=1e-11, atol=1e-12)
    q = {k: v for k, v in p.items() if k != "u1"}
    fixed = {k: v for k, v in p.items() if k == "u1"}
    check_grads(lambda q, x: loss({**q, **fixed}, x, "dense"), (q, u), order=1, modes=["rev"])


def test_sign_of_u1_enters_only_the_last_column(rng):
    """m = n: W = (reflections) · H_1(±1); flipping the sign of u1 flips W's last column."""
    p = random_params(rng, 2, 5, 5, u1=0.7)
    W_plus = np.asarray(ornn.transition_matrix(p))
    W_minus = np.asarray(ornn.transition_matrix({**p, "u1": -0.7}))
    np.testing.assert_allclose(W_minus[:, :-1], W_plus[:, :-1], atol=1e-14)
    np.testing.assert_allclose(W_minus[:, -1], -W_plus[:, -1], atol=1e-14)
    np.testing.assert_allclose(W_plus, transition_np(p["U"], 0.7), atol=1e-12)
    g = jax.grad(lambda s: jnp.sum(ornn.transition_matrix({**p, "u1": s}) ** 3))(0.7)
    W_free = transition_np(p["U"], 1.0)                 # d/ds sum((W_free · H_1(s))**3) at s = 1
    assert float(g) == pytest.approx(float(np.sum(3 * W_free[:, -1] ** 3)), rel=1e-10)


@pytest.mark.slow
def test_float32_formulations_stay_close_to_float64(rng):
    """float32 values and gradients of both formulations, against the float64 reference."""
    n, m, d_in, L = 32, 8, 4, 50
    p64 = random_params(rng, d_in, n, m, h0=False)
    u64 = rng.normal(size=(4, L, d_in))
    loss = lambda q, x, f: jnp.mean(ornn.apply(q, x, formulation=f) ** 2)
    h_ref = np.asarray(ornn.apply(p64, u64, formulation="reflections"))
    g_ref = jax.grad(loss)(p64, u64, "reflections")
    p32 = {k: np.asarray(v, np.float32) for k, v in p64.items()}
    u32 = u64.astype(np.float32)
    for f in ("dense", "reflections"):
        h = ornn.apply(p32, u32, formulation=f)
        assert h.dtype == jnp.float32
        np.testing.assert_allclose(h, h_ref, atol=2e-5 * np.abs(h_ref).max())
        g = jax.grad(loss)(p32, u32, f)
        for k in g:
            scale = np.abs(np.asarray(g_ref[k])).max()
            np.testing.assert_allclose(g[k], g_ref[k], atol=1e-4 * scale, err_msg=f"{f} {k}")


@pytest.mark.slow
@pytest.mark.parametrize("backend", ["cpu", "gpu"])
def test_W_of_the_dense_formulation_on_each_backend(rng, backend):
    """On a CPU W is built reflection by reflection, on a GPU by the compact WY form: the same
    matrix and the same gradients (float64)."""
    p = random_params(rng, 2, 9, 9, u1=-0.5)
    cols, sign = ornn._transition_parts(p)
    W = ornn._form_W(cols, sign, backend)
    np.testing.assert_allclose(W, transition_np(p["U"], -0.5), atol=1e-12)
    g = jax.grad(lambda c: jnp.sum(ornn._form_W(c, sign, backend) ** 3))(cols)
    g_ref = jax.grad(lambda c: jnp.sum(ornn._form_W(c, sign, "cpu") ** 3))(cols)
    np.testing.assert_allclose(g, g_ref, rtol=1e-10, atol=1e-12)


def test_transition_matrix_is_eq_8(rng):
    for n, m in ((6, 3), (6, 6)):
        p = random_params(rng, 2, n, m, u1=-1.3)
        W = np.asarray(ornn.transition_matrix(p))
        np.testing.assert_allclose(W, transition_np(p["U"], p.get("u1")), atol=1e-12)
        np.testing.assert_allclose(ornn.transition(p), W)                  # the old name


def test_choose_formulation_and_auto(rng):
    for batch in (1, 16, 64):
        name, reason = ornn.choose_formulation(batch, 128, 4, backend="cpu")
        assert name == "reflections" and "CPU" in reason
    assert ornn.choose_formulation(4, 256, 16, backend="cpu")[0] == "reflections"
    for args in ((1, 128, 5, "cpu"), (64, 128, 16, "cpu"), (1, 256, 17, "cpu"),
                 (64, 128, 4, "gpu"), (4, 256, 1, "tpu")):
        name, reason = ornn.choose_formulation(*args)
        assert name == "dense" and reason
    assert ornn.choose_formulation(64, 128, 16)[0] == "dense"              # backend: the default
    # apply(..., "auto") follows the choice: only the dense formulation forms an (n, n) matrix.
    n, d_in, L = 128, 2, 3
    small, large = random_params(rng, d_in, n, 4), random_params(rng, d_in, n, 8)
    x = rng.normal(size=(2, L, d_in))
    if jax.default_backend() == "cpu":
        assert not _forms_W(ornn.apply, small, x, n=n)
        assert _forms_W(ornn.apply, large, x, n=n)
    assert not _forms_W(lambda q, x: ornn.apply(q, x, formulation="reflections"), large, x, n=n)
    assert _forms_W(lambda q, x: ornn.apply(q, x, formulation="dense"), small, x, n=n)


@pytest.mark.slow
@pytest.mark.parametrize("m", [4, 16])
def test_W_stays_orthogonal_after_training(m):
    """A few hundred Adam steps at a large learning rate move U far from its initialisation;
    W, rebuilt from U in float32 at every forward pass, stays orthogonal to float32 precision,
    also when float32 products are rounded to TF32 (W is built at full precision)."""
    import optax
    from lrnn.course import precision

    jax.config.update("jax_enable_x64", False)            # the x64 fixture restores it
    n, d_in, L, B = 16, 2, 20, 16
    p = ornn.init(jax.random.PRNGKey(0), d_in, n, m)
    w = jnp.zeros((n,))
    x = jax.random.normal(jax.random.PRNGKey(1), (B, L, d_in))
    y = jnp.sum(x[:, :, 0], axis=1) / L

    def loss(params):
        q, w = params
        return jnp.mean((ornn.apply(q, x, formulation="dense")[:, -1] @ w - y) ** 2)

    tx = optax.adam(3e-2)
    params = (p, w)
    state = tx.init(params)

    @jax.jit
    def update(params, state):
        grads = jax.grad(loss)(params)
        updates, state = tx.update(grads, state)
        return optax.apply_updates(params, updates), state

    for _ in range(300):
        params, state = update(params, state)
    U0, U = np.asarray(p["U"]), np.asarray(params[0]["U"])
    assert np.abs(U - U0).max() > 0.3                       # training really moved U
    with precision.tf32_emulated():
        for q in (params[0], p):
            cols, sign = ornn._transition_parts(q)
            for backend in ("cpu", "gpu"):                   # both builders of W
                W = np.asarray(ornn._form_W(cols, sign, backend), np.float64)
                assert np.linalg.norm(W.T @ W - np.eye(n), 2) < 1e-5, backend
            np.testing.assert_array_equal(ornn.transition_matrix(q),
                                          ornn._form_W(cols, sign))
        h = jnp.ones((1, n)) / 3
        W32 = ornn.transition_matrix(params[0])
        assert not np.array_equal(np.asarray(h @ W32), np.asarray(jnp.dot(
            h, W32, precision=jax.lax.Precision.HIGHEST)))   # the emulation is really on


# ---------------------------------------------------------------- OPLU (oRNN §5.5)

def oplu_np(z):
    """OPLU (Chernodub & Nowicki 2016): (z_{2i-1}, z_{2i}) -> (max, min), pair by pair."""
    z = np.asarray(z, np.float64)
    out = np.empty_like(z)
    for i in range(0, z.shape[-1], 2):
        out[..., i] = np.maximum(z[..., i], z[..., i + 1])
        out[..., i + 1] = np.minimum(z[..., i], z[..., i + 1])
    return out


def test_oplu_definition_and_norm(rng):
    z = rng.normal(size=(3, 8))
    z[0, 2] = z[0, 3]                                        # a tie
    y = np.asarray(ornn.oplu(jnp.asarray(z)))
    np.testing.assert_array_equal(y, oplu_np(z))
    np.testing.assert_allclose(np.linalg.norm(y, axis=-1), np.linalg.norm(z, axis=-1), rtol=1e-15)
    np.testing.assert_array_equal(np.sort(y, axis=-1), np.sort(z, axis=-1))   # a permutation


@pytest.mark.parametrize("formulation", ["dense", "reflections"])
def test_apply_with_oplu(rng, formulation):
    n, m, d_in, L = 6, 3, 2, 5
    p = random_params(rng, d_in, n, m)
    u = rng.normal(size=(2, L, d_in))
    W = transition_np(p["U"])
    ref = np.zeros((2, L, n))
    for s in range(2):
        h = p["h0"]
        for t in range(L):
            h = oplu_np(W @ h + p["V"] @ u[s, t] + p["b"])
            ref[s, t] = h
    got = ornn.apply(p, u, formulation=formulation, activation="oplu")
    np.testing.assert_allclose(got, ref, atol=1e-12)
    np.testing.assert_allclose(ornn.step(p, p["h0"], u[0, 0], activation="oplu"), ref[0, 0],
                               atol=1e-12)


def test_errors_name_the_argument(rng):
    key = jax.random.PRNGKey(0)
    with pytest.raises(ValueError, match="`n_reflections`.*m <= d_state = 4"):
        ornn.init(key, 2, 4, 5)
    with pytest.raises(ValueError, match="`d_state`"):
        ornn.init(key, 2, 0, 1)
    with pytest.raises(ValueError, match="`d_model`"):
        ornn.init(key, 2.5, 4, 1)
    p = random_params(rng, 2, 4, 2)
    with pytest.raises(ValueError, match="`u`.*d_model = 2"):
        ornn.apply(p, rng.normal(size=(5, 3)))
    with pytest.raises(ValueError, match="`u`.*\\(\\.\\.\\., L, d_model\\)"):
        ornn.apply(p, rng.normal(size=(2,)))
    with pytest.raises(ValueError, match="`x_t`.*d_model = 2"):
        ornn.step(p, np.zeros(4), np.zeros(3))
    with pytest.raises(ValueError, match="`h`.*n = 4"):
        ornn.step(p, np.zeros(3), np.zeros(2))
    with pytest.raises(ValueError, match="`x_t`.*batch"):
        ornn.step(p, np.zeros((2, 4)), np.zeros((3, 2)))
    with pytest.raises(ValueError, match="`params\\['U'\\] \\(its columns\\)`: got 5.*m <= n = 4"):
        ornn.apply({**p, "U": rng.normal(size=(4, 5))}, rng.normal(size=(5, 2)))
    with pytest.raises(ValueError, match="`params`.*'u1'"):
        ornn.apply({**p, "U": rng.normal(size=(4, 4))}, rng.normal(size=(5, 2)))
    with pytest.raises(ValueError, match="`params\\['u1'\\]`"):
        ornn.apply({**p, "u1": 1.0}, rng.normal(size=(5, 2)))
    with pytest.raises(ValueError, match="`params\\['V'\\]`"):
        ornn.apply({**p, "V": rng.normal(size=(3, 2))}, rng.normal(size=(5, 2)))
    with pytest.raises(ValueError, match="`params\\['b'\\]`"):
        ornn.apply({**p, "b": np.zeros(3)}, rng.normal(size=(5, 2)))
    with pytest.raises(ValueError, match="`params\\['h0'\\]`"):
        ornn.apply({**p, "h0": np.zeros(5)}, rng.normal(size=(5, 2)))
    with pytest.raises(ValueError, match="`params`.*'V'"):
        ornn.apply({"U": p["U"], "b": p["b"]}, rng.normal(size=(5, 2)))
    with pytest.raises(ValueError, match="`formulation`.*'dense'"):
        ornn.apply(p, rng.normal(size=(5, 2)), formulation="wy")
    with pytest.raises(ValueError, match="`activation`.*'oplu'"):
        ornn.apply(p, rng.normal(size=(5, 2)), activation="relu")
    with pytest.raises(ValueError, match="`activation`.*odd hidden size n = 5"):
        ornn.apply(random_params(rng, 2, 5, 2), rng.normal(size=(5, 2)), activation="oplu")
    zero = {**p, "U": np.tril(np.ones((4, 2))) * np.array([1.0, 0.0])}
    with pytest.raises(ValueError, match="`params\\['U'\\]`.*zero vector"):
        ornn.apply(zero, rng.normal(size=(5, 2)))
