"""Checks for Exercises 2 · The Linear Recurrent Unit (solutions/02_lru.ipynb)."""
from __future__ import annotations

import math

import numpy as np

from ._core import (alternative, call, crandn, exercise, expect, expect_close, expect_prediction,
                    randn, when)


def _pair(got, inputs, names):
    expect(isinstance(got, (tuple, list)) and len(got) == 2,
           f"the result must be a pair ({names}), received a {type(got).__name__}"
           + (f" of length {len(got)}" if isinstance(got, (tuple, list)) else "") + ".",
           inputs=inputs, hint=f"`return {names}`.")
    return got


def random_params(rng, h, n, r_min=0.4, r_max=0.95, max_phase=2 * np.pi, bidirectional=False):
    """LRU parameters with the layout and distributions of ``lrnn.layers.lru.init``, drawn with
    NumPy (no JAX compilation for every new shape); ``bidirectional``: C of shape (H, 2N), the
    forward states' columns first."""
    u1, u2 = rng.uniform(0.01, 0.99, n), rng.uniform(0.01, 0.99, n)
    nu = -0.5 * np.log(u1 * (r_max ** 2 - r_min ** 2) + r_min ** 2)
    theta = max_phase * u2
    lam = np.exp(-nu + 1j * theta)
    p = {"nu_log": np.log(nu), "theta_log": np.log(theta),
         "B_re": rng.standard_normal((n, h)) / np.sqrt(2 * h),
         "B_im": rng.standard_normal((n, h)) / np.sqrt(2 * h),
         "C_re": rng.standard_normal((h, 2 * n if bidirectional else n)) / np.sqrt(n),
         "C_im": rng.standard_normal((h, 2 * n if bidirectional else n)) / np.sqrt(n),
         "D": rng.standard_normal(h),
         "gamma_log": np.log(np.sqrt(1 - np.abs(lam) ** 2))}
    return {k: v.astype(np.float32) for k, v in p.items()}


def _t_step_radius(u, r_min, r_max, T, iterations=200):
    """|λ| such that the share ``u`` of the ring r_min <= |μ| <= r_max (its area) lies inside
    |μ| = |λ|^T: the inverse of F(r) = (r^(2T) − r_min²)/(r_max² − r_min²), found by bisection
    on [r_min^(1/T), r_max^(1/T)] in float64 (a numerical inverse CDF, not the closed form)."""
    u = np.asarray(u, np.float64)
    lo = np.full(u.shape, r_min ** (1.0 / T))
    hi = np.full(u.shape, r_max ** (1.0 / T))
    if r_max == r_min:
        return hi
    for _ in range(iterations):
        mid = 0.5 * (lo + hi)
        share = (mid ** (2 * T) - r_min ** 2) / (r_max ** 2 - r_min ** 2)
        lo, hi = np.where(share < u, mid, lo), np.where(share < u, hi, mid)
    return 0.5 * (lo + hi)


def _t_step_moduli(nu_log, T):
    """|λ|^T = e^(−T ν) for the received log ν (the moduli of the T-step map Λ^T)."""
    with np.errstate(all="ignore"):
        return np.exp(-T * np.exp(np.real(np.asarray(nu_log, np.float64))))


@exercise("2.1", points=3, title="a ring for the T-step map (LRU Lemma 3.2)",
          reference="LRU Lemma 3.2 (the ring sampler), applied to the T-step map Λ^T, and §3.3 "
                    "(the layer learns log ν, log θ); chapter 2, eqs. (2.2)–(2.3)",
          stronger_hint="Λ^T is diagonal with entries μ = λ^T = e^(−Tν + iTθ). Lemma 3.2 for μ: "
                        "|μ|² = e^(−2Tν) must be uniform on [r_min², r_max²] (the area argument "
                        "holds for μ, not for λ), and arg μ = Tθ uniform on [0, max_phase]. Map "
                        "u1 onto that interval, solve for ν, and take the slowest root, θ ≤ "
                        "max_phase/T. Return (log ν, log θ).")
def _(fn, rng):
    """Long because each typical mistake gets its own hint, computed from the same uniforms:
    the hints only make sense beside the shapes and rings they are computed for."""
    for n, r_min, r_max, max_phase, T in [(3, 0.4, 0.9, 2 * np.pi, 1), (5, 0.4, 0.9, 2 * np.pi, 4),
                                          (1, 0.0, 1.0, np.pi, 2), (4, 0.9, 0.999, np.pi / 10, 16),
                                          (3, 0.5, 0.5, 2 * np.pi, 3),
                                          (200, 0.2, 0.95, np.pi / 2, 50)]:
        u1 = rng.uniform(0.01, 0.99, n).astype(np.float32)
        u2 = rng.uniform(0.01, 0.99, n).astype(np.float32)
        inputs = {"u1": u1, "u2": u2, "r_min": r_min, "r_max": r_max, "max_phase": max_phase,
                  "T": T}
        got = _pair(call(fn, inputs), inputs, "nu_log, theta_log")
        u1d, u2d = u1.astype(np.float64), u2.astype(np.float64)
        want_nu = np.log(-np.log(_t_step_radius(u1d, r_min, r_max, T)))
        want_theta = np.log(max_phase * u2d / T)      # arg μ = Tθ, the slowest of the T roots

        def nu_log_of(mu_sq, power=T):
            """log ν for |λ|^power² = mu_sq (the moduli a typical mistake gives)."""
            with np.errstate(all="ignore"):
                return np.log(-np.log(mu_sq) / (2 * power))
        area_sq = u1d * (r_max ** 2 - r_min ** 2) + r_min ** 2
        lo_root, hi_root = r_min ** (2 / T), r_max ** (2 / T)
        ring = (r_min, r_max)
        nu_hints = [
            alternative(np.exp(want_nu), "the first item looks like ν itself: the layer "
                                         "learns ν_log = log ν."),
            alternative(nu_log_of((1 - u1d) * (r_max ** 2 - r_min ** 2) + r_min ** 2),
                        "your map runs the wrong way: u1 = 0 must give the inner edge of the "
                        "ring (|λ|^T = r_min) and u1 = 1 the outer edge."),
        ]
        if T > 1:
            nu_hints += [
                alternative(nu_log_of(area_sq, 1),
                            "your λ are themselves uniform on the ring [r_min, r_max]: their "
                            "T-step map Λ^T then decays T times as fast and its moduli |λ|^T fall "
                            "inside the ring."),
                alternative(nu_log_of((u1d * (hi_root - lo_root) + lo_root) ** T),
                            "Λ^T lands on the ring, but too many of its eigenvalues sit near the "
                            "inner edge: your λ are uniform in area on the ring of their own "
                            "radii, r^(1/T), and their T-th powers are not."),
                alternative(nu_log_of(area_sq, 1.0 / T),
                            "your λ decay faster than the ring allows: their T-step map Λ^T "
                            "lies far inside the ring."),
            ]
        if r_max > r_min:
            nu_hints += [
                alternative(nu_log_of((r_min + u1d * (r_max - r_min)) ** 2),
                            "Λ^T lands on the ring, but its moduli are spread evenly in radius: "
                            "too many eigenvalues near the inner edge, where the ring has less "
                            "area."),
                alternative(nu_log_of(area_sq ** 2),
                            "Λ^T falls inside the ring: its moduli |λ|^T are the squares of the "
                            "ones the ring asks for."),
            ]
        nu_hints += [
            when(lambda r, e: np.any(np.abs(_t_step_moduli(r, T) - np.clip(
                _t_step_moduli(r, T), *ring)) > 1e-4),
                 "some moduli |λ|^T of the T-step map fall outside the ring [r_min, r_max]."),
            when(lambda r, e: np.mean(_t_step_moduli(r, T) ** 2) < np.mean(
                _t_step_moduli(e, T) ** 2),
                 "too many eigenvalues of the T-step map Λ^T near the inner edge of the ring, "
                 "too few near the outer edge."),
            when(lambda r, e: np.mean(_t_step_moduli(r, T) ** 2) > np.mean(
                _t_step_moduli(e, T) ** 2),
                 "too many eigenvalues of the T-step map Λ^T near the outer edge of the ring, "
                 "too few near the inner edge."),
        ]
        expect_close(got[0], want_nu, inputs=inputs, what="nu_log (first item)", hints=nu_hints)
        theta_hints = [
            alternative(np.exp(want_theta), "the second item looks like θ itself: return "
                                            "log θ."),
            alternative(np.log(max_phase * (1 - u2d) / T), "your phases run the wrong way: "
                                                           "u2 = 0 must give θ = 0."),
        ]
        if T > 1:
            theta_hints.append(alternative(np.log(max_phase * u2d),
                                           "Λ^T turns by Tθ: with these phases its eigenvalues "
                                           "spread over [0, T·max_phase], past max_phase."))
        if not np.isclose(max_phase, 2 * np.pi):
            theta_hints.append(alternative(np.log(2 * np.pi * u2d / T),
                                           "the phases of Λ^T spread over [0, 2π], whatever "
                                           "max_phase."))
        expect_close(got[1], want_theta, inputs=inputs, what="theta_log (second item)",
                     hints=theta_hints)


def _memory(r):
    """τ = −1/ln r, the steps after which a state of modulus r has shrunk by e (0 at r = 0,
    ∞ at r = 1)."""
    if r >= 1:
        return np.inf
    with np.errstate(divide="ignore"):
        return -1 / np.log(r)


@exercise("2.2", points=2, title="the distribution of the memory on the ring",
          reference="LRU Lemma 3.2 and its proof (App. F.1); chapter 2, §2.3: a uniform "
                    "distribution in area, and |λ|^t decays by e after −1/ln|λ| steps",
          stronger_hint="first the distribution of |λ|: the share of the ring's area within "
                        "radius r is (r² − r_min²)/(r_max² − r_min²), clipped to [0, 1]. The "
                        "memory τ = −1/ln|λ| grows with |λ|, so τ ≤ t exactly when |λ| ≤ "
                        "e^(−1/t): evaluate the share at that radius.")
def _(fn, rng):
    from scipy import integrate
    for r_min, r_max in [(0.4, 0.9), (0.0, 1.0), (0.9, 0.999)]:
        lo, hi = _memory(r_min), _memory(r_max)
        spread = rng.uniform(np.log(max(0.8 * lo, 0.1)), np.log(min(1.2 * hi, 1e4)), 7)
        t = np.sort(np.concatenate([[v for v in (lo, hi) if 0 < v < np.inf],
                                    [_memory(0.5 * (r_min + r_max))], np.exp(spread)]))
        inputs = {"t": t, "r_min": r_min, "r_max": r_max}
        got = call(fn, inputs)
        # the share of the ring's area (2πr dr) inside the radius e^(−1/t), by quadrature
        edge = np.clip(np.exp(-1 / t), r_min, r_max)
        want = np.array([integrate.quad(lambda r: 2 * r, r_min, e)[0] for e in edge]) \
            / (r_max ** 2 - r_min ** 2)
        share = (np.exp(-2 / t) - r_min ** 2) / (r_max ** 2 - r_min ** 2)
        expect_close(got, want, inputs=inputs, rtol=1e-5, atol=1e-6, what="the CDF", hints=[
            alternative(np.clip((np.exp(-1 / t) - r_min) / (r_max - r_min), 0.0, 1.0),
                        "|λ| is not uniform in r: the area of the ring between r_min and r grows "
                        "like r², so P(|λ| ≤ r) is quadratic in r."),
            alternative(np.clip((np.exp(-1 / t) - r_min ** 2) / (r_max ** 2 - r_min ** 2), 0, 1),
                        "the share of the area needs the squared radius: (e^(−1/t))² = "
                        "e^(−2/t)."),
            alternative(1 - want, "that is P(τ > t), the share that remembers longer than t: "
                                  "a longer memory means a larger |λ|."),
            alternative(np.clip((np.exp(-2 * t) - r_min ** 2) / (r_max ** 2 - r_min ** 2), 0, 1),
                        "τ = −1/ln|λ|, so τ ≤ t means |λ| ≤ e^(−1/t), not e^(−t)."),
            alternative(share, "a probability stays in [0, 1]: clip below the shortest and "
                               "above the longest memory of the ring."),
        ])


def _eigen_and_input(params, gamma=True, theta_exp=True):
    """λ and the input matrix diag(γ) B in complex128 (or a typical mistake: γ left out, the
    phase taken as θ_log itself)."""
    theta_log = np.asarray(params["theta_log"], np.float64)
    theta = np.exp(theta_log) if theta_exp else theta_log
    lam = np.exp(-np.exp(np.asarray(params["nu_log"], np.float64)) + 1j * theta)
    b = params["B_re"] + 1j * params["B_im"].astype(np.float64)
    if gamma:
        b = b * np.exp(params["gamma_log"].astype(np.float64))[:, None]
    return lam, b


def _naive_states(params, u, x0=None, *, gamma=True, theta_exp=True, power=1, scale_x0=False):
    """LRU eq. 7 by an explicit loop in complex128 from x_{−1} = 0, plus Λ^(k + power) x0 for
    a carried state x0: power = 1 is the recurrence from x_{−1} = x0; the other arguments make
    the typical mistakes (power 0: x0 taken as a part of x_0, no step of Λ; scale_x0: x0 sent
    through γ like an input)."""
    lam, b = _eigen_and_input(params, gamma, theta_exp)
    bu = np.einsum("...lh,nh->...ln", u.astype(np.float64), b)
    x = np.zeros(bu.shape, np.complex128)
    prev = np.zeros(bu.shape[:-2] + bu.shape[-1:], np.complex128)
    for k in range(bu.shape[-2]):
        prev = lam * prev + bu[..., k, :]
        x[..., k, :] = prev
    if x0 is not None:
        carried = np.asarray(x0, np.complex128)
        if scale_x0:
            carried = carried * np.exp(params["gamma_log"].astype(np.float64))
        steps = np.arange(bu.shape[-2])[:, None] + power
        x = x + lam ** steps * carried[..., None, :]
    return x


@exercise("2.3", points=4, title="the LRU hidden states from a carried state",
          reference="LRU eq. 7 and §3.3, started from a state x_{-1} = x_init instead of 0; "
                    "chapter 2, eqs. (2.3) and (2.5); chapter 1, eq. (1.1) (unrolling)",
          stronger_hint="the recurrence is linear, so its states are the sum of two runs: the "
                        "inputs from a zero state (the scan you know, of (γ ⊙ B) u_k along axis "
                        "−2) and x_init with no input at all. The second run is x_init multiplied "
                        "by λ once per step: x_init is the state *before* step 0, so x_0 holds "
                        "λ x_init and x_k holds λ^(k+1) x_init. (Equivalently: add λ ⊙ x_init to "
                        "the first projected input and scan from zero.)")
def _(fn, rng):
    from lrnn.scan.reference import linear_scan
    for lead, length, h, n in [((), 6, 2, 3), ((), 1, 1, 1), ((2,), 9, 3, 4)]:
        params = random_params(rng, h, n)
        u = randn(rng, *lead, length, h)
        x0 = crandn(rng, *lead, n)
        inputs = {"params": params, "u": u, "x_init": x0}
        got = call(fn, inputs)
        lam, b = _eigen_and_input(params)
        want = linear_scan(lam, np.einsum("...lh,nh->...ln", u.astype(np.float64), b),
                           initial=x0.astype(np.complex128))

        late = u.copy()
        late[..., 0, :] = 0                     # x_0 = x_init: the first input is never read

        def states(**mistake):
            return lambda: _naive_states(params, u, x0, **mistake)
        expect_close(got, want, inputs=inputs, rtol=2e-4, atol=2e-5, time_axis=-2,
                     dtype="complex", what="the states x", hints=[
                         alternative(lambda: _naive_states(params, u),
                                     "these are the states from x_{−1} = 0: the carried state "
                                     "x_init is missing (what it becomes after k + 1 steps adds "
                                     "to every x_k)."),
                         alternative(states(power=0),
                                     "one power of λ short: x_init is the state *before* step "
                                     "0, so it passes through λ once more, x_0 = λ x_init + (γ ⊙ "
                                     "B) u_0, and x_k holds λ^(k+1) x_init."),
                         alternative(states(power=2),
                                     "one power of λ too many: x_0 = λ x_init + (γ ⊙ B) u_0, so "
                                     "x_k holds λ^(k+1) x_init."),
                         alternative(states(scale_x0=True),
                                     "x_init is a state, not an input: it does not pass "
                                     "through the γ normalisation."),
                         alternative(lambda: _naive_states(params, late, x0, power=0),
                                     "x_init is x_{−1}, the state before the first input: x_0 "
                                     "= λ x_init + (γ ⊙ B) u_0 still reads u_0."),
                         alternative(states(gamma=False),
                                     "the γ normalisation is missing: the input of state j is "
                                     "exp(γ_log_j) · (B u_k)_j (LRU eq. 7)."),
                         alternative(states(theta_exp=False),
                                     "the phase is θ = exp(θ_log), not θ_log."),
                         when(lambda r, e: np.allclose(np.abs(r), np.abs(e), rtol=1e-3,
                                                       atol=1e-4) and np.any(lam.imag != 0)
                              and not np.allclose(r, np.conj(e), rtol=1e-3, atol=1e-4),
                              "right magnitudes, wrong phases: check λ = exp(−exp(ν_log) + "
                              "i·exp(θ_log)) and B = B_re + i·B_im."),
                     ])


def _bidirectional_outputs(params, u):
    """y_k = Re(C [x→_k; x←_k]) + D ⊙ u_k of a bidirectional LRU layer in complex128, both
    directions by the step-by-step reference scan: x→_k = Λ x→_{k−1} + (γ ⊙ B) u_k from
    x→_{−1} = 0 and x←_k = Λ x←_{k+1} + (γ ⊙ B) u_k from x←_L = 0."""
    from lrnn.scan.reference import linear_scan
    lam, b = _eigen_and_input(params)
    bu = np.einsum("...lh,nh->...ln", np.asarray(u, np.float64), b)
    states = np.concatenate([linear_scan(lam, bu), linear_scan(lam, bu, reverse=True)], axis=-1)
    c = params["C_re"] + 1j * params["C_im"].astype(np.float64)
    return np.einsum("...ln,hn->...lh", states, c).real + params["D"] * np.asarray(u)


def impulse_kernel(params, L):
    """The two-sided kernel K (2L − 1, H, H) of a bidirectional LRU layer, read off its outputs:
    y_k = Σ_m K[L − 1 + k − m] u_m. Column i of K[L − 1 + j] is the output j steps after a unit
    impulse on input channel i: an impulse at the last step shows the lags −(L − 1) … 0 in the
    outputs k = 0 … L − 1, one at the first step the lags 0 … L − 1."""
    h = params["D"].shape[0]
    u = np.zeros((2, h, L, h))
    u[0, np.arange(h), L - 1, np.arange(h)] = 1.0
    u[1, np.arange(h), 0, np.arange(h)] = 1.0
    y = _bidirectional_outputs(params, u)                   # (impulse, channel i, step k, out)
    K = np.empty((2 * L - 1, h, h))
    K[:L] = np.transpose(y[0], (1, 2, 0))
    K[L - 1:] = np.transpose(y[1], (1, 2, 0))
    return K


def _kernel_variant(params, L, *, lag0=("fwd", "bwd", "D"), swap=False, late_future=False,
                    gamma=True, conj=False):
    """The two-sided kernel lag by lag from its parts (the right one by default) or a typical
    mistake: ``lag0`` lists what lag 0 holds, ``swap`` puts the backward states on the past side,
    ``late_future`` makes x←_k read u_{k+1} instead of u_k, ``conj`` flips the sign of C_im."""
    lam, b = _eigen_and_input(params, gamma)
    n, h = lam.shape[0], params["D"].shape[0]
    c = params["C_re"] + (-1j if conj else 1j) * params["C_im"].astype(np.float64)
    past, future = (c[:, n:], c[:, :n]) if swap else (c[:, :n], c[:, n:])
    K = np.zeros((2 * L - 1, h, h))
    for j in range(1, L):
        K[L - 1 + j] = (past @ np.diag(lam ** j) @ b).real
        K[L - 1 - j] = (future @ np.diag(lam ** (j - 1 if late_future else j)) @ b).real
    parts = {"fwd": (past @ b).real, "bwd": (future @ b).real, "D": np.diag(params["D"]),
             "2D": 2 * np.diag(params["D"])}
    K[L - 1] = sum(parts[p] for p in lag0)
    return K


@exercise("2.4", points=3, title="the two-sided kernel of a bidirectional LRU layer",
          reference="LRU §3.3 and App. D.1 (bidirectional layers for PathFinder and PathX); "
                    "RotRNN App. B.2 (shared Λ and B; one C per direction); chapter 1, eqs. "
                    "(1.1)–(1.2) (a layer as a convolution)",
          stronger_hint="unroll each direction as in eq. (1.1). The forward states give y_k the "
                        "terms Re(C_f Λ^j (γ ⊙ B)) u_{k−j}, j ≥ 0 (the past); the backward states "
                        "x←_k = Λ x←_{k+1} + (γ ⊙ B) u_k give Re(C_b Λ^j (γ ⊙ B)) u_{k+j}, j ≥ 0 "
                        "(the future), with C_f, C_b the first and last N columns of C. Put the "
                        "past at K[L − 1 + j], the future at K[L − 1 − j]; at lag 0 both "
                        "directions read u_k, and the skip diag(D) adds once.")
def _(fn, rng):
    for h, n, L in [(1, 1, 1), (2, 3, 4), (3, 2, 7), (2, 4, 12)]:
        params = random_params(rng, h, n, bidirectional=True)
        inputs = {"params": params, "L": L}
        got = call(fn, inputs)
        expect(L == 1 or np.shape(got) != (L, h, h),
               f"the kernel has shape {np.shape(got)}, expected {(2 * L - 1, h, h)}.",
               inputs=inputs, hint="a bidirectional layer hears the future too: the lags run "
                                   "from −(L − 1) to L − 1, 2L − 1 matrices of shape (H, H).")
        want = impulse_kernel(params, L)

        def variant(**mistake):
            return lambda: _kernel_variant(params, L, **mistake)
        one_way = ("both directions read u_k (the backward state x←_k = Λ x←_{k+1} + (γ ⊙ B) u_k "
                   "too), so lag 0 holds the current input's term of each direction, plus the "
                   "skip.")
        expect_close(got, want, inputs=inputs, rtol=2e-4, atol=2e-5, what="the kernel K",
                     hints=[
                         alternative(variant(lag0=("fwd", "D")), one_way),
                         alternative(variant(lag0=("bwd", "D")), one_way),
                         alternative(variant(lag0=("fwd", "bwd")),
                                     "the skip D ⊙ u_k is missing: it adds diag(D) at lag 0."),
                         alternative(variant(lag0=("fwd", "bwd", "2D")),
                                     "the skip D ⊙ u_k is added once, not once per direction."),
                         alternative(variant(swap=True),
                                     "past and future are swapped: the forward states (the first "
                                     "N columns of C) carry the past, u_{k−j} at K[L − 1 + j], "
                                     "the backward states the future."),
                         alternative(variant(late_future=True, lag0=("fwd", "D")),
                                     "the backward states start one step late: x←_k = Λ x←_{k+1} "
                                     "+ (γ ⊙ B) u_k reads u_k, so u_{k+j} enters with Λ^j, "
                                     "not Λ^(j−1)."),
                         alternative(variant(gamma=False),
                                     "the γ normalisation is missing: the input matrix is "
                                     "diag(exp(γ_log)) B (LRU eq. 7)."),
                         alternative(variant(conj=True),
                                     "C = C_re + i·C_im: the sign of the imaginary part is "
                                     "flipped (a stray conjugate)."),
                     ])


def _mean_state_variance(modulus_sq, T):
    """(1/T) Σ_{k<T} Σ_{i≤k} s^i for each s = |λ|², by running sums (white noise, γ = 1,
    x_{−1} = 0): the mean of E|x_k|² over a sequence of T steps."""
    s = np.asarray(modulus_sq, np.float64)[..., None]
    per_step = np.cumsum(s ** np.arange(T), axis=-1)              # E|x_k|², k = 0 … T−1
    return per_step.mean(axis=-1)


@exercise("2.5", points=2, title="the γ normalisation for sequences of T steps",
          reference="LRU §3.4, eqs. 6–7; chapter 2, §2.5 (the variance at a finite step t) and "
                    "eq. (2.5)",
          stronger_hint="with γ the variance at step k is E|x_k|² = γ² Σ_{i=0..k} s^i = γ² (1 − "
                        "s^(k+1))/(1 − s), s = |λ|² = exp(−2·exp(nu_log)). Sum it over k = 0, …, "
                        "T − 1 (a second geometric series), divide by T, set the mean to 1 and "
                        "solve for γ². Return ½ log γ²; T = 1 must give γ = 1.")
def _(fn, rng):
    for n, T, r_hi in [(3, 1, 0.99), (1, 2, 0.9), (4, 10, 0.999), (5, 100, 0.9999),
                       (6, 1000, 0.999)]:
        modulus = rng.uniform(0.3, r_hi, n)
        nu_log = np.log(-np.log(modulus)).astype(np.float32)
        inputs = {"nu_log": nu_log, "T": T}
        got = call(fn, inputs)
        s = np.exp(-2 * np.exp(nu_log.astype(np.float64)))
        want = -0.5 * np.log(_mean_state_variance(s, T))
        hints = [alternative(np.exp(want), "return the logarithm γ_log = log γ."),
                 alternative(2 * want, "that is log γ²: γ_log = ½ log γ²."),
                 alternative(0.5 * np.log1p(-s),
                             "that is γ = √(1 − |λ|²), the limit T → ∞ (LRU eq. 6): from "
                             "x_{−1} = 0 the early steps hold less variance, so a sequence of T "
                             "steps needs a larger γ."),
                 alternative(0.5 * np.log((1 - s) / (1 - s ** T)),
                             "that makes the variance 1 at the last step k = T − 1 only; the "
                             "mean over the T steps k = 0, …, T − 1 must be 1."),
                 alternative(-0.5 * np.log(_mean_state_variance(s, T + 1)),
                             "off by one: that is the mean over T + 1 steps; x_{−1} = 0, so the "
                             "steps are k = 0, …, T − 1.")]
        if T > 1:
            hints.append(alternative(-0.5 * np.log(_mean_state_variance(s, T - 1)),
                                     "off by one: that is the mean over T − 1 steps; the steps "
                                     "are k = 0, …, T − 1, and x_0 = γ u_0 already counts."))
        expect_close(got, want, inputs=inputs, rtol=1e-4, atol=1e-6, what="gamma_log",
                     hints=hints)


@exercise("2.6", points=3, title="the forward-pass blow-up of a ring uniform in radius",
          reference="LRU Proposition 3.3, its proof (App. F.2) and eq. 5; chapter 2, eq. (2.4) "
                    "(the same average, for the ring uniform in area)",
          stronger_hint="average 1/(1 − r²) over r uniform on [r_min, r_max]: divide its integral "
                        "by r_max − r_min. Split 1/(1 − r²) into partial fractions ½[1/(1 − r) + "
                        "1/(1 + r)]; the antiderivative is artanh r. When r_min = r_max the "
                        "difference quotient becomes a derivative.")
def _(fn, rng):
    from scipy import integrate

    from lrnn.layers import lru
    cases = [(0.4, 0.9), (0.0, 0.5), (0.9, 0.999), (0.5, 0.5), (0.99, 0.99),
             (float(np.round(rng.uniform(0.1, 0.5), 3)), float(np.round(rng.uniform(0.6, 0.95), 3)))]
    for r_min, r_max in cases:
        inputs = {"r_min": r_min, "r_max": r_max}
        got = call(fn, inputs)
        width = r_max - r_min
        if width == 0:
            want = np.float64(1 / (1 - r_max ** 2))
        else:
            integral, _ = integrate.quad(lambda r: 1 / (1 - r * r), r_min, r_max,
                                         epsabs=0, epsrel=1e-12, limit=200)
            want = np.float64(integral / width)
        hints = [when(lambda r, e: not np.all(np.isfinite(r)) and width == 0,
                      "for r_min = r_max the formula is 0/0: use its limit, the value of "
                      "1/(1 − r²) at r = r_max (a single eigenvalue modulus, LRU eq. 5).")]
        if width > 0:
            artanh = np.arctanh(r_max) - np.arctanh(r_min)
            hints += [alternative(np.float64(lru.forward_blowup(r_min, r_max)),
                                  "that is the ring uniform in area of Prop. 3.3 (eq. 2.4), "
                                  "where |λ|² is uniform; here |λ| itself is uniform on "
                                  "[r_min, r_max]."),
                      alternative(artanh, "the factor 1/(r_max − r_min) is missing: an average "
                                          "divides the integral by the interval's length."),
                      alternative(artanh / (r_max ** 2 - r_min ** 2),
                                  "divide by the length of the interval of r, r_max − r_min, "
                                  "not by r_max² − r_min²."),
                      alternative(2 * artanh / width,
                                  "1/(1 − r²) = ½[1/(1 − r) + 1/(1 + r)]: the ½ is missing."),
                      alternative(np.log((1 - r_min) / (1 - r_max)) / width,
                                  "1/(1 − r²) = ½[1/(1 − r) + 1/(1 + r)]: that integrates "
                                  "1/(1 − r) only.")]
        expect_close(got, want, inputs=inputs, rtol=1e-5, atol=1e-8,
                     what="the mean of 1/(1 − |λ|²)", hints=hints)


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
