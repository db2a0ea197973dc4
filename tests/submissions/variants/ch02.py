"""Chapter 2 (the LRU): alternative answers and habit cells."""

SCRATCH = {
    "ex2.1-solution": ['''\
nu_try, theta_try = lru.ring_init(jax.random.PRNGKey(1), 8, 0.5, 0.9)
print(np.exp(-np.exp(np.asarray(nu_try))))
print(lru.ring_from_uniforms(np.array([0.3]), np.array([0.6]), r_min=0.5, r_max=0.8,
                             max_phase=np.pi))'''],
    "ex2.3-solution": ['''\
p_try = lru.init(jax.random.PRNGKey(0), 2, 4)
u_try = np.ones((5, 2), np.float32)
print(lru.hidden_states(p_try, u_try).shape, lru.apply(p_try, u_try).shape)
state_try, y_try = lru.step(p_try, lru.init_state(p_try), u_try[0])
print(state_try["x"].shape, y_try.shape)
a_try, b_try, h_try = np.full(4, 0.5), np.ones((5, 4)), np.ones(4)
x_try = lrnn.linear_scan(a_try, b_try, initial=h_try)      # runs lrnn.scan._api._check_initial
print(np.allclose(x_try, lrnn.scan.reference.linear_scan(a_try, b_try, initial=h_try)))'''],
    "ex2.4-solution": ['''\
p_bi_try = lru.init(jax.random.PRNGKey(1), 2, 4, bidirectional=True)
u_bi_try = np.ones((6, 2), np.float32)
print(lru.apply(p_bi_try, u_bi_try).shape, lru.hidden_states(p_bi_try, u_bi_try).shape)
print(lru.impulse_response(lru.init(jax.random.PRNGKey(1), 2, 4), 6).shape)'''],
}

SELF_CHECK = '''\
# my own final check against the library
rng_me = np.random.default_rng(7)
u1_me, u2_me = rng_me.uniform(size=6), rng_me.uniform(size=6)
mine = ring_from_uniforms(u1_me, u2_me, 0.4, 0.9, np.pi, 1)
lib = lru.ring_from_uniforms(u1_me, u2_me, r_min=0.4, r_max=0.9, max_phase=np.pi)
print("ring, T = 1:", all(np.allclose(m, l, rtol=1e-5, atol=1e-6) for m, l in zip(mine, lib)))
nu5, theta5 = ring_from_uniforms(u1_me, u2_me, 0.4, 0.9, np.pi, 5)
print("ring, T = 5:", np.allclose(5 * np.exp(nu5), np.exp(lib[0]), rtol=1e-5),
      np.allclose(5 * np.exp(theta5), np.exp(lib[1]), rtol=1e-5))
nu_me, _ = lru.ring_init(jax.random.PRNGKey(5), 20000, 0.3, 0.9)
modulus_me = np.exp(-np.exp(np.asarray(nu_me, np.float64)))
print("cdf:", abs(np.mean(-1 / np.log(modulus_me) <= 2.0) - memory_cdf(2.0, 0.3, 0.9)) < 0.02)
p_me = lru.init(jax.random.PRNGKey(3), 3, 5, r_min=0.5, r_max=0.95)
u_me = rng_me.standard_normal((2, 20, 3)).astype(np.float32)
x0_me = (rng_me.standard_normal((2, 5)) + 1j * rng_me.standard_normal((2, 5))).astype(np.complex64)
x_lib = lrnn.linear_scan(lru.eigenvalues(p_me), u_me @ lru.normalized_B(p_me).T, initial=x0_me)
print("states:", np.allclose(lru_hidden_states(p_me, u_me, x0_me), x_lib, rtol=1e-3, atol=1e-4))
p_bi_me = lru.init(jax.random.PRNGKey(4), 3, 5, bidirectional=True)
K_me = np.asarray(lru_bidirectional_kernel(p_bi_me, 20))
y_me = np.stack([sum(K_me[19 + k - m] @ u_me[0, m] for m in range(20)) for k in range(20)])
print("kernel:", np.allclose(y_me, lru.apply(p_bi_me, u_me[0]), rtol=1e-3, atol=1e-4))
print("gamma:", np.allclose(gamma_log_for_length(p_me["nu_log"], 20_000), p_me["gamma_log"],
                            atol=1e-3))
radii_me = rng_me.uniform(0.5, 0.9, 200_000)
mean_me = np.mean(1 / (1 - radii_me ** 2))
print("blow-up:", abs(mean_me / forward_blowup_radial(0.5, 0.9) - 1) < 0.01)'''

RING_1 = '''\
def ring_from_uniforms(u1, u2, r_min, r_max, max_phase, T):
    """λ with λ**T uniform in area on the ring, phases of λ**T in [0, max_phase]."""
    u1, u2 = np.asarray(u1, dtype=np.float64), np.asarray(u2, dtype=np.float64)
    radius_T = np.sqrt(r_min ** 2 + u1 * (r_max ** 2 - r_min ** 2))   # |λ^T|, uniform in area
    radius = radius_T ** (1.0 / T)
    nu = -np.log(radius)
    theta = u2 * max_phase / T                        # the slowest of the T roots
    return np.log(nu), np.log(theta)'''

RING_2 = {"helpers": ['''\
import math


def inverse_area(u, r_lo, r_hi):
    """The radius whose disc holds r_lo² plus the fraction u of the ring's area (/π)."""
    return math.sqrt(u * r_hi ** 2 + (1 - u) * r_lo ** 2)'''], "answer": '''\
def ring_from_uniforms(u1, u2, r_min, r_max, max_phase, T):
    u1 = np.asarray(u1, dtype=np.float64)
    u2 = np.asarray(u2, dtype=np.float64)
    nu_log = np.empty(u1.shape)
    theta_log = np.empty(u2.shape)
    for idx in np.ndindex(u1.shape):
        mu = inverse_area(float(u1[idx]), r_min, r_max)     # |μ| of μ = λ^T
        nu_log[idx] = math.log(-math.log(mu) / T)           # |λ| = |μ|^(1/T) = e^(−ν)
        theta_log[idx] = math.log(max_phase) + math.log(u2[idx]) - math.log(T)
    return nu_log, theta_log'''}

CDF_1 = '''\
def memory_cdf(t, r_min, r_max):
    t = np.asarray(t, dtype=np.float64)
    radius = np.exp(-1.0 / t)                         # τ = t exactly at this |λ|
    share = (radius ** 2 - r_min ** 2) / (r_max ** 2 - r_min ** 2)
    return np.where(radius < r_min, 0.0, np.where(radius > r_max, 1.0, share))'''

CDF_2 = {"helpers": ['''\
import math


def area_share(radius, r_min, r_max):
    """The share of the ring's area inside `radius`."""
    if radius <= r_min:
        return 0.0
    if radius >= r_max:
        return 1.0
    return (radius * radius - r_min * r_min) / (r_max * r_max - r_min * r_min)'''], "answer": '''\
def memory_cdf(t, r_min, r_max):
    t = np.asarray(t, dtype=np.float64)
    # memory <= t  <=>  ln|λ| <= −1/t
    shares = [area_share(math.exp(-1 / v), r_min, r_max) for v in t.ravel()]
    return np.array(shares).reshape(t.shape)'''}

STATES_1 = '''\
def lru_hidden_states(params, u, x_init):
    """Complex LRU states x_k, shape (..., L, N), from x_{-1} = x_init."""
    u = np.asarray(u, dtype=np.float64)
    nu = np.exp(np.asarray(params["nu_log"], np.float64))
    theta = np.exp(np.asarray(params["theta_log"], np.float64))
    lam = np.exp(-nu) * (np.cos(theta) + 1j * np.sin(theta))
    gamma = np.exp(np.asarray(params["gamma_log"], np.float64))
    B = gamma[:, None] * (np.asarray(params["B_re"]) + 1j * np.asarray(params["B_im"]))
    drive = u @ B.T                                   # (..., L, N)
    x = np.array(x_init, dtype=complex)               # the state before step 0
    states = []
    for k in range(drive.shape[-2]):                  # the recurrence, step by step
        x = lam * x + drive[..., k, :]
        states.append(x)
    return np.stack(states, axis=-2)'''

STATES_2 = '''\
import jax.numpy as jnp


def lru_hidden_states(params, u, x_init):
    lam = jnp.exp(-jnp.exp(params["nu_log"]) + 1j * jnp.exp(params["theta_log"]))
    B = (params["B_re"] + 1j * params["B_im"]) * jnp.exp(params["gamma_log"])[:, None]
    Bu = jnp.asarray(u) @ B.T
    # x_0 = lam x_init + Bu_0: fold the carried state into the first input, scan from zero
    Bu = Bu.at[..., 0, :].add(lam * jnp.asarray(x_init))
    return lrnn.linear_scan(lam, Bu)'''

KERNEL_1 = '''\
def lru_bidirectional_kernel(params, L):
    nu = np.exp(np.asarray(params["nu_log"], np.float64))
    theta = np.exp(np.asarray(params["theta_log"], np.float64))
    lam = np.exp(-nu + 1j * theta)
    gamma = np.exp(np.asarray(params["gamma_log"], np.float64))
    B = gamma[:, None] * (np.asarray(params["B_re"]) + 1j * np.asarray(params["B_im"]))
    C = np.asarray(params["C_re"]) + 1j * np.asarray(params["C_im"])
    N, H = len(lam), B.shape[1]
    C_fwd, C_bwd = C[:, :N], C[:, N:]
    K = np.zeros((2 * L - 1, H, H))
    for j in range(L):
        power = np.diag(lam ** j)
        K[L - 1 + j] += (C_fwd @ power @ B).real      # u_{k-j}, read by the forward states
        K[L - 1 - j] += (C_bwd @ power @ B).real      # u_{k+j}, read by the backward states
    K[L - 1] += np.diag(np.asarray(params["D"], np.float64))
    return K'''

KERNEL_2 = {"helpers": ['''\
import jax.numpy as jnp


def both_directions(params, u):
    """The forward and the backward LRU states for real u (..., L, H), each (..., L, N)."""
    lam = jnp.exp(-jnp.exp(params["nu_log"]) + 1j * jnp.exp(params["theta_log"]))
    B = (params["B_re"] + 1j * params["B_im"]) * jnp.exp(params["gamma_log"])[:, None]
    Bu = jnp.einsum("...lh,nh->...ln", jnp.asarray(u), B)
    return lrnn.linear_scan(lam, Bu), lrnn.linear_scan(lam, Bu, reverse=True)'''], "answer": '''\
def lru_bidirectional_kernel(params, L):
    H, N = params["D"].shape[0], params["nu_log"].shape[0]
    u = np.zeros((H, 2 * L - 1, H), np.float32)       # channel i: an impulse at step L - 1
    u[:, L - 1, :] = np.eye(H)
    fwd, bwd = both_directions(params, u)
    C = jnp.asarray(params["C_re"]) + 1j * jnp.asarray(params["C_im"])
    y = jnp.real(jnp.einsum("hn,iln->ilh", C[:, :N], fwd)
                 + jnp.einsum("hn,iln->ilh", C[:, N:], bwd)) + params["D"] * u
    # the output at step L - 1 + j is the lag j: K[L - 1 + j][:, i] = y[i, L - 1 + j]
    return jnp.transpose(y, (1, 2, 0))'''}

GAMMA_1 = '''\
def gamma_log_for_length(nu_log, T):
    nu_log = np.asarray(nu_log, dtype=np.float64)
    s = np.exp(-2 * np.exp(nu_log))                   # |λ|²
    total = 0.0
    for k in range(T):                                # E|x_k|² / γ² = 1 + s + … + s^k
        total = total + (1 - s ** (k + 1)) / (1 - s)
    return np.log(np.sqrt(T / total))'''

GAMMA_2 = {"helpers": ['''\
def geometric(s, n):
    """1 + s + … + s^(n−1), with 1 − s = −expm1(log s) kept exact near s = 1."""
    return -np.expm1(n * np.log(s)) / -np.expm1(np.log(s))'''], "answer": '''\
def gamma_log_for_length(nu_log, T):
    nu = np.exp(np.asarray(nu_log, dtype=np.float64))
    s = np.exp(-2.0 * nu)
    # Σ_{k<T} Σ_{i≤k} s^i = (T − s·(1 + … + s^(T−1))) / (1 − s)
    summed = (T - s * geometric(s, T)) / -np.expm1(-2.0 * nu)
    return 0.5 * (np.log(T) - np.log(summed))'''}

BLOWUP_1 = '''\
def forward_blowup_radial(r_min, r_max):
    if r_max == r_min:                                # a thin ring: one eigenvalue modulus
        return 1.0 / (1.0 - r_max ** 2)
    area = 0.5 * (np.log((1 + r_max) / (1 - r_max)) - np.log((1 + r_min) / (1 - r_min)))
    return float(area / (r_max - r_min))'''

BLOWUP_2 = {"helpers": ['''\
import math


def antiderivative(r):
    """∫_0^r dq / (1 − q²) = ½ (log(1 + r) − log(1 − r))."""
    return 0.5 * (math.log1p(r) - math.log1p(-r))'''], "answer": '''\
def forward_blowup_radial(r_min, r_max):
    width = r_max - r_min
    if width == 0:
        return 1 / ((1 - r_max) * (1 + r_max))
    return (antiderivative(r_max) - antiderivative(r_min)) / width'''}

VARIANTS = {
    "ex2.1-solution": [RING_1, RING_2],
    "ex2.2-solution": [CDF_1, CDF_2],
    "ex2.3-solution": [STATES_1, STATES_2],
    "ex2.4-solution": [KERNEL_1, KERNEL_2],
    "ex2.5-solution": [GAMMA_1, GAMMA_2],
    "ex2.6-solution": [BLOWUP_1, BLOWUP_2],
    "ex2.8-solution": ['share_remembering_100 = 0.024',
                       'r_lo, r_hi = 0.5, 0.999\nthreshold = np.exp(-1 / 100)\nshare_remembering_100 = (r_hi**2 - threshold**2) / (r_hi**2 - r_lo**2)'],
}
