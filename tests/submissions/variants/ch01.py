"""Chapter 1 (the linear recurrence): alternative answers and habit cells."""

SCRATCH = {
    "ex1.1-solution": ['''\
# what does the library's operator give? (my scratch)
print(lrnn.scan.binary_operator((np.array([2.0]), np.array([1.0])),
                                (np.array([3.0]), np.array([0.0]))))'''],
    "ex1.2-solution": ['''\
import jax
a_try, b_try = np.full((1, 8, 1), 0.5), np.ones((1, 8, 1))
print(np.asarray(lrnn.linear_scan(a_try, b_try))[0, :, 0])
print(np.asarray(lrnn.scan.linear_scan(a_try, b_try, method="sequential"))[0, -1, 0])
_, x_try = jax.lax.associative_scan(lrnn.scan.binary_operator, (a_try, b_try), axis=1)
print(np.asarray(x_try)[0, -1, 0])'''],
    "ex1.5-solution": ['''\
A_try = np.array([[0.9, 4.0], [0.0, 0.9]])
print(np.linalg.eigvals(A_try), np.linalg.eig(A_try)[0])
import scipy.linalg
print(np.max(np.abs(scipy.linalg.eigvals(A_try))), scipy.linalg.eig(A_try)[0])'''],
}

SELF_CHECK = '''\
# my own final check against the library
rng_me = np.random.default_rng(123)
a_me, b_me = rng_me.uniform(-1, 1, (2, 33, 3)), rng_me.standard_normal((2, 33, 3))
x_lib = np.asarray(lrnn.linear_scan(a_me, b_me, method="sequential"))
print("operator:", np.allclose(binary_operator((a_me, b_me), (a_me, b_me))[1],
                               lrnn.scan.binary_operator((a_me, b_me), (a_me, b_me))[1]))
M1_me, M2_me = rng_me.standard_normal((2, 4, 3, 3))
v1_me, v2_me, x_me = rng_me.standard_normal((3, 4, 3))
M_me, v_me = binary_operator((M1_me, v1_me), (M2_me, v2_me))
two_steps = np.einsum("bij,bj->bi", M2_me, np.einsum("bij,bj->bi", M1_me, x_me) + v1_me) + v2_me
print("operator, matrices:", np.allclose(np.einsum("bij,bj->bi", M_me, x_me) + v_me, two_steps))
print("parallel_scan:", np.allclose(parallel_scan(a_me, b_me), x_lib, rtol=1e-4, atol=1e-5))
print("chunked_scan:", np.allclose(chunked_scan(a_me, b_me, 5), x_lib, rtol=1e-4, atol=1e-5))
K1_me, K2_me = rng_me.standard_normal((2, 9, 3, 3))
D1_me, D2_me = rng_me.standard_normal((2, 3))
u_me = rng_me.standard_normal((9, 3))


def layer_me(K, D, u):
    return np.stack([sum(K[j] @ u[k - j] for j in range(k + 1)) for k in range(len(u))]) + D * u


K_me, D_me = stack_layers(K1_me, D1_me, K2_me, D2_me)
print("stack_layers:", np.allclose(layer_me(K_me, D_me, u_me),
                                   layer_me(K2_me, D2_me, layer_me(K1_me, D1_me, u_me))))
A_me = rng_me.standard_normal((5, 5))
print("spectral_radius:", np.isclose(spectral_radius(A_me),
                                     np.max(np.abs(np.linalg.eigvals(A_me))), rtol=1e-6))'''

BINARY_OPERATOR_1 = '''\
def binary_operator(left, right):
    """Compose two steps x -> a x + b: first `left`, then `right`."""
    (a1, b1), (a2, b2) = left, right
    if np.ndim(a1) > np.ndim(b1):                     # a matrix per element
        # a2 (a1 x + b1) + b2 = (a2 a1) x + (a2 b1 + b2)
        gain = np.einsum("...ij,...jk->...ik", a2, a1)
        offset = np.einsum("...ij,...j->...i", a2, b1) + b2
    else:                                             # element-wise
        gain = a2 * a1
        offset = a2 * b1 + b2
    return gain, offset'''

BINARY_OPERATOR_2 = {"helpers": ['''\
def apply_step(step, x):
    """One step x -> A x + b: A a matrix per element (one axis more than b) or element-wise."""
    A, b = step
    if np.ndim(A) == np.ndim(b) + 1:
        return np.matmul(A, np.expand_dims(x, -1))[..., 0] + b
    return A * x + b'''], "answer": '''\
def binary_operator(left, right):
    a_r, b_r = right
    a_l, b_l = left
    new_b = apply_step(right, b_l)          # where `right` sends left's constant
    if np.ndim(a_l) == np.ndim(b_l) + 1:
        new_a = np.matmul(a_r, a_l)         # left acts first: its matrix on the right
    else:
        new_a = np.multiply(a_r, a_l)
    return new_a, new_b'''}

PARALLEL_SCAN_1 = '''\
import jax.numpy as jnp


def parallel_scan(a, b):
    """Hillis-Steele with jax.numpy: pad on the left instead of concatenating."""
    A, X = jnp.asarray(a), jnp.asarray(b)
    L = X.shape[-2]
    offset = 1
    while offset < L:
        pad = [(0, 0)] * (X.ndim - 2) + [(offset, 0), (0, 0)]
        A_prev = jnp.pad(A, pad, constant_values=1)[..., :L, :]
        X_prev = jnp.pad(X, pad)[..., :L, :]
        A, X = binary_operator((A_prev, X_prev), (A, X))
        offset *= 2
    return X'''

PARALLEL_SCAN_2 = {"helpers": ['''\
def shift_right(arr, k, fill):
    """arr moved k steps later along axis -2, the first k steps set to `fill`."""
    out = np.full_like(arr, fill)
    if k < arr.shape[-2]:
        out[..., k:, :] = arr[..., :-k, :]
    return out'''], "answer": '''\
def parallel_scan(a, b):
    a, b = np.asarray(a), np.asarray(b)
    L = b.shape[-2]

    def rounds(gain, state, k):             # one call of the operator per round
        if k >= L:
            return state
        gain, state = binary_operator((shift_right(gain, k, 1), shift_right(state, k, 0)),
                                      (gain, state))
        return rounds(gain, state, 2 * k)

    return rounds(a, b, 1)'''}

CHUNKED_SCAN_1 = '''\
def chunked_scan(a, b, T):
    a, b = np.broadcast_arrays(np.asarray(a), np.asarray(b))
    L, N = b.shape[-2:]
    n_chunks = (L + T - 1) // T
    batch = b.shape[:-2]
    widths = [(0, 0)] * len(batch) + [(0, n_chunks * T - L), (0, 0)]
    a_blocks = np.pad(a, widths, constant_values=1).reshape(batch + (n_chunks, T, N))
    b_blocks = np.pad(b, widths, constant_values=0).reshape(batch + (n_chunks, T, N))
    inside = parallel_scan(a_blocks, b_blocks)           # every chunk from zero
    # the products a_0 ... a_k: the same scan started from x_{-1} = 1 with no input
    start = np.zeros_like(a_blocks)
    start[..., 0, :] = a_blocks[..., 0, :]
    gains = parallel_scan(a_blocks, start)
    out = np.empty(inside.shape, np.result_type(inside.dtype, gains.dtype))
    h = np.zeros(batch + (N,), out.dtype)
    for c in range(n_chunks):
        out[..., c, :, :] = inside[..., c, :, :] + gains[..., c, :, :] * h[..., None, :]
        h = out[..., c, -1, :]
    return out.reshape(batch + (n_chunks * T, N))[..., :L, :]'''

CHUNKED_SCAN_2 = {"helpers": ['''\
import jax.numpy as jnp


def pad_to_chunks(x, T, fill):
    """(..., L, N) -> (..., C, T, N), the last chunk padded with `fill`."""
    L = x.shape[-2]
    C = -(-L // T)
    tail = jnp.full(x.shape[:-2] + (C * T - L, x.shape[-1]), fill, x.dtype)
    x = jnp.concatenate([x, tail], axis=-2)
    return x.reshape(x.shape[:-2] + (C, T, x.shape[-1]))'''], "answer": '''\
def chunked_scan(a, b, T):
    a, b = np.broadcast_arrays(np.asarray(a), np.asarray(b))
    L, N = b.shape[-2:]
    ac, bc = pad_to_chunks(jnp.asarray(a), T, 1), pad_to_chunks(jnp.asarray(b), T, 0)
    local = jnp.asarray(parallel_scan(ac, bc))
    running = jnp.cumprod(ac, axis=-2)               # a_0 a_1 ... a_k in each chunk
    entering = [jnp.zeros_like(local[..., 0, 0, :])]
    for c in range(ac.shape[-3] - 1):
        entering.append(running[..., c, -1, :] * entering[-1] + local[..., c, -1, :])
    h = jnp.stack(entering, axis=-2)                 # (..., C, N)
    x = local + running * h[..., :, None, :]
    return x.reshape(b.shape[:-2] + (-1, N))[..., :L, :]'''}

STACK_LAYERS_1 = {"helpers": ['''\
def kernel_product(P, Q):
    """(P * Q)_k = sum_i P_i Q_{k-i}: the causal convolution of two matrix kernels."""
    out = np.zeros((len(P),) + P.shape[1:])
    for k in range(len(P)):
        for i in range(k + 1):
            out[k] += P[i] @ Q[k - i]
    return out'''], "answer": '''\
def stack_layers(K1, D1, K2, D2):
    K1, K2 = np.asarray(K1, float), np.asarray(K2, float)
    D1, D2 = np.asarray(D1, float), np.asarray(D2, float)
    K = kernel_product(K2, K1)                  # layer 2's kernel on layer 1's kernel
    K = K + K2 @ np.diag(D1) + np.diag(D2) @ K1  # each kernel with the other's skip
    return K, D1 * D2'''}

STACK_LAYERS_2 = '''\
import jax.numpy as jnp


def stack_layers(K1, D1, K2, D2):
    # the first layer as an L x L block matrix acting on the whole sequence: output t, input s
    L, H = K1.shape[0], K1.shape[1]

    def big(K, D):
        M = jnp.zeros((L, H, L, H))
        for t in range(L):
            for s in range(t + 1):
                M = M.at[t, :, s, :].set(K[t - s])
            M = M.at[t, :, t, :].add(jnp.diag(D))
        return M.reshape(L * H, L * H)
    M = (big(jnp.asarray(K2), jnp.asarray(D2)) @ big(jnp.asarray(K1), jnp.asarray(D1)))
    M = M.reshape(L, H, L, H)
    D = jnp.diagonal(M[0, :, 0, :])
    K = jnp.stack([M[k, :, 0, :] for k in range(L)]).at[0].add(-jnp.diag(D))
    return K, D'''

SPECTRAL_RADIUS_1 = {"helpers": ['''\
def normalised(M):
    """M / ‖M‖_1 and log ‖M‖_1 (the largest column sum); (M, -inf) for M = 0."""
    size = np.abs(M).sum(axis=0).max()
    return (M / size, np.log(size)) if size > 0 else (M, -np.inf)'''], "answer": '''\
def spectral_radius(A):
    A = np.asarray(A, dtype=np.float64)
    P, log_scale = normalised(A)                  # A^(2^j) = exp(log_scale) P
    if not np.isfinite(log_scale):
        return 0.0
    for j in range(40):
        P, log_step = normalised(P @ P)
        if not np.isfinite(log_step):
            return 0.0
        log_scale = 2 * log_scale + log_step
    return float(np.exp(log_scale / 2 ** 40))'''}

SPECTRAL_RADIUS_2 = '''\
def spectral_radius(A):
    M = np.array(A, dtype=float)
    log_norm, k = 0.0, 1                          # A^k = exp(log_norm) M
    while k < 2 ** 40:
        s = np.linalg.norm(M, 2)                  # largest singular value
        if s == 0.0:
            return 0.0
        M = M / s
        log_norm += np.log(s)
        M = M @ M
        log_norm *= 2
        k *= 2
    s = np.linalg.norm(M, 2)
    if s == 0.0:
        return 0.0
    return float(np.exp((log_norm + np.log(s)) / k))'''

VARIANTS = {
    "ex1.1-solution": [BINARY_OPERATOR_1, BINARY_OPERATOR_2],
    "ex1.2-solution": [PARALLEL_SCAN_1, PARALLEL_SCAN_2],
    "ex1.3-solution": [CHUNKED_SCAN_1, CHUNKED_SCAN_2],
    "ex1.4-solution": [STACK_LAYERS_1, STACK_LAYERS_2],
    "ex1.5-solution": [SPECTRAL_RADIUS_1, SPECTRAL_RADIUS_2],
    "ex1.7-solution": ['first_step_below_1pc = 90.0',
                       'import math\n\nfirst_step_below_1pc = math.ceil(math.log(0.01) / math.log(0.95))'],
}
