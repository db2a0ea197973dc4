"""Checks for Exercises 2 · The Linear Recurrent Unit (solutions/02_lru.ipynb)."""
from __future__ import annotations

import math

import numpy as np

from ._core import alternative, call, exercise, expect, expect_close, expect_prediction, randn, when


def _pair(got, inputs, names):
    expect(isinstance(got, (tuple, list)) and len(got) == 2,
           f"the result must be a pair ({names}), received a {type(got).__name__}"
           + (f" of length {len(got)}" if isinstance(got, (tuple, list)) else "") + ".",
           inputs=inputs, hint=f"`return {names}`.")
    return got


def random_params(rng, h, n, r_min=0.4, r_max=0.95, max_phase=2 * np.pi):
    """LRU parameters with the layout and distributions of ``lrnn.layers.lru.init``, drawn with
    NumPy (no JAX compilation for every new shape)."""
    u1, u2 = rng.uniform(0.01, 0.99, n), rng.uniform(0.01, 0.99, n)
    nu = -0.5 * np.log(u1 * (r_max ** 2 - r_min ** 2) + r_min ** 2)
    theta = max_phase * u2
    lam = np.exp(-nu + 1j * theta)
    p = {"nu_log": np.log(nu), "theta_log": np.log(theta),
         "B_re": rng.standard_normal((n, h)) / np.sqrt(2 * h),
         "B_im": rng.standard_normal((n, h)) / np.sqrt(2 * h),
         "C_re": rng.standard_normal((h, n)) / np.sqrt(n),
         "C_im": rng.standard_normal((h, n)) / np.sqrt(n),
         "D": rng.standard_normal(h),
         "gamma_log": np.log(np.sqrt(1 - np.abs(lam) ** 2))}
    return {k: v.astype(np.float32) for k, v in p.items()}


@exercise("2.1", points=3, title="ring initialisation (LRU Lemma 3.2)",
          reference="LRU Lemma 3.2 (the ring sampler) and §3.3 (the layer learns log ν, log θ); "
                    "chapter 2, eq. (2.2)",
          stronger_hint="the ring's area inside radius r grows like r², so draw |λ|² (not |λ|) "
                        "uniformly: |λ|² = r_min² + u1 (r_max² − r_min²). With |λ| = e^(−ν), solve "
                        "for ν; the phase is θ = max_phase · u2. The layer stores logarithms: "
                        "return (log ν, log θ).")
def _(fn, rng):
    from lrnn.layers import lru
    for n, r_min, r_max, max_phase in [(5, 0.4, 0.9, 2 * np.pi), (1, 0.0, 1.0, np.pi),
                                       (4, 0.9, 0.999, np.pi / 10), (3, 0.5, 0.5, 2 * np.pi)]:
        u1 = rng.uniform(0.01, 0.99, n).astype(np.float32)
        u2 = rng.uniform(0.01, 0.99, n).astype(np.float32)
        inputs = {"u1": u1, "u2": u2, "r_min": r_min, "r_max": r_max, "max_phase": max_phase}
        got = _pair(call(fn, inputs), inputs, "nu_log, theta_log")
        want_nu, want_theta = (np.asarray(v, np.float64) for v in lru.ring_from_uniforms(
            u1, u2, r_min=r_min, r_max=r_max, max_phase=max_phase))
        u1d = u1.astype(np.float64)
        no_half = np.log(-np.log(u1d * (r_max ** 2 - r_min ** 2) + r_min ** 2))
        not_squared = np.log(-0.5 * np.log(u1d * (r_max - r_min) + r_min))
        expect_close(got[0], want_nu, inputs=inputs, what="nu_log (first item)", hints=[
            alternative(np.exp(want_nu), "return log ν, not ν: the layer learns ν_log."),
            alternative(no_half, "ν = −½ log(…): the ½ is missing (|λ| = e^{−ν} is the square "
                                 "root of a uniform number on [r_min², r_max²])."),
            alternative(not_squared, "sample |λ|² uniformly on [r_min², r_max²], not |λ| on "
                                     "[r_min, r_max]: square the radii."),
        ])
        expect_close(got[1], want_theta, inputs=inputs, what="theta_log (second item)", hints=[
            alternative(np.exp(want_theta), "return log θ, not θ."),
            alternative(np.log(2 * np.pi * u2.astype(np.float64)),
                        "the phase is θ = max_phase · u2, not 2π · u2."),
        ])


@exercise("2.2", points=2, title="the distribution of |λ| on the ring",
          reference="LRU Lemma 3.2 and its proof (App. F.1); chapter 2, §2.3: a uniform "
                    "distribution in area",
          stronger_hint="the share of the ring's area within radius r is (r² − r_min²)/(r_max² − "
                        "r_min²) between the two radii; clip it to 0 inside the ring and to 1 "
                        "outside it.")
def _(fn, rng):
    for r_min, r_max in [(0.4, 0.9), (0.0, 1.0), (0.9, 0.999)]:
        r = np.concatenate([[r_min, r_max, 0.5 * (r_min + r_max)],
                            rng.uniform(max(0.0, r_min - 0.1), min(1.0, r_max + 0.05), 7)])
        r = np.sort(r)
        inputs = {"r": r, "r_min": r_min, "r_max": r_max}
        got = call(fn, inputs)
        want = np.clip((r ** 2 - r_min ** 2) / (r_max ** 2 - r_min ** 2), 0.0, 1.0)
        linear = np.clip((r - r_min) / (r_max - r_min), 0.0, 1.0)
        unclipped = (r ** 2 - r_min ** 2) / (r_max ** 2 - r_min ** 2)
        expect_close(got, want, inputs=inputs, rtol=1e-5, atol=1e-6, what="the CDF", hints=[
            alternative(linear, "|λ| is not uniform in r: the area of the ring between r_min "
                                "and r grows like r², so P(|λ| ≤ r) is quadratic in r."),
            alternative(unclipped, "a probability stays in [0, 1]: clip below r_min and above "
                                   "r_max."),
        ])


def _naive_states(params, u, *, gamma=True, theta_exp=True):
    """LRU eq. 7 by an explicit loop in complex128 (for hints: typical mistakes)."""
    theta = np.exp(params["theta_log"]) if theta_exp else params["theta_log"]
    lam = np.exp(-np.exp(params["nu_log"].astype(np.float64)) + 1j * theta)
    b = params["B_re"] + 1j * params["B_im"]
    if gamma:
        b = b * np.exp(params["gamma_log"])[:, None]
    bu = np.einsum("...lh,nh->...ln", u.astype(np.float64), b)
    x = np.zeros(bu.shape, np.complex128)
    prev = np.zeros(bu.shape[:-2] + bu.shape[-1:], np.complex128)
    for k in range(bu.shape[-2]):
        prev = lam * prev + bu[..., k, :]
        x[..., k, :] = prev
    return x


@exercise("2.3", points=4, title="the LRU hidden states",
          reference="LRU eq. 7 and §3.3 (the exponential parametrisation); chapter 2, "
                    "eqs. (2.3) and (2.5)",
          stronger_hint="three steps: λ = exp(−exp(nu_log) + i·exp(theta_log)); the input matrix γ "
                        "⊙ B scales each row (one per state) of B = B_re + i·B_im by γ = "
                        "exp(gamma_log); then x_t = λ x_{t−1} + (γ ⊙ B) u_t is a linear scan over "
                        "time (axis −2) of the projected inputs, shape (…, L, N).")
def _(fn, rng):
    from lrnn.layers import lru
    for lead, length, h, n in [((), 6, 2, 3), ((), 1, 1, 1), ((2,), 9, 3, 4)]:
        params = random_params(rng, h, n)
        u = randn(rng, *lead, length, h)
        inputs = {"params": params, "u": u}
        got = call(fn, inputs)
        want = np.asarray(lru.hidden_states(params, u, scan_method="sequential"))
        lam = np.exp(-np.exp(params["nu_log"]) + 1j * np.exp(params["theta_log"]))
        expect_close(got, want, inputs=inputs, rtol=2e-4, atol=2e-5, time_axis=-2,
                     dtype="complex", what="the states x", hints=[
                         alternative(lambda: _naive_states(params, u, gamma=False),
                                     "the γ normalisation is missing: the input of state j is "
                                     "exp(γ_log_j) · (B u_k)_j (LRU eq. 7)."),
                         alternative(lambda: _naive_states(params, u, theta_exp=False),
                                     "the phase is θ = exp(θ_log), not θ_log."),
                         when(lambda r, e: np.allclose(np.abs(r), np.abs(e), rtol=1e-3,
                                                       atol=1e-4) and np.any(lam.imag != 0)
                              and not np.allclose(r, np.conj(e), rtol=1e-3, atol=1e-4),
                              "right magnitudes, wrong phases: check λ = exp(−exp(ν_log) + "
                              "i·exp(θ_log)) and B = B_re + i·B_im."),
                     ])


@exercise("2.4", points=3, title="the LRU layer output",
          reference="LRU §3.2 and App. A (the real part of the output, the skip D); "
                    "chapter 2, eq. (2.1)",
          stronger_hint="compute the hidden states of Exercise 2.3, project them with C = C_re + "
                        "i·C_im (shape (H, N)) to (…, L, H), keep the real part, and add the skip "
                        "term D ⊙ u_t element by element.")
def _(fn, rng):
    from lrnn.layers import lru
    for lead, length, h, n in [((), 5, 2, 3), ((3,), 7, 3, 2)]:
        params = random_params(rng, h, n)
        u = randn(rng, *lead, length, h)
        inputs = {"params": params, "u": u}
        got = call(fn, inputs)
        want = np.asarray(lru.apply(params, u, scan_method="sequential"))
        c = params["C_re"] + 1j * params["C_im"]

        def cx(c=c, params=params, u=u):
            return np.einsum("...ln,hn->...lh", _naive_states(params, u), c)
        du = params["D"] * u
        expect_close(got, want, inputs=inputs, rtol=2e-4, atol=2e-5, time_axis=-2,
                     what="the output y", hints=[
                         alternative(lambda: cx().real, "the skip connection D ⊙ u_k is "
                                                        "missing."),
                         alternative(lambda: np.abs(cx()) + du,
                                     "take the real part of C x_k, not its modulus."),
                         alternative(lambda: cx().imag + du,
                                     "take the real part of C x_k, not the imaginary part."),
                         alternative(lambda: np.einsum("...ln,hn->...lh",
                                                       _naive_states(params, u),
                                                       np.conj(c)).real + du,
                                     "C = C_re + i·C_im: the sign of the imaginary part is "
                                     "flipped (a stray conjugate)."),
                     ])


@exercise("2.5", points=2, title="the γ normalisation (LRU §3.4)",
          reference="LRU §3.4, eqs. 6–7; chapter 2, §2.5 and eq. (2.5)",
          stronger_hint="write x_k = γ Σ_i λ^i u_(k−i) for white inputs of unit variance: E|x_k|² "
                        "→ γ² Σ_i |λ|^(2i) = γ²/(1 − |λ|²). Set that to 1 and solve for γ, with "
                        "|λ|² = exp(−2·exp(nu_log)); return log γ (log1p keeps the precision when "
                        "|λ| is close to 1).")
def _(fn, rng):
    for n in [4, 1, 6]:
        nu_log = np.log(-np.log(rng.uniform(0.3, 0.999, n))).astype(np.float32)
        theta_log = np.log(rng.uniform(0.01, 2 * np.pi, n)).astype(np.float32)
        inputs = {"nu_log": nu_log, "theta_log": theta_log}
        got = call(fn, inputs)
        mod2 = np.exp(-2 * np.exp(nu_log.astype(np.float64)))
        want = np.log(np.sqrt(1 - mod2))
        no_exp = np.log(np.sqrt(np.clip(1 - np.exp(-2 * nu_log.astype(np.float64)), 1e-30, None)))
        expect_close(got, want, inputs=inputs, rtol=1e-4, atol=1e-5, what="gamma_log", hints=[
            alternative(np.sqrt(1 - mod2), "return the logarithm γ_log = log γ."),
            alternative(np.log(1 - mod2), "γ is the square root sqrt(1 − |λ|²): its log is "
                                          "½ log(1 − |λ|²)."),
            alternative(np.log(np.sqrt(1 - np.exp(-np.exp(nu_log.astype(np.float64))))),
                        "|λ|² = exp(−2 exp(ν_log)): you used |λ| instead of |λ|²."),
            alternative(no_exp, "ν = exp(ν_log): apply the exponential to ν_log first."),
        ])


@exercise("2.6", points=3, title="the forward-pass blow-up (LRU Prop. 3.3)",
          reference="LRU Proposition 3.3, its proof (App. F.2) and eq. 5; chapter 2, eq. (2.4)",
          stronger_hint="Prop. 3.3 needs E[1/(1 − |λ|²)] with |λ|² uniform on [a, b] = [r_min², "
                        "r_max²]: (1/(b − a)) ∫_a^b ds/(1 − s) = log((1 − a)/(1 − b))/(b − a). "
                        "When a = b it is simply 1/(1 − b).")
def _(fn, rng):
    from lrnn.layers import lru
    cases = [(0.4, 0.9), (0.0, 0.5), (0.9, 0.999), (0.5, 0.5), (0.99, 0.99),
             (float(np.round(rng.uniform(0.1, 0.5), 3)), float(np.round(rng.uniform(0.6, 0.95), 3)))]
    for r_min, r_max in cases:
        inputs = {"r_min": r_min, "r_max": r_max}
        got = call(fn, inputs)
        want = np.float64(lru.forward_blowup(r_min, r_max))
        eps = r_max ** 2 - r_min ** 2
        hints = [when(lambda r, e: not np.all(np.isfinite(r)) and eps == 0,
                      "for r_min = r_max the formula is 0/0: use its limit 1/(1 − r²) "
                      "(LRU eq. 5), or log1p(ε/ρ)/ε with a special case for ε = 0.")]
        if eps > 0:
            hints += [alternative(np.log((1 - r_min ** 2) / (1 - r_max ** 2)),
                                  "the factor 1/(r_max² − r_min²) is missing."),
                      alternative(np.log((1 - r_min) / (1 - r_max)) / (r_max - r_min),
                                  "the radii enter squared: r_min², r_max².")]
        expect_close(got, want, inputs=inputs, rtol=1e-5, atol=1e-8,
                     what="E‖x_∞‖² / E‖Bu‖²", hints=hints)


# ---------------------------------------------------------------------------------------------
# Predict, then run
# ---------------------------------------------------------------------------------------------

RING_R_MIN, RING_R_MAX, MEMORY_STEPS = 0.5, 0.999, 100


@exercise("2.8", points=1, kind="value",
          title="predict: the share of a ring that remembers 100 steps",
          reference="LRU Lemma 3.2 (the ring's density); chapter 2, §2.2 (|λ|^t decays)",
          stronger_hint="An eigenvalue keeps a fraction 1/e of its state after −1/ln|λ| steps, "
                        "so it remembers 100 steps when |λ| > e^(−1/100). Lemma 3.2 samples "
                        "uniformly over the ring's area: |λ|² is uniform between r_min² and "
                        "r_max². Take the share of that interval above e^(−2/100).")
def _(value, rng):
    lo, hi = RING_R_MIN ** 2, RING_R_MAX ** 2
    threshold = math.exp(-1 / MEMORY_STEPS)
    want = (hi - threshold ** 2) / (hi - lo)
    expect_prediction(value, want, rtol=0.1, what="the share of the ring", hints=[
        alternative((RING_R_MAX - threshold) / (RING_R_MAX - RING_R_MIN),
                    "that is the share if |λ| were uniform on [r_min, r_max]; Lemma 3.2 "
                    "makes the area uniform: |λ|², not |λ|."),
        alternative(1 - want, "that is the share that forgets within 100 steps."),
        when(lambda r, e: float(r) > 1 or float(r) < 0, "a share lies between 0 and 1."),
    ])
