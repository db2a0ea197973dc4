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
print(lrnn.layers.gru.cell(p_try, jnp.zeros(4), jnp.ones(3))[0])'''],
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
print("rotation_recurrence:", np.allclose(rotation_recurrence(g_me, th_steps_me, b_me),
                                          lrnn.rotation_scan(g_me, th_me, b_me), atol=1e-4))
P_me = np.asarray(lrnn.orthogonal.skew_expm(M_me), np.float64)
A_me = P_me @ np.asarray(lrnn.orthogonal.block_rotation(th_me), np.float64) @ P_me.T
print("rotation_power:", np.allclose(rotation_power(P_me, th_me, 3),
                                     np.linalg.matrix_power(A_me, 3), atol=1e-4))
half_me = np.asarray(rotation_power(P_me, th_me, 0.5), np.float64)
print("rotation_power, s = 1/2:", np.allclose(half_me @ half_me, A_me, atol=1e-4))
p_me = lrnn.layers.gru.init(jax.random.PRNGKey(1), 3, 4)
h_me, x_me = jnp.asarray(rng_me.standard_normal(4)), jnp.asarray(rng_me.standard_normal(3))
print("rotgru_cell:", np.allclose(rotgru_cell(p_me, h_me, x_me)[0],
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
    for t in range(z.shape[-2]):                   # K complex channels, a new factor each step
        state = gamma * np.exp(1j * theta[t]) * state + z[..., t, :]
        out[..., t, :] = state
    x = np.empty(b.shape)
    x[..., 0::2], x[..., 1::2] = out.real, out.imag
    return x'''

ROTATION_RECURRENCE_2 = '''\
def rotation_recurrence(gamma, theta, b):
    """The pairs rotated with this step's cos and sin in a lax.scan, no complex numbers."""
    b = jnp.asarray(b)
    c = jnp.asarray(gamma) * jnp.cos(jnp.asarray(theta))          # (L, K)
    s = jnp.asarray(gamma) * jnp.sin(jnp.asarray(theta))
    even, odd = b[..., 0::2], b[..., 1::2]          # (..., L, K)

    def step(carry, inputs):
        p, q = carry
        u, v, c_t, s_t = inputs
        p, q = c_t * p - s_t * q + u, s_t * p + c_t * q + v
        return (p, q), (p, q)

    zeros = jnp.zeros(even.shape[:-2] + even.shape[-1:], b.dtype)
    _, (P, Q) = jax.lax.scan(step, (zeros, zeros),
                             (jnp.moveaxis(even, -2, 0), jnp.moveaxis(odd, -2, 0), c, s))
    x = jnp.stack([jnp.moveaxis(P, 0, -2), jnp.moveaxis(Q, 0, -2)], axis=-1)
    return x.reshape(b.shape)'''

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
    return out.reshape(out.shape[:-2] + (-1,))'''], "answer": '''\
def rotgru_cell(params, h, x_t):
    p = {k: np.asarray(v, np.float64) for k, v in params.items()}
    h, x_t = np.asarray(h, np.float64), np.asarray(x_t, np.float64)
    n = h.shape[-1]

    def affine(g, state_part, input_part):         # W_g [state, input] + b_g, W_g split in two
        W = p[f"W_{g}"]
        return state_part @ W[:, :n].T + input_part @ W[:, n:].T + p[f"b_{g}"]

    z = sigmoid(affine("z", h, x_t))
    d = h * sigmoid(affine("r", h, x_t))
    r = rotate_in_pairs(d, 2 * np.pi * sigmoid(affine("rot", h, x_t))) if "W_rot" in p else d
    h_hat = np.tanh(affine("h", r, x_t))
    h_new = h + z * (h_hat - h)
    return h_new, h_new'''}

ROTGRU_2 = '''\
def rotgru_cell(params, h, x_t):
    """The given step with its two lines mended: the gated state turns, z weighs the candidate."""
    xc = jnp.concatenate([h, x_t], axis=-1)
    z = jax.nn.sigmoid(xc @ params["W_z"].T + params["b_z"])
    reset = jax.nn.sigmoid(xc @ params["W_r"].T + params["b_r"])
    state = reset * h
    if "W_rot" in params:
        u = 2 * jnp.pi * jax.nn.sigmoid(xc @ params["W_rot"].T + params["b_rot"])
        state = rotate_pairs(state, u)
    h_hat = jnp.tanh(jnp.concatenate([state, x_t], axis=-1) @ params["W_h"].T + params["b_h"])
    h_new = z * h_hat + (1 - z) * h
    return h_new, h_new'''

VARIANTS = {
    "ex3.1-solution": [SKEW_EXPM_1, SKEW_EXPM_2],
    "ex3.2-solution": [ROTATION_RECURRENCE_1, ROTATION_RECURRENCE_2],
    "ex3.3-solution": [ROTATION_POWER_1, ROTATION_POWER_2],
    "ex3.4-solution": [ROTGRU_1, ROTGRU_2],
    "ex3.6-solution": ['first_step_backwards = 6.0',
                       'import math\n\nfirst_step_backwards = math.floor(math.pi / 2 / 0.3) + 1'],
}
