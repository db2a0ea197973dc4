"""lrnn.layers.lru against float64 NumPy transcriptions of the LRU paper (Orvieto et al., 2023):
Appendix A code, Lemma 3.2 (ring initialisation), Prop. 3.3 (forward blow-up) and the
γ normalisation of §3.4."""
import math

import jax
import jax.numpy as jnp
import jax.test_util
import numpy as np
import pytest
from scipy import integrate, stats

from lrnn.layers import lru

pytestmark = pytest.mark.usefixtures("x64")

METHODS = ["sequential", "associative", "chunked"]


# ----------------------------------------------------------------------------------------
# NumPy transcriptions
# ----------------------------------------------------------------------------------------

def np_init(u1, u2, z_bre, z_bim, z_cre, z_cim, z_d, r_min, r_max, max_phase):
    """Appendix A, init_lru_parameters, with its random draws passed in. C's normaliser is
    its number of columns (N, or 2N for the bidirectional layer)."""
    n, h = z_bre.shape
    nu_log = np.log(-0.5 * np.log(u1 * (r_max ** 2 - r_min ** 2) + r_min ** 2))
    theta_log = np.log(max_phase * u2)
    B_re = z_bre / np.sqrt(2 * h)
    B_im = z_bim / np.sqrt(2 * h)
    C_re = z_cre / np.sqrt(z_cre.shape[1])
    C_im = z_cim / np.sqrt(z_cim.shape[1])
    D = z_d
    diag_lambda = np.exp(-np.exp(nu_log) + 1j * np.exp(theta_log))
    gamma_log = np.log(np.sqrt(1 - np.abs(diag_lambda) ** 2))
    return dict(nu_log=nu_log, theta_log=theta_log, B_re=B_re, B_im=B_im, C_re=C_re, C_im=C_im,
                D=D, gamma_log=gamma_log)


def np_forward(params, u):
    """Explicit time loop with dense matrices for one sequence u (L, H); returns (x, y)."""
    p = {k: np.asarray(v, dtype=np.float64) for k, v in params.items()}
    lam = np.exp(-np.exp(p["nu_log"]) + 1j * np.exp(p["theta_log"]))
    Lam = np.diag(lam)
    B_norm = np.diag(np.exp(p["gamma_log"])) @ (p["B_re"] + 1j * p["B_im"])
    C = p["C_re"] + 1j * p["C_im"]
    n = lam.shape[0]
    length = u.shape[0]
    xs = np.zeros((length, n), complex)
    x = np.zeros(n, complex)
    for k in range(length):
        x = Lam @ x + B_norm @ u[k]
        xs[k] = x
    if C.shape[1] == 2 * n:
        xr = np.zeros((length, n), complex)
        x = np.zeros(n, complex)
        for k in reversed(range(length)):
            x = Lam @ x + B_norm @ u[k]
            xr[k] = x
        xs = np.concatenate([xs, xr], axis=1)
    y = np.stack([(C @ xs[k]).real + p["D"] * u[k] for k in range(length)])
    return xs, y


def np_forward_batched(params, u):
    lead = u.shape[:-2]
    xs, ys = [], []
    for idx in np.ndindex(*lead):
        x, y = np_forward(params, u[idx])
        xs.append(x)
        ys.append(y)
    return (np.stack(xs).reshape(*lead, *xs[0].shape), np.stack(ys).reshape(*lead, *ys[0].shape))


# ----------------------------------------------------------------------------------------
# Initialisation: Appendix A and Lemma 3.2
# ----------------------------------------------------------------------------------------

def test_ring_from_uniforms_is_lemma_3_2(rng):
    u1, u2 = rng.uniform(size=(2, 50))
    r_min, r_max, max_phase = 0.3, 0.95, math.pi / 7
    nu_log, theta_log = lru.ring_from_uniforms(u1, u2, r_min=r_min, r_max=r_max,
                                               max_phase=max_phase)
    nu = -0.5 * np.log(u1 * (r_max ** 2 - r_min ** 2) + r_min ** 2)
    np.testing.assert_allclose(nu_log, np.log(nu), rtol=1e-12)
    np.testing.assert_allclose(theta_log, np.log(max_phase * u2), rtol=1e-12)
    # Inverse-CDF reading of the lemma: |λ|² = r_min² + u1 (r_max² - r_min²).
    lam = np.exp(-np.exp(np.asarray(nu_log)) + 1j * np.exp(np.asarray(theta_log)))
    np.testing.assert_allclose(np.abs(lam) ** 2, r_min ** 2 + u1 * (r_max ** 2 - r_min ** 2),
                               rtol=1e-12)


@pytest.mark.parametrize("bidirectional", [False, True])
def test_init_matches_appendix_code(bidirectional):
    key = jax.random.key(7)
    h, n, r_min, r_max, max_phase = 3, 4, 0.4, 0.99, math.pi / 10
    params = lru.init(key, h, n, r_min=r_min, r_max=r_max, max_phase=max_phase,
                      bidirectional=bidirectional)
    # The draws, from the random streams documented in lru.init / lru.ring_init.
    k_ring, k_bre, k_bim, k_cre, k_cim, k_d = jax.random.split(key, 6)
    k1, k2 = jax.random.split(k_ring)
    cols = 2 * n if bidirectional else n
    draws = [np.asarray(d) for d in (
        jax.random.uniform(k1, (n,)), jax.random.uniform(k2, (n,)),
        jax.random.normal(k_bre, (n, h)), jax.random.normal(k_bim, (n, h)),
        jax.random.normal(k_cre, (h, cols)), jax.random.normal(k_cim, (h, cols)),
        jax.random.normal(k_d, (h,)))]
    expected = np_init(*draws, r_min, r_max, max_phase)
    assert set(params) == set(expected)
    for name, value in expected.items():
        assert params[name].shape == value.shape, name
        np.testing.assert_allclose(params[name], value, rtol=1e-12, atol=1e-14, err_msg=name)


def test_init_is_deterministic_in_the_key():
    a = lru.init(jax.random.key(0), 3, 4)
    b = lru.init(jax.random.key(0), 3, 4)
    c = lru.init(jax.random.key(1), 3, 4)
    for name in a:
        np.testing.assert_array_equal(a[name], b[name])
        assert not np.allclose(a[name], c[name]), name


def test_eigenvalues_lie_on_the_ring_with_bounded_phase():
    r_min, r_max, max_phase = 0.6, 0.9, math.pi / 3
    nu_log, theta_log = lru.ring_init(jax.random.key(3), 20000, r_min, r_max, max_phase)
    lam = np.asarray(lru.eigenvalues(dict(nu_log=nu_log, theta_log=theta_log)))
    mod = np.abs(lam)
    assert np.all(mod >= r_min - 1e-12) and np.all(mod <= r_max + 1e-12)
    phase = np.exp(np.asarray(theta_log))
    assert np.all(phase >= 0) and np.all(phase <= max_phase)
    np.testing.assert_allclose(np.angle(lam), phase, atol=1e-12)      # phases < π here
    # γ normalisation (§3.4): exp(γ_log) = sqrt(1 - |λ|²).
    params = lru.init(jax.random.key(3), 3, 4, r_min=r_min, r_max=r_max, max_phase=max_phase)
    mod = np.abs(np.asarray(lru.eigenvalues(params)))
    np.testing.assert_allclose(np.exp(params["gamma_log"]), np.sqrt(1 - mod ** 2), rtol=1e-12)


def _ks_uniform(samples):
    return stats.kstest(samples, "uniform").statistic


def test_ring_is_uniform_lemma_3_2():
    """|λ|² is uniform on [r_min², r_max²] and the phase on [0, max_phase]: the uniform
    distribution on the ring. KS statistic below the 0.1 % critical value 1.95/sqrt(n)."""
    n = 20000
    crit = 1.95 / math.sqrt(n)
    for r_min, r_max, max_phase in [(0.0, 1.0, 2 * math.pi), (0.5, 0.9, math.pi / 50)]:
        nu_log, theta_log = lru.ring_init(jax.random.key(11), n, r_min, r_max, max_phase)
        lam = np.exp(-np.exp(np.asarray(nu_log)) + 1j * np.exp(np.asarray(theta_log)))
        s = np.abs(lam) ** 2
        assert _ks_uniform((s - r_min ** 2) / (r_max ** 2 - r_min ** 2)) < crit
        assert _ks_uniform(np.exp(np.asarray(theta_log)) / max_phase) < crit
        # The check has power: a radius uniform on [r_min, r_max] (not uniform in area) fails it.
        r_wrong = r_min + (r_max - r_min) * np.random.default_rng(0).uniform(size=n)
        assert _ks_uniform((r_wrong ** 2 - r_min ** 2) / (r_max ** 2 - r_min ** 2)) > 5 * crit


# ----------------------------------------------------------------------------------------
# Forward pass vs explicit loops
# ----------------------------------------------------------------------------------------

@pytest.mark.slow
@pytest.mark.parametrize("method", METHODS)
@pytest.mark.parametrize("bidirectional", [False, True])
@pytest.mark.parametrize("shape", [(1, 3), (7, 3), (2, 3, 5, 3)])
def test_hidden_states_and_apply_match_naive_loop(method, bidirectional, shape, rng):
    params = lru.init(jax.random.key(5), 3, 4, r_min=0.7, r_max=0.99, bidirectional=bidirectional)
    u = rng.standard_normal(shape)
    x_ref, y_ref = np_forward_batched(params, u)
    x = lru.hidden_states(params, u, scan_method=method)
    y = lru.apply(params, u, scan_method=method)
    n = 8 if bidirectional else 4
    assert x.shape == (*shape[:-1], n) and jnp.iscomplexobj(x)
    assert y.shape == shape
    np.testing.assert_allclose(x, x_ref, rtol=1e-10, atol=1e-12)
    np.testing.assert_allclose(y, y_ref, rtol=1e-10, atol=1e-12)


def test_impulse_response_is_the_convolution_kernel(rng):
    params = lru.init(jax.random.key(2), 3, 4, r_min=0.5, r_max=0.95)
    length = 9
    u = rng.standard_normal((length, 3))
    K = np.asarray(lru.impulse_response(params, length))
    assert K.shape == (length, 3, 3)
    conv = np.stack([sum(K[j] @ u[t - j] for j in range(t + 1)) for t in range(length)])
    np.testing.assert_allclose(conv, np_forward(params, u)[1], rtol=1e-10, atol=1e-12)
    # Column i of K[k] is the response at lag k to a unit impulse on input i.
    impulse = np.zeros((length, 3))
    impulse[0, 1] = 1.0
    np.testing.assert_allclose(K[:, :, 1], np_forward(params, impulse)[1], atol=1e-12)


def test_gradients_are_finite_and_correct(rng):
    params = lru.init(jax.random.key(4), 3, 4, r_min=0.5, r_max=0.9)
    u = rng.standard_normal((4, 3))
    grads = jax.grad(lambda p: jnp.sum(lru.apply(p, u) ** 2))(params)
    assert all(np.all(np.isfinite(g)) for g in grads.values())
    jax.test_util.check_grads(lambda p: lru.apply(p, u, scan_method="sequential"), (params,),
                              order=1, modes=("rev",))


# ----------------------------------------------------------------------------------------
# Prop. 3.3 and the γ normalisation (§3.4), by Monte Carlo
# ----------------------------------------------------------------------------------------

def _final_state_energy(params, key, samples, length):
    """‖x_L‖² for `samples` white-noise sequences u ~ N(0, I) (one compiled call)."""
    h = params["B_re"].shape[1]
    u = jax.random.normal(key, (samples, length, h))
    energy = jax.jit(lambda p, u: jnp.sum(jnp.abs(lru.hidden_states(p, u)[:, -1]) ** 2, -1))
    return np.asarray(energy(params, u))


def test_forward_blowup_formula():
    for r_min, r_max in [(0.0, 0.5), (0.3, 0.9), (0.9, 0.999)]:
        s_mean, _ = integrate.quad(lambda s: 1 / (1 - s), r_min ** 2, r_max ** 2,
                                   epsabs=0, epsrel=1e-12)
        assert lru.forward_blowup(r_min, r_max) == pytest.approx(
            s_mean / (r_max ** 2 - r_min ** 2), rel=1e-10)
    # Equal radii: 1/(1 - r²) (§3.4, eq. 5), approached continuously.
    assert lru.forward_blowup(0.99, 0.99) == pytest.approx(1 / (1 - 0.99 ** 2), rel=1e-14)
    assert lru.forward_blowup(0.99 - 1e-9, 0.99) == pytest.approx(1 / (1 - 0.99 ** 2), rel=1e-6)
    assert lru.forward_blowup(0.2, 1.0) == math.inf
    grid = lru.forward_blowup(np.array([0.0, 0.5]), np.array([0.5, 0.5]))
    np.testing.assert_allclose(grid, [math.log(1 / 0.75) / 0.25, 1 / 0.75], rtol=1e-14)


@pytest.mark.slow
def test_forward_blowup_prop_3_3_monte_carlo():
    """Without γ normalisation, white noise and Glorot B: E‖x_∞‖² / E‖Bu‖² matches Prop. 3.3.

    Two sources of error, each bounded at 4 standard errors: the S input samples
    (std(‖x_L‖²)/sqrt(S)) and the N random eigenvalues (with weights w_j = ‖B_j‖²,
    Σ w g / Σ w has standard error std(g) sqrt(Σw²)/Σw for g = 1/(1-|λ|²)). At L = 120,
    |λ|^{2L} <= 0.81^120 < 1e-10: the state is stationary."""
    r_min, r_max, n, h, length, samples = 0.5, 0.9, 256, 16, 120, 256
    params = lru.init(jax.random.key(8), h, n, r_min=r_min, r_max=r_max)
    params = dict(params, gamma_log=jnp.zeros(n))                       # no normalisation
    energy = _final_state_energy(params, jax.random.key(9), samples, length)
    w = np.sum(np.asarray(params["B_re"]) ** 2 + np.asarray(params["B_im"]) ** 2, axis=1)
    bu = w.sum()                                                          # E‖Bu‖² = ‖B‖_F²
    s = np.abs(np.asarray(lru.eigenvalues(params))) ** 2
    g = 1 / (1 - s)
    se_u = energy.std(ddof=1) / math.sqrt(samples) / bu
    se_lam = g.std(ddof=1) * math.sqrt(np.sum(w ** 2)) / w.sum()
    ratio = energy.mean() / bu
    predicted = lru.forward_blowup(r_min, r_max)
    # Conditional on λ and B the layer must reproduce Σ w g / Σ w (4 SE of the inputs) ...
    assert abs(ratio - np.sum(w * g) / bu) < 4 * se_u
    # ... and over the ring this is Prop. 3.3 (both error sources).
    assert abs(ratio - predicted) < 4 * math.hypot(se_u, se_lam)
    # The alternative 1/(1 - r_max²) (all eigenvalues at the outer radius) is rejected.
    assert abs(ratio - 1 / (1 - r_max ** 2)) > 20 * math.hypot(se_u, se_lam)


def test_gamma_normalisation_keeps_the_state_at_input_scale():
    """With γ_j = sqrt(1 - |λ_j|²), E|x_{∞,j}|² = E|(Bu)_j|², so E‖x_∞‖² = E‖Bu‖² = ‖B‖_F²
    (§3.4, eq. 6), where the unnormalised layer gives forward_blowup(0.5, 0.9) ≈ 2.45 times
    that. Tolerance: 4 standard errors of the S samples."""
    r_min, r_max, n, h, length, samples = 0.5, 0.9, 256, 16, 120, 256
    params = lru.init(jax.random.key(8), h, n, r_min=r_min, r_max=r_max)
    energy = _final_state_energy(params, jax.random.key(10), samples, length)
    bu = np.sum(np.asarray(params["B_re"]) ** 2 + np.asarray(params["B_im"]) ** 2)
    ratio = energy.mean() / bu
    se = energy.std(ddof=1) / math.sqrt(samples) / bu
    assert abs(ratio - 1) < 4 * se
    assert lru.forward_blowup(r_min, r_max) - 1 > 20 * se


# ----------------------------------------------------------------------------------------
# Errors
# ----------------------------------------------------------------------------------------

@pytest.mark.parametrize("kwargs, name", [
    (dict(r_min=0.9, r_max=0.5), "r_min"),
    (dict(r_min=-0.1), "r_min"),
    (dict(r_max=1.5), "r_max"),
    (dict(r_max=float("nan")), "r_max"),
    (dict(max_phase=0.0), "max_phase"),
    (dict(max_phase=-1.0), "max_phase"),
])
def test_init_rejects_bad_ring(kwargs, name):
    with pytest.raises(ValueError, match=f"`{name}`"):
        lru.init(jax.random.key(0), 3, 4, **kwargs)


def test_init_error_names_value_and_expectation():
    with pytest.raises(ValueError, match=r"`r_min`: got 0\.9, expected .*r_max = 0\.5"):
        lru.init(jax.random.key(0), 3, 4, r_min=0.9, r_max=0.5)


@pytest.mark.parametrize("d_model, d_state, name", [(0, 4, "d_model"), (2, 2.5, "d_state"),
                                                    (True, 4, "d_model")])
def test_init_rejects_bad_sizes(d_model, d_state, name):
    with pytest.raises(ValueError, match=f"`{name}`"):
        lru.init(jax.random.key(0), d_model, d_state)


@pytest.mark.parametrize("u", [np.zeros((5, 4)), np.zeros(3), np.zeros((0, 3)),
                               np.zeros((5, 3), complex)])
def test_apply_rejects_bad_input(u):
    params = lru.init(jax.random.key(0), 3, 4)
    for fn in (lru.apply, lru.hidden_states):
        with pytest.raises(ValueError, match="`u`"):
            fn(params, u)


def test_forward_blowup_and_impulse_response_errors():
    with pytest.raises(ValueError, match="`r_min`"):
        lru.forward_blowup(0.9, 0.5)
    with pytest.raises(ValueError, match="`r_max`"):
        lru.forward_blowup(0.1, 1.2)
    bi = lru.init(jax.random.key(0), 3, 4, bidirectional=True)
    with pytest.raises(ValueError, match="`params`"):
        lru.impulse_response(bi, 4)
    with pytest.raises(ValueError, match="`L`"):
        lru.impulse_response(lru.init(jax.random.key(0), 3, 4), 0)
