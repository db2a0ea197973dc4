"""Chapter 5 (Householder reflections): alternative answers and habit cells."""

SCRATCH = {
    "ex5.2-solution": ['''\
U_try = np.tril(np.random.default_rng(0).standard_normal((5, 3))).astype(np.float32)
print(np.asarray(lrnn.orthogonal.householder_product(U_try)).round(3))
print(np.asarray(lrnn.orthogonal.wy_transform(U_try, np.ones(5, np.float32))))'''],
    "ex5.4-solution": ['''\
p_try = lrnn.layers.ornn.init(jax.random.PRNGKey(0), 2, 4, 4)
print(lrnn.layers.ornn.step(p_try, jnp.ones(4), jnp.ones(2)))'''],
}

SELF_CHECK = '''\
# my own final check against the library
rng_me = np.random.default_rng(11)
x_me = rng_me.standard_normal(4)
y_me = np.linalg.norm(x_me) * np.eye(4)[0]
u_me = np.asarray(reflector(x_me, y_me), np.float64)
print("reflector:", np.allclose(x_me - 2 * u_me * (u_me @ x_me) / (u_me @ u_me), y_me))
U_me = np.tril(rng_me.standard_normal((6, 4))).astype(np.float32)
W_lib = np.asarray(lrnn.orthogonal.householder_product(U_me))
print("householder_chain:", np.allclose(householder_chain(U_me), W_lib, atol=1e-5))
G_me = U_me.T.astype(np.float64) @ U_me
Uw, Tw = wy_merge(U_me[:, :2], np.triu(G_me[:2, :2], 1) + np.diag(np.diag(G_me[:2, :2])) / 2,
                  U_me[:, 2:], np.triu(G_me[2:, 2:], 1) + np.diag(np.diag(G_me[2:, 2:])) / 2)
print("wy_merge:", np.allclose(np.eye(6) - Uw @ np.linalg.solve(Tw, Uw.T), W_lib, atol=1e-5))
for m_me in (2, 4):
    p_me = lrnn.layers.ornn.init(jax.random.PRNGKey(m_me), 3, 4, m_me)
    h_me, xt_me = jnp.asarray(rng_me.standard_normal(4)), jnp.asarray(rng_me.standard_normal(3))
    print("ornn_step", m_me, np.allclose(ornn_step(p_me, h_me, xt_me),
                                         lrnn.layers.ornn.step(p_me, h_me, xt_me), atol=1e-5))'''

VARIANTS = {}
