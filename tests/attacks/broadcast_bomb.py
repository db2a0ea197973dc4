"""A broadcast bomb (attack 8): `binary_operator` returns shapes (N, 1) on one call
and (1, N) on the next, so the hidden test's comparison of two of its results (associativity)
builds an N x N array in the grader: 1.9 GB at N = 14 000, from under 1 MB sent."""
# %%
# replaces ex1.1-solution
import numpy as np

_calls = [0]


def binary_operator(left, right):
    _calls[0] += 1
    n = 14_000
    shape = (n, 1) if _calls[0] % 2 else (1, n)
    return np.ones(shape), np.ones(shape)
