"""The checkers of exercises 3–5 accept the library's reference implementations and give the
intended hint for typical mistakes (each test can fail: the wrong answers are real mistakes)."""
import jax.numpy as jnp
import numpy as np
import pytest

import lrnn.check as lc
from lrnn import orthogonal as o


def _hint(ex, fn):
    res = lc.run(ex, fn)
    assert res.status in ("fail", "error"), res.message
    return res.message


@pytest.mark.parametrize("ex, fn", [
    ("3.1", o.skew_expm), ("3.2", o.rotate_pairs), ("5.1", o.householder),
    ("5.2", o.householder_product), ("5.3", o.wy_matrix), ("5.4", o.wy_transform),
])
def test_reference_passes(ex, fn):
    assert lc.run(ex, fn).passed


def test_hints():
    assert "transpose" in _hint("3.1", lambda M: o.skew_expm(jnp.asarray(M).T))
    assert "−θ" in _hint("3.2", lambda x, t: o.rotate_pairs(x, -t))
    assert "dense" in _hint("3.2", lambda x, t: x @ o.block_rotation(t).T)
    assert "Pᵀ" in _hint("3.3", lambda P, t, k: P @ o.block_rotation(k * t))
    assert "square root" in _hint("4.1", lambda nu, B: (1 - jnp.exp(-jnp.exp(nu)) ** 2)
                                  / jnp.sum(B ** 2, axis=(1, 2)))
    assert "factor 2" in _hint("5.1", lambda u: jnp.eye(u.shape[0]) - jnp.outer(u, u) / (u @ u))
    assert "reverse order" in _hint("5.2", lambda U, s=None: o.householder_product(U, s).T)
    assert "n×n" in _hint("5.4", lambda U, h: h @ o.householder_product(U).T)
    assert "wrong order" in _hint("5.4", lambda U, h: h @ o.householder_product(U))
