"""lrnn.layers.rotrnn against float64 NumPy transcriptions of the RotRNN paper (Dolga et al., 2024):
Lemmas 2–3, eq. 6 with the normalisation ξ of §3.1, Theorem 1, App. B.1–B.3."""
import math

import jax
import jax.numpy as jnp
import jax.test_util
import numpy as np
import pytest
import scipy.linalg
from scipy import stats

from lrnn.layers import rotrnn

pytestmark = pytest.mark.usefixtures("x64")

METHODS = ["sequential", "associative", "chunked"]


# ----------------------------------------------------------------------------------------
# NumPy transcriptions: dense matrices, explicit loops
# ----------------------------------------------------------------------------------------

def np_block_rotation(theta):
    k = theta.shape[0]
    out = np.zeros((2 * k, 2 * k))
    for i in range(k):
        c, s = math.cos(theta[i]), math.sin(theta[i])
        out[2 * i:2 * i + 2, 2 * i:2 * i + 2] = [[c, -s], [s, c]]
    return out


def np_parts(params):
    """Per head: γ_h, P_h = expm(M - Mᵀ), A_h = γ P D(θ) Pᵀ, ξ_h, from the paper's formulas."""
    p = {k: np.asarray(v, dtype=np.float64) for k, v in params.items()}
    heads = p["M"].shape[0]
    gam = np.exp(-np.exp(p["nu_log"]))
    P = np.stack([scipy.linalg.expm(m - m.T) for m in p["M"]])
    A = np.stack([gam[h] * P[h] @ np_block_rotation(p["theta"][h]) @ P[h].T for h in range(heads)])
    xi = np.sqrt((1 - gam ** 2) / np.array([np.trace(b.T @ b) for b in p["B"]]))
    return p, gam, P, A, xi


def np_states(params, u, *, scale_first_state=False, reverse=False):
    """Eq. 6 for one sequence u (L, K): x_t = A_h x_{t-1} + ξ_h B_h u_t, x_0 = 0.
    scale_first_state: the first input term is divided by sqrt(1 - γ_h²)."""
    p, gam, _, A, xi = np_parts(params)
    heads, n, _ = p["B"].shape
    length = u.shape[0]
    order = list(reversed(range(length))) if reverse else list(range(length))
    xs = np.zeros((length, heads, n))
    for h in range(heads):
        x = np.zeros(n)
        for step, t in enumerate(order):
            drive = xi[h] * p["B"][h] @ u[t]
            if scale_first_state and step == 0:
                drive = drive / math.sqrt(1 - gam[h] ** 2)
            x = A[h] @ x + drive
            xs[t, h] = x
    return xs


def np_apply(params, u, *, scale_first_state=False):
    p = {k: np.asarray(v, dtype=np.float64) for k, v in params.items()}
    length = u.shape[0]
    x = np_states(params, u, scale_first_state=scale_first_state).reshape(length, -1)
    y = np.stack([p["C"] @ x[t] + p["D"] * u[t] for t in range(length)])
    if "C_rev" in p:
        xr = np_states(params, u, scale_first_state=scale_first_state, reverse=True)
        xr = xr.reshape(length, -1)
        y = y + np.stack([p["C_rev"] @ xr[t] for t in range(length)])
    return y


def batched(fn, u, **kw):
    lead = u.shape[:-2]
    outs = [fn(u[idx], **kw) for idx in np.ndindex(*lead)]
    return np.stack(outs).reshape(*lead, *outs[0].shape)


# ----------------------------------------------------------------------------------------
# Initialisation (App. B.3)
# ----------------------------------------------------------------------------------------

@pytest.mark.parametrize("bidirectional", [False, True])
def test_init_shapes_and_ranges(bidirectional):
    params = rotrnn.init(jax.random.key(0), 3, 12, 2, gamma_min=0.5, gamma_max=0.8,
                         max_phase=math.pi / 10, bidirectional=bidirectional)
    shapes = {"M": (2, 6, 6), "theta": (2, 3), "nu_log": (2,), "B": (2, 6, 3), "C": (3, 12),
              "D": (3,)}
    if bidirectional:
        shapes["C_rev"] = (3, 12)
    assert {k: v.shape for k, v in params.items()} == shapes
    g = np.asarray(rotrnn.gamma(params))
    np.testing.assert_allclose(g, np.exp(-np.exp(np.asarray(params["nu_log"]))), rtol=1e-14)
    assert np.all((g >= 0.5) & (g <= 0.8))
    theta = np.asarray(params["theta"])
    assert np.all((theta >= 0) & (theta <= math.pi / 10))
    again = rotrnn.init(jax.random.key(0), 3, 12, 2, gamma_min=0.5, gamma_max=0.8,
                        max_phase=math.pi / 10, bidirectional=bidirectional)
    other = rotrnn.init(jax.random.key(1), 3, 12, 2, gamma_min=0.5, gamma_max=0.8,
                        max_phase=math.pi / 10, bidirectional=bidirectional)
    for name in params:
        np.testing.assert_array_equal(params[name], again[name])
        assert not np.allclose(params[name], other[name]), name


def test_init_gamma_and_theta_are_uniform():
    """γ = exp(-exp(ν_log)) uniform on [gamma_min, gamma_max] (App. B.3) and θ uniform on
    [0, max_phase]: KS statistics below the 0.1 % critical value 1.95/sqrt(n)."""
    heads = 4000
    params = rotrnn.init(jax.random.key(3), 1, 2 * heads, heads, gamma_min=0.9, gamma_max=0.999,
                         max_phase=2.0)
    crit = 1.95 / math.sqrt(heads)
    g = np.asarray(rotrnn.gamma(params))
    assert stats.kstest((g - 0.9) / 0.099, "uniform").statistic < crit
    assert stats.kstest(np.asarray(params["theta"]).ravel() / 2.0, "uniform").statistic < crit
    # Power: ν_log uniform between the bounds instead (γ crowds towards 0.999) fails it.
    lo, hi = math.log(-math.log(0.999)), math.log(-math.log(0.9))
    nu_log = np.random.default_rng(0).uniform(lo, hi, heads)
    assert stats.kstest((np.exp(-np.exp(nu_log)) - 0.9) / 0.099, "uniform").statistic > 5 * crit


# ----------------------------------------------------------------------------------------
# Lemmas 2–3, ξ
# ----------------------------------------------------------------------------------------

def test_transition_is_gamma_times_a_rotation():
    params = rotrnn.init(jax.random.key(1), 3, 12, 2)
    _, gam, P_ref, A_ref, _ = np_parts(params)
    P = np.asarray(rotrnn.P(params))
    A = np.asarray(rotrnn.transition(params))
    assert A.shape == (2, 6, 6)
    np.testing.assert_allclose(P, P_ref, atol=1e-12)
    np.testing.assert_allclose(A, A_ref, atol=1e-12)
    eye = np.eye(6)
    for h in range(2):
        # Lemma 2: P ∈ SO(n); Lemma 3: A/γ = P D Pᵀ ∈ SO(n).
        np.testing.assert_allclose(P[h] @ P[h].T, eye, atol=1e-12)
        assert np.linalg.det(P[h]) == pytest.approx(1.0, abs=1e-12)
        R = A[h] / gam[h]
        np.testing.assert_allclose(R @ R.T, eye, atol=1e-12)
        np.testing.assert_allclose(R.T @ R, eye, atol=1e-12)
        assert np.linalg.det(R) == pytest.approx(1.0, abs=1e-12)
        # Its spectrum is e^{±iθ} (similar to D(θ)).
        theta = np.asarray(params["theta"][h])
        expected = np.sort_complex(np.concatenate([np.exp(1j * theta), np.exp(-1j * theta)]))
        np.testing.assert_allclose(np.sort_complex(np.linalg.eigvals(R)), expected, atol=1e-9)
    # P is a genuine change of basis here, not the identity.
    assert np.abs(P - eye).max() > 0.1


def test_xi_formula_for_any_B(rng):
    params = rotrnn.init(jax.random.key(2), 3, 8, 2, gamma_min=0.3, gamma_max=0.99)
    _, gam, _, _, xi_ref = np_parts(params)
    np.testing.assert_allclose(rotrnn.xi(params), xi_ref, rtol=1e-12)
    # After an arbitrary change of B (as in training) ξ is recomputed: Tr[(ξB)ᵀ(ξB)] = 1 - γ².
    for scale in (1e-3, 1.0, 250.0):
        B = scale * rng.standard_normal((2, 4, 3)) * np.array([1.0, 5.0, 0.1])
        changed = dict(params, B=jnp.asarray(B))
        xi = np.asarray(rotrnn.xi(changed))
        trace = np.array([np.trace((xi[h] * B[h]).T @ (xi[h] * B[h])) for h in range(2)])
        np.testing.assert_allclose(trace, 1 - gam ** 2, rtol=1e-12)


# ----------------------------------------------------------------------------------------
# Eq. 6 and the layer vs explicit loops
# ----------------------------------------------------------------------------------------

@pytest.mark.parametrize("scale_first_state", [False, True])
@pytest.mark.parametrize("reverse", [False, True])
@pytest.mark.parametrize("shape", [(1, 3), (7, 3), (2, 3, 5, 3)])
def test_hidden_states_match_eq_6_loop(scale_first_state, reverse, shape, rng):
    params = rotrnn.init(jax.random.key(4), 3, 8, 2, gamma_min=0.6, gamma_max=0.95)
    u = rng.standard_normal(shape)
    x = rotrnn.hidden_states(params, u, scale_first_state=scale_first_state, reverse=reverse)
    assert x.shape == (*shape[:-1], 2, 4)
    ref = batched(lambda v: np_states(params, v, scale_first_state=scale_first_state,
                                      reverse=reverse), u)
    np.testing.assert_allclose(x, ref, rtol=1e-10, atol=1e-12)


@pytest.mark.parametrize("method", METHODS)
def test_every_scan_method_is_forwarded(method, rng):
    params = rotrnn.init(jax.random.key(6), 3, 8, 2, gamma_min=0.6, gamma_max=0.95,
                         bidirectional=True)
    u = rng.standard_normal((2, 9, 3))
    x = rotrnn.hidden_states(params, u, reverse=True, scan_method=method)
    np.testing.assert_allclose(x, batched(lambda v: np_states(params, v, reverse=True), u),
                               rtol=1e-10, atol=1e-12)
    np.testing.assert_allclose(rotrnn.apply(params, u, scan_method=method),
                               batched(lambda v: np_apply(params, v), u), rtol=1e-10, atol=1e-12)


@pytest.mark.parametrize("bidirectional", [False, True])
@pytest.mark.parametrize("scale_first_state, shape", [(False, (1, 3)), (True, (6, 3)),
                                                      (False, (2, 5, 3))])
def test_apply_matches_C_concat_x_plus_D_u(bidirectional, scale_first_state, shape, rng):
    params = rotrnn.init(jax.random.key(5), 3, 12, 2, bidirectional=bidirectional)
    u = rng.standard_normal(shape)
    y = rotrnn.apply(params, u, scale_first_state=scale_first_state)
    assert y.shape == shape
    ref = batched(lambda v: np_apply(params, v, scale_first_state=scale_first_state), u)
    np.testing.assert_allclose(y, ref, rtol=1e-10, atol=1e-12)


def test_gradients_finite_and_checked(rng):
    params = rotrnn.init(jax.random.key(7), 3, 8, 2, bidirectional=True)
    u = rng.standard_normal((3, 3))
    # Compiled once: differentiating expm (Lemma 2) op by op is slow.
    loss = jax.jit(lambda p: jnp.sum(rotrnn.apply(p, u, scan_method="sequential") ** 2))
    jax.test_util.check_grads(loss, (params,), order=1, modes=("rev",))
    grads = jax.grad(loss)(params)
    assert set(grads) == set(params)
    assert all(np.all(np.isfinite(g)) for g in grads.values())
    assert np.abs(np.asarray(grads["M"])).max() > 0      # P is learned through expm


# ----------------------------------------------------------------------------------------
# Theorem 1 by Monte Carlo
# ----------------------------------------------------------------------------------------

def _state_energy(params, samples, length, key, **kw):
    u = jax.random.normal(key, (samples, length, params["B"].shape[-1]))   # white noise
    x = rotrnn.hidden_states(params, u, **kw)
    e = np.sum(np.asarray(x) ** 2, axis=-1)                                # (S, L, H)
    return e.mean(axis=0), e.std(axis=0, ddof=1) / math.sqrt(samples)


@pytest.mark.parametrize("arbitrary_B", [False, True])
def test_theorem_1_monte_carlo(arbitrary_B, rng):
    """White noise u_t ~ N(0, I): E‖x_t‖² = 1 for every t with scale_first_state=True
    (Theorem 1, α = 1), and 1 - γ^{2t} without it, per head, t = 1..T. Each of the H·T means
    is within 4 standard errors of its target (two-sided, P ≈ 6e-5 each under the theorem)."""
    heads, n, k, length, samples = 2, 6, 3, 12, 4000
    params = rotrnn.init(jax.random.key(8), k, heads * n, heads, gamma_min=0.4, gamma_max=0.9)
    if arbitrary_B:
        # Any B, e.g. after training: ξ is recomputed, the theorem still holds.
        B = rng.standard_normal((heads, n, k)) * np.array([3.0, 0.2, 7.0])
        params = dict(params, B=jnp.asarray(B))
    g = np.asarray(rotrnn.gamma(params))
    t = np.arange(1, length + 1)[:, None]

    mean, se = _state_energy(params, samples, length, jax.random.key(9), scale_first_state=True)
    assert np.all(np.abs(mean - 1.0) < 4 * se)
    # Power: at t = 1 the unscaled target 1 - γ² is far from what was measured.
    assert np.all(np.abs(mean[0] - (1 - g ** 2)) > 10 * se[0])

    mean, se = _state_energy(params, samples, length, jax.random.key(10))
    assert np.all(np.abs(mean - (1 - g[None, :] ** (2 * t))) < 4 * se)
    assert np.all(np.abs(mean[0] - 1.0) > 10 * se[0])


# ----------------------------------------------------------------------------------------
# Errors
# ----------------------------------------------------------------------------------------

@pytest.mark.parametrize("args, kwargs, name", [
    ((4, 12, 5), {}, "n_heads"),                       # 5 does not divide 12
    ((4, 12, 4), {}, "d_state"),                       # n = 3 is odd
    ((4, 0, 2), {}, "d_state"),
    ((0, 8, 2), {}, "d_model"),
    ((4, 8, 2), dict(gamma_min=0.0), "gamma_min"),
    ((4, 8, 2), dict(gamma_max=1.0), "gamma_max"),
    ((4, 8, 2), dict(gamma_min=-0.5), "gamma_min"),
    ((4, 8, 2), dict(gamma_min=0.99, gamma_max=0.9), "gamma_min"),
    ((4, 8, 2), dict(max_phase=0.0), "max_phase"),
])
def test_init_errors(args, kwargs, name):
    with pytest.raises(ValueError, match=f"`{name}`"):
        rotrnn.init(jax.random.key(0), *args, **kwargs)


def test_error_messages_say_what_was_expected():
    with pytest.raises(ValueError, match=r"`n_heads`: got 5, expected a divisor of d_state = 12"):
        rotrnn.init(jax.random.key(0), 4, 12, 5)
    with pytest.raises(ValueError, match=r"`d_state`: got 12, expected .* = 3 to be even"):
        rotrnn.init(jax.random.key(0), 4, 12, 4)


@pytest.mark.parametrize("u", [np.zeros((5, 4)), np.zeros(3), np.zeros((0, 3)),
                               np.zeros((5, 3), complex)])
def test_layer_rejects_bad_input(u):
    params = rotrnn.init(jax.random.key(0), 3, 8, 2)
    for fn in (rotrnn.apply, rotrnn.hidden_states):
        with pytest.raises(ValueError, match="`u`"):
            fn(params, u)
