"""Chapter 4 (normalisation): alternative answers and habit cells."""

SCRATCH = {
    "ex4.4-solution": ['''\
p_try = lrnn.layers.rotrnn.init(jax.random.PRNGKey(0), 3, 8, 2)
x_try = lrnn.layers.rotrnn.hidden_states(p_try, jnp.ones((5, 3)), scale_first_state=True)
print(x_try.shape, float(jnp.sum(x_try[0] ** 2)))'''],
}

SELF_CHECK = '''\
# my own final check against the library and the formulas
rng_me = np.random.default_rng(9)
P_me = np.asarray(lrnn.orthogonal.skew_expm(rng_me.standard_normal((4, 4))), np.float64)
B_me = rng_me.standard_normal((4, 3))
print("xi at rho = 0:", np.isclose(xi_correlated(P_me, np.array([0.2, 1.0]), B_me, 0.9, 0.0),
                                    np.sqrt((1 - 0.81) / np.sum(B_me ** 2))))
lam_me = np.array([0.5, 0.9j], np.complex64)
B2_me = np.ones((2, 2), np.complex64)
print("E|x_1|^2:", np.isclose(np.asarray(lru_expected_sq_norm(lam_me, B2_me, np.array([1])))[0], 4.0))
p_me = lrnn.layers.rotrnn.init(jax.random.PRNGKey(2), 3, 8, 2)
u_me = jnp.asarray(rng_me.standard_normal((2, 7, 3)), jnp.float32)
for scale in (False, True):
    print("rotrnn_states", "scaled" if scale else "plain", np.allclose(rotrnn_states(p_me, u_me, scale_first_state=scale),
          lrnn.layers.rotrnn.hidden_states(p_me, u_me, scale_first_state=scale), atol=1e-4))
m_me, se_me = mc_expected_sq_norm(jax.random.PRNGKey(0), np.eye(4), np.zeros((4, 2)), 0.5, 1.0,
                                  np.eye(4)[0], 3, 10)
print("no input: the norm shrinks by gamma^2:", np.allclose(m_me, [1, 0.25, 0.0625]))'''

VARIANTS = {}
