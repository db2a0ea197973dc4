"""Chapter 2 (the LRU): alternative answers and habit cells."""

SCRATCH = {
    "ex2.1-solution": ['''\
nu_try, theta_try = lru.ring_init(jax.random.PRNGKey(1), 8, 0.5, 0.9)
print(np.exp(-np.exp(np.asarray(nu_try))))
print(lru.ring_from_uniforms(np.array([0.3]), np.array([0.6]), r_min=0.5, r_max=0.8,
                             max_phase=np.pi))'''],
    "ex2.3-solution": ['''\
p_try = lru.init(jax.random.PRNGKey(0), 2, 4)
u_try = np.ones((5, 2), np.float32)
print(lru.hidden_states(p_try, u_try).shape, lru.apply(p_try, u_try).shape)'''],
    "ex2.6-solution": ['print(lru.forward_blowup(0.9, 0.999), lru.forward_blowup(0.0, 0.9))'],
}

SELF_CHECK = '''\
# my own final check against the library
rng_me = np.random.default_rng(7)
u1_me, u2_me = rng_me.uniform(size=6), rng_me.uniform(size=6)
mine = ring_from_uniforms(u1_me, u2_me, 0.4, 0.9, np.pi)
lib = lru.ring_from_uniforms(u1_me, u2_me, r_min=0.4, r_max=0.9, max_phase=np.pi)
print("ring:", all(np.allclose(m, l, rtol=1e-5, atol=1e-6) for m, l in zip(mine, lib)))
nu_me, _ = lru.ring_init(jax.random.PRNGKey(5), 20000, 0.3, 0.9)
modulus_me = np.exp(-np.exp(np.asarray(nu_me, np.float64)))
print("cdf:", abs(np.mean(modulus_me <= 0.6) - ring_radius_cdf(0.6, 0.3, 0.9)) < 0.02)
p_me = lru.init(jax.random.PRNGKey(3), 3, 5, r_min=0.5, r_max=0.95)
u_me = rng_me.standard_normal((2, 20, 3)).astype(np.float32)
print("states:", np.allclose(lru_hidden_states(p_me, u_me), lru.hidden_states(p_me, u_me),
                             rtol=1e-3, atol=1e-4))
print("apply:", np.allclose(lru_apply(p_me, u_me), lru.apply(p_me, u_me), rtol=1e-3, atol=1e-4))
print("gamma:", np.allclose(gamma_log_init(p_me["nu_log"], p_me["theta_log"]), p_me["gamma_log"],
                            atol=1e-5))
print("blow-up:", np.isclose(forward_blowup(0.5, 0.9), lru.forward_blowup(0.5, 0.9)))'''

VARIANTS = {}
