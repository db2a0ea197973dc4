"""Checks for Exercises 4 · Normalisation (solutions/04_normalisation.ipynb): RotRNN §3.1
(ξ redone for correlated inputs at a finite step, Theorem 1's expansion redone for inputs
with a mean), the backward pass of a bidirectional layer with its first state scaled (App. B.2)
and how long the LRU's expected norm takes to reach its limit (RotRNN App. C.1)."""
from __future__ import annotations

import math

import numpy as np

from ._core import (alternative, as_array, call, crandn, exercise, expect, expect_close,
                    expect_prediction, randn)
from .ch03 import _block_rotation, _expm


def _rotation(rng, n):
    M = rng.standard_normal((n, n))
    return _expm(M - M.T) @ _block_rotation(rng.uniform(0, 2 * np.pi, n // 2)) @ _expm(M - M.T).T


def stationary_xi(P, theta, B, gamma, rho):
    """ξ that gives E‖x_∞‖² = 1 for x_t = γ P D(θ) Pᵀ x_{t-1} + ξ B u_t under stationary AR(1)
    inputs u_t = ρ u_{t-1} + √(1−ρ²) ε_t: from the exact stationary covariance of the joint
    linear system (x_t, u_t) (a discrete Lyapunov equation, float64), with ξ = 1 first, since
    E‖x_∞‖² grows like ξ²."""
    import scipy.linalg
    P, B = np.asarray(P, np.float64), np.asarray(B, np.float64)
    n, K = B.shape
    A = P @ _block_rotation(theta) @ P.T
    F = np.block([[gamma * A, rho * B], [np.zeros((K, n)), rho * np.eye(K)]])
    G = np.sqrt(1 - rho ** 2) * np.vstack([B, np.eye(K)])
    Sigma = scipy.linalg.solve_discrete_lyapunov(F, G @ G.T)
    return 1.0 / np.sqrt(np.trace(Sigma[:n, :n]))


def _sq_norm_at_step(P, theta, B, gamma, rho, T):
    """E‖x_T‖² for x_t = γ P D(θ) Pᵀ x_{t−1} + B u_t (ξ = 1) from x_0 = 0, under the stationary
    AR(1) input u_t = ρ u_{t−1} + √(1−ρ²) ε_t (u_0 ~ N(0, I)): the exact covariance of the joint
    linear system (x_t, u_t), propagated one step at a time in float64 (dense A, original
    basis)."""
    P, B = np.asarray(P, np.float64), np.asarray(B, np.float64)
    n, K = B.shape
    A = P @ _block_rotation(theta) @ P.T
    F = np.block([[gamma * A, rho * B], [np.zeros((K, n)), rho * np.eye(K)]])
    G = np.sqrt(1 - rho ** 2) * np.vstack([B, np.eye(K)])
    Sigma = np.zeros((n + K, n + K))
    Sigma[n:, n:] = np.eye(K)                                   # x_0 = 0, u_0 stationary
    for _ in range(T):
        Sigma = F @ Sigma @ F.T + G @ G.T
    return float(np.trace(Sigma[:n, :n]))


def _pair_sums(gamma, rho, theta, T):
    """Σ_{j,k<T} γ^(j+k) ρ^|j−k| cos((j−k)θ_i) of every rotation pair, from the covariance
    recursion of one pair driven by one unit input (for the hints)."""
    return np.array([_sq_norm_at_step(np.eye(2), [th], np.array([[1.0], [0.0]]), gamma, rho, T)
                     for th in np.asarray(theta, np.float64)])


@exercise("4.1", points=3, title="ξ at step T for correlated inputs (RotRNN §3.1)",
          reference="RotRNN §3.1 and eq. 5 (the unrolled state, α = 1); chapter 4, §4.6 (the "
                    "double series of each rotation pair, weighted by the rows of PᵀB), kept to "
                    "the T inputs a state has seen",
          stronger_hint="from x_0 = 0, x_T = ξ Σ_{k=1..T} (γA)^(T−k) B u_k, so E‖x_T‖² = ξ² E_T "
                        "with E_T the norm at ξ = 1. In the rotated basis pair i contributes "
                        "‖β_i‖² Σ_{j,k=0..T−1} γ^(j+k) ρ^|j−k| cos((j−k)θ_i), β_i its two rows "
                        "of PᵀB: the chapter's series with j and k stopped at T − 1. Then ξ = "
                        "1/√E_T.")
def _(fn, rng):
    # γ^(2T) between about 0.5 and 0.001: the state is neither fresh nor stationary at step T
    for n, K, rho, T, g_lo, g_hi in [(2, 1, 0.6, 1, 0.5, 0.99), (2, 1, 0.0, 3, 0.5, 0.9),
                                     (4, 3, -0.7, 12, 0.75, 0.97), (6, 2, 0.9, 60, 0.95, 0.99),
                                     (4, 2, 0.3, 150, 0.98, 0.997), (4, 1, 0.5, 25, 0.9, 0.98)]:
        M = rng.standard_normal((n, n))
        P = _expm(M - M.T).astype(np.float32)
        theta = rng.uniform(0, np.pi, n // 2).astype(np.float32)
        B = randn(rng, n, K)
        gamma = float(np.round(rng.uniform(g_lo, g_hi), 4))
        inputs = {"P": P, "theta": theta, "B": B, "gamma": gamma, "rho": rho, "T": T}
        got = call(fn, inputs)
        args = (P, theta, B, gamma)
        want = 1 / np.sqrt(_sq_norm_at_step(*args, rho, T))

        def xi_for(P_=P, theta_=theta, rho_=rho, T_=T):
            return 1 / np.sqrt(_sq_norm_at_step(P_, theta_, B, gamma, rho_, T_))
        frob = float(np.sum(B.astype(np.float64) ** 2))
        white = np.sqrt((1 - gamma ** 2) / frob)
        hints = [alternative(lambda: stationary_xi(*args, rho),
                             "with your ξ the norm is 1 in the stationary limit t → ∞, not at "
                             "step T: a state that has seen T inputs is not there yet."),
                 alternative(white, "that is RotRNN's white-noise ξ: with it E‖x_t‖² reaches 1 "
                                    "only for uncorrelated inputs and only as t → ∞.")]
        if rho != 0:
            hints.insert(1, alternative(lambda: xi_for(rho_=0.0),
                                        "your ξ gives E‖x_T‖² = 1 for white noise (ρ = 0): with "
                                        "correlated inputs the products of inputs from "
                                        "different steps do not average out."))
        if T > 1:
            hints.append(alternative(lambda: xi_for(T_=T - 1),
                                     "your ξ makes the norm 1 at step T − 1, one input too "
                                     "few: x_1 already holds u_1."))
        hints += [
            alternative(lambda: xi_for(T_=T + 1),
                        "your ξ makes the norm 1 at step T + 1, one input too many: x_1 "
                        "already holds u_1 (x_0 = 0)."),
            alternative(lambda: xi_for(theta_=np.zeros_like(theta)),
                        "your ξ is right only for pairs that do not turn (θ = 0): the inputs "
                        "of different steps reach a turning pair at different angles."),
            alternative(lambda: xi_for(P_=np.eye(n)),
                        "your ξ is the one for P = I: it weighs the pairs by the rows of B, as "
                        "if B were already in the basis of the 2×2 blocks of D(θ)."),
            alternative(lambda: 1 / np.sqrt(frob * np.mean(_pair_sums(gamma, rho, theta, T))),
                        "your ξ would be right if every pair received the same share of "
                        "‖B‖_F²; the pairs weigh differently here."),
            alternative(want ** 2, "your number is ξ², not ξ."),
        ]
        expect_close(got, np.float64(want), inputs=inputs, rtol=2e-4, atol=1e-7, what="ξ",
                     hints=hints)


def _biased_sq_norms(A, B, gamma, alpha, x1, mu, T):
    """E‖x_t‖², t = 1..T, for x_t = α(γ A x_{t−1} + B u_t) with u_t ~ N(μ, I) i.i.d. and x_1
    given: the second moment E[z zᵀ] of the augmented state z_t = (x_t, 1), which is linear,
    z_t = F z_{t−1} + G ε_t with F = [[αγA, αBμ], [0, 1]] and G = [[αB], [0]], propagated in
    float64 (dense A, any A: orthogonality is not used)."""
    A, B = np.asarray(A, np.float64), np.asarray(B, np.float64)
    x1, mu = np.asarray(x1, np.float64), np.asarray(mu, np.float64)
    n = A.shape[0]
    F = np.eye(n + 1)
    F[:n, :n] = alpha * gamma * A
    F[:n, n] = alpha * (B @ mu)
    G = np.vstack([alpha * B, np.zeros((1, B.shape[1]))])
    z1 = np.append(x1, 1.0)
    second = np.outer(z1, z1)
    out = np.empty(T)
    for t in range(T):
        if t:
            second = F @ second @ F.T + G @ G.T
        out[t] = np.trace(second[:n, :n])
    return out


#: Typical mistakes of 4.2, each a change to the expansion of eq. 7 (for the hints).
_BIASED_MISTAKES = {
    "no_cross": "the cross term 2γ E[x_{t−1}ᵀ Aᵀ B u_t] of eq. 7 is missing: u_t is still "
                "independent of x_{t−1}, but with E u_t = μ ≠ 0 it no longer averages to zero; "
                "it is 2γ E[x_{t−1}]ᵀ Aᵀ B μ.",
    "no_mean": "that is Theorem 1's recursion for zero-mean inputs: the mean μ of u_t adds "
               "‖Bμ‖² to E[u_tᵀ Bᵀ B u_t] and a cross term with the mean of x_{t−1}.",
    "no_bias_sq": "E[u_tᵀ Bᵀ B u_t] is Tr[BᵀB E u_t u_tᵀ] with E u_t u_tᵀ = I + μμᵀ: the term "
                  "‖Bμ‖² is missing.",
    "trace_scaled": "E u_t u_tᵀ = I + μμᵀ, so E[u_tᵀ Bᵀ B u_t] = Tr[BᵀB] + ‖Bμ‖², not "
                    "Tr[BᵀB](1 + ‖μ‖²).",
    "cross_without_A": "the cross term pairs the mean of x_{t−1}, turned by A, with Bμ: "
                       "2γ E[x_{t−1}]ᵀ Aᵀ B μ.",
    "cross_once": "the cross term of a square, ‖a + b‖² = ‖a‖² + 2aᵀb + ‖b‖², counts twice.",
    "mean_without_alpha": "the mean follows eq. 4 without its noise, α multiplying both terms: "
                          "E x_t = α(γ A E x_{t−1} + B μ).",
}


def _biased_mistake(A, B, gamma, alpha, x1, mu, T, mistake):
    """E‖x_t‖² as ``mistake`` (a key of ``_BIASED_MISTAKES``) would compute it: the mean and
    the second moment stepped together, one term of the expansion changed."""
    A, B = np.asarray(A, np.float64), np.asarray(B, np.float64)
    mean, drive = np.asarray(x1, np.float64), B @ np.asarray(mu, np.float64)
    trace = float(np.sum(B ** 2))
    mu_sq = float(np.sum(np.asarray(mu, np.float64) ** 2))
    values = [float(mean @ mean)]
    while len(values) < T:
        turned = A @ mean if mistake != "cross_without_A" else mean
        cross = 0.0 if mistake in ("no_cross", "no_mean") else 2 * gamma * turned @ drive
        if mistake == "cross_once":
            cross /= 2
        noise = {"no_mean": trace, "no_bias_sq": trace,
                 "trace_scaled": trace * (1 + mu_sq)}.get(mistake, trace + drive @ drive)
        values.append(alpha ** 2 * (gamma ** 2 * values[-1] + cross + noise))
        scale = 1.0 if mistake == "mean_without_alpha" else alpha
        mean = scale * (gamma * A @ mean + drive)
    return np.array(values)


@exercise("4.2", points=3, title="Theorem 1 with a biased input: E‖x_t‖² exactly",
          reference="RotRNN Theorem 1, eq. 4 and App. A.1, eqs. 7–9 (the cross term, the trace "
                    "trick); chapter 4, §4.2",
          stronger_hint="expand eq. 7 again without the zero mean: γ²E‖x_{t−1}‖² stays (A is "
                        "orthogonal); E[u_tᵀBᵀBu_t] = Tr[BᵀB(I + μμᵀ)] = Tr[BᵀB] + ‖Bμ‖²; and "
                        "the cross term becomes 2γ m_{t−1}ᵀAᵀBμ, with m_t = E x_t. The mean "
                        "obeys eq. 4 without its noise, m_t = α(γ A m_{t−1} + Bμ) from m_1 = "
                        "x_1: step m and E‖x_t‖² together, starting from ‖x_1‖².")
def _(fn, rng):
    # (n, K, γ, α: "thm" for Theorem 1's or a number, |μ|, x_1 against the drive, T)
    for n, K, gamma, alpha, mu_scale, against, T in [
            (2, 1, 0.9, "thm", 1.0, False, 1), (2, 1, 0.8, "thm", 0.0, False, 5),
            (4, 3, 0.9, 1.0, 0.7, False, 12), (4, 2, 0.95, "thm", 1.5, True, 8),
            (6, 2, 0.97, 0.8, 1.0, False, 40), (2, 2, 0.6, 1.2, 2.0, True, 6)]:
        A = _rotation(rng, n).astype(np.float32)
        B = (randn(rng, n, K) / np.float32(np.sqrt(n * K))).astype(np.float32)
        mu = (mu_scale * randn(rng, K)).astype(np.float32)
        tr = float(np.sum(B.astype(np.float64) ** 2))
        alpha = float(1 / np.sqrt(gamma ** 2 + tr)) if alpha == "thm" else alpha
        x1 = randn(rng, n)
        if against:                           # x_1 opposite to A⁻¹Bμ: the cross term is < 0
            x1 = -(A.T.astype(np.float64) @ B.astype(np.float64) @ mu.astype(np.float64))
        x1 = (x1 / np.linalg.norm(x1)).astype(np.float32)
        inputs = {"A": A, "B": B, "gamma": gamma, "alpha": alpha, "x1": x1, "mu": mu, "T": T}
        got = call(fn, inputs)
        want = _biased_sq_norms(A, B, gamma, alpha, x1, mu, T)
        args = (A, B, gamma, alpha, x1, mu)
        hints = [alternative(lambda m=m: _biased_mistake(*args, T, m), msg)
                 for m, msg in _BIASED_MISTAKES.items()]
        hints.append(alternative(lambda: _biased_sq_norms(*args, T + 1)[1:],
                                 "every entry is one step late: entry 0 is t = 1, x_1 itself, "
                                 "with E‖x_1‖² = ‖x_1‖²; the inputs enter from t = 2 on."))
        expect_close(got, want, inputs=inputs, rtol=1e-4, atol=1e-6, time_axis=0,
                     what="E‖x_t‖², t = 1 … T", hints=hints)


def _layer_fill_steps(lam, B, q, t_max=100_000):
    """First t with E‖x_t‖² ≥ q E‖x_∞‖² for x_t = Λ x_{t−1} + B̃ u_t from x_0 = 0 under white
    noise: E|x_{t,k}|² accumulated one step at a time, e ← |λ_k|² e + b_k (float64). Also
    returns the fractions E‖x_t‖² / E‖x_∞‖² at that t and one step before."""
    r2 = np.abs(np.asarray(lam, np.complex128)) ** 2
    b = np.sum(np.abs(np.asarray(B, np.complex128)) ** 2, axis=1)
    limit = float(np.sum(b / (1 - r2)))
    e, before = np.zeros_like(b), 0.0
    for t in range(1, t_max + 1):
        e = r2 * e + b
        now = float(np.sum(e)) / limit
        if now >= q:
            return t, before, now
        before = now
    raise ValueError("the layer does not reach q within t_max steps")


def _first_step(r2, w, q, t_max=100_000):
    """First t ≥ 1 with Σ_k w_k (1 − r2_k^t) / Σ_k w_k ≥ q (a loop over t)."""
    w = np.asarray(w, np.float64) / np.sum(w)
    tail = np.array(w)
    for t in range(1, t_max + 1):
        tail = tail * r2
        if 1 - np.sum(tail) >= q:
            return t
    return t_max


def _fill_case(rng, N, K, q, r_lo, r_hi, memoryless=False):
    """Eigenvalues and B̃ whose answer is well clear of q on both sides (2 % of a step), so
    that float32 and float64 answers agree; with ``memoryless``, λ_0 = 0."""
    while True:
        lam = (np.exp(1j * rng.uniform(0, 2 * np.pi, N)) * rng.uniform(r_lo, r_hi, N)
               ).astype(np.complex64)
        if memoryless:
            lam[0] = 0                           # a channel with no memory: full at t = 1
        B = crandn(rng, N, K)
        t, before, now = _layer_fill_steps(lam, B, q)
        if min(now - q, q - before) > 0.02 * (now - before):
            return lam, B, t


@exercise("4.3", points=2, title="how many steps the LRU needs to reach its norm",
          reference="RotRNN App. C.1, eqs. 21–27 (E‖x_t‖² and its limit); LRU §3.3; chapter 4, "
                    "§4.5",
          stronger_hint="divide eq. 27 by its limit: E‖x_t‖²/E‖x_∞‖² = 1 − Σ_k w_k |λ_k|^(2t) with "
                        "the weights w_k = (b_k/(1 − |λ_k|²)) / Σ_j b_j/(1 − |λ_j|²), each "
                        "channel's share of the limit. It grows with t, so look for the first "
                        "integer t where Σ_k w_k |λ_k|^(2t) ≤ 1 − q: one channel alone reaches "
                        "q at t_k = ⌈log(1 − q)/log|λ_k|²⌉, and the layer has reached q by the "
                        "largest t_k, which bounds a bisection (or a loop) over t.")
def _(fn, rng):
    cases = [(1, 1, 0.5, 0.6, 0.9, False), (1, 2, 0.05, 0.85, 0.95, False),
             (1, 1, 0.9, 0.9, 0.99, False), (3, 2, 0.9, 0.5, 0.99, True),
             (8, 3, 0.99, 0.3, 0.99, False), (16, 2, 0.5, 0.5, 0.99, False)]
    for N, K, q, r_lo, r_hi, memoryless in cases:
        lam, B, want = _fill_case(rng, N, K, q, r_lo, r_hi, memoryless)
        inputs = {"lam": lam, "B": B, "q": q}
        got = as_array(call(fn, inputs), inputs=inputs, what="t")
        expect(got.size == 1, f"t has shape {got.shape}: return one integer, the number of "
               "steps.", inputs=inputs, received=got)
        value = float(np.real(got.reshape(())))
        expect(np.isfinite(value) and value == round(value), "t is not a whole number of steps.",
               inputs=inputs, expected=want, received=value,
               hint="E‖x_t‖² is defined at integer steps only: return the first integer t at "
                    "which the fraction reaches q (not where a continuous curve crosses it).")
        r2 = np.abs(lam.astype(np.complex128)) ** 2
        b = np.sum(np.abs(B.astype(np.complex128)) ** 2, axis=1)
        slowest = max(_first_step(r2[k:k + 1], [1.0], q) for k in range(N))
        hints = []
        if N > 1:
            hints += [
                alternative(_first_step(r2, np.ones(N), q), "that is where the plain mean of "
                            "the channels' fractions 1 − |λ_k|^(2t) reaches q: weight each "
                            "channel by its share of E‖x_∞‖², b_k/(1 − |λ_k|²), so the slow "
                            "channels count most."),
                alternative(_first_step(r2, b, q), "weighting by b_k treats b_k as "
                            "channel k's limit, as in §4.5, where b_k is measured before the "
                            "γ-normalisation; here B̃ drives the state as given, and channel "
                            "k's limit is b_k/(1 − |λ_k|²) (eq. 27)."),
                alternative(slowest, "that is when every channel has reached q on its own, "
                            "the slowest one last; the layer's fraction is a weighted mean "
                            "and reaches q earlier."),
            ]
        hints.append(alternative(_first_step(r2, b * r2 / (1 - r2), q), "the powers run over "
                                 "i = 0 … t−1 (x_1 = B̃u_1 has no factor λ); eq. 24 as printed "
                                 "starts at i = 1."))
        if N == 1:
            hints.append(alternative(np.ceil(-np.log(1 - q) / (1 - r2[0])), "1/(1 − |λ|²) is "
                                     "only the time constant of the rise: solve "
                                     "|λ|^(2t) ≤ 1 − q exactly."))
        hints += [
            alternative(want - 1, "one step early: at that t the fraction E‖x_t‖²/E‖x_∞‖² is "
                        "still below q; return the first t at which it is ≥ q (x_1 = B̃u_1 "
                        "is t = 1)."),
            alternative(want + 1, "one step late: the layer already reaches q one step "
                        "earlier (x_1 = B̃u_1 is t = 1, and reaching q exactly counts)."),
        ]
        expect_close(value, np.float64(want), inputs=inputs, rtol=0, atol=0.05,
                     what="t, the first step with E‖x_t‖² ≥ q E‖x_∞‖²", hints=hints)


def _heads_np(params):
    """Every head's dense γ_h A_h (Lemmas 2–3, App. B.3), B_h, ξ_h (§3.1) and 1/‖B_h‖_F, in
    float64."""
    M, theta, nu_log, B = (np.asarray(params[k], np.float64) for k in ("M", "theta", "nu_log", "B"))
    decay = np.exp(-np.exp(nu_log))
    turns = []
    for h in range(B.shape[0]):
        P = _expm(M[h] - M[h].T)
        turns.append(decay[h] * P @ _block_rotation(theta[h]) @ P.T)
    frob = np.sqrt(np.sum(B ** 2, axis=(1, 2)))
    return np.stack(turns), B, np.sqrt(1 - decay ** 2) / frob, 1 / frob


def _backward_np(params, u, scale_first_state, *, scaled_step="last", turn=1):
    """The backward pass of a bidirectional RotRNN (App. B.2), a float64 loop from the end:
    x_t = γ A x_{t+1} + c_t B u_t from x_{L+1} = 0, stored at index t − 1 (the input's order).
    c_t = ξ, except, with ``scale_first_state``, 1/‖B‖_F at ``scaled_step`` ("last": t = L, the
    pass's first state; "first": t = 1, the forward rule, for the hints). ``turn=-1`` applies
    (γA)ᵀ instead (a hint)."""
    GA, B, xi, inv_frob = _heads_np(params)
    if turn < 0:
        GA = np.swapaxes(GA, -1, -2)
    u = np.asarray(u, np.float64)
    L = u.shape[-2]
    states = np.zeros(u.shape[:-2] + (L, B.shape[0], B.shape[1]))
    special = L - 1 if scaled_step == "last" else 0
    later = np.zeros(u.shape[:-2] + B.shape[:2])                    # x_{L+1} = 0
    for i in reversed(range(L)):
        c = inv_frob if (scale_first_state and i == special) else xi
        later = np.einsum("hij,...hj->...hi", GA, later) \
            + c[:, None] * np.einsum("hnk,...k->...hn", B, u[..., i, :])
        states[..., i, :, :] = later
    return states


def _forward_np(params, u, scale_first_state):
    """The forward states of eq. 6 (first state x_1), as the backward pass of the time-reversed
    input read back in time order (for the hints)."""
    flipped = np.flip(np.asarray(u, np.float64), axis=-2)
    return np.flip(_backward_np(params, flipped, scale_first_state), axis=-3)


@exercise("4.4", points=3, title="the backward pass of a bidirectional RotRNN",
          reference="RotRNN App. B.2 (bidirectional layers reuse P, D(θ) and B), eq. 6 and "
                    "§3.1 (ξ, 'scaling the first state'), Theorem 1, Lemmas 2–3; chapter 4, §4.4",
          stronger_hint="the heads of eq. 6 unchanged (A_h = P_h D(θ_h) P_hᵀ, γ_h, ξ_h), run "
                        "from the other end: x_t = γ_h A_h x_(t+1) + ξ_h B_h u_t from x_(L+1) = 0, "
                        "for t = L, L − 1, …, 1. The pass starts at t = L, so its first state is "
                        "x_L: with scale_first_state, the input u_L (not u_1) gets 1/‖B_h‖_F "
                        "instead of ξ_h. Entry t of the result holds x_t, which has seen u_t … "
                        "u_L: if you scanned a reversed copy, flip the states back.")
def _(fn, rng):
    for lead, L, K, H, n in [((), 1, 1, 1, 2), ((2,), 6, 3, 3, 4)]:
        params = {"M": randn(rng, H, n, n) / np.float32(np.sqrt(n)),
                  "theta": rng.uniform(0, 2 * np.pi, (H, n // 2)).astype(np.float32),
                  "nu_log": np.log(-np.log(rng.uniform(0.6, 0.95, H))).astype(np.float32),
                  "B": randn(rng, H, n, K)}
        u = randn(rng, *lead, L, K)
        for scale in (False, True):
            inputs = {"params": params, "u": u}
            got = call(fn, inputs, scale_first_state=scale)
            want = _backward_np(params, u, scale)
            zero = np.zeros_like(want[..., :1, :, :])
            hints = [
                alternative(np.flip(want, axis=-3),
                            "your states are those of the right answer in reverse time order: "
                            "entry t holds x_(L+1−t) (entry 1 holds x_L, which has seen only "
                            "u_L), while entry t must hold x_t, which has seen u_t … u_L."),
                alternative(lambda: _forward_np(params, u, scale),
                            "these are the forward states, x_t from x_(t−1): the backward "
                            "pass runs x_t = γ A x_(t+1) + ξ B u_t from x_(L+1) = 0."),
                alternative(lambda: np.flip(_forward_np(params, u, scale), axis=-3),
                            "these are the forward states in reverse order: the backward pass "
                            "feeds u_t into x_t and carries x_(t+1) into it, from the end."),
                alternative(lambda: _backward_np(params, u, scale, turn=-1),
                            "your backward pass turns the other way, with (γA)ᵀ: App. B.2 reuses "
                            "P, D(θ) and B, so the backward pass applies the same γA to the state "
                            "of the later step."),
                alternative(np.concatenate([want[..., 1:, :, :], zero], axis=-3),
                            "off by one step: entry t holds x_(t+1), the state before u_t came "
                            "in; x_t already includes u_t."),
                alternative(np.concatenate([zero, want[..., :-1, :, :]], axis=-3),
                            "off by one step: entry t holds x_(t−1); x_t includes u_t … u_L "
                            "and nothing before t."),
            ]
            if scale:
                hints.insert(0, alternative(
                    lambda: _backward_np(params, u, True, scaled_step="first"),
                    "with scale_first_state=True your x_L is √(1 − γ²) times the expected "
                    "one (E‖x_L‖² = 1 − γ² under white noise, not 1), that share of u_L is "
                    "carried into every earlier state, and your x_1 weighs its own input "
                    "u_1 1/√(1 − γ²) times too much."))
            hints.append(alternative(lambda: _backward_np(params, u, not scale),
                                     "scale_first_state is ignored or inverted: with it, the "
                                     "first state of the backward pass is B u_L / ‖B‖_F; "
                                     "without it, ξ B u_L."))
            shown = dict(inputs, scale_first_state=scale)
            expect_close(got, want, inputs=shown, rtol=1e-3, atol=1e-4, time_axis=-3,
                         what="the backward states x_t, shape (..., L, H, n)", hints=hints)


# ---------------------------------------------------------------------------------------------
# Predict, then run
# ---------------------------------------------------------------------------------------------

DRIFT_RHO, DRIFT_GAMMA, DRIFT_THETA, DRIFT_STEPS = 0.8, 0.9, math.pi / 2, 3


def _drift_factor(rho, gamma, theta):
    """E|x|² of a γ-normalised head λ = γe^{iθ} under AR(1) inputs of correlation ρ, over its
    value under white noise: Re[(1 + ρλ)/(1 − ρλ)] (the series Σ λ^j λ̄^k ρ^|j−k|)."""
    lam = gamma * np.exp(1j * theta)
    return float(np.real((1 + rho * lam) / (1 - rho * lam)))


def _norm_after(rho, gamma, theta, steps):
    """E|x_t|² after ``steps`` inputs from x_0 = 0 of that head, fed a stationary AR(1) input of
    unit variance: (1 − γ²) Σ_{j,k<t} λ^j λ̄^k ρ^|j−k|, its terms grouped by d = j − k."""
    lam = gamma * np.exp(1j * theta)
    total = sum(gamma ** (2 * k) for k in range(steps))
    for d in range(1, steps):
        total += 2 * np.real((rho * lam) ** d) * sum(gamma ** (2 * k) for k in range(steps - d))
    return float((1 - gamma ** 2) * total)


@exercise("4.6", points=1, kind="value",
          title="predict: the norm of a rotating head after three correlated inputs",
          reference="chapter 4, §4.6 (AR(1) inputs, and the drift factor g, the limit of "
                    "the same series); RotRNN §3.1",
          stronger_hint="x_3 = √(1−γ²)(u_3 + λu_2 + λ²u_1) from x_0 = 0, and E[u_j u_k] = "
                        "ρ^|j−k|: the three squares give 1 + γ² + γ⁴; the pairs one step apart "
                        "give 2·Re(ρλ)(1 + γ²), zero when λ = 0.9i; the pair two steps apart "
                        "gives 2·Re((ρλ)²). Multiply the sum by 1 − γ².")
def _(value, rng):
    want = _norm_after(DRIFT_RHO, DRIFT_GAMMA, DRIFT_THETA, DRIFT_STEPS)
    expect_prediction(value, want, rtol=0.05, what="E|x_3|²", hints=[
        alternative(_drift_factor(DRIFT_RHO, DRIFT_GAMMA, DRIFT_THETA),
                    "that is the stationary drift factor g of §4.6, the limit of many steps: "
                    "after three inputs from x_0 = 0 only the terms j, k < 3 of its series are "
                    "there."),
        alternative(1 - DRIFT_GAMMA ** (2 * DRIFT_STEPS),
                    "that is the white-noise value 1 − γ^{2t}: correlated inputs add the cross "
                    "terms j ≠ k."),
        alternative(_norm_after(DRIFT_RHO, DRIFT_GAMMA, 0.0, DRIFT_STEPS),
                    "that is a head that does not rotate (θ = 0): a quarter turn per step "
                    "makes inputs two steps apart point opposite ways."),
        alternative(_norm_after(DRIFT_RHO, DRIFT_GAMMA, DRIFT_THETA, DRIFT_STEPS)
                    / (1 - DRIFT_GAMMA ** 2),
                    "the normalisation's factor 1 − γ² (from √(1−γ²) on the input) is missing."),
        alternative(_norm_after(DRIFT_RHO, DRIFT_GAMMA, DRIFT_THETA, DRIFT_STEPS - 1),
                    "that is after two inputs: x_1 already holds the first one."),
        alternative(_norm_after(DRIFT_RHO, DRIFT_GAMMA, DRIFT_THETA, DRIFT_STEPS + 1),
                    "that is after four inputs: from x_0 = 0, x_3 holds three."),
    ])
