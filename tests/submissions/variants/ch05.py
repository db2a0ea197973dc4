"""Chapter 5 (Householder reflections): alternative answers and habit cells."""

SCRATCH = {
    "ex5.2-solution": ['''\
U_try = np.tril(np.random.default_rng(0).standard_normal((5, 3))).astype(np.float32)
print(np.asarray(lrnn.orthogonal.householder_product(U_try)).round(3))
print(np.asarray(lrnn.orthogonal.wy_transform(U_try, np.ones(5, np.float32))))'''],
    "ex5.4-solution": ['''\
p_try = lrnn.layers.ornn.init(jax.random.PRNGKey(0), 2, 4, 4)
print(lrnn.layers.ornn.step(p_try, jnp.ones(4), jnp.ones(2)))'''],
}

SELF_CHECK = '''\
# my own final check against the library
rng_me = np.random.default_rng(11)
x_me = rng_me.standard_normal(4)
y_me = np.linalg.norm(x_me) * np.eye(4)[0]
u_me = np.asarray(reflector(x_me, y_me), np.float64)
print("reflector:", np.allclose(x_me - 2 * u_me * (u_me @ x_me) / (u_me @ u_me), y_me))
U_me = np.tril(rng_me.standard_normal((6, 4))).astype(np.float32)
W_lib = np.asarray(lrnn.orthogonal.householder_product(U_me))
print("householder_chain:", np.allclose(householder_chain(U_me), W_lib, atol=1e-5))
G_me = U_me.T.astype(np.float64) @ U_me
Uw, Tw = wy_merge(U_me[:, :2], np.triu(G_me[:2, :2], 1) + np.diag(np.diag(G_me[:2, :2])) / 2,
                  U_me[:, 2:], np.triu(G_me[2:, 2:], 1) + np.diag(np.diag(G_me[2:, 2:])) / 2)
print("wy_merge:", np.allclose(np.eye(6) - Uw @ np.linalg.solve(Tw, Uw.T), W_lib, atol=1e-5))
for m_me in (2, 4):
    p_me = lrnn.layers.ornn.init(jax.random.PRNGKey(m_me), 3, 4, m_me)
    h_me, xt_me = jnp.asarray(rng_me.standard_normal(4)), jnp.asarray(rng_me.standard_normal(3))
    print("ornn_step", m_me, np.allclose(ornn_step(p_me, h_me, xt_me),
                                         lrnn.layers.ornn.step(p_me, h_me, xt_me), atol=1e-5))'''

REFLECTOR_1 = '''\
def reflector(x, y):
    x, y = np.asarray(x, np.float64), np.asarray(y, np.float64)
    u = y - x                                        # H(u) = H(−u): either sign works
    if np.linalg.norm(u) > 1e-6 * np.linalg.norm(x):
        return u
    # y = x: a mirror that contains x, i.e. u orthogonal to x (the SVD's null space of xᵀ)
    return np.linalg.svd(x[None, :])[2][-1]'''

REFLECTOR_2 = '''\
def reflector(x, y):
    x, y = np.asarray(x, np.float64), np.asarray(y, np.float64)
    diff = x - y
    size = np.sqrt(diff @ diff)
    if size > 1e-6 * np.sqrt(x @ x):
        return diff / size
    i, j = np.argsort(-np.abs(x))[:2]                # (x_j, −x_i) in places i, j: orthogonal to x
    w = np.zeros_like(x)
    w[i], w[j] = x[j], -x[i]
    if not w.any():
        w[0] = 1.0
    return w'''

CHAIN_1 = '''\
def householder_chain(U, u1_sign=None):
    U = np.asarray(U, np.float64)
    n, m = U.shape
    cols = m - 1 if u1_sign is not None else m
    W = np.eye(n)
    for j in range(cols):                            # W = H(u_0) H(u_1) ... left to right
        u = U[:, j]
        W = W @ (np.eye(n) - 2 * np.outer(u, u) / (u @ u))
    if u1_sign is not None:
        W = W @ np.diag([1.0] * (n - 1) + [float(u1_sign)])
    return W'''

CHAIN_2 = '''\
def householder_chain(U, u1_sign=None):
    """Right to left: start from the rightmost factor and reflect it by H(u_j), j = m−1 … 0."""
    U = jnp.asarray(U)
    n, m = U.shape
    last = jnp.ones(n, U.dtype)
    if u1_sign is not None:
        last = last.at[-1].set(u1_sign)
    count = m if u1_sign is None else m - 1
    W = jnp.diag(last)
    for j in reversed(range(count)):
        u = U[:, j]
        W = W - jnp.outer(u, 2 * (u @ W) / (u @ u))      # H(u) W
    return W'''

MERGE_1 = '''\
def wy_merge(U1, T1, U2, T2):
    U1, T1, U2, T2 = (np.asarray(v, np.float64) for v in (U1, T1, U2, T2))
    m1, m2 = T1.shape[0], T2.shape[0]
    T = np.zeros((m1 + m2, m1 + m2))
    T[:m1, :m1] = T1
    T[m1:, m1:] = T2
    T[:m1, m1:] = U1.T @ U2                          # the cross terms of W1 W2
    return np.concatenate([U1, U2], axis=1), T'''

MERGE_2 = '''\
def wy_merge(U1, T1, U2, T2):
    U = np.hstack([np.asarray(U1, float), np.asarray(U2, float)])
    m1 = np.shape(T1)[0]
    G = U.T @ U                                      # every u_i · u_j
    T = np.block([[np.asarray(T1, float), G[:m1, m1:]],
                  [np.zeros((np.shape(T2)[0], m1)), np.asarray(T2, float)]])
    return U, T'''

STEP_1 = '''\
def ornn_step(params, h, x_t):
    U = np.asarray(params["U"], np.float64)
    sign = None
    if "u1" in params:
        sign = 1.0 if float(params["u1"]) > 0 else -1.0
    W = np.asarray(householder_chain(U, sign))
    pre = (np.asarray(h) @ W.T + np.asarray(x_t) @ np.asarray(params["V"]).T
           + np.asarray(params["b"]))
    return np.where(pre > 0, pre, 0.1 * pre)'''

STEP_2 = {"helpers": ['''\
def reflect(v, u):
    """H(u) v for every row of v."""
    return v - np.outer(v @ u, u) * (2.0 / (u @ u))'''], "answer": '''\
def ornn_step(params, h, x_t):
    U = np.asarray(params["U"], np.float64)
    v = np.array(h, np.float64).reshape(-1, U.shape[0])   # rows: the batch
    cols = list(range(U.shape[1]))
    if "u1" in params:                               # H_1 is the rightmost factor: first
        v[:, -1] *= 1.0 if float(params["u1"]) > 0 else -1.0
        cols = cols[:-1]
    for j in cols[::-1]:                             # then H(U[:, m−1]), ..., H(U[:, 0])
        v = reflect(v, U[:, j])
    z = v.reshape(np.shape(h)) + np.asarray(x_t) @ np.asarray(params["V"]).T + params["b"]
    return np.maximum(z, 0.1 * z)'''}

VARIANTS = {
    "ex5.1-solution": [REFLECTOR_1, REFLECTOR_2],
    "ex5.2-solution": [CHAIN_1, CHAIN_2],
    "ex5.3-solution": [MERGE_1, MERGE_2],
    "ex5.4-solution": [STEP_1, STEP_2],
    "ex5.6-solution": ['fixed_directions = 8 - 3',
                       'fixed_directions = 5.0'],
}
