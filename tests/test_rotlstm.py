"""RotLSTM / RotGRU against a naive float64 NumPy transcription of RotLSTM eqs. 1–17."""
import jax
import jax.numpy as jnp
import numpy as np
import pytest

from lrnn import rotlstm


def sigmoid(z):
    return 1 / (1 + np.exp(-z))


def rotation_matrix(u):
    """Eq. 2: block-diagonal 2×2 rotations by the angles u (dense)."""
    n = 2 * len(u)
    R = np.zeros((n, n))
    for i, a in enumerate(u):
        R[2 * i:2 * i + 2, 2 * i:2 * i + 2] = [[np.cos(a), -np.sin(a)], [np.sin(a), np.cos(a)]]
    return R


def lstm_reference(p, u, rotate):
    p = {k: np.asarray(v, np.float64) for k, v in p.items()}
    n = p["W_f"].shape[0]
    h, c, out = np.zeros(n), np.zeros(n), []
    for x_t in u:
        x = np.concatenate([h, x_t])                                   # eq. 3
        f = sigmoid(p["W_f"] @ x + p["b_f"])                           # eq. 4
        i = sigmoid(p["W_i"] @ x + p["b_i"])                           # eq. 5
        o = sigmoid(p["W_o"] @ x + p["b_o"])                           # eq. 6
        d = f * c + i * np.tanh(p["W_c"] @ x + p["b_c"])               # eq. 8
        if rotate:
            angles = 2 * np.pi * sigmoid(p["W_rot"] @ x + p["b_rot"])  # eq. 7
            c = rotation_matrix(angles) @ d                            # eq. 9
        else:
            c = d
        h = o * np.tanh(c)                                             # eq. 10
        out.append(h)
    return np.array(out)


def gru_reference(p, u, rotate):
    p = {k: np.asarray(v, np.float64) for k, v in p.items()}
    n = p["W_z"].shape[0]
    h, out = np.zeros(n), []
    for x_t in u:
        x = np.concatenate([h, x_t])                                   # eq. 11
        z = sigmoid(p["W_z"] @ x + p["b_z"])                           # eq. 12
        d = h * sigmoid(p["W_r"] @ x + p["b_r"])                       # eq. 13
        if rotate:
            U = rotation_matrix(2 * np.pi * sigmoid(p["W_rot"] @ x + p["b_rot"]))  # eq. 14
            r = U @ d                                                  # eq. 15
        else:
            r = d
        h_hat = np.tanh(p["W_h"] @ np.concatenate([r, x_t]) + p["b_h"])  # eq. 16
        h = (1 - z) * h + z * h_hat                                    # eq. 17
        out.append(h)
    return np.array(out)


def randomise(params, rng):
    """Non-trivial biases so that every term of the equations is exercised."""
    return {k: jnp.asarray(rng.normal(size=v.shape)) for k, v in params.items()}


@pytest.mark.parametrize("rotate", [True, False])
def test_lstm_matches_equations(x64, rng, rotate):
    params = randomise(rotlstm.init(jax.random.PRNGKey(0), 3, 6, rotate=rotate), rng)
    u = rng.normal(size=(2, 7, 3))
    h = np.asarray(rotlstm.apply(params, u))
    assert h.shape == (2, 7, 6)
    for b in range(2):
        np.testing.assert_allclose(h[b], lstm_reference(params, u[b], rotate), rtol=1e-12, atol=1e-12)


@pytest.mark.parametrize("rotate", [True, False])
def test_gru_matches_equations(x64, rng, rotate):
    params = randomise(rotlstm.gru_init(jax.random.PRNGKey(1), 2, 4, rotate=rotate), rng)
    u = rng.normal(size=(5, 2))
    np.testing.assert_allclose(rotlstm.gru_apply(params, u), gru_reference(params, u, rotate),
                               rtol=1e-12, atol=1e-12)


def test_init_shapes_and_concatenation_order():
    p = rotlstm.init(jax.random.PRNGKey(0), d_model=3, d_state=8)
    with pytest.warns(DeprecationWarning) as record:
        old = rotlstm.init(jax.random.PRNGKey(0), d_in=3, d_hidden=8)
    assert sorted(str(w.message).split("(")[1].split("=")[0] for w in record) == ["d_hidden", "d_in"]
    assert jax.tree_util.tree_all(jax.tree_util.tree_map(lambda a, b: bool((a == b).all()), p, old))
    for g in "fioc":
        assert p[f"W_{g}"].shape == (8, 11) and p[f"b_{g}"].shape == (8,)
    assert p["W_rot"].shape == (4, 11) and p["b_rot"].shape == (4,)
    assert "W_rot" not in rotlstm.init(jax.random.PRNGKey(0), 3, 8, rotate=False)
    # x = [h_{t-1}, x_t]: with h_0 = 0 the first step only sees the last d_in columns.
    p2 = dict(p, W_c=p["W_c"].at[:, :8].set(100.0))
    u = jnp.ones((1, 3))
    np.testing.assert_allclose(rotlstm.apply(p, u), rotlstm.apply(p2, u))


def test_rotation_preserves_memory_norm(x64, rng):
    """U(u) is orthogonal: ‖c_t‖ = ‖d_t‖ (the rotation only mixes pairs of cells)."""
    params = randomise(rotlstm.init(jax.random.PRNGKey(2), 2, 6), rng)
    h, c = jnp.asarray(rng.normal(size=6)), jnp.asarray(rng.normal(size=6))
    (_, c_rot), _ = rotlstm.cell(params, (h, c), jnp.ones(2))
    plain = {k: v for k, v in params.items() if "rot" not in k}
    (_, c_plain), _ = rotlstm.cell(plain, (h, c), jnp.ones(2))
    np.testing.assert_allclose(np.linalg.norm(c_rot), np.linalg.norm(c_plain), rtol=1e-12)
    assert not np.allclose(c_rot, c_plain)


def test_gradients_are_finite_and_match_finite_differences(x64, rng):
    from jax.test_util import check_grads
    params = randomise(rotlstm.init(jax.random.PRNGKey(3), 2, 4), rng)
    u = jnp.asarray(rng.normal(size=(4, 2)))
    check_grads(lambda p: rotlstm.apply(p, u).sum(), (params,), order=1, modes=["rev"])


def test_bad_input_raises():
    with pytest.raises(ValueError, match="d_state.*5.*even"):
        rotlstm.init(jax.random.PRNGKey(0), 2, 5)
    rotlstm.init(jax.random.PRNGKey(0), 2, 5, rotate=False)  # odd is fine without rotation
    p = rotlstm.init(jax.random.PRNGKey(0), 2, 4)
    with pytest.raises(ValueError, match="`u`.*\\(3, 5\\).*d_model = 2"):
        rotlstm.apply(p, jnp.ones((3, 5)))
    with pytest.raises(ValueError, match="d_model"):
        rotlstm.gru_init(jax.random.PRNGKey(0), 0, 4)
