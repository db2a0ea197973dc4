"""Chapter 3 (rotations): alternative answers and habit cells."""

SCRATCH = {
    "ex3.1-solution": ['''\
import scipy.linalg
import jax.scipy.linalg
M_try = 20 * np.random.default_rng(0).standard_normal((4, 4))
A_lib = np.asarray(lrnn.orthogonal.skew_expm(M_try))
print(np.abs(scipy.linalg.expm(M_try - M_try.T) - A_lib).max())
print(np.abs(jax.scipy.linalg.expm(jnp.asarray(M_try - M_try.T)) - skew_expm(M_try)).max())'''],
    "ex3.2-solution": ['''\
b_try = np.zeros((6, 4), np.float32)
b_try[0] = [1, 0, 0, 1]
print(np.asarray(lrnn.rotation_scan(np.array([0.9, 1.0], np.float32),
                                    np.array([np.pi / 2, 0.3], np.float32), b_try))[1])
print(np.asarray(lrnn.scan.rotation_scan(np.ones(2), np.zeros(2), b_try))[-1])
z_try = lrnn.scan.pairs_to_complex(b_try)
print(z_try.shape, lrnn.scan.complex_to_pairs(z_try).shape)'''],
    "ex3.3-solution": ['''\
import scipy.linalg
A_try = np.array([[0.0, -1.0], [1.0, 0.0]])
print(scipy.linalg.fractional_matrix_power(A_try, 0.5))
print(scipy.linalg.sqrtm(A_try), scipy.linalg.logm(A_try))'''],
    "ex3.4-solution": ['''\
p_try = lrnn.layers.gru.init(jax.random.PRNGKey(0), 3, 4)
print(lrnn.layers.gru.cell(p_try, jnp.zeros(4), jnp.ones(3))[0])
state_try, y_try = lrnn.layers.gru.step(p_try, lrnn.layers.gru.init_state(p_try), jnp.ones(3))
print(y_try, lrnn.layers.gru.apply(p_try, jnp.ones((5, 3))).shape)'''],
}

SELF_CHECK = '''\
# my own final check against the library
rng_me = np.random.default_rng(5)
M_me = rng_me.standard_normal((6, 6)).astype(np.float32)
print("skew_expm:", np.allclose(skew_expm(M_me), lrnn.orthogonal.skew_expm(M_me), atol=1e-4))
g_me = rng_me.uniform(0.5, 1.0, 3).astype(np.float32)
th_me = rng_me.uniform(-np.pi, np.pi, 3).astype(np.float32)
b_me = rng_me.standard_normal((2, 10, 6)).astype(np.float32)
th_steps_me = np.broadcast_to(th_me, (10, 3))          # the same angles at every step
b_turned_me = np.repeat(g_me, 2) * np.asarray(lrnn.orthogonal.rotate_pairs(b_me, th_me))
print("rotation_recurrence:", np.allclose(rotation_recurrence(g_me, th_steps_me, b_me),
                                          lrnn.rotation_scan(g_me, th_me, b_turned_me), atol=1e-4))
P_me = np.asarray(lrnn.orthogonal.skew_expm(M_me), np.float64)
A_me = P_me @ np.asarray(lrnn.orthogonal.block_rotation(th_me), np.float64) @ P_me.T
print("rotation_power:", np.allclose(rotation_power(P_me, th_me, 3),
                                     np.linalg.matrix_power(A_me, 3), atol=1e-4))
half_me = np.asarray(rotation_power(P_me, th_me, 0.5), np.float64)
print("rotation_power, s = 1/2:", np.allclose(half_me @ half_me, A_me, atol=1e-4))
p_me = lrnn.layers.gru.init(jax.random.PRNGKey(1), 3, 4)
gates_me = ("z", "r", "h", "rot")
fused_me = {"kernel": jnp.concatenate([p_me[f"W_{g}"][:, 4:] for g in gates_me]).T,
            "recurrent_kernel": jnp.concatenate([p_me[f"W_{g}"][:, :4] for g in gates_me]).T,
            "bias": jnp.concatenate([p_me[f"b_{g}"] + 0.1 for g in gates_me])}
p_me = {k: v + 0.1 if k.startswith("b_") else v for k, v in p_me.items()}
h_me, x_me = jnp.asarray(rng_me.standard_normal(4)), jnp.asarray(rng_me.standard_normal(3))
print("rotgru_fused:", np.allclose(rotgru_fused(fused_me, h_me, x_me)[0],
                                   lrnn.layers.gru.cell(p_me, h_me, x_me)[0], atol=1e-5))'''

SKEW_EXPM_1 = '''\
def skew_expm(M):
    """exp(M − Mᵀ) from the eigendecomposition of the Hermitian matrix iS."""
    M = np.asarray(M, dtype=np.float64)
    S = M - M.T
    w, V = np.linalg.eigh(1j * S)                  # iS = V diag(w) Vᴴ, so S = −i V diag(w) Vᴴ
    A = (V * np.exp(-1j * w)) @ V.conj().T
    return A.real'''

SKEW_EXPM_2 = {"helpers": ['''\
def squarings_needed(S):
    """The smallest s with ‖S‖_F / 2^s < 1/2."""
    norm = np.linalg.norm(S)
    s = 0
    while norm / 2 ** s >= 0.5:
        s += 1
    return s'''], "answer": '''\
def skew_expm(M):
    M = np.asarray(M, dtype=np.float64)
    S = M - M.T
    s = squarings_needed(S)
    X = S / 2 ** s
    n = X.shape[0]
    A = np.eye(n)
    for k in range(18, 0, -1):                     # Horner: I + X (I + X/2 (I + X/3 (...)))/1
        A = np.eye(n) + X @ A / k
    for _ in range(s):
        A = A @ A
    return A'''}

ROTATION_RECURRENCE_1 = '''\
def rotation_recurrence(gamma, theta, b):
    b = np.asarray(b, dtype=np.float64)
    z = b[..., 0::2] + 1j * b[..., 1::2]
    gamma, theta = np.asarray(gamma, np.float64), np.asarray(theta, np.float64)
    out = np.empty_like(z)
    state = np.zeros(z.shape[:-2] + z.shape[-1:], complex)
    for t in range(z.shape[-2]):                   # add the input, then turn and shrink the sum
        state = gamma * np.exp(1j * theta[t]) * (state + z[..., t, :])
        out[..., t, :] = state
    x = np.empty(b.shape)
    x[..., 0::2], x[..., 1::2] = out.real, out.imag
    return x'''

ROTATION_RECURRENCE_2 = {"helpers": ['''\
def as_complex_pairs(v):
    return v[..., ::2] + 1j * v[..., 1::2]'''], "answer": '''\
def rotation_recurrence(gamma, theta, b):
    """Scan y_t = x_{t-1} + b_t (the sum before step t turns it), then x_t = λ_t y_t."""
    lam = jnp.asarray(gamma) * jnp.exp(1j * jnp.asarray(theta))          # (L, K)
    # y_t = λ_{t-1} y_{t-1} + b_t: the coefficient of step t is the previous step's λ
    shifted = jnp.concatenate([jnp.zeros_like(lam[:1]), lam[:-1]], axis=0)
    y = lrnn.linear_scan(shifted, as_complex_pairs(jnp.asarray(b)))
    x = lam * y
    return jnp.stack([jnp.real(x), jnp.imag(x)], axis=-1).reshape(jnp.shape(b))'''}

ROTATION_POWER_1 = '''\
def rotation_power(P, theta, s):
    P = np.asarray(P, np.float64)
    angles = s * np.angle(np.exp(1j * np.asarray(theta, np.float64)))   # principal angles first
    D = np.zeros_like(P)                           # D(s·θ), block by block
    for i, t in enumerate(angles):
        D[2 * i:2 * i + 2, 2 * i:2 * i + 2] = [[np.cos(t), -np.sin(t)], [np.sin(t), np.cos(t)]]
    return P @ D @ P.T'''

ROTATION_POWER_2 = '''\
def rotation_power(P, theta, s):
    P = jnp.asarray(P)
    phi = jnp.mod(jnp.asarray(theta) + jnp.pi, 2 * jnp.pi) - jnp.pi   # angles into [−π, π)
    rows = P[:, 0::2] + 1j * P[:, 1::2]            # each row of P (a column of Pᵀ) as K numbers
    turned = rows * jnp.exp(1j * s * phi)
    DsPt = jnp.stack([turned.real, turned.imag], axis=-1).reshape(P.shape).T   # D(sφ) Pᵀ
    return P @ DsPt'''

ROTGRU_1 = {"helpers": ['''\
def sigmoid(z):
    return 1 / (1 + np.exp(-z))


def rotate_in_pairs(v, angles):
    """Rotate (v_0, v_1), (v_2, v_3), ... by `angles` (the block rotation of eq. 2)."""
    c, s = np.cos(angles), np.sin(angles)
    even, odd = v[..., 0::2], v[..., 1::2]
    out = np.stack([c * even - s * odd, s * even + c * odd], axis=-1)
    return out.reshape(out.shape[:-2] + (-1,))''', '''\
def split_blocks(params):
    """The fused columns as {gate: (kernel part, recurrent part, bias part)}."""
    K, R, b = (np.asarray(params[k], np.float64) for k in ("kernel", "recurrent_kernel", "bias"))
    n = R.shape[0]
    names = ["z", "r", "h"] + (["rot"] if K.shape[1] > 3 * n else [])
    edges = [0, n, 2 * n, 3 * n, K.shape[1]]
    return {g: (K[:, edges[i]:edges[i + 1]], R[:, edges[i]:edges[i + 1]], b[edges[i]:edges[i + 1]])
            for i, g in enumerate(names)}'''], "answer": '''\
def rotgru_fused(params, h, x_t):
    blocks = split_blocks(params)
    h, x_t = np.asarray(h, np.float64), np.asarray(x_t, np.float64)

    def affine(g, state):                          # W_g [state, x_t] + b_g from the blocks
        K, R, b = blocks[g]
        return state @ R + x_t @ K + b

    z = sigmoid(affine("z", h))
    r = h * sigmoid(affine("r", h))
    if "rot" in blocks:
        r = rotate_in_pairs(r, 2 * np.pi * sigmoid(affine("rot", h)))
    h_hat = np.tanh(affine("h", r))                # the candidate reads r_t
    h_new = h + z * (h_hat - h)
    return h_new, h_new'''}

ROTGRU_2 = '''\
def rotgru_fused(params, h, x_t):
    """The given step mended: the blocks read in the order z, r; the reset gate and the
    rotation act on h_{t-1} before the candidate's recurrent columns read it."""
    R = params["recurrent_kernel"]
    n = R.shape[0]
    pre = x_t @ params["kernel"] + params["bias"]
    rec = h @ R
    z = jax.nn.sigmoid(pre[..., :n] + rec[..., :n])
    reset = jax.nn.sigmoid(pre[..., n:2 * n] + rec[..., n:2 * n])
    state = reset * h
    if pre.shape[-1] > 3 * n:
        u = 2 * jnp.pi * jax.nn.sigmoid(pre[..., 3 * n:] + rec[..., 3 * n:])
        state = rotate_pairs(state, u)
    h_hat = jnp.tanh(pre[..., 2 * n:3 * n] + state @ R[:, 2 * n:3 * n])
    h_new = (1 - z) * h + z * h_hat
    return h_new, h_new'''

VARIANTS = {
    "ex3.1-solution": [SKEW_EXPM_1, SKEW_EXPM_2],
    "ex3.2-solution": [ROTATION_RECURRENCE_1, ROTATION_RECURRENCE_2],
    "ex3.3-solution": [ROTATION_POWER_1, ROTATION_POWER_2],
    "ex3.4-solution": [ROTGRU_1, ROTGRU_2],
    "ex3.6-solution": ['first_step_backwards = 6.0',
                       'import math\n\nfirst_step_backwards = math.floor(math.pi / 2 / 0.3) + 1'],
}
