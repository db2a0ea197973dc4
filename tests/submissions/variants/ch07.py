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
# my own final check against sampling, the library and SciPy
from scipy import stats as stats_me
nu_me, _ = lrnn.layers.lru.ring_init(jax.random.PRNGKey(3), 20000, r_min=0.5, r_max=0.999)
mod_me = np.exp(-np.exp(np.asarray(nu_me, np.float64)))
print("fraction_remembering:",
      abs(np.mean(mod_me ** 300 >= 0.3) - fraction_remembering(0.5, 0.999, 300, 0.3)) < 0.02)
for layer_me, p_me in (("lru", lrnn.layers.lru.init(jax.random.PRNGKey(0), 16, 12)),
                       ("rotrnn", lrnn.layers.rotrnn.init(jax.random.PRNGKey(0), 16, 12, 3))):
    n_me = sum(int(np.size(v)) for v in jax.tree_util.tree_leaves(p_me))
    print("layer_param_count", layer_me, layer_param_count(layer_me, 16, 12, 3) == n_me)
a_me, b_me = [0.9, 0.8, 0.7], [0.85, 0.75, 0.6]
u_me = stats_me.mannwhitneyu(a_me, b_me).statistic / 9
print("win_probability:", np.isclose(win_probability(a_me, b_me), u_me),
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

COUNT_1 = '''\
def layer_param_count(layer, d_model, d_state, n_heads=1):
    H, N = d_model, d_state
    if layer == "lru":
        shapes = {"nu_log": (N,), "theta_log": (N,), "gamma_log": (N,), "B_re": (N, H),
                  "B_im": (N, H), "C_re": (H, N), "C_im": (H, N), "D": (H,)}
    else:
        n = N // n_heads
        shapes = {"M": (n_heads, n, n), "theta": (n_heads, n // 2), "nu_log": (n_heads,),
                  "B": (n_heads, n, H), "C": (H, N), "D": (H,)}
    return int(sum(np.prod(s) for s in shapes.values()))'''

COUNT_2 = '''\
def layer_param_count(layer, d_model, d_state, n_heads=1):
    if layer == "lru":
        per_state = 3 + 4 * d_model          # ν, θ, γ; a row of B̃ and a column of C̃, re and im
        return d_state * per_state + d_model
    head = d_state // n_heads
    per_head = head * head + head // 2 + 1 + head * d_model    # M_h, θ_h, ν_h, B_h
    return n_heads * per_head + d_model * d_state + d_model    # + C, D'''

WIN_1 = '''\
def win_probability(a, b, higher_is_better=True):
    score = 0.0
    for x in a:                                      # every pair of seeds
        for y in b:
            if x == y:
                score += 0.5
            elif (x > y) == higher_is_better:
                score += 1
    return score / (len(a) * len(b))'''

WIN_2 = {"helpers": ['''\
from scipy.stats import rankdata'''], "answer": '''\
def win_probability(a, b, higher_is_better=True):
    """Mann–Whitney U from the rank sum of A (ties get their average rank)."""
    a = np.asarray(a, np.float64).ravel()
    b = np.asarray(b, np.float64).ravel()
    if not higher_is_better:
        a, b = -a, -b
    ranks = rankdata(np.concatenate([a, b]))
    U = ranks[:len(a)].sum() - len(a) * (len(a) + 1) / 2
    return float(U / (len(a) * len(b)))'''}

VARIANTS = {
    "ex7.1-solution": [R_MIN_1, R_MIN_2],
    "ex7.2-solution": [FRACTION_1, FRACTION_2],
    "ex7.3-solution": [COUNT_1, COUNT_2],
    "ex7.4-solution": [WIN_1, WIN_2],
    "ex7.6-solution": ['all_three_by_luck = 0.05',
                       'from math import comb\n\nall_three_by_luck = 1 / comb(6, 3)'],
}
