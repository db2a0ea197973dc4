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
print("parallel_scan:", np.allclose(parallel_scan(a_me, b_me), x_lib, rtol=1e-4, atol=1e-5))
print("chunked_scan:", np.allclose(chunked_scan(a_me, b_me, 5), x_lib, rtol=1e-4, atol=1e-5))
K_me = rng_me.standard_normal((33, 2, 3))
u_me = rng_me.standard_normal((33, 3))
y_loop = np.stack([sum(K_me[j] @ u_me[k - j] for j in range(k + 1)) for k in range(33)])
print("convolve:", np.allclose(convolve(K_me, u_me), y_loop))
A_me = rng_me.standard_normal((5, 5))
print("spectral_radius:", np.isclose(spectral_radius(A_me),
                                     np.max(np.abs(np.linalg.eigvals(A_me))), rtol=1e-6))'''

VARIANTS = {}
