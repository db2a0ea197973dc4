"""The reference backend, ``method="sequential"``: one ``lax.scan`` step per time step.

``scan(a, b, reverse)`` solves ``x_t = a_t x_{t-1} + b_t`` (``x_{-1} = 0``) along axis -2, and
``adjoint`` runs the backward pass of the custom VJP in ``lrnn.scan`` as one reverse loop that
also accumulates the gradient of a time-invariant ``a``.
"""
from __future__ import annotations

import jax.numpy as jnp
from jax import lax


def scan(a, b, reverse):
    """``a``: ``(N,)`` (time-invariant) or ``b.shape``; ``b``: ``(..., L, N)``. Returns ``x``."""
    time_invariant = a.ndim == 1
    b_t = jnp.moveaxis(b, -2, 0)
    carry0 = jnp.zeros(b_t.shape[1:], b.dtype)
    if time_invariant:
        def step(x, b_k):
            x = a * x + b_k
            return x, x
        _, x = lax.scan(step, carry0, b_t, reverse=reverse)
    else:
        def step(x, ab_k):
            a_k, b_k = ab_k
            x = a_k * x + b_k
            return x, x
        _, x = lax.scan(step, carry0, (jnp.moveaxis(a, -2, 0), b_t), reverse=reverse)
    return jnp.moveaxis(x, 0, -2)


def shift_towards_past(v, reverse):
    """v_{t+1} at position t (zero at the end); the other way round when ``reverse``."""
    zero = jnp.zeros_like(v[..., :1, :])
    if reverse:
        return jnp.concatenate([zero, v[..., :-1, :]], axis=-2)
    return jnp.concatenate([v[..., 1:, :], zero], axis=-2)


def previous_state(x, reverse):
    """x_{t-1} at position t (zero at the start); x_{t+1} when ``reverse``."""
    zero = jnp.zeros_like(x[..., :1, :])
    if reverse:
        return jnp.concatenate([x[..., 1:, :], zero], axis=-2)
    return jnp.concatenate([zero, x[..., :-1, :]], axis=-2)


def adjoint(a, x, g, reverse):
    """The reverse scan and the gradient of a in one loop: returns ``(da, lam)``.

    Walking backwards, the carry is λ_{t+1}; it meets x_t at step t, so
    ``da = Σ_t λ_{t+1} x_t`` accumulates without a shifted copy of x."""
    time_invariant = a.ndim == 1
    move = lambda v: jnp.moveaxis(v, -2, 0)   # noqa: E731
    g_t, x_t = move(g), move(x)
    a_t = jnp.broadcast_to(a, x_t.shape[1:]) if time_invariant else move(shift_towards_past(a, reverse))
    zero = jnp.zeros(g_t.shape[1:], g.dtype)

    def step(carry, inputs):
        lam_next, da = carry
        if time_invariant:
            g_k, x_k = inputs
            a_k = a_t
        else:
            g_k, x_k, a_k = inputs
        da = da + lam_next * x_k if time_invariant else da
        lam = g_k + a_k * lam_next
        return (lam, da), lam

    inputs = (g_t, x_t) if time_invariant else (g_t, x_t, a_t)
    (_, da), lam = lax.scan(step, (zero, zero), inputs, reverse=not reverse)
    lam = jnp.moveaxis(lam, 0, -2)
    if time_invariant:
        return da.reshape(-1, da.shape[-1]).sum(axis=0), lam
    return lam * previous_state(x, reverse), lam
