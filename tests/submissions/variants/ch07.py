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

VARIANTS = {}
