"""Structural bypass 2: reach the forbidden function by another path
(`lrnn.scan.associative.binary_operator`, the module it is defined in) and the forbidden
eigenvalues by another NumPy function (`np.roots(np.poly(A))`): a `forbid` that patches one
module attribute missed both (4/14)."""
# %%
# replaces ex1.1-solution
import lrnn.scan.associative


def binary_operator(left, right):
    return lrnn.scan.associative.binary_operator(left, right)
# %%
# replaces ex1.5-solution
import numpy as np


def spectral_radius(A):
    return float(np.max(np.abs(np.roots(np.poly(np.asarray(A, dtype=float))))))
