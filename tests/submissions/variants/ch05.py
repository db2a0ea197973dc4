"""Chapter 5 (Householder reflections): alternative answers and habit cells."""

SCRATCH = {
    "ex5.2-solution": ['''\
U_try = np.tril(np.random.default_rng(0).standard_normal((5, 3))).astype(np.float32)
h_try, g_try = jnp.ones(5), jnp.arange(5.0)
f_try = lambda U: g_try @ lrnn.orthogonal.householder_product(U) @ h_try
print(np.asarray(jax.grad(f_try)(jnp.asarray(U_try))).round(3))
print(jax.value_and_grad(f_try)(jnp.asarray(U_try))[0])
print(jax.vjp(f_try, jnp.asarray(U_try))[1](1.0)[0].shape)
print(jax.jacrev(f_try)(jnp.asarray(U_try)).shape, jax.jacfwd(f_try)(jnp.asarray(U_try)).shape)
print(np.asarray(lrnn.orthogonal.wy_transform(U_try, np.ones(5, np.float32))))'''],
    "ex5.4-solution": ['''\
p_try = lrnn.layers.ornn.init(jax.random.PRNGKey(0), 2, 4, 4)
h_try = lrnn.layers.ornn.step(p_try, jnp.ones(4), jnp.ones(2))
W_try = lrnn.layers.ornn.transition_matrix(p_try)
print(W_try.T @ (jnp.where(h_try < 0, 10 * h_try, h_try) - p_try["V"] @ jnp.ones(2) - p_try["b"]))
U_try = np.tril(np.random.default_rng(1).standard_normal((5, 3))).astype(np.float32)
print(np.asarray(lrnn.orthogonal.householder_product(U_try)).round(3))
print(np.asarray(lrnn.orthogonal.wy_matrix(U_try)).round(3))'''],
}

SELF_CHECK = '''\
# my own final check against the library
rng_me = np.random.default_rng(11)
A_me = rng_me.standard_normal((4, 4)).astype(np.float32)
A_me[:, 0] = [2.0, 1e-4, -1e-4, 0.0]                 # nearly on the axis
u_me, b_me = (np.asarray(v, np.float64) for v in reflect_to_axis(A_me.T))
x_me = A_me.T.astype(np.float64)
v_me = u_me / np.linalg.norm(u_me, axis=-1, keepdims=True)
Hx_me = x_me - 2 * v_me * np.sum(v_me * x_me, -1, keepdims=True)
R_lib = np.asarray(lrnn.orthogonal.householder_qr(jnp.asarray(A_me)).R)
print("reflect_to_axis:", np.allclose(Hx_me[:, 1:], 0, atol=1e-5),
      np.isclose(abs(b_me[0]), R_lib[0, 0], rtol=1e-5), np.allclose(Hx_me[:, 0], b_me))
U_me = np.tril(rng_me.standard_normal((6, 4))).astype(np.float32)
W_lib = np.asarray(lrnn.orthogonal.householder_product(U_me))
h_me, g_me = rng_me.standard_normal((2, 6))
f_me = lambda U: g_me @ lrnn.orthogonal.householder_product(U) @ h_me
grad_me = jax.grad(f_me)(jnp.asarray(U_me))
print("chain_gradient:", np.allclose(chain_gradient(U_me, h_me, g_me), grad_me, atol=1e-4))
G_me = U_me.T.astype(np.float64) @ U_me
T_me = np.linalg.inv(np.triu(G_me, 1) + np.diag(np.diag(G_me)) / 2)     # LAPACK's T of all four
Uw, Tw = wy_merge(U_me[:, :2], np.linalg.inv(np.linalg.inv(T_me)[:2, :2]),
                  U_me[:, 2:], np.linalg.inv(np.linalg.inv(T_me)[2:, 2:]))
print("wy_merge:", np.allclose(np.eye(6) - Uw @ Tw @ Uw.T, W_lib, atol=1e-5))
for m_me in (2, 4):
    p_me = lrnn.layers.ornn.init(jax.random.PRNGKey(m_me), 3, 4, m_me)
    h_me, xt_me = jnp.asarray(rng_me.standard_normal(4)), jnp.asarray(rng_me.standard_normal(3))
    ht_me = lrnn.layers.ornn.step(p_me, h_me, xt_me)
    print("ornn_step_back", m_me, np.allclose(ornn_step_back(p_me, ht_me, xt_me), h_me,
                                              atol=1e-5))'''

AXIS_HELPER = '''\
def scaled(v):
    """v divided by its largest |entry| (1 if v = 0), and that scale."""
    m = jnp.max(jnp.abs(v))
    m = jnp.where(m == 0, 1.0, m)
    return v / m, m'''

REFLECTOR_1 = {"helpers": [AXIS_HELPER], "answer": '''\
def reflect_to_axis(x):
    x = jnp.asarray(x, jnp.float32)
    flat = x.reshape(-1, x.shape[-1])
    us, betas = [], []
    for v in flat:                                   # one vector at a time, each its own scale
        w, m = scaled(v)
        length = jnp.linalg.norm(w)
        s = jnp.where(w[0] >= 0, 1.0, -1.0)
        first = w[0] + s * length                    # same signs: a sum, not a difference
        u = jnp.concatenate([first[None], w[1:]])
        u = jnp.where(length == 0, jnp.eye(len(v))[0], u)
        us.append(u)
        betas.append(-s * length * m)
    return jnp.stack(us).reshape(x.shape), jnp.stack(betas).reshape(x.shape[:-1])'''}

REFLECTOR_2 = '''\
def reflect_to_axis(x):
    # keeps beta = +||x|| (Algorithm 2's positive diagonal) and rewrites x1 - ||x|| so that
    # nothing is subtracted when x1 > 0
    x = jnp.asarray(x, jnp.float32)
    n = x.shape[-1]
    big = jnp.max(jnp.abs(x), axis=-1, keepdims=True)
    big = jnp.where(big > 0, big, 1.0)
    y = x / big
    tail = jnp.sum(y[..., 1:] ** 2, axis=-1)
    norm = jnp.sqrt(y[..., 0] ** 2 + tail)
    if n == 1:                                       # H = -1 is the only reflection in 1-D
        return jnp.ones_like(x), -x[..., 0]
    positive = y[..., 0] > 0
    safe = jnp.where(positive, y[..., 0] + norm, 1.0)
    u1 = jnp.where(positive, -tail / safe, y[..., 0] - norm)
    u = jnp.concatenate([u1[..., None], y[..., 1:]], axis=-1)
    nothing = jnp.sum(u * u, axis=-1, keepdims=True) == 0   # x = c e1 with c >= 0
    u = jnp.where(nothing, jnp.zeros_like(u).at[..., -1].set(1.0), u)   # a mirror containing x
    return u, norm * big[..., 0]'''

GRADIENT_1 = '''\
def chain_gradient(U, h, g):
    U = np.asarray(U, np.float64)
    n, m = U.shape
    H = [np.eye(n) - 2 * np.outer(u, u) / (u @ u) for u in U.T]
    grad = np.zeros((n, m))
    for j in range(m):
        left = np.eye(n)
        for k in range(j):
            left = left @ H[k]
        right = np.eye(n)
        for k in range(j + 1, m):
            right = right @ H[k]
        a = left.T @ np.asarray(g, np.float64)     # g through the factors left of H_j
        b = right @ np.asarray(h, np.float64)      # h through the factors right of H_j
        u = U[:, j]
        nu = u @ u
        for i in range(j, n):                      # only the entries of eq. 9
            grad[i, j] = (-2 * (a[i] * (u @ b) + b[i] * (u @ a)) / nu
                          + 4 * (u @ a) * (u @ b) * u[i] / nu ** 2)
    return grad'''

GRADIENT_2 = {"helpers": ['''\
def mirror(u, v):
    return v - 2 * (u @ v) / (u @ u) * u'''], "answer": '''\
def chain_gradient(U, h, g):
    """Through the unit vector v = u/|u|: H = I - 2 v v^T, dv/du = (I - v v^T)/|u|."""
    U = jnp.asarray(U, jnp.float32)
    n, m = U.shape
    bs = []
    b = jnp.asarray(h, jnp.float32)
    for j in range(m - 1, -1, -1):
        bs.append(b)                               # h after the factors right of H_j
        b = mirror(U[:, j], b)
    bs = bs[::-1]
    a = jnp.asarray(g, jnp.float32)
    columns = []
    for j in range(m):
        norm = jnp.linalg.norm(U[:, j])
        v = U[:, j] / norm
        dv = -2 * ((v @ bs[j]) * a + (v @ a) * bs[j])
        columns.append((dv - v * (v @ dv)) / norm)
        a = mirror(U[:, j], a)
    mask = jnp.arange(n)[:, None] >= jnp.arange(m)[None, :]
    return jnp.where(mask, jnp.stack(columns, axis=1), 0.0)'''}

MERGE_1 = '''\
def wy_merge(U1, T1, U2, T2):
    U1, T1, U2, T2 = (np.asarray(v, np.float64) for v in (U1, T1, U2, T2))
    m1, m2 = T1.shape[0], T2.shape[0]
    T = np.zeros((m1 + m2, m1 + m2))
    T[:m1, :m1] = T1
    T[m1:, m1:] = T2
    T[:m1, m1:] = -T1 @ U1.T @ U2 @ T2               # minus the cross term of W1 W2
    return np.concatenate([U1, U2], axis=1), T'''

MERGE_2 = '''\
def wy_merge(U1, T1, U2, T2):
    U = jnp.hstack([jnp.asarray(U1), jnp.asarray(U2)])
    m1, m2 = np.shape(T1)[0], np.shape(T2)[0]
    B = jnp.asarray(U2) @ jnp.asarray(T2)            # W2 = I - B U2^T
    cols = [-(jnp.asarray(T1) @ (jnp.asarray(U1).T @ B[:, j])) for j in range(m2)]
    S = jnp.stack(cols, axis=1)                      # the cross term, column by column
    T = jnp.block([[jnp.asarray(T1), S], [jnp.zeros((m2, m1)), jnp.asarray(T2)]])
    return U, T'''

STEP_1 = '''\
def ornn_step_back(params, h_t, x_t):
    U = np.asarray(params["U"], np.float64)
    n, m = U.shape
    pre = np.array(h_t, np.float64)
    pre[pre < 0] *= 10.0                             # undo the leaky ReLU
    v = pre - np.asarray(x_t, np.float64) @ np.asarray(params["V"], np.float64).T
    v = v - np.asarray(params["b"], np.float64)
    if "u1" in params:
        m -= 1
    # W = H_0 H_1 ... H_{m-1} (H_1 sign): W^-1 = W^T = (sign) H_{m-1} ... H_0, so H_0 first
    for j in range(m):
        u = U[:, j]
        coef = 2.0 * (v @ u) / (u @ u)
        v = v - coef[..., None] * u
    if "u1" in params and float(params["u1"]) <= 0:
        v[..., -1] = -v[..., -1]
    return v'''

STEP_2 = {"helpers": ['''\
def leaky_relu_inverse(y):
    return jnp.minimum(y, 10 * y)''', '''\
def reflect(v, u):
    """H(u) v for every row of v, with jax.numpy."""
    return v - (v @ u)[..., None] * u * (2.0 / jnp.dot(u, u))'''], "answer": '''\
def ornn_step_back(params, h_t, x_t):
    U = jnp.asarray(params["U"], jnp.float32)
    v = leaky_relu_inverse(jnp.asarray(h_t, jnp.float32))
    v = v - jnp.asarray(x_t, jnp.float32) @ jnp.asarray(params["V"]).T - jnp.asarray(params["b"])
    cols = [U[:, j] for j in range(U.shape[1])]
    sign = None
    if "u1" in params:
        cols = cols[:-1]
        sign = jnp.where(jnp.asarray(params["u1"]) > 0, 1.0, -1.0)
    for u in cols:                                   # the leftmost factor of W goes first
        v = reflect(v, u)
    if sign is not None:                             # H_1 was the first factor to act: last
        v = v.at[..., -1].multiply(sign)
    return v'''}

VARIANTS = {
    "ex5.1-solution": [REFLECTOR_1, REFLECTOR_2],
    "ex5.2-solution": [GRADIENT_1, GRADIENT_2],
    "ex5.3-solution": [MERGE_1, MERGE_2],
    "ex5.4-solution": [STEP_1, STEP_2],
    "ex5.6-solution": ['real_eigenvalues = (8 - 3) + 3 % 2',
                       'real_eigenvalues = 6.0'],
}
