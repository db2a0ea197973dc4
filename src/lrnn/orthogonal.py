"""Orthogonal maps: the skew-symmetric exponential (RotRNN Lemma 2), block-diagonal rotations
(RotRNN Lemma 3, eq. 14), and Householder reflections in compact WY form (oRNN §4)."""
from __future__ import annotations

import jax
import jax.numpy as jnp

from ._validate import fail


def skew_expm(M):
    """``expm(M - Mᵀ)`` ∈ SO(n) for any real ``M`` of shape ``(..., n, n)`` (RotRNN Lemma 2).

    ``M - Mᵀ`` is skew-symmetric, so its exponential is orthogonal and has determinant
    ``exp(Tr[M - Mᵀ]) = 1``."""
    M = jnp.asarray(M)
    if M.ndim < 2 or M.shape[-1] != M.shape[-2]:
        fail("M", M, "a square matrix of shape (..., n, n)")
    S = M - jnp.swapaxes(M, -1, -2)
    if S.ndim == 2:
        return jax.scipy.linalg.expm(S)
    flat = S.reshape(-1, *S.shape[-2:])
    return jax.vmap(jax.scipy.linalg.expm)(flat).reshape(S.shape)


def block_rotation(theta):
    """The dense block-diagonal rotation ``D(θ)`` of shape ``(..., 2K, 2K)`` for ``θ`` of shape
    ``(..., K)``: 2×2 blocks ``[[cos θ_i, -sin θ_i], [sin θ_i, cos θ_i]]`` (RotRNN Lemma 3).
    For teaching and tests; ``rotate_pairs`` applies it without forming it."""
    theta = jnp.asarray(theta)
    if theta.ndim < 1:
        fail("theta", theta, "an array of shape (..., K) of angles")
    k = theta.shape[-1]
    c, s = jnp.cos(theta), jnp.sin(theta)
    blocks = jnp.stack([jnp.stack([c, -s], -1), jnp.stack([s, c], -1)], -2)   # (..., K, 2, 2)
    eye = jnp.eye(k, dtype=blocks.dtype)
    dense = jnp.einsum("...kij,kl->...kilj", blocks, eye)                   # (..., K, 2, K, 2)
    return dense.reshape(*theta.shape[:-1], 2 * k, 2 * k)


def rotate_pairs(x, theta):
    """``D(θ) x`` without forming ``D``, as in RotRNN eq. 14:
    ``x ⊗ [cos θ_1, cos θ_1, …] + [-x_2, x_1, -x_4, x_3, …] ⊗ [sin θ_1, sin θ_1, …]``.

    Args:
      x: shape ``(..., 2K)``.
      theta: shape ``(K,)``, or broadcastable to ``x.shape[:-1] + (K,)``.
    Returns:
      an array of the shape of ``x``."""
    x = jnp.asarray(x)
    theta = jnp.asarray(theta)
    if x.ndim < 1 or x.shape[-1] % 2:
        fail("x", x, "a last dimension of even size 2K (pairs of coordinates)")
    k = x.shape[-1] // 2
    if theta.ndim < 1 or theta.shape[-1] != k:
        fail("theta", theta, f"a last dimension of size K = {k} (one angle per pair of x)")
    cos = jnp.repeat(jnp.cos(theta), 2, axis=-1)
    sin = jnp.repeat(jnp.sin(theta), 2, axis=-1)
    pairs = x.reshape(*x.shape[:-1], k, 2)
    swapped = jnp.stack([-pairs[..., 1], pairs[..., 0]], axis=-1).reshape(x.shape)
    return x * cos + swapped * sin
