"""Checks for Exercises 7 · Experiments (solutions/07_experiments.ipynb): choosing the ring of
eigenvalues so that a share of it remembers, the number of states that makes k of them remember,
where a layer's parameters go, and comparing two models over seeds."""
from __future__ import annotations

import functools
import math
from fractions import Fraction

import numpy as np

from ._core import alternative, call, exercise, expect, expect_close, expect_prediction, when


@functools.cache
def _gauss_legendre_2():
    return np.polynomial.legendre.leggauss(2)


def _ring_area(inner, outer):
    """∫ 2πρ dρ from ``inner`` to ``outer`` by two-point Gauss–Legendre quadrature (exact: the
    integrand is linear in ρ)."""
    nodes, weights = _gauss_legendre_2()
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


def reference_r_max_for_share(r_min, T, q, share):
    """The smallest r_max ≥ r_min whose ring [r_min, r_max] has at least ``share`` of its area
    where |λ|^T ≥ q, by bisection on the quadrature share (it grows with r_max); NaN when no
    r_max < 1 reaches it."""
    if reference_fraction(r_min, r_min, T, q) >= share:
        return float(r_min)
    if reference_fraction(r_min, 1.0, T, q) <= share:
        return math.nan
    lo, hi = float(r_min), 1.0
    for _ in range(64):
        mid = (lo + hi) / 2
        lo, hi = (lo, mid) if reference_fraction(r_min, mid, T, q) >= share else (mid, hi)
    return hi


@exercise("7.1", points=2, title="the ring whose given share remembers T steps",
          reference="chapter 1, eq. (1.1) (an input reaches x_{t+T} through λ^T); LRU §3.3 "
                    "and Lemma 3.2 (|λ|² uniform on [r_min², r_max²]); chapter 2, eq. (2.2)",
          stronger_hint="write the share of the ring with |λ| ≥ q^(1/T) as a function of r_max "
                        "(|λ|² is uniform on [r_min², r_max²]), set it equal to the share and "
                        "solve for r_max² (it is linear in r_max²). Two special cases: r_min "
                        "already remembers (the thin ring r_max = r_min does), or the r_max you "
                        "find is not below 1 (NaN).")
def _(fn, rng):
    cases = [(0.0, 1, 0.5, 0.3), (0.99, 100, 0.5, 0.5), (0.0, 100, 0.5, 0.001),
             (0.9, 50, 0.1, 0.25), (0.999, 200, 0.5, 0.9), (0.0, 1000, 0.5, 0.5),
             (0.98, 200, 0.3, 0.25), (0.9, 100, 0.5, 0.5),
             (float(np.round(rng.uniform(0.9, 0.99), 4)), int(rng.integers(10, 200)),
              float(np.round(rng.uniform(0.1, 0.9), 3)),
              float(np.round(rng.uniform(0.05, 0.95), 3)))]
    for r_min, T, q, share in cases:
        inputs = {"r_min": r_min, "T": T, "q": q, "share": share}
        got = call(fn, inputs)
        expect(np.ndim(got) == 0, "return one number, r_max.", inputs=inputs, received=got)
        want = reference_r_max_for_share(r_min, T, q, share)
        got = float(np.asarray(got, np.float64))
        if math.isnan(want):
            expect(math.isnan(got), "no ring inside the unit circle gives this share: with "
                   "r_max < 1 the part of the ring that remembers stays too small. Return NaN "
                   "(math.nan).", inputs=inputs, received=got,
                   hint="r_max must stay below 1." if got >= 1 else None)
            continue
        expect(not math.isnan(got), "a ring with r_max < 1 gives this share: return it.",
               inputs=inputs, received=got)
        r_star = q ** (1.0 / T)
        s = share
        hints = [when(lambda rec, exp: float(rec) < r_min - 1e-9, "r_max ≥ r_min: when r_min "
                      "itself remembers T steps, the thin ring [r_min, r_min] already does.")]
        if r_min < r_star:
            hints += [
                alternative((r_star - s * r_min) / (1 - s), "|λ| is not uniform on "
                            "[r_min, r_max]: the ring's area inside radius r grows like r², "
                            "so solve in squared radii (LRU Lemma 3.2)."),
                alternative(math.sqrt(max(r_star ** 2 - (1 - s) * r_min ** 2, 0) / s),
                            "that ring gives the share to the eigenvalues that forget: "
                            "those with |λ|^T ≥ q remember."),
                alternative(r_star, "at r_max = q^(1/T) no eigenvalue of the ring remembers "
                            "yet: the ring must reach beyond it until the part above holds "
                            "the share."),
                alternative(math.sqrt((q ** (1.0 / T) - s * r_min ** 2) / (1 - s)),
                            "q is a fraction of the amplitude: |λ|^T = q (you solved the "
                            "energy equation |λ|^(2T) = q)."),
            ]
        expect_close(np.float64(got), np.float64(want), inputs=inputs, rtol=1e-6, atol=1e-9,
                     what="r_max", hints=hints)


def _states_for(s, k, p):
    """The smallest N with P(at least k of N independent draws succeed) ≥ p, for a success
    probability 0 < s ≤ 1: the count's distribution, kept below k and grown one draw at a
    time (a draw moves a count j < k to j + 1 with probability s)."""
    below = np.zeros(k + 1)                      # P(count = j) for j < k; below[k]: P(≥ k)
    below[0] = 1.0
    n = 0
    while below[k] < p:
        moved = s * below[:k]
        below[:k] -= moved
        below[1:] += moved
        n += 1
    return n


def reference_states_needed(r_min, r_max, T, q, k, p):
    """The smallest N with P(at least k of N eigenvalues drawn on the ring remember T steps)
    ≥ p: the share by quadrature, then the binomial count grown state by state; infinite when
    no eigenvalue of the ring remembers."""
    s = reference_fraction(r_min, r_max, T, q)
    return math.inf if s <= 0 else _states_for(min(s, 1.0), k, p)


@exercise("7.2", points=2, title="how many states make k of them remember",
          reference="LRU Lemma 3.2 (|λ|² uniform on [r_min², r_max²]); chapter 2, eq. (2.2); "
                    "Exercise 2.2; the eigenvalues are drawn independently",
          stronger_hint="first the share s of the ring with |λ|^T ≥ q (|λ|² is uniform on "
                        "[r_min², r_max²]; clip the threshold to the ring, and a thin ring gives "
                        "0 or 1). The number of the N states that remember is then binomial "
                        "(N, s): increase N from k until P(fewer than k) ≤ 1 − p. No N works "
                        "when s = 0.")
def _(fn, rng):
    r_lo = float(np.round(rng.uniform(0.9, 0.99), 3))
    cases = [(0.5, 0.5, 2, 0.2, 3, 0.95), (0.5, 0.5, 2, 0.3, 1, 0.9), (0.0, 1.0, 1, 0.5, 2, 0.9),
             (0.0, 0.9, 1000, 0.5, 1, 0.5), (0.0, 0.999, 200, 0.5, 4, 0.95),
             (0.9, 0.9999, 1000, 0.5, 8, 0.99), (0.99, 0.999, 100, 0.5, 16, 0.9),
             (0.4, 0.95, 20, 0.1, 2, 0.8),
             (r_lo, 0.9995, int(rng.integers(50, 500)), float(np.round(rng.uniform(0.2, 0.8), 3)),
              int(rng.integers(1, 20)), float(np.round(rng.uniform(0.5, 0.99), 3)))]
    for r_min, r_max, T, q, k, p in cases:
        inputs = {"r_min": r_min, "r_max": r_max, "T": T, "q": q, "k": k, "p": p}
        got = call(fn, inputs)
        expect(np.ndim(got) == 0, "return one number, N.", inputs=inputs, received=got)
        got = float(np.asarray(got, np.float64))
        want = reference_states_needed(r_min, r_max, T, q, k, p)
        if math.isinf(want):
            expect(math.isinf(got) and got > 0, "no eigenvalue of this ring keeps the "
                   "fraction q for T steps, so no number of states is enough: return "
                   "math.inf.", inputs=inputs, received=got)
            continue
        expect(math.isfinite(got), "this ring has eigenvalues that remember T steps, so some "
               "finite N is enough.", inputs=inputs, received=got)
        s = reference_fraction(r_min, r_max, T, q)
        r = min(max(q ** (1.0 / T), r_min), r_max)
        hints = [alternative(math.ceil(k / s), "that N makes the *expected* number N·s reach "
                             "k, but the number that remember is random (binomial): require "
                             "P(at least k) ≥ p.")]
        hints.append(alternative(reference_states_needed(r_min, r_max, T, q, k + 1, p),
                                 "at least k includes exactly k: that N gives more than k "
                                 "with probability p."))
        if want > k:
            hints.append(alternative(want - 1, "with that N the probability of at least k is "
                                     "still below p: return the smallest N where it reaches "
                                     "p."))
        if r_max > r_min and 0 < (r_max - r) / (r_max - r_min) < 1:
            hints.append(alternative(_states_for((r_max - r) / (r_max - r_min), k, p),
                                     "|λ| is not uniform on [r_min, r_max]: the ring's area "
                                     "inside radius r grows like r², so |λ|² is uniform "
                                     "(LRU Lemma 3.2)."))
        expect_close(np.float64(got), np.float64(want), inputs=inputs, rtol=0, atol=0.05,
                     what="the number of states N", hints=hints)


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
        alternative(3 * sweep, "list the choices of A's results that lose exactly one "
                               "comparison, and check each of them against the nine pairs."),
        alternative(10 * 0.5 ** (n * n), "the nine comparisons share seeds, so they are not "
                                         "independent coin flips."),
        alternative(0.5, "that is the chance of one comparison."),
    ])
