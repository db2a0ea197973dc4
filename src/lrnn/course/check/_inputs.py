"""Seeded random inputs for the checkers."""
from __future__ import annotations

import numpy as np


def reference_scan(a, b):
    """``x_t = a_t x_{t-1} + b_t`` in float64 (``lrnn.scan.reference``, imported when a check
    runs)."""
    from lrnn.scan.reference import linear_scan
    return linear_scan(a, b)


def randn(rng, *shape, dtype=np.float32):
    return rng.standard_normal(shape).astype(dtype)


def crandn(rng, *shape, dtype=np.complex64):
    z = rng.standard_normal(shape) + 1j * rng.standard_normal(shape)
    return (z / np.sqrt(2)).astype(dtype)


def unit_disk(rng, *shape, r_min=0.3, r_max=0.95, dtype=np.complex64):
    """Complex numbers with modulus in [r_min, r_max] and uniform phase."""
    r = rng.uniform(r_min, r_max, shape)
    phase = rng.uniform(0, 2 * np.pi, shape)
    return (r * np.exp(1j * phase)).astype(dtype)
