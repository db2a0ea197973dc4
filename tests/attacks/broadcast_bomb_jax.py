"""The broadcast bomb with JAX arrays: results came back as JAX arrays, past the guard on NumPy
arrays, and the hidden test's comparison built the N x N array in the grader (0.9 GB at
N = 12 000, 3.0 GB at 24 000). Results now come back as NumPy arrays behind the guard."""
# %%
# replaces ex1.1-solution
import jax.numpy as jnp

_calls = [0]


def binary_operator(left, right):
    _calls[0] += 1
    n = 24_000
    shape = (n, 1) if _calls[0] % 2 else (1, n)
    return jnp.ones(shape), jnp.ones(shape)
