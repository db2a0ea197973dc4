"""Chapter 4 (normalisation): alternative answers and habit cells."""

SCRATCH = {
    "ex4.4-solution": ['''\
p_try = lrnn.layers.rotrnn.init(jax.random.PRNGKey(0), 3, 8, 2, bidirectional=True)
x_try = lrnn.layers.rotrnn.hidden_states(p_try, jnp.ones((5, 3)), scale_first_state=True,
                                         reverse=True)
print(x_try.shape, float(jnp.sum(x_try[-1] ** 2)))
print(lrnn.layers.rotrnn.apply(p_try, jnp.ones((5, 3))).shape)'''],
}

SELF_CHECK = '''\
# my own final check against the library and the formulas
rng_me = np.random.default_rng(9)
P_me = np.asarray(lrnn.orthogonal.skew_expm(rng_me.standard_normal((4, 4))), np.float64)
B_me = rng_me.standard_normal((4, 3))
th_me = np.array([0.2, 1.0])
print("xi at T = 1:", np.isclose(xi_correlated(P_me, th_me, B_me, 0.9, 0.5, 1),
                                 1 / np.sqrt(np.sum(B_me ** 2))))
print("xi at rho = 0, long:", np.isclose(xi_correlated(P_me, th_me, B_me, 0.9, 0.0, 400),
                                          np.sqrt((1 - 0.81) / np.sum(B_me ** 2))))
lam_me = np.array([0.5, 0.9j], np.complex64)
B2_me = np.ones((2, 2), np.complex64)
print("t to 90 %:", steps_to_fraction(lam_me, B2_me, 0.9), steps_to_fraction(lam_me[1:], B2_me[1:], 0.9))
p_me = lrnn.layers.rotrnn.init(jax.random.PRNGKey(2), 3, 8, 2)
u_me = jnp.asarray(rng_me.standard_normal((2, 7, 3)), jnp.float32)
for scale in (False, True):
    print("backward states", "scaled" if scale else "plain", np.allclose(
        rotrnn_backward_states(p_me, u_me, scale_first_state=scale),
        lrnn.layers.rotrnn.hidden_states(p_me, u_me, scale_first_state=scale, reverse=True),
        atol=1e-4))
A_me = np.asarray(lrnn.orthogonal.skew_expm(rng_me.standard_normal((4, 4))), np.float64)
alpha_me = 1 / np.sqrt(0.81 + np.sum(B_me ** 2))
print("Theorem 1 when mu = 0:", np.allclose(expected_sq_norm_biased(
    A_me, B_me, 0.9, alpha_me, np.eye(4)[0], np.zeros(3), 5), 1))
print("no input: the norm shrinks by (alpha gamma)^2:", np.allclose(expected_sq_norm_biased(
    A_me, np.zeros((4, 2)), 0.5, 1.0, np.eye(4)[0], np.ones(2), 3), [1, 0.25, 0.0625]))'''

XI_1 = '''\
def xi_correlated(P, theta, B, gamma, rho, T):
    P, B = np.asarray(P, np.float64), np.asarray(B, np.float64)
    beta = P.T @ B                                   # B in the rotated basis
    total = 0.0
    for i, th in enumerate(np.asarray(theta, np.float64)):    # one rotation pair at a time
        weight = np.sum(beta[2 * i:2 * i + 2] ** 2)
        lam = gamma * np.exp(1j * th)
        # z_t = lam z_{t-1} + u_t with a unit AR(1) input: e = E|z|^2, m = E[z_t u_t]
        e, m = 0.0, 0.0
        for t in range(T):
            e = gamma ** 2 * e + 2 * (lam * rho * m).real + 1
            m = lam * rho * m + 1
        total += weight * e
    # E‖x_T‖² = ξ² total = 1
    return float(1 / np.sqrt(total))'''

XI_2 = {"helpers": ['''\
from scipy.linalg import toeplitz'''], "answer": '''\
def xi_correlated(P, theta, B, gamma, rho, T):
    """E‖x_T‖² = ξ² Σ_i ‖β_i‖² Re(vᴴ R v), v_j = (γ e^{iθ_i})^j, R_jk = ρ^|j−k| (j, k < T)."""
    P, B = np.asarray(P, np.float64), np.asarray(B, np.float64)
    rotated = P.T @ B
    w = (rotated[0::2] ** 2).sum(axis=1) + (rotated[1::2] ** 2).sum(axis=1)
    R = toeplitz(rho ** np.arange(T))
    powers = (gamma * np.exp(1j * np.asarray(theta, np.float64))[:, None]) ** np.arange(T)
    quad = np.einsum("ij,jk,ik->i", powers.conj(), R, powers).real
    return float(1 / np.sqrt(w @ quad))'''}

BIAS_1 = '''\
def expected_sq_norm_biased(A, B, gamma, alpha, x1, mu, T):
    A, B = np.asarray(A, float), np.asarray(B, float)
    x1, mu = np.asarray(x1, float), np.asarray(mu, float)
    # E‖x‖² = ‖E x‖² + (the spread around the mean); the spread follows Theorem 1's
    # recursion and starts at 0 because x_1 is fixed
    mean, spread = x1.copy(), 0.0
    out = [x1 @ x1]
    for t in range(1, T):
        mean = alpha * (gamma * A @ mean + B @ mu)
        spread = alpha ** 2 * (gamma ** 2 * spread + np.trace(B.T @ B))
        out.append(mean @ mean + spread)
    return np.array(out)'''

BIAS_2 = {"helpers": ['''\
import functools


def moments_step(carry, _, A, B, gamma, alpha, mu):
    """(mean, covariance) of x_t from those of x_{t-1}."""
    m, C = carry
    m = alpha * (gamma * A @ m + B @ mu)
    C = alpha ** 2 * (gamma ** 2 * A @ C @ A.T + B @ B.T)
    return (m, C), m @ m + jnp.trace(C)'''], "answer": '''\
def expected_sq_norm_biased(A, B, gamma, alpha, x1, mu, T):
    """Mean and full covariance matrix of the state, stepped with lax.scan."""
    A, B, x1, mu = (jnp.asarray(v, jnp.float32) for v in (A, B, x1, mu))
    start = (x1, jnp.zeros((x1.shape[0], x1.shape[0])))
    step = functools.partial(moments_step, A=A, B=B, gamma=gamma, alpha=alpha, mu=mu)
    _, later = jax.lax.scan(step, start, None, length=T - 1)
    return jnp.concatenate([jnp.array([x1 @ x1]), later])'''}

NORM_1 = '''\
def steps_to_fraction(lam, B, q):
    r2 = np.abs(np.asarray(lam, np.complex128)) ** 2
    b = np.sum(np.abs(np.asarray(B, np.complex128)) ** 2, axis=1)
    limit = np.sum(b / (1 - r2))                     # eq. 27 as t -> infinity
    e = np.zeros(len(b))
    t = 0
    while True:                                      # step the expected norms forward
        t += 1
        e = r2 * e + b                               # E|x_t,k|^2 from E|x_t-1,k|^2
        if e.sum() >= q * limit:
            return t'''

NORM_2 = {"helpers": ['''\
def channel_steps(r2, q):
    """First t with |lambda|^(2t) <= 1 - q, channel by channel."""
    return np.maximum(1, np.ceil(np.log(1 - q) / np.log(np.clip(r2, 1e-30, None))))'''],
          "answer": '''\
def steps_to_fraction(lam, B, q):
    """Every t up to the slowest channel at once, then the first that reaches q."""
    r2 = jnp.abs(jnp.asarray(lam)) ** 2
    b = jnp.sum(jnp.abs(jnp.asarray(B)) ** 2, axis=1)
    weights = b / (1 - r2)
    weights = weights / weights.sum()
    last = int(channel_steps(np.asarray(r2, np.float64), q).max()) + 2
    t = jnp.arange(1, last + 1)
    fraction = 1 - jnp.sum(weights * r2 ** t[:, None], axis=1)
    return int(t[jnp.argmax(fraction >= q)])'''}

STATES_1 = {"helpers": ['''\
from scipy.linalg import expm


def block_rotation_np(theta):
    """D(θ): 2×2 rotation blocks on the diagonal."""
    D = np.zeros((2 * len(theta), 2 * len(theta)))
    for i, t in enumerate(theta):
        D[2 * i:2 * i + 2, 2 * i:2 * i + 2] = [[np.cos(t), -np.sin(t)], [np.sin(t), np.cos(t)]]
    return D'''], "answer": '''\
def rotrnn_backward_states(params, u, scale_first_state=False):
    M, theta, nu_log, B = (np.asarray(params[k], np.float64)
                           for k in ("M", "theta", "nu_log", "B"))
    u = np.asarray(u, np.float64)
    H, n, _ = B.shape
    L = u.shape[-2]
    A = np.empty((H, n, n))
    for h in range(H):
        P = expm(M[h] - M[h].T)
        A[h] = P @ block_rotation_np(theta[h]) @ P.T
    gamma = np.exp(-np.exp(nu_log))
    B_norm2 = np.sum(B ** 2, axis=(1, 2))
    xi = np.sqrt((1 - gamma ** 2) / B_norm2)
    x = np.zeros(u.shape[:-2] + (H, n))              # x_{L+1} = 0
    out = [None] * L
    for t in range(L - 1, -1, -1):                   # t = L, ..., 1 (0-based L-1, ..., 0)
        Bu = np.einsum("hnk,...k->...hn", B, u[..., t, :])
        if t == L - 1 and scale_first_state:         # the backward pass starts here
            x = Bu / np.sqrt(B_norm2)[:, None]
        else:
            x = gamma[:, None] * np.einsum("hij,...hj->...hi", A, x) + xi[:, None] * Bu
        out[t] = x
    return np.stack(out, axis=-3)'''}

STATES_2 = '''\
def rotrnn_backward_states(params, u, scale_first_state=False):
    # reverse time, run the forward recurrence (first state = u_L's), reverse back
    M = jnp.asarray(params["M"])
    P = jnp.stack([lrnn.orthogonal.skew_expm(M[h]) for h in range(M.shape[0])])   # (H, n, n)
    phase = jnp.exp(1j * jnp.asarray(params["theta"]))              # (H, n/2)
    gamma = jnp.exp(-jnp.exp(jnp.asarray(params["nu_log"])))        # (H,)
    B = jnp.asarray(params["B"])
    xi = jnp.sqrt((1 - gamma ** 2) / jnp.sum(B ** 2, axis=(1, 2)))
    u_rev = jnp.flip(jnp.asarray(u), axis=-2)
    inputs = xi[:, None] * jnp.einsum("hnk,...lk->...lhn", B, u_rev)
    if scale_first_state:                        # ξ B u_L / √(1 − γ²), the first of u_rev
        first = inputs[..., 0, :, :] / jnp.sqrt(1 - gamma ** 2)[:, None]
        inputs = jnp.concatenate([first[..., None, :, :], inputs[..., 1:, :, :]], axis=-3)

    def transition(x):                           # γ P D(θ) Pᵀ x, every head at once
        y = jnp.einsum("hji,...hj->...hi", P, x)
        z = (y[..., 0::2] + 1j * y[..., 1::2]) * phase
        y = jnp.stack([z.real, z.imag], axis=-1).reshape(y.shape)
        return gamma[:, None] * jnp.einsum("hij,...hj->...hi", P, y)

    def step(x, b_t):
        x = transition(x) + b_t
        return x, x

    x0 = jnp.zeros(inputs.shape[:-3] + inputs.shape[-2:])
    _, xs = jax.lax.scan(step, x0, jnp.moveaxis(inputs, -3, 0))
    return jnp.flip(jnp.moveaxis(xs, 0, -3), axis=-3)'''

VARIANTS = {
    "ex4.1-solution": [XI_1, XI_2],
    "ex4.2-solution": [BIAS_1, BIAS_2],
    "ex4.3-solution": [NORM_1, NORM_2],
    "ex4.4-solution": [STATES_1, STATES_2],
    "ex4.6-solution": ['drift_quarter_turn = 0.27',
                       'lam_head = 0.9j\nterms = [lam_head ** j * np.conj(lam_head) ** k * 0.8 ** abs(j - k)\n'
                       '         for j in range(3) for k in range(3)]\n'
                       'drift_quarter_turn = (1 - 0.81) * sum(terms).real'],
}
