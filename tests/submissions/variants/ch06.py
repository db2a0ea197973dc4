"""Chapter 6 (scans on the GPU): alternative answers and habit cells."""

SCRATCH = {
    "ex6.3-solution": ['''\
a_try = jnp.array([0.5, -0.9])
x_try, vjp_try = jax.vjp(lambda a, b: lrnn.linear_scan(a, b, method="sequential"), a_try,
                         jnp.ones((4, 2)))
print(vjp_try(jnp.ones((4, 2)))[0])
print(jax.grad(lambda a: lrnn.linear_scan(a, jnp.ones((4, 2)), method="sequential").sum())(a_try))
print(jax.value_and_grad(lambda b: (lrnn.linear_scan(a_try, b, method="sequential") ** 2).sum())(
    jnp.ones((4, 2)))[0])
print(jax.linear_transpose(lambda b: 2 * b, jnp.ones(3))(jnp.ones(3)))'''],
}

SELF_CHECK = '''\
# my own final check against JAX and the traced scan
key_me = jax.random.PRNGKey(21)
lam_me = (0.9 * jnp.exp(1j * jnp.linspace(0, 2, 3))).astype(jnp.complex64)
b_me = jax.random.normal(key_me, (2, 9, 3)).astype(jnp.complex64)
x_me, vjp_me = jax.vjp(lambda a, b: lrnn.linear_scan(a, b, method="sequential"), lam_me, b_me)
xbar_me = jnp.ones_like(x_me) * (1 - 0.5j)
a_lib, b_lib = vjp_me(xbar_me)
a_mine, b_mine = scan_vjp(np.asarray(lam_me), np.asarray(x_me), np.asarray(xbar_me))
print("scan_vjp:", np.allclose(b_mine, b_lib, atol=1e-4), np.allclose(a_mine, a_lib, atol=1e-3))
calls_me = []
def counting_op(left, right):
    calls_me.append(left[0].shape[0])
    return left[0] * right[0], right[0] * left[1] + right[1]
jax.make_jaxpr(lambda v: jax.lax.associative_scan(counting_op, (v, v)))(jnp.ones(100))
print("odd_even_work_depth:", tuple(odd_even_work_depth(100)) == (sum(calls_me), sum(1 for n in calls_me if n > 0)))
print("scan_bytes:", scan_bytes((2, 10, 4), "float32", time_varying=True) == 2 * 10 * 4 * 4 * 3)
print("fraction_of_floor:", np.isclose(fraction_of_floor((2, 10, 4), 1.0, 1e-9), 1280.0))'''

VARIANTS = {}
