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
print("fraction_remembering:",
      abs(np.mean(mod_me ** 300 >= 0.3) - fraction_remembering(0.5, 0.999, 300, 0.3)) < 0.02)
p_lru_me = lrnn.layers.lru.init(jax.random.PRNGKey(0), 16, 12)
n_lru_me = sum(int(np.size(v)) for v in jax.tree_util.tree_leaves(p_lru_me))
N_me = matching_rotrnn_state(16, 12, 4)
p_rot_me = lrnn.layers.rotrnn.init(jax.random.PRNGKey(0), 16, N_me, N_me // 4)
n_rot_me = sum(int(np.size(v)) for v in jax.tree_util.tree_leaves(p_rot_me))
print("matching_rotrnn_state:", N_me, n_rot_me, "against", n_lru_me)
ranks_me = np.argsort(np.random.default_rng(7).random((4000, 5)), axis=1)
sweeps_me = np.mean(ranks_me[:, :2].max(axis=1) < 2)        # seeds 0, 1 are A's: both best
print("seeds_needed:", seeds_needed(2, 0.2), "a sweep of 2 against 3 by sampling:", sweeps_me,
      np.isclose(r_min_for_memory(100, 0.5) ** 100, 0.5))'''

R_MIN_1 = '''\
def r_min_for_memory(T, q):
    # |λ|^T >= q  <=>  T log|λ| >= log q
    return float(np.exp(np.log(q) / T))'''

R_MIN_2 = '''\
def r_min_for_memory(T, q):
    """By bisection on [0, 1]: r^T grows with r."""
    lo, hi = 0.0, 1.0
    for _ in range(200):
        mid = (lo + hi) / 2
        if mid ** T >= q:
            hi = mid
        else:
            lo = mid
    return hi'''

FRACTION_1 = '''\
def fraction_remembering(r_min, r_max, T, q):
    r_star = r_min_for_memory(T, q)
    if r_min == r_max:
        return 1.0 if r_min >= r_star else 0.0
    below = (r_star ** 2 - r_min ** 2) / (r_max ** 2 - r_min ** 2)   # P(|λ| < r*)
    return float(1.0 - min(1.0, max(0.0, below)))'''

FRACTION_2 = '''\
def fraction_remembering(r_min, r_max, T, q):
    """In |λ|², which is uniform on [r_min², r_max²]: |λ|^T >= q  <=>  |λ|² >= q^(2/T)."""
    s_star = q ** (2.0 / T)
    lo, hi = r_min ** 2, r_max ** 2
    if hi == lo:
        return float(hi >= s_star)
    return float(np.clip((hi - s_star) / (hi - lo), 0.0, 1.0))'''

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
    "ex7.1-solution": [R_MIN_1, R_MIN_2],
    "ex7.2-solution": [FRACTION_1, FRACTION_2],
    "ex7.3-solution": [MATCH_1, MATCH_2],
    "ex7.4-solution": [SEEDS_1, SEEDS_2],
    "ex7.6-solution": ['eight_of_nine_by_luck = 0.1',
                       'from math import comb\n\neight_of_nine_by_luck = 2 / comb(6, 3)'],
}
