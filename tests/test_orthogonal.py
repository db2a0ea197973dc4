"""lrnn.orthogonal against naive float64 NumPy transcriptions: RotRNN Lemmas 2–3 and eq. 14
(skew exponential, block rotations), oRNN eqs. 6–9 (Householder products), Prop. 1 and
eqs. 12–13 (compact WY), Algorithm 1 (forward loop and its backward pass, Theorem 2) and
Algorithm 2 (QR with the oRNN factors, Theorem 1)."""
import jax
import jax.numpy as jnp
import numpy as np
import pytest
import scipy.linalg
from jax.test_util import check_grads

from lrnn import orthogonal as o

pytestmark = pytest.mark.usefixtures("x64")


# ---------------------------------------------------------------- NumPy transcriptions

def householder_np(u):
    """oRNN eq. 6 with k = n: I - 2 u u' / ‖u‖²."""
    u = np.asarray(u, np.float64)
    return np.eye(len(u)) - 2 * np.outer(u, u) / (u @ u)


def H_k_np(u_k, n):
    """oRNN eq. 6: blockdiag(I_{n-k}, I_k - 2 u u'/‖u‖²) for u_k in R^k, k >= 2."""
    k = len(u_k)
    H = np.eye(n)
    H[n - k:, n - k:] = householder_np(u_k)
    return H


def H_1_np(u1, n):
    """oRNN eq. 7: diag(1, …, 1, u_1)."""
    H = np.eye(n)
    H[-1, -1] = u1
    return H


def product_np(U, u1=None):
    """oRNN eq. 8 with the vectors read from the columns of U as in eq. 9:
    W = H_n(u_n) ⋯ H_{n-m+1}(u_{n-m+1}); for m = n the last factor is H_1(u_1)."""
    U = np.asarray(U, np.float64)
    n, m = U.shape
    W = np.eye(n)
    for j in range(m):                      # column j (0-based) holds u_{n-j} in rows j..n-1
        k = n - j
        W = W @ (H_k_np(U[j:, j], n) if k >= 2 else H_1_np(u1, n))
    return W


def wy_np(U, u1=None):
    """oRNN Prop. 1: I - U T^{-1} U' with T = striu(U'U) + diag(U'U)/2 (eqs. 12-13); for
    m = n, U = (u_n | … | u_2) and the result is multiplied by H_1(u_1)."""
    U = np.tril(np.asarray(U, np.float64))
    n, m = U.shape
    if m == n:
        U = U[:, :-1]
    G = U.T @ U
    T = np.triu(G, 1) + np.diag(np.diag(G)) / 2
    W = np.eye(n) - U @ np.linalg.solve(T, U.T)
    return W @ H_1_np(u1, n) if m == n else W


def algorithm1_forward_np(U, h):
    """oRNN Algorithm 1, lines 4–10 and 16, with explicit loops."""
    U = np.tril(np.asarray(U, np.float64))
    n, m = U.shape
    N = [U[:, k] @ U[:, k] for k in range(m)]
    H = np.zeros((n, m + 1))
    H[:, m] = h
    for k in reversed(range(m)):
        h_tilde = 2 / N[k] * (U[:, k] @ H[:, k + 1])
        H[:, k] = H[:, k + 1] - h_tilde * U[:, k]
    return H[:, 0]


def theorem2_np(U, h, dC):
    """oRNN Theorem 2, eqs. 14–15: gradients of L(C), C = (I - U T^{-1} U') h."""
    n, m = U.shape
    G = U.T @ U
    T = np.triu(G, 1) + np.diag(np.diag(G)) / 2
    B = np.triu(np.ones((m, m)), 1) + np.eye(m) / 2
    h_t = np.linalg.solve(T, U.T @ h)
    C_t = np.linalg.solve(T.T, U.T @ dC)
    dU = U @ (np.outer(h_t, C_t) * B.T + np.outer(C_t, h_t) * B) - np.outer(dC, h_t) \
        - np.outer(h, C_t)
    dh = dC - U @ C_t
    return dU, dh


def algorithm2_np(A):
    """oRNN Algorithm 2, line by line (dense H_k, the paper's formula for u)."""
    A = np.asarray(A, np.float64)
    n = A.shape[0]
    R, Q = A.copy(), np.eye(n)
    U = np.zeros((n, n))
    for k in range(n - 1):                  # paper's k = 1 … n-1
        x = R[k:, k]
        if R[k, k] == np.linalg.norm(x):
            u = np.zeros(n - k)
            u[-1] = 1.0
        else:
            u = x - np.linalg.norm(x) * np.eye(n - k)[0]
            u = u / np.linalg.norm(u)
        R = H_k_np(u, n) @ R
        Q = Q @ H_k_np(u, n)
        U[k:, k] = u
    u1 = np.sign(R[-1, -1])
    R = H_1_np(u1, n) @ R
    Q = Q @ H_1_np(u1, n)
    return U, u1, Q, R


def random_orthogonal(rng, n, det=1):
    Q, R = np.linalg.qr(rng.normal(size=(n, n)))
    Q = Q * np.sign(np.diag(R))
    if np.sign(np.linalg.det(Q)) != det:
        Q[:, 0] *= -1
    return Q


def lower(rng, n, m):
    return np.tril(rng.normal(size=(n, m)))


SHAPES = [(1, 1), (2, 2), (5, 1), (5, 3), (6, 5), (6, 6)]


# ---------------------------------------------------------------- Householder reflections

@pytest.mark.parametrize("n", [1, 2, 5])
def test_householder_properties(rng, n):
    u = rng.normal(size=n)
    H = np.asarray(o.householder(u))
    np.testing.assert_allclose(H, householder_np(u), atol=1e-14)
    np.testing.assert_allclose(H, H.T, atol=1e-14)                      # symmetric
    np.testing.assert_allclose(H @ H.T, np.eye(n), atol=1e-13)          # orthogonal
    np.testing.assert_allclose(H @ H, np.eye(n), atol=1e-13)            # involutive
    np.testing.assert_allclose(H @ u, -u, atol=1e-13)                   # u -> -u
    assert np.linalg.det(H) == pytest.approx(-1.0, abs=1e-12)
    if n > 1:                                                           # fixes u^⊥
        v = rng.normal(size=n)
        v -= (v @ u) / (u @ u) * u
        np.testing.assert_allclose(H @ v, v, atol=1e-13)
    np.testing.assert_allclose(o.householder(-3.7 * u), H, atol=1e-13)  # scale invariant


def test_householder_batch(rng):
    u = rng.normal(size=(3, 2, 4))
    H = np.asarray(o.householder(u))
    assert H.shape == (3, 2, 4, 4)
    for i in range(3):
        for j in range(2):
            np.testing.assert_allclose(H[i, j], householder_np(u[i, j]), atol=1e-14)


def test_householder_zero_vector_raises(rng):
    with pytest.raises(ValueError, match="`u`"):
        o.householder(np.zeros(3))
    u = rng.normal(size=(2, 3))
    u[1] = 0
    with pytest.raises(ValueError, match="`u`.*zero vector"):
        o.householder(u)
    with pytest.raises(ValueError, match="`u`"):
        o.householder(np.float64(1.0))


# ---------------------------------------------------------------- products (eqs. 6–9)

@pytest.mark.parametrize("n,m", SHAPES)
@pytest.mark.parametrize("u1", [1.0, -1.0])
def test_householder_product_matches_eqs_6_to_9(rng, n, m, u1):
    U = lower(rng, n, m)
    s = u1 if m == n else None
    W = np.asarray(o.householder_product(U, s))
    np.testing.assert_allclose(W, product_np(U, s), atol=1e-12)
    np.testing.assert_allclose(W @ W.T, np.eye(n), atol=1e-12)
    det = (-1.0) ** (n - 1) * u1 if m == n else (-1.0) ** m
    assert np.linalg.det(W) == pytest.approx(det, abs=1e-10)


def test_householder_product_masks_eq9_structure(rng):
    n, m = 6, 4
    U = lower(rng, n, m)
    noisy = U + np.triu(rng.normal(size=(n, m)), 1)
    np.testing.assert_allclose(o.householder_product(noisy), o.householder_product(U),
                               atol=1e-14)
    g = jax.jit(jax.grad(lambda A: jnp.sum(o.householder_product(A) ** 3)))(noisy)
    assert np.all(np.asarray(g)[np.triu_indices(n, 1, m)] == 0)
    assert np.any(np.asarray(g)[np.tril_indices(n, 0, m)] != 0)
    # m = n: the last column is not a reflection vector (u_1 is u1_sign); it is ignored.
    V = lower(rng, n, n)
    V2 = V.copy()
    V2[:, -1] = rng.normal(size=n)
    np.testing.assert_allclose(o.householder_product(V2, -1.0), o.householder_product(V, -1.0),
                               atol=1e-14)


@pytest.mark.slow
@pytest.mark.parametrize("n,m", [(1, 1), (2, 2), (5, 1), (5, 3), (7, 5), (6, 6)])
@pytest.mark.parametrize("builder", ["reflect_identity", "compact_wy"])
def test_pure_builders_of_W_are_eq_8(rng, n, m, builder):
    """The two ways of forming W from checked reflection columns (the oRNN layer's dense
    formulation uses the first on a CPU, the second on a GPU): values against eqs. 6–9, and
    gradients against those of the reflection-by-reflection construction, in float64."""
    U = lower(rng, n, m)
    s = -1.0 if m == n else None
    cols = np.asarray(o.reflection_columns(jnp.asarray(U)))
    u1 = None if s is None else jnp.asarray(s)
    build = getattr(o, builder)
    np.testing.assert_allclose(build(cols, u1), product_np(U, s), atol=1e-12)
    R = rng.normal(size=(n, n))
    loss = lambda f: (lambda c: jnp.sum(jnp.sin(f(c, u1) @ R)))
    np.testing.assert_allclose(jax.grad(loss(build))(cols), jax.grad(loss(o.reflect_identity))(cols),
                               rtol=1e-10, atol=1e-12)


# ---------------------------------------------------------------- compact WY (Prop. 1)

@pytest.mark.parametrize("n,m", SHAPES)
def test_wy_matrix_is_the_product(rng, n, m):
    U = lower(rng, n, m)
    s = -1.0 if m == n else None
    W = product_np(U, s)
    np.testing.assert_allclose(wy_np(U, s), W, atol=1e-11)             # the paper's claim
    np.testing.assert_allclose(o.wy_matrix(U, s), W, atol=1e-11)


@pytest.mark.parametrize("n,m", SHAPES)
def test_wy_transform_is_algorithm_1(rng, n, m):
    U = lower(rng, n, m)
    s = -1.0 if m == n else None
    W = product_np(U, s)
    h = rng.normal(size=(3, 2, n))
    out = np.asarray(o.wy_transform(U, h, s))
    assert out.shape == h.shape
    np.testing.assert_allclose(out, h @ W.T, atol=1e-12)
    if m < n:
        np.testing.assert_allclose(out[1, 0], algorithm1_forward_np(U, h[1, 0]), atol=1e-12)
    np.testing.assert_allclose(o.wy_transform(U, h[0, 0], s), W @ h[0, 0], atol=1e-12)
    jitted = jax.jit(o.wy_transform)(U, h, s)
    np.testing.assert_allclose(jitted, out, atol=1e-13)


def test_wy_transform_float32(rng):
    U = lower(rng, 5, 3).astype(np.float32)
    h = rng.normal(size=(4, 5)).astype(np.float32)
    out = o.wy_transform(U, h)
    assert out.dtype == jnp.float32
    np.testing.assert_allclose(out, h @ product_np(U).T, atol=1e-5)


@pytest.mark.parametrize("n,m", [(5, 1), (5, 3), (6, 5)])
def test_wy_transform_gradient_is_theorem_2(rng, n, m):
    U = lower(rng, n, m) + np.triu(rng.normal(size=(n, m)), 1)   # masked inside
    h, dC = rng.normal(size=n), rng.normal(size=n)
    dU, dh = jax.jit(jax.grad(lambda A, x: jnp.dot(dC, o.wy_transform(A, x)), (0, 1)))(U, h)
    dU_ref, dh_ref = theorem2_np(np.tril(U), h, dC)
    np.testing.assert_allclose(dU, np.tril(dU_ref), atol=1e-11)   # chain rule through the mask
    np.testing.assert_allclose(dh, dh_ref, atol=1e-12)


@pytest.mark.parametrize("n,m", [(4, 2), (4, 4)])
def test_wy_transform_check_grads(rng, n, m):
    U = lower(rng, n, m)
    h = rng.normal(size=(2, n))
    s = 1.0 if m == n else None
    check_grads(lambda A, x: o.wy_transform(A, x, s), (U, h), order=1, modes=["rev"])
    check_grads(lambda A: o.householder_product(A, s), (U,), order=1, modes=["rev"])


def _shapes(jaxpr):
    """Every intermediate shape in a jaxpr, sub-jaxprs (scan bodies, custom VJPs) included."""
    out = []
    for eqn in jaxpr.eqns:
        out += [tuple(v.aval.shape) for v in eqn.outvars if hasattr(v.aval, "shape")]
        for p in eqn.params.values():
            for sub in (p if isinstance(p, (tuple, list)) else (p,)):
                inner = getattr(sub, "jaxpr", sub)
                if hasattr(inner, "eqns"):
                    out += _shapes(inner)
    return out


def test_wy_transform_never_forms_n_by_n(rng):
    n, m = 11, 3
    U, h = lower(rng, n, m), rng.normal(size=(5, n))
    fwd = jax.make_jaxpr(o.wy_transform)(U, h).jaxpr
    bwd = jax.make_jaxpr(jax.grad(lambda A, x: jnp.sum(o.wy_transform(A, x) ** 2),
                                  (0, 1)))(U, h).jaxpr
    for shapes in (_shapes(fwd), _shapes(bwd)):
        assert shapes and all(s.count(n) <= 1 for s in shapes)
    dense = _shapes(jax.make_jaxpr(o.householder_product)(U).jaxpr)   # the test can fail
    assert any(s.count(n) >= 2 for s in dense)


# ---------------------------------------------------------------- Algorithm 2, Theorem 1

@pytest.mark.parametrize("n", [1, 2, 5])
@pytest.mark.parametrize("det", [1, -1])
def test_householder_qr_reaches_every_orthogonal_matrix(rng, n, det):
    Q = random_orthogonal(rng, n, det)
    U, u1, R = o.householder_qr(Q)
    np.testing.assert_allclose(R, np.eye(n), atol=1e-12)
    np.testing.assert_allclose(o.householder_product(U, u1), Q, atol=1e-12)
    np.testing.assert_allclose(product_np(U, float(u1)), Q, atol=1e-12)
    assert float(u1) in (1.0, -1.0)


@pytest.mark.parametrize("n", [1, 2, 5])
def test_householder_qr_general_matrix(rng, n):
    A = rng.normal(size=(n, n))
    res = o.householder_qr(A)
    U, u1, R = (np.asarray(x) for x in res)
    Q = np.asarray(o.householder_product(res.U, res.u1_sign))
    np.testing.assert_allclose(Q @ R, A, atol=1e-12)
    np.testing.assert_array_equal(R, np.triu(R))
    assert np.all(np.diag(R) > 0)
    U_ref, u1_ref, Q_ref, R_ref = algorithm2_np(A)
    np.testing.assert_allclose(U, U_ref, atol=1e-12)
    assert u1 == u1_ref
    np.testing.assert_allclose(Q, Q_ref, atol=1e-12)
    np.testing.assert_allclose(R, R_ref, atol=1e-12)
    _, R_np = np.linalg.qr(A)                     # unique QR with positive diagonal
    np.testing.assert_allclose(R, np.sign(np.diag(R_np))[:, None] * R_np, atol=1e-12)
    np.testing.assert_array_equal(U, np.tril(U))
    np.testing.assert_allclose(np.linalg.norm(U[:, :-1], axis=0), 1.0, atol=1e-14)
    jitted = jax.jit(o.householder_qr)(A)
    np.testing.assert_allclose(jitted.R, R, atol=1e-13)


def test_householder_qr_special_branch(rng):
    """Columns already equal to ‖x‖ e_1: Algorithm 2 takes u = (0, …, 0, 1)."""
    n = 4
    A = np.triu(rng.uniform(0.5, 2.0, size=(n, n)))
    for M in (np.eye(n), A):
        U, u1, R = (np.asarray(x) for x in o.householder_qr(M))
        expected = np.zeros((n, n))
        expected[-1, :-1] = 1.0
        np.testing.assert_array_equal(U, expected)
        assert u1 == (-1.0) ** (n - 1)            # undoes the n-1 flips of the last row
        np.testing.assert_allclose(R, M, atol=1e-14)
        np.testing.assert_allclose(algorithm2_np(M)[0], U, atol=0)


def test_householder_qr_bad_input(rng):
    with pytest.raises(ValueError, match="`A`.*square"):
        o.householder_qr(rng.normal(size=(3, 4)))
    singular = rng.normal(size=(4, 4))
    singular[:, 2] = 0                            # exactly zero R_kk at step 3
    with pytest.raises(ValueError, match="`A`.*full-rank"):
        o.householder_qr(singular)
    with pytest.raises(ValueError, match="`A`.*full-rank"):
        o.householder_qr(np.zeros((3, 3)))
    bad = np.eye(3)
    bad[1, 2] = np.nan
    with pytest.raises(ValueError, match="`A`.*finite"):
        o.householder_qr(bad)


# ---------------------------------------------------------------- argument checks

def test_householder_errors_name_the_argument(rng):
    U = lower(rng, 4, 4)
    for f in (o.householder_product, o.wy_matrix,
              lambda A, s=None: o.wy_transform(A, np.ones(4), s)):
        with pytest.raises(ValueError, match="`U \\(its columns\\)`: got 4.*m <= n = 3"):
            f(rng.normal(size=(3, 4)))
        with pytest.raises(ValueError, match="`U`"):
            f(rng.normal(size=(4,)))
        with pytest.raises(ValueError, match="`u1_sign`.*m = n"):
            f(U)
        with pytest.raises(ValueError, match="`u1_sign`.*None"):
            f(U[:, :2], 1.0)
        with pytest.raises(ValueError, match="`u1_sign`.*\\+1 or -1"):
            f(U, 0.5)
        with pytest.raises(ValueError, match="`u1_sign`.*scalar"):
            f(U, np.ones(2))
        zero = U[:, :2].copy()
        zero[1:, 1] = 0                               # a zero reflection vector (eq. 9 part)
        with pytest.raises(ValueError, match="`U`.*zero vector"):
            f(zero)
    with pytest.raises(ValueError, match="`h`.*n = 4"):
        o.wy_transform(U[:, :2], np.ones(3))


# ---------------------------------------------------------------- rotations (RotRNN)

def block_rotation_np(theta):
    """RotRNN Lemma 3: blockdiag of [[cos, -sin], [sin, cos]], built with a loop."""
    K = len(theta)
    D = np.zeros((2 * K, 2 * K))
    for i, t in enumerate(theta):
        D[2 * i:2 * i + 2, 2 * i:2 * i + 2] = [[np.cos(t), -np.sin(t)], [np.sin(t), np.cos(t)]]
    return D


@pytest.mark.parametrize("n", [1, 4])
def test_skew_expm(rng, n):
    M = rng.normal(size=(n, n))
    P = np.asarray(o.skew_expm(M))
    np.testing.assert_allclose(P, scipy.linalg.expm(M - M.T), atol=1e-12)
    np.testing.assert_allclose(P @ P.T, np.eye(n), atol=1e-12)
    assert np.linalg.det(P) == pytest.approx(1.0, abs=1e-12)           # RotRNN Lemma 2
    batch = rng.normal(size=(2, 3, n, n))
    Pb = np.asarray(o.skew_expm(batch))
    assert Pb.shape == batch.shape
    np.testing.assert_allclose(Pb[1, 2], scipy.linalg.expm(batch[1, 2] - batch[1, 2].T),
                               atol=1e-12)


def test_skew_expm_errors(rng):
    with pytest.raises(ValueError, match="`M`.*square"):
        o.skew_expm(rng.normal(size=(3, 4)))
    with pytest.raises(ValueError, match="`M`"):
        o.skew_expm(rng.normal(size=(3,)))


def test_block_rotation(rng):
    theta = rng.uniform(-np.pi, np.pi, size=4)
    D = np.asarray(o.block_rotation(theta))
    np.testing.assert_allclose(D, block_rotation_np(theta), atol=1e-15)
    np.testing.assert_allclose(D @ D.T, np.eye(8), atol=1e-13)
    assert np.linalg.det(D) == pytest.approx(1.0, abs=1e-12)
    eig = np.linalg.eigvals(D)
    expected = np.concatenate([np.exp(1j * theta), np.exp(-1j * theta)])
    np.testing.assert_allclose(np.sort_complex(eig), np.sort_complex(expected), atol=1e-12)
    for k in (2, 3, 7):                                                # RotRNN Lemma 3 powers
        np.testing.assert_allclose(np.linalg.matrix_power(D, k), o.block_rotation(k * theta),
                                   atol=1e-12)
    batch = rng.normal(size=(2, 3, 4))
    Db = np.asarray(o.block_rotation(batch))
    assert Db.shape == (2, 3, 8, 8)
    np.testing.assert_allclose(Db[1, 0], block_rotation_np(batch[1, 0]), atol=1e-15)
    with pytest.raises(ValueError, match="`theta`"):
        o.block_rotation(np.float64(0.3))


def test_rotate_pairs(rng):
    theta = rng.normal(size=3)
    x = rng.normal(size=(2, 5, 6))
    out = np.asarray(o.rotate_pairs(x, theta))
    np.testing.assert_allclose(out, x @ block_rotation_np(theta).T, atol=1e-13)   # eq. 14
    thetas = rng.normal(size=(5, 3))                                   # broadcast over batch
    out = np.asarray(o.rotate_pairs(x, thetas))
    for b in range(2):
        for t in range(5):
            np.testing.assert_allclose(out[b, t], block_rotation_np(thetas[t]) @ x[b, t],
                                       atol=1e-13)
    with pytest.raises(ValueError, match="`x`.*even"):
        o.rotate_pairs(rng.normal(size=(4, 5)), rng.normal(size=2))
    with pytest.raises(ValueError, match="`theta`.*K = 3"):
        o.rotate_pairs(x, rng.normal(size=4))
    with pytest.raises(ValueError, match="`theta`"):
        o.rotate_pairs(x, np.float64(0.1))
