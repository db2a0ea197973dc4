"""Chapter 7 (experiments): alternative answers and habit cells."""

SCRATCH = {
    "ex7.2-solution": ['''\
nu_try, _ = lrnn.layers.lru.ring_init(jax.random.PRNGKey(0), 5000, r_min=0.0, r_max=0.999)
print(np.mean(np.exp(-np.exp(np.asarray(nu_try, np.float64))) ** 200 >= 0.5))'''],
    "ex7.3-solution": ['''\
p_try = lrnn.layers.rotrnn.init(jax.random.PRNGKey(0), 64, 64, 8)
print(sum(int(np.size(v)) for v in jax.tree_util.tree_leaves(p_try)))'''],
}

SELF_CHECK = '''\
# my own final check against sampling and the library
nu_me, _ = lrnn.layers.lru.ring_init(jax.random.PRNGKey(3), 20000, r_min=0.5, r_max=0.999)
mod_me = np.exp(-np.exp(np.asarray(nu_me, np.float64)))
share_me = np.mean(mod_me ** 300 >= 0.3)
print("states_needed:", states_needed(0.5, 0.999, 300, 0.3, 3), "share by sampling:", share_me)
R_me = r_max_for_share(0.99, 100, 0.5, 0.5)
nu_R, _ = lrnn.layers.lru.ring_init(jax.random.PRNGKey(4), 20000, r_min=0.99, r_max=R_me)
print("r_max_for_share:", R_me,
      np.mean(np.exp(-np.exp(np.asarray(nu_R, np.float64))) ** 100 >= 0.5))
p_lru_me = lrnn.layers.lru.init(jax.random.PRNGKey(0), 16, 12)
n_lru_me = sum(int(np.size(v)) for v in jax.tree_util.tree_leaves(p_lru_me))
N_me = matching_rotrnn_state(16, 12, 4)
p_rot_me = lrnn.layers.rotrnn.init(jax.random.PRNGKey(0), 16, N_me, N_me // 4)
n_rot_me = sum(int(np.size(v)) for v in jax.tree_util.tree_leaves(p_rot_me))
print("matching_rotrnn_state:", N_me, n_rot_me, "against", n_lru_me)
ranks_me = np.argsort(np.random.default_rng(7).random((4000, 5)), axis=1)
sweeps_me = np.mean(ranks_me[:, :2].max(axis=1) < 2)        # seeds 0, 1 are A's: both best
print("seeds_needed:", seeds_needed(2, 0.2), "a sweep of 2 against 3 by sampling:", sweeps_me)'''

R_MAX_1 = '''\
def r_max_for_share(r_min, T, q, share):
    # |λ|^T >= q  <=>  |λ| >= q^(1/T); the part of the ring beyond it, by area, is the share
    edge = np.exp(np.log(q) / T)
    if r_min >= edge:
        return r_min
    # share * (R^2 - r_min^2) = R^2 - edge^2
    R2 = (edge ** 2 - share * r_min ** 2) / (1.0 - share)
    if R2 >= 1.0:
        return float("nan")
    return R2 ** 0.5'''

R_MAX_2 = '''\
def r_max_for_share(r_min, T, q, share):
    """By bisection on r_max: the share that remembers grows as the ring widens."""
    def share_of(r_max):
        inner = min(max(q ** (1 / T), r_min), r_max)
        if r_max == r_min:
            return 1.0 if r_min ** T >= q else 0.0
        return (r_max ** 2 - inner ** 2) / (r_max ** 2 - r_min ** 2)
    if share_of(r_min) >= share:
        return r_min
    if share_of(1.0) <= share:
        return math.nan
    lo, hi = r_min, 1.0
    for _ in range(100):
        mid = 0.5 * (lo + hi)
        if share_of(mid) >= share:
            hi = mid
        else:
            lo = mid
    return hi'''

STATES_1 = {"helpers": ['''\
def ring_share(r_min, r_max, T, q):
    """P(|λ|^T >= q) for λ uniform on the ring: in |λ|², which is uniform."""
    s_star = q ** (2.0 / T)
    lo, hi = r_min ** 2, r_max ** 2
    if hi == lo:
        return float(hi >= s_star)
    return float(np.clip((hi - s_star) / (hi - lo), 0.0, 1.0))'''], "answer": '''\
def states_needed(r_min, r_max, T, q, k, p=0.95):
    from scipy.stats import binom
    s = ring_share(r_min, r_max, T, q)
    if s == 0.0:
        return float("inf")
    n = k
    while binom.sf(k - 1, n, s) < p:      # P(count >= k)
        n += 1
    return n'''}

STATES_2 = '''\
def states_needed(r_min, r_max, T, q, k, p=0.95):
    """Grow the distribution of the count one state at a time, in log space."""
    r_star = q ** (1 / T)
    if r_min == r_max:
        s = 1.0 if r_min >= r_star else 0.0
    else:
        r = np.clip(r_star, r_min, r_max)
        s = (r_max ** 2 - r ** 2) / (r_max ** 2 - r_min ** 2)
    if s <= 0:
        return math.inf
    if s >= 1:
        return k
    n = k
    while True:
        j = np.arange(k)
        log_pmf = (np.array([math.lgamma(n + 1) - math.lgamma(i + 1) - math.lgamma(n - i + 1)
                             for i in j]) + j * np.log(s) + (n - j) * np.log1p(-s))
        if np.exp(log_pmf).sum() <= 1 - p:
            return n
        n += 1'''

MATCH_1 = '''\
def matching_rotrnn_state(d_model, d_state, head_size=8):
    H = d_model
    lru_shapes = [(d_state,)] * 3 + [(d_state, H)] * 2 + [(H, d_state)] * 2 + [(H,)]

    def rot_count(heads):
        n = head_size
        shapes = [(heads, n, n), (heads, n // 2), (heads,), (heads, n, H), (H, heads * n), (H,)]
        return sum(int(np.prod(s)) for s in shapes)
    target = sum(int(np.prod(s)) for s in lru_shapes)
    heads = 1
    while rot_count(heads + 1) <= target:           # walk up while the next one fits
        heads += 1
    if abs(rot_count(heads + 1) - target) < abs(rot_count(heads) - target):
        heads += 1
    return heads * head_size'''

MATCH_2 = '''\
def matching_rotrnn_state(d_model, d_state, head_size=8):
    """Solve count_rot(k) = count_lru for real k, then compare the whole numbers around it."""
    lru_params = d_state * (3 + 4 * d_model) + d_model
    one_head = head_size ** 2 + head_size // 2 + 1 + 2 * head_size * d_model
    k_real = (lru_params - d_model) / one_head
    candidates = np.array([max(1, int(np.floor(k_real))), max(1, int(np.ceil(k_real)))])
    gaps = np.abs(d_model + candidates * one_head - lru_params)
    return int(candidates[np.argmin(gaps)] * head_size)     # argmin: the first (smaller) on ties'''

SEEDS_1 = '''\
def seeds_needed(n_a, alpha):
    n_b = 0
    p_sweep = 1.0
    while p_sweep > alpha:
        n_b += 1
        p_sweep = 1.0
        for i in range(n_a):            # the i-th best result must be one of A's remaining seeds
            p_sweep *= (n_a - i) / (n_a + n_b - i)
    return n_b'''

SEEDS_2 = {"helpers": ['''\
from scipy import special'''], "answer": '''\
def seeds_needed(n_a, alpha):
    """All n_a-subsets of the n_a + n_b ranks are equally likely; a sweep is one of them."""
    n_b = np.arange(1, 200_000)
    ok = special.comb(n_a + n_b, n_a) >= 1 / alpha
    return int(n_b[np.argmax(ok)])'''}

VARIANTS = {
    "ex7.1-solution": [R_MAX_1, R_MAX_2],
    "ex7.2-solution": [STATES_1, STATES_2],
    "ex7.3-solution": [MATCH_1, MATCH_2],
    "ex7.4-solution": [SEEDS_1, SEEDS_2],
    "ex7.6-solution": ['eight_of_nine_by_luck = 0.1',
                       'from math import comb\n\neight_of_nine_by_luck = 2 / comb(6, 3)'],
}
