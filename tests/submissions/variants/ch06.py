"""Chapter 6 (scans on the GPU): alternative answers and habit cells."""

SCRATCH = {
    "ex6.2-solution": ['''\
pairs_seen = []
def pair_counter(left, right):
    pairs_seen.append(left[0].shape[0])
    return left[0] * right[0], right[0] * left[1] + right[1]
jax.make_jaxpr(lambda v: jax.lax.associative_scan(pair_counter, (v, v)))(jnp.ones(13))
print(sum(pairs_seen), odd_even_work_depth(13))'''],
    "ex6.3-solution": ['''\
a_try = jnp.full((2, 4, 2), 0.5)
h_try = jnp.ones((2, 2))
x_try, vjp_try = jax.vjp(lambda a, b, h: lrnn.linear_scan(a, b, initial=h), a_try,
                         jnp.ones((2, 4, 2)), h_try)
print([g.shape for g in vjp_try(jnp.ones((2, 4, 2)))])
print(jax.grad(lambda h: lrnn.linear_scan(a_try, jnp.ones((2, 4, 2)), initial=h).sum())(h_try))
print(jax.value_and_grad(lambda b: (lrnn.linear_scan(a_try, b) ** 2).sum())(jnp.ones((2, 4, 2)))[0])
print(jax.linear_transpose(lambda b: 2 * b, jnp.ones(3))(jnp.ones(3)))
print(lrnn.scan.sequential.scan(a_try, jnp.ones((2, 4, 2)), True)[0, :, 0])
print(lrnn.scan.sequential.adjoint(a_try, x_try, jnp.ones((2, 4, 2)), False)[0].shape)
print(lrnn.scan.reference.linear_scan(np.asarray(a_try), np.ones((2, 4, 2)), reverse=True)[0, 0])
print(lrnn.scan.reference.linear_scan_vjp(np.full(2, 0.5), np.ones((4, 2)), np.ones((4, 2)))[0])
print(lrnn.scan.associative.scan(a_try, jnp.ones((2, 4, 2)), True)[0, :, 0])
print(lrnn.scan.chunked.scan(a_try, jnp.ones((2, 4, 2)), True)[0, :, 0])
print(jax.jacrev(lambda h: a_try[:, 0, :] * h)(h_try[0]).shape)
print(jax.jacfwd(lambda h: a_try[:, 0, :] * h)(h_try[0]).shape)
print(jax.jvp(lambda h: 0.5 * h, (h_try,), (h_try,))[1])
print(jax.linearize(lambda h: 0.5 * h, h_try)[1](h_try))'''],
}

SELF_CHECK = '''\
# my own final check against JAX and the traced scan
key_me = jax.random.PRNGKey(21)
lam_me = (0.9 * jnp.exp(1j * jnp.linspace(0, 2, 3))).astype(jnp.complex64)
b_me = jax.random.normal(key_me, (2, 9, 3)).astype(jnp.complex64)
h_me = (jnp.ones((2, 3)) * (0.5 + 1j)).astype(jnp.complex64)
a_me = jnp.broadcast_to(lam_me, b_me.shape) * jnp.exp(0.1j * jnp.arange(9.0))[:, None]
x_me, vjp_me = jax.vjp(lambda a, b, h: lrnn.linear_scan(a, b, initial=h, method="sequential"),
                       a_me.astype(jnp.complex64), b_me, h_me)
xbar_me = jnp.ones_like(x_me) * (1 - 0.5j)
mine = scan_vjp(np.asarray(a_me), np.asarray(h_me), np.asarray(x_me), np.asarray(xbar_me))
print("scan_vjp:", [np.allclose(m, l, atol=1e-4) for m, l in zip(mine, vjp_me(xbar_me))])
calls_me = []
def counting_op(left, right):
    calls_me.append(left[0].shape[0])
    return left[0] * right[0], right[0] * left[1] + right[1]
jax.make_jaxpr(lambda v: jax.lax.associative_scan(counting_op, (v, v)))(jnp.ones(100))
print("odd_even_work_depth:", tuple(odd_even_work_depth(100)) == (sum(calls_me), sum(1 for n in calls_me if n > 0)))
print("scan_bytes:", scan_bytes((2, 10, 4), "float32", time_varying=True) == 2 * 10 * 4 * 4 * 3)
print("passes_at_most:", passes_at_most((2, 10, 4), 4.5 * 640e-9, 1.0) == 3)'''

BYTES_1 = '''\
def scan_bytes(shape, dtype="complex64", time_varying=False, passes=1, backward=False):
    elements = 1
    for size in shape:
        elements *= int(size)
    itemsize = np.zeros(0, dtype=dtype).itemsize
    per_pass = 2 if time_varying else 1              # b (or x̄ going back), and a when it varies
    if not backward:
        return elements * itemsize * (passes * per_pass + 1)   # + writing x once
    # backward: b̄_t = x̄_t + a_{t+1} b̄_{t+1} each pass; last pass reads x, writes b̄ (and ā_t)
    last = 2 + (1 if time_varying else 0)
    return elements * itemsize * (passes * per_pass + last)'''

BYTES_2 = {"helpers": ['''\
def array_bytes(shape, dtype):
    return int(np.prod(np.array(shape, dtype=np.int64))) * np.dtype(dtype).itemsize'''],
           "answer": '''\
def scan_bytes(shape, dtype="complex64", time_varying=False, passes=1, backward=False):
    reads_each_pass = ["x_bar" if backward else "b"] + (["a"] if time_varying else [])
    moved = passes * reads_each_pass
    if backward:
        moved += ["x", "b_bar"] + (["a_bar"] if time_varying else [])
    else:
        moved += ["x"]
    return len(moved) * array_bytes(shape, dtype)'''}

WORK_DEPTH_1 = '''\
def odd_even_work_depth(L):
    work, depth, n = 0, 0, L
    while n >= 2:                                    # one level of the recursion per pass
        down = n // 2                                # neighbours combined
        up = (n + 1) // 2 - 1                        # even positions fixed on the way back
        work += down + up
        depth += 1 + (1 if up > 0 else 0)
        n = down
    return work, depth'''

WORK_DEPTH_2 = {"helpers": ['''\
from functools import lru_cache'''], "answer": '''\
@lru_cache(maxsize=None)
def odd_even_work_depth(L):
    if L <= 1:
        return (0, 0)
    pairs = L // 2
    fix_ups = L - pairs - 1                          # ceil(L/2) − 1
    inner_work, inner_depth = odd_even_work_depth(pairs)
    return (pairs + fix_ups + inner_work, inner_depth + 1 + int(fix_ups > 0))'''}

VJP_1 = '''\
def scan_vjp(a, x_init, x, x_bar):
    # b_t feeds x_t, which feeds x_{t+1} through a_{t+1}: going back, carry b̄ and multiply it by
    # the NEXT a (zero past the end). a_t multiplied x_{t-1} (x_init for t = 0); x̄_init = a_0 b̄_0
    a, x_init, x, x_bar = (jnp.asarray(v) for v in (a, x_init, x, x_bar))
    a_next = jnp.concatenate([a[..., 1:, :], jnp.zeros_like(a[..., :1, :])], axis=-2)

    def back(carry, step):
        g_t, a_t1 = step
        carry = g_t + a_t1 * carry
        return carry, carry
    time_first = lambda v: jnp.moveaxis(v, -2, 0)
    _, rows = jax.lax.scan(back, jnp.zeros_like(x_bar[..., 0, :]),
                           (time_first(x_bar), time_first(a_next)), reverse=True)
    b_bar = jnp.moveaxis(rows, 0, -2)
    x_before = jnp.concatenate([x_init[..., None, :], x[..., :-1, :]], axis=-2)
    return b_bar * x_before, b_bar, a[..., 0, :] * b_bar[..., 0, :]'''

VJP_2 = {"helpers": ['''\
def transfer_products(a):
    """P[..., s, t, :] = a_{s+1} ⋯ a_t for t ≥ s (1 when t = s), 0 for t < s."""
    L = a.shape[-2]
    P = np.zeros(a.shape[:-2] + (L, L, a.shape[-1]), dtype=a.dtype)
    for s in range(L):
        running = np.ones_like(a[..., 0, :])
        for t in range(s, L):
            if t > s:
                running = running * a[..., t, :]
            P[..., s, t, :] = running
    return P'''],
         "answer": '''\
def scan_vjp(a, x_init, x, x_bar):
    """b_s reaches x_t with weight a_{s+1}⋯a_t, x_init with weight a_0⋯a_t (eq. 1.1 unrolled)."""
    a, x_init, x, x_bar = map(np.asarray, (a, x_init, x, x_bar))
    P = transfer_products(a)
    b_bar = np.einsum("...stn,...tn->...sn", P, x_bar)    # transpose: no conjugate
    a_bar = np.empty_like(b_bar)
    a_bar[..., 0, :] = b_bar[..., 0, :] * x_init
    a_bar[..., 1:, :] = b_bar[..., 1:, :] * x[..., :-1, :]
    from_init = P[..., 0, :, :] * a[..., :1, :]           # a_0 a_1 ⋯ a_t
    x_init_bar = np.sum(from_init * x_bar, axis=-2)
    return a_bar, b_bar, x_init_bar'''}

PASSES_1 = '''\
def passes_at_most(shape, seconds, copy_GBps, dtype="complex64", time_varying=False):
    p = 0
    while scan_bytes(shape, dtype, time_varying, passes=p + 1) <= seconds * copy_GBps * 1e9:
        p += 1                                       # one more pass still fits
    return p'''

PASSES_2 = {"helpers": ['''\
def copy_time(n_bytes, GBps):
    """Seconds to move n_bytes at GBps (1 GB = 1e9 bytes)."""
    return n_bytes / GBps / 1e9'''], "answer": '''\
def passes_at_most(shape, seconds, copy_GBps, dtype="complex64", time_varying=False):
    """Time of x's write, then of one pass; the passes fill what is left of the measured time."""
    n = int(np.prod(shape))
    array_time = copy_time(n * np.dtype(dtype).itemsize, copy_GBps)
    arrays_per_pass = 2 if time_varying else 1
    left = seconds - array_time
    if left < 0:
        return 0
    return int(np.floor(left / (arrays_per_pass * array_time)))'''}

VARIANTS = {
    "ex6.1-solution": [BYTES_1, BYTES_2],
    "ex6.2-solution": [WORK_DEPTH_1, WORK_DEPTH_2],
    "ex6.3-solution": [VJP_1, VJP_2],
    "ex6.4-solution": [PASSES_1, PASSES_2],
    "ex6.6-solution": ['fewest_chunks = 44.0',
                       'import math\n\nunroll = 2 ** math.floor(math.log2((255 - 38) / 2))\n'
                       'by_latency = math.ceil(2.94e12 * 0.53e-6 / (96 * unroll * 16))\n'
                       'fewest_chunks = max(by_latency, math.ceil(132 / (96 // 32)))'],
}
