"""Chapter 3 (rotations): alternative answers and habit cells."""

SCRATCH = {
    "ex3.1-solution": ['''\
from scipy.linalg import expm
M_try = np.random.default_rng(0).standard_normal((4, 4))
print(np.abs(expm(M_try - M_try.T) - np.asarray(lrnn.orthogonal.skew_expm(M_try))).max())'''],
    "ex3.2-solution": ['''\
b_try = np.zeros((6, 4), np.float32)
b_try[0] = [1, 0, 0, 1]
print(np.asarray(lrnn.rotation_scan(np.array([0.9, 1.0], np.float32),
                                    np.array([np.pi / 2, 0.3], np.float32), b_try))[1])
print(np.asarray(lrnn.scan.rotation_scan(np.ones(2), np.zeros(2), b_try))[-1])
z_try = lrnn.scan.pairs_to_complex(b_try)
print(z_try.shape, lrnn.scan.complex_to_pairs(z_try).shape)'''],
    "ex3.4-solution": ['''\
p_try = lrnn.layers.gru.init(jax.random.PRNGKey(0), 3, 4)
print(lrnn.layers.gru.cell(p_try, jnp.zeros(4), jnp.ones(3))[0])'''],
}

SELF_CHECK = '''\
# my own final check against the library
rng_me = np.random.default_rng(5)
M_me = rng_me.standard_normal((6, 6)).astype(np.float32)
print("skew_expm:", np.allclose(skew_expm(M_me), lrnn.orthogonal.skew_expm(M_me), atol=1e-4))
g_me = rng_me.uniform(0.5, 1.0, 3).astype(np.float32)
th_me = rng_me.uniform(-np.pi, np.pi, 3).astype(np.float32)
b_me = rng_me.standard_normal((2, 10, 6)).astype(np.float32)
print("rotation_recurrence:", np.allclose(rotation_recurrence(g_me, th_me, b_me),
                                          lrnn.rotation_scan(g_me, th_me, b_me), atol=1e-4))
P_me = np.asarray(lrnn.orthogonal.skew_expm(M_me), np.float64)
A_me = P_me @ np.asarray(lrnn.orthogonal.block_rotation(th_me), np.float64) @ P_me.T
print("rotation_power:", np.allclose(rotation_power(P_me, th_me, 3),
                                     np.linalg.matrix_power(A_me, 3), atol=1e-4))
p_me = lrnn.layers.gru.init(jax.random.PRNGKey(1), 3, 4)
h_me, x_me = jnp.asarray(rng_me.standard_normal(4)), jnp.asarray(rng_me.standard_normal(3))
print("rotgru_cell:", np.allclose(rotgru_cell(p_me, h_me, x_me)[0],
                                  lrnn.layers.gru.cell(p_me, h_me, x_me)[0], atol=1e-5))'''

VARIANTS = {}
