"""Checks for Exercises 7 · Experiments (solutions/07_experiments.ipynb): choosing the ring of
eigenvalues for a memory length, the share of a ring that remembers, where a layer's parameters
go, and comparing two models over seeds."""
from __future__ import annotations

import functools
import math
from fractions import Fraction

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
    return _traced_count(layer, int(d_model), int(d_state), int(n_heads))


@functools.cache
def _traced_count(layer, d_model, d_state, n_heads):
    import jax
    from lrnn.layers import lru, rotrnn

    def init(key):
        if layer == "lru":
            return lru.init(key, d_model, d_state)
        return rotrnn.init(key, d_model, d_state, n_heads)
    shapes = jax.eval_shape(init, jax.random.PRNGKey(0))       # shapes only, nothing computed
    return sum(int(np.prod(v.shape)) for v in shapes.values())


def _closest_heads(target, count, start=1):
    """The number of heads k ≥ 1 whose ``count(k)`` (increasing in k) is closest to ``target``,
    the smaller on a tie, by walking up from one head."""
    k = start
    while count(k + 1) < target:
        k += 1
    return min((k, k + 1), key=lambda j: (abs(count(j) - target), j))


def reference_matching_state(d_model, d_state, head_size):
    """The RotRNN state size (heads × head_size) whose layer of width ``d_model`` has the
    number of parameters closest to the LRU layer (d_model, d_state): both counts traced from
    the library's ``init``; a RotRNN layer grows by the same count with every head."""
    H, n = d_model, head_size
    lru_count = reference_param_count("lru", H, d_state)
    one_head = reference_param_count("rotrnn", H, n, 1)
    return n * _closest_heads(lru_count, lambda k: H + k * (one_head - H))


@exercise("7.3", points=3, title="a RotRNN with the LRU's parameter budget",
          reference="LRU §3.2–3.4 and App. A (complex B̃, C̃; ν, θ, γ per state); RotRNN eq. 6, "
                    "Lemmas 2–3, §3 'Multi-Head Decay' and App. B.2 (heads of 8)",
          stronger_hint="count array by array. LRU: ν, θ and γ have one entry per state; B̃ "
                        "(N × H) and C̃ (H × N) are complex, two real numbers per entry; D has H. "
                        "RotRNN, per head of n states: M is n × n, θ has n/2 angles, ν one decay, "
                        "B_h is n × H and C has n columns of H; D (H) once. So the RotRNN's count "
                        "is H plus the number of heads times a per-head count: solve for the "
                        "number of heads and compare the two whole numbers around it (at least "
                        "one head).")
def _(fn, rng):
    cases = [(2, 1, 16), (1, 1, 2), (64, 64, 8), (16, 12, 4), (64, 100, 8), (24, 40, 8),
             (48, 64, 16), (int(rng.integers(4, 97)), int(rng.integers(4, 129)),
                          int(rng.choice([2, 4, 8, 16])))]
    for H, N, n in cases:
        inputs = {"d_model": H, "d_state": N, "head_size": n}
        got = call(fn, inputs)
        expect(np.ndim(got) == 0 and float(got) == int(float(got)),
               "return one whole number, the RotRNN's state size.", inputs=inputs, received=got)
        want = reference_matching_state(H, N, n)
        lru_count = reference_param_count("lru", H, N)
        per_head = reference_param_count("rotrnn", H, n, 1) - H
        rot = lambda k, extra=0: H + k * (per_head + extra)                       # noqa: E731
        expect_close(np.float64(got), np.float64(want), inputs=inputs, rtol=0, atol=0.05,
                     what="the RotRNN's state size", hints=[
            alternative(want // n, "return the state size, heads × head_size, not the number "
                        "of heads."),
            alternative(n * _closest_heads(lru_count - 2 * N * H, rot), "B̃ and C̃ of the LRU "
                        "are complex: each is stored as a real and an imaginary part."),
            alternative(n * _closest_heads(lru_count, lambda k: rot(k, 2 * n * H)), "B and C "
                        "of the RotRNN are real: no imaginary parts."),
            alternative(n * max(1, (lru_count - H) // per_head), "round to the nearest number "
                        "of heads: compare the counts of the two whole numbers around your "
                        "solution."),
            alternative(2 * N, "2N equalises the real state size (N complex states are 2N real "
                        "numbers), not the number of parameters."),
            when(lambda r, e: float(r) % n != 0, "the state size is a whole number of heads: "
                 "a multiple of head_size."),
            when(lambda r, e: float(r) <= 0, "a RotRNN has at least one head."),
        ])


def reference_seeds_needed(n_a, alpha):
    """The smallest n_b ≥ 1 for which a clean sweep of A (its n_a results the n_a best) has
    probability at most ``alpha`` when all n_a + n_b results are exchangeable: drawing the best
    results one by one, the i-th best is one of A's remaining n_a − i seeds with probability
    (n_a − i) / (n_a + n_b − i). Exact fractions, so a boundary case is decided exactly."""
    bound = Fraction(alpha)
    n_b = 1
    while math.prod((Fraction(n_a - i, n_a + n_b - i) for i in range(n_a)), start=1) > bound:
        n_b += 1
    return n_b


def _smallest_n_b(chance, alpha, limit=100_000):
    """The smallest n_b ≥ 1 with chance(n_b) ≤ alpha (a wrong chance, for the hints)."""
    return next((n_b for n_b in range(1, limit) if chance(n_b) <= alpha), -1)


@exercise("7.4", points=2, title="how many seeds make a clean sweep convincing",
          reference="chapter 7, §7.2 (seeds matter as much as models); a clean sweep under "
                    "exchangeable results, as in the Mann–Whitney test's null hypothesis",
          stronger_hint="if the two models are equally good, every choice of which n_a of the "
                        "n_a + n_b sorted results belong to A is equally likely, and a clean "
                        "sweep is exactly one of those choices. Count the choices (a binomial "
                        "coefficient) and increase n_b from 1 until one over that count is at "
                        "most alpha.")
def _(fn, rng):
    n_a_random = int(rng.integers(1, 7))
    alpha_random = float(np.round(rng.uniform(0.002, 0.2), 4))
    while any(abs(math.comb(n_a_random + n_b, n_a_random) * alpha_random - 1) < 1e-6
              for n_b in range(1, 2000)):
        alpha_random *= 1.01                 # keep the random case off a boundary
    for n_a, alpha in [(1, 0.15), (2, 0.02), (3, 0.2), (10, 0.5), (2, 0.05), (3, 0.01),
                       (1, 0.045), (5, 0.001), (n_a_random, alpha_random)]:
        inputs = {"n_a": n_a, "alpha": alpha}
        got = call(fn, inputs)
        expect(np.ndim(got) == 0 and float(got) == int(float(got)),
               "return one whole number of seeds, n_b.", inputs=inputs, received=got)
        want = reference_seeds_needed(n_a, alpha)
        sweep = lambda n_b: 1 / math.comb(n_a + n_b, n_a)                        # noqa: E731
        expect_close(np.float64(got), np.float64(want), inputs=inputs, rtol=0, atol=0.05,
                     what="the number of seeds of B", hints=[
            alternative(_smallest_n_b(lambda n_b: 0.5 ** (n_a * n_b), alpha),
                        "the n_a × n_b comparisons share seeds, so they are not independent "
                        "coin flips."),
            alternative(_smallest_n_b(lambda n_b: math.perm(n_a + n_b, n_a) ** -1.0, alpha),
                        "A's seeds may finish in any order among themselves: only which "
                        "results are A's matters, not their order."),
            alternative(_smallest_n_b(lambda n_b: 2 * sweep(n_b), alpha),
                        "the question is whether A beats B, decided before the runs: a clean "
                        "sweep of B does not count."),
            alternative(want - 1, "that n_b still leaves a clean sweep more likely than "
                        "alpha: return the smallest n_b at which it is at most alpha."),
            alternative(want + n_a, "return the seeds of B only, n_b, not n_a + n_b."),
            when(lambda r, e: float(r) < 1, "B needs at least one seed."),
        ])


# ---------------------------------------------------------------------------------------------
# Predict, then run
# ---------------------------------------------------------------------------------------------

SEEDS_EACH = 3


def reference_share_at_least(n, wins):
    """P(the win share of A ≥ wins / n²) for two equally good models with n seeds each: all
    C(2n, n) choices of A's ranks are equally likely, and each is counted by its wins."""
    import itertools
    splits = list(itertools.combinations(range(2 * n), n))    # A's ranks, 0 = the best
    def a_wins(ranks):
        b = sorted(set(range(2 * n)) - set(ranks))
        return sum(r < s for r in ranks for s in b)
    return sum(a_wins(ranks) >= wins for ranks in splits) / len(splits)


@exercise("7.6", points=1, kind="value",
          title="predict: a win share of 8/9 or more, by luck",
          reference="chapter 7, §7.2 (seeds matter); Exercise 7.4 (a clean sweep by luck)",
          stronger_hint="If the two models are the same, the six results are exchangeable: "
                        "each of the C(6, 3) ways to choose which three of the six sorted "
                        "results belong to A is equally likely. List the choices in which A "
                        "loses at most one of the nine comparisons.")
def _(value, rng):
    n = SEEDS_EACH
    want = reference_share_at_least(n, n * n - 1)
    sweep = 1 / math.comb(2 * n, n)
    expect_prediction(value, want, rtol=0.02, what="the probability", hints=[
        alternative(sweep, "that is the clean sweep alone, 9 of 9: a share of 8/9 counts "
                           "too."),
        alternative(3 * sweep, "only one choice of A's results other than the clean sweep "
                               "loses exactly one comparison."),
        alternative(10 * 0.5 ** (n * n), "the nine comparisons share seeds, so they are not "
                                         "independent coin flips."),
        alternative(0.5, "that is the chance of one comparison."),
    ])
