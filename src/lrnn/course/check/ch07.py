"""Checks for Exercises 7 · Experiments (solutions/07_experiments.ipynb): choosing the ring of
eigenvalues for a memory length, the share of a ring that remembers, where a layer's parameters
go, and comparing two models over seeds."""
from __future__ import annotations

import math

import numpy as np

from ._core import alternative, call, exercise, expect, expect_close, expect_prediction, when


@exercise("7.1", points=2, title="the smallest |λ| that remembers T steps",
          reference="chapter 1, eq. (1.1) (an input reaches x_{t+T} through λ^T); LRU §3.3 "
                    "and Lemma 3.2 (r_min of the ring)",
          stronger_hint="an input reaches the state T steps later multiplied by λ^T, of modulus "
                        "r^T. Require r^T ≥ q and solve for r.")
def _(fn, rng):
    for T, q in [(1, 0.5), (100, 0.5), (1000, 0.1), (784, 0.01), (16384, 0.5),
                 (int(rng.integers(10, 5000)), float(np.round(rng.uniform(0.05, 0.9), 3)))]:
        inputs = {"T": T, "q": q}
        got = call(fn, inputs)
        want = q ** (1.0 / T)
        expect(np.ndim(got) == 0, "return one number, the modulus r.", inputs=inputs,
               received=got)
        expect_close(np.float64(got), np.float64(want), inputs=inputs, rtol=1e-9, atol=1e-12,
                     what="r", hints=[
            alternative(1 - (1 - q) / T, "a linear guess: r^T = q is solved by r = q^(1/T) "
                        "(take logarithms)."),
            alternative(q ** (1.0 / (T - 1)) if T > 1 else -1.0, "the input is multiplied by "
                        "λ once per step: T steps later by λ^T, not λ^(T−1)."),
            alternative(np.exp(-q / T), "r^T = q gives log r = (log q) / T."),
            alternative(q ** (0.5 / T), "q is a fraction of the amplitude: |λ|^T = q (you "
                        "solved the energy equation |λ|^(2T) = q)."),
        ])


def _ring_area(inner, outer):
    """∫ 2πρ dρ from ``inner`` to ``outer`` by two-point Gauss–Legendre quadrature (exact: the
    integrand is linear in ρ)."""
    nodes, weights = np.polynomial.legendre.leggauss(2)
    centre, half_width = (inner + outer) / 2, (outer - inner) / 2
    return half_width * float(np.sum(weights * 2 * np.pi * (centre + half_width * nodes)))


def reference_fraction(r_min, r_max, T, q):
    """P(|λ|^T ≥ q) for λ uniform (in area) on the ring r_min ≤ |λ| ≤ r_max: the area of the
    part of the ring where |λ| ≥ q^(1/T), over the area of the whole ring."""
    threshold = q ** (1.0 / T)
    if r_max == r_min:
        return float(r_max >= threshold)
    remembering = _ring_area(float(np.clip(threshold, r_min, r_max)), r_max)
    return remembering / _ring_area(r_min, r_max)


@exercise("7.2", points=2, title="the share of a ring that remembers T steps",
          reference="LRU Lemma 3.2 (|λ|² uniform on [r_min², r_max²]); chapter 2, eq. (2.2); "
                    "Exercise 2.2",
          stronger_hint="|λ|² is uniform on [r_min², r_max²] (uniform in area), so the share with "
                        "|λ| ≥ r* is (r_max² − r*²)/(r_max² − r_min²), where r* = q^(1/T) is first "
                        "clipped to [r_min, r_max]. A thin ring (r_min = r_max) gives 0 or 1.")
def _(fn, rng):
    cases = [(0.0, 1.0, 100, 0.5), (0.9, 0.999, 1000, 0.5), (0.99, 0.999, 100, 0.5),
             (0.0, 0.9, 1000, 0.5), (0.5, 0.5, 2, 0.2), (0.5, 0.5, 2, 0.3),
             (0.4, 0.95, 50, 0.1)]
    for r_min, r_max, T, q in cases:
        inputs = {"r_min": r_min, "r_max": r_max, "T": T, "q": q}
        got = call(fn, inputs)
        want = reference_fraction(r_min, r_max, T, q)
        r_star = q ** (1.0 / T)
        r = min(max(r_star, r_min), r_max)
        hints = []
        if r_max > r_min:
            hints += [
                alternative((r_max - r) / (r_max - r_min), "|λ| is not uniform on "
                            "[r_min, r_max]: the ring's area inside radius r grows like r², "
                            "so use squared radii (LRU Lemma 3.2)."),
                alternative(1 - (r_max ** 2 - r ** 2) / (r_max ** 2 - r_min ** 2),
                            "that is the share that forgets: the eigenvalues with "
                            "|λ| ≥ q^(1/T) remember."),
                alternative((r_max ** 2 - r_star ** 2) / (r_max ** 2 - r_min ** 2),
                            "clip q^(1/T) to the ring: a share lies in [0, 1]."),
            ]
        hints.append(when(lambda rec, exp: not np.isfinite(rec).all(), "r_min = r_max is a "
                          "thin ring: every eigenvalue has the same modulus, so the share is "
                          "0 or 1."))
        expect(np.ndim(got) == 0, "return one number, the share.", inputs=inputs, received=got)
        expect_close(np.float64(got), np.float64(want), inputs=inputs, rtol=1e-7, atol=1e-9,
                     what="the share", hints=hints)


def reference_param_count(layer, d_model, d_state, n_heads=1):
    """Parameters of one LRU or RotRNN layer, from the shapes its ``init`` returns."""
    import jax
    from lrnn.layers import lru, rotrnn
    def init(key):
        if layer == "lru":
            return lru.init(key, d_model, d_state)
        return rotrnn.init(key, d_model, d_state, n_heads)
    shapes = jax.eval_shape(init, jax.random.PRNGKey(0))       # shapes only, nothing computed
    return sum(int(np.prod(v.shape)) for v in shapes.values())


@exercise("7.3", points=3, title="where a layer's parameters go: LRU against RotRNN",
          reference="LRU §3.2–3.4 and App. A (complex B̃, C̃; ν, θ, γ per state); RotRNN eq. 6, "
                    "Lemmas 2–3 and §3 'Multi-Head Decay' (M, θ, ν per head; real B, C)",
          stronger_hint="count array by array. LRU: ν, θ and γ have one entry per state (N each); "
                        "B̃ (N × H) and C̃ (H × N) are complex, two real numbers per entry; D has "
                        "H. RotRNN: per head of size n = N / n_heads, M is n × n, θ has n/2 angles "
                        "and ν one decay; B (N × H) and C (H × N) are real; D has H.")
def _(fn, rng):
    for layer, H, N, heads in [("lru", 1, 1, 1), ("lru", 64, 64, 1), ("lru", 3, 10, 1),
                               ("rotrnn", 64, 64, 8), ("rotrnn", 4, 8, 2), ("rotrnn", 3, 12, 1),
                               ("rotrnn", 32, 256, 32)]:
        inputs = {"layer": layer, "d_model": H, "d_state": N, "n_heads": heads}
        got = call(fn, inputs)
        want = reference_param_count(layer, H, N, heads)
        expect(np.ndim(got) == 0, "return one integer.", inputs=inputs, received=got)
        if layer == "lru":
            hints = [alternative(want - 2 * N * H, "B̃ and C̃ are complex: each is stored as a "
                                 "real and an imaginary part (B_re, B_im, C_re, C_im)."),
                     alternative(want - N, "the γ normalisation γ_log (LRU eq. 7) is a "
                                 "parameter too."),
                     alternative(want - H, "the skip D ⊙ u has H parameters.")]
        else:
            n = N // heads
            hints = [alternative(want - heads * n * n + N * N, "M is per head, (n × n) with "
                                 "n = d_state / n_heads: P_h = exp(M_h − M_hᵀ), not one "
                                 "N × N matrix."),
                     alternative(want + N * H, "B and C of the RotRNN are real: no imaginary "
                                 "parts."),
                     alternative(want - heads * (n // 2) + N // 2 * heads, "each head has n/2 "
                                 "angles θ (one per 2×2 block)."),
                     alternative(want - heads + N, "one decay ν per head (Multi-Head Decay), "
                                 "not one per state.")]
        expect_close(np.float64(got), np.float64(want), inputs=inputs, rtol=0, atol=0.05,
                     what="the number of parameters", hints=hints)


def reference_win(a, b, higher_is_better=True):
    a = np.asarray(a, np.float64)[:, None]
    b = np.asarray(b, np.float64)[None, :]
    wins = (a > b) if higher_is_better else (a < b)
    return float(np.mean(wins + 0.5 * (a == b)))


@exercise("7.4", points=2, title="the chance that a seed of A beats a seed of B",
          reference="chapter 7, §2 (seeds matter as much as models); the Mann–Whitney "
                    "U statistic U / (n_A n_B), ties counted ½",
          stronger_hint="compare every seed of A with every seed of B: all n_A × n_B pairs, e.g. "
                        "a[:, None] against b[None, :]. A win counts 1 and a tie ½, with 'better' "
                        "meaning higher or lower as higher_is_better says; average over the pairs.")
def _(fn, rng):
    cases = [([0.9], [0.8], True), ([0.5, 0.7], [0.7, 0.6], True),
             ([0.0049, 0.0031, 0.0062], [0.026, 0.007, 0.03], False),
             (list(np.round(rng.uniform(0.6, 0.8, 5), 2)), list(np.round(rng.uniform(0.6, 0.8, 4),
                                                                          2)), True),
             ([1.0, 1.0], [1.0, 0.5, 1.0], True)]
    for a, b, higher in cases:
        inputs = {"a": np.asarray(a), "b": np.asarray(b), "higher_is_better": higher}
        got = call(fn, inputs)
        want = reference_win(a, b, higher)
        A, B = np.asarray(a)[:, None], np.asarray(b)[None, :]
        expect(np.ndim(got) == 0, "return one number in [0, 1].", inputs=inputs, received=got)
        expect_close(np.float64(got), np.float64(want), inputs=inputs, rtol=1e-9, atol=1e-12,
                     what="P(a seed of A beats a seed of B)", hints=[
            alternative(1 - want, "the direction is reversed: with higher_is_better=False "
                        "(an error such as the MSE) the smaller value wins."),
            alternative(float(np.mean((A > B) if higher else (A < B))), "ties count one half "
                        "(neither seed wins)."),
            alternative(float(np.mean((A >= B) if higher else (A <= B))), "ties count one "
                        "half, not a full win."),
            alternative(float(np.mean(a) > np.mean(b)) if higher else
                        float(np.mean(a) < np.mean(b)), "compare every seed of A with every "
                        "seed of B, not the means."),
        ])


# ---------------------------------------------------------------------------------------------
# Predict, then run
# ---------------------------------------------------------------------------------------------

SEEDS_EACH = 3


@exercise("7.6", points=1, kind="value",
          title="predict: the chance that every seed of A beats every seed of B by luck",
          reference="chapter 7, §7.4 (seeds, medians and what they settle)",
          stronger_hint="If the two models are the same, the six results are exchangeable: "
                        "every way of choosing which three of the six sorted results belong to "
                        "A is equally likely. A wins every comparison only if its three are the "
                        "three best; count the ways to choose 3 of 6.")
def _(value, rng):
    want = 1 / math.comb(2 * SEEDS_EACH, SEEDS_EACH)
    expect_prediction(value, want, rtol=0.02, what="the probability", hints=[
        alternative(0.5 ** SEEDS_EACH, "the three seeds are not three coin flips against one "
                                       "fixed opponent: all nine comparisons must go A's way."),
        alternative(0.5 ** (SEEDS_EACH ** 2), "the nine comparisons share seeds, so they are "
                                             "not independent."),
        alternative(0.5, "that is the chance of one comparison."),
    ])
