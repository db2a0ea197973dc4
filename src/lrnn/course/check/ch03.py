"""Checks for Exercises 3 · Rotations (solutions/03_rotations.ipynb): RotRNN Lemmas 2–3, the
rotation recurrence as a complex diagonal scan, and one RotGRU step (RotLSTM paper, eqs. 11–17)."""
from __future__ import annotations

import math

import numpy as np

from ._core import (alternative, call, exercise, expect, expect_close, expect_prediction,
                    largest_intermediate, randn)


def _block_rotation(theta):
    """Dense D(θ) in float64, (2K, 2K): 2×2 blocks [[cos, -sin], [sin, cos]] (RotRNN Lemma 3)."""
    theta = np.asarray(theta, np.float64)
    d = np.zeros((2 * theta.size, 2 * theta.size))
    for i, t in enumerate(theta):
        d[2 * i:2 * i + 2, 2 * i:2 * i + 2] = [[np.cos(t), -np.sin(t)], [np.sin(t), np.cos(t)]]
    return d


def _expm(S):
    import scipy.linalg
    return scipy.linalg.expm(np.asarray(S, np.float64))


@exercise("3.1", points=2, title="a rotation from any matrix (RotRNN Lemma 2)",
          reference="RotRNN Lemma 2 and App. A.2 (exp(S) = Σ S^k/k!, with exp(S) = "
                    "exp(S/2^s)^(2^s))",
          stronger_hint="exp(S) for S = M − Mᵀ by scaling and squaring: divide S by 2^s until its "
                        "norm is below about ½, sum the Taylor series I + S + S²/2! + … (15 terms "
                        "are plenty at that size), then square the result s times.")
def _(fn, rng):
    cases = [(1, 1.0), (2, 1.0), (3, 0.5), (6, 1.0), (6, 2.0)]
    for n, scale in cases:
        M = (scale * randn(rng, n, n)).astype(np.float32)
        inputs = {"M": M}
        got = call(fn, inputs)
        S = M.astype(np.float64) - M.T
        want = _expm(S)
        expect_close(got, want, inputs=inputs, rtol=1e-4, atol=2e-4, what="exp(M − Mᵀ)", hints=[
            alternative(_expm(M), "you exponentiated M itself; Lemma 2 uses S = M − Mᵀ."),
            alternative(_expm(-S), "you return the transpose (the inverse rotation): "
                                   "S = M − Mᵀ, not Mᵀ − M."),
            alternative(_expm(S / 2), "S = M − Mᵀ has no factor ½."),
            alternative(np.eye(n) + S, "only two terms of the series: keep adding S^k/k! until "
                                       "they are negligible."),
        ])
        rec = np.asarray(got, np.float64)
        expect(np.allclose(rec.T @ rec, np.eye(n), atol=1e-3),
               "the result is not orthogonal (AᵀA ≠ I).", inputs=inputs,
               hint="for large ‖S‖ a truncated series loses accuracy: scale S by 2⁻ˢ, sum the "
                    "series, then square the result s times.")
    M = randn(rng, 4, 4)
    M = (M + M.T).astype(np.float32)
    inputs = {"M": M}
    expect_close(call(fn, inputs), np.eye(4), inputs=inputs, atol=1e-5,
                 what="exp(M − Mᵀ) for a symmetric M",
                 hints=[alternative(_expm(M), "a symmetric M gives S = 0 and exp(0) = I: "
                                              "exponentiate S = M − Mᵀ, not M.")])


def _rotation_recurrence(gamma, theta, b, sign=1.0, pairs="neighbours", use_gamma=True):
    """x_t = γ D(θ) x_{t-1} + b_t, float64 loop with dense 2×2 blocks (and typical mistakes)."""
    gamma = np.asarray(gamma, np.float64) if use_gamma else np.ones(np.shape(theta))
    b = np.asarray(b, np.float64)
    K = b.shape[-1] // 2
    G = np.repeat(gamma, 2)[:, None] * _block_rotation(sign * np.asarray(theta, np.float64))
    if pairs == "halves":                     # (x_i, x_{i+K}) paired instead of neighbours
        perm = np.arange(2 * K).reshape(2, K).T.reshape(-1)
        G = G[np.argsort(perm)][:, np.argsort(perm)]
    x = np.zeros(b.shape[:-2] + (2 * K,))
    out = np.empty_like(b)
    for t in range(b.shape[-2]):
        x = x @ G.T + b[..., t, :]
        out[..., t, :] = x
    return out


@exercise("3.2", points=3, title="the rotation recurrence as a complex diagonal scan",
          reference="chapter 3, §3: a 2×2 block γR(θ) acting on (x₁, x₂) is γe^{iθ} acting on "
                    "x₁ + i x₂; RotRNN Lemma 3 and App. B.1",
          stronger_hint="pair the channels: z_i = b_(2i) + i·b_(2i+1). The block γR(θ_i) acts on "
                        "z_i as the multiplication by λ_i = γ e^(iθ_i), so run a complex diagonal "
                        "linear scan with λ over z, then put (Re x, Im x) back at the interleaved "
                        "positions 2i and 2i + 1.")
def _(fn, rng):
    for lead, L, K in [((), 1, 1), ((), 6, 1), ((), 9, 3), ((2,), 7, 2), ((2, 3), 5, 2)]:
        gamma = rng.uniform(0.5, 0.999, K).astype(np.float32)
        theta = rng.uniform(-np.pi, np.pi, K).astype(np.float32)
        b = randn(rng, *lead, L, 2 * K)
        inputs = {"gamma": gamma, "theta": theta, "b": b}
        got = call(fn, inputs)
        want = _rotation_recurrence(gamma, theta, b)
        hints = [
            alternative(lambda: _rotation_recurrence(gamma, theta, b, sign=-1.0),
                        "you turn by −θ: the pair (x₁, x₂) is the complex number x₁ + i x₂, "
                        "multiplied by λ = γe^{+iθ} (or you took x₁ − i x₂)."),
            alternative(lambda: _rotation_recurrence(gamma, theta, b, use_gamma=False),
                        "the decay is missing: λ = γ e^{iθ}, not e^{iθ}."),
        ]
        if K > 1:
            hints.append(alternative(lambda: _rotation_recurrence(gamma, theta, b,
                                                                  pairs="halves"),
                                     "pairs mis-ordered: the blocks act on neighbours "
                                     "(x₀, x₁), (x₂, x₃), …, not on x_i and x_{i+K}."))
        expect_close(got, want, inputs=inputs, rtol=2e-4, atol=2e-5, time_axis=-2, dtype="real",
                     what="the states x, shape (..., L, 2K)", hints=hints)
    import jax.numpy as jnp
    big = largest_intermediate(fn, jnp.full(128, 0.9, jnp.float32),
                               jnp.ones(128, jnp.float32), jnp.ones((4, 256), jnp.float32))
    expect(big is None or big < 256 * 256,
           f"for 2K = 256 your function builds an array of {big} entries.",
           hint="you formed the dense 2K×2K transition: as complex numbers the recurrence is "
                "elementwise, K independent channels.")


@exercise("3.3", points=2, title="powers of a rotation via θ·k (RotRNN Lemma 3)",
          reference="RotRNN Lemma 3 and §3.2 (the P's cancel inside powers; D(θ)^k = D(kθ))",
          stronger_hint="A^k = P D(θ)^k Pᵀ and D(θ)^k = D(kθ). Form D(kθ) Pᵀ without building D: "
                        "rotating the pairs of entries of every row of P by the angles kθ, then "
                        "transposing, gives exactly D(kθ) Pᵀ. Multiply by P on the left.")
def _(fn, rng):
    for n in (2, 4, 6):
        M = rng.standard_normal((n, n))
        P = _expm(M - M.T)
        theta = rng.uniform(0, 2 * np.pi, n // 2)
        A = P @ _block_rotation(theta) @ P.T
        for k in (0, 1, 2, 7, 100, -3):
            inputs = {"P": P.astype(np.float32), "theta": theta.astype(np.float32), "k": k}
            got = call(fn, inputs)
            want = np.linalg.matrix_power(A, k) if k >= 0 else np.linalg.matrix_power(A.T, -k)
            Dk = _block_rotation(k * theta)
            expect_close(got, want, inputs=inputs, rtol=1e-3, atol=1e-3, what=f"A^{k}", hints=[
                alternative(A, "you return A itself: the blocks of D^k rotate by k·θ."),
                alternative(P @ Dk, "forgot Pᵀ on the right: A^k = P D(kθ) Pᵀ."),
                alternative(Dk, "forgot P and Pᵀ: D(kθ) is A^k only in the rotated basis."),
                alternative(P.T @ Dk @ P, "P and Pᵀ are swapped: A = P D Pᵀ (Lemma 3)."),
                alternative(P @ _block_rotation(-k * theta) @ P.T,
                            "transposed rotation: that is A^(−k); check the sign of the sin "
                            "entries of D."),
            ])


def _sigmoid(z):
    return 1.0 / (1.0 + np.exp(-z))


def _rotate_pairs64(v, u):
    cu, su = np.repeat(np.cos(u), 2, -1), np.repeat(np.sin(u), 2, -1)
    swapped = np.stack([-v[..., 1::2], v[..., ::2]], -1).reshape(v.shape)
    return v * cu + swapped * su


def rotgru_np(params, h, x, variant="ok"):
    """One (Rot)GRU step in float64 NumPy (RotLSTM paper, eqs. 11–17), and typical mistakes."""
    p = {k: np.asarray(v, np.float64) for k, v in params.items()}
    h, x = np.asarray(h, np.float64), np.asarray(x, np.float64)
    xcat = np.concatenate([x, h] if variant == "order" else [h, x], -1)     # eq. 11
    z = _sigmoid(xcat @ p["W_z"].T + p["b_z"])                               # eq. 12
    reset = _sigmoid(xcat @ p["W_r"].T + p["b_r"])
    d = h * reset                                                            # eq. 13
    r = d
    if "W_rot" in p:
        u = _sigmoid(xcat @ p["W_rot"].T + p["b_rot"])                       # eq. 14
        u = u if variant == "no2pi" else 2 * np.pi * u
        u = -u if variant == "neg" else u
        r = _rotate_pairs64(h if variant == "rotate_h" else d, u)            # eq. 15
        if variant == "rotate_h":
            r = r * reset
    if variant == "no_reset":
        r = h
    h_hat = np.tanh(np.concatenate([r, x], -1) @ p["W_h"].T + p["b_h"])      # eq. 16
    if variant == "z_swapped":
        return z * h + (1 - z) * h_hat
    return (1 - z) * h + z * h_hat                                           # eq. 17


_ROTGRU_MISTAKES = {
    "order": "concatenate [h_{t-1}, x_t] in that order (eq. 11): the first n columns of each "
             "W act on h_{t-1}.",
    "no2pi": "the angles are 2π σ(W_rot x + b_rot) (eq. 14): the 2π is missing.",
    "neg": "you rotate by −u: the transposed rotation (the sin terms have the wrong sign).",
    "rotate_h": "rotate the reset-gated state d_t = h_{t-1} ∘ r (eqs. 13, 15): the reset "
                "gate acts before the rotation, not after.",
    "no_reset": "the candidate reads [r_t, x_t] (eq. 16), with r_t the rotated reset-gated "
                "state (eqs. 13–15), not [h_{t-1}, x_t].",
    "z_swapped": "the update gate weighs the candidate: h_t = (1 − z_t) ∘ h_{t-1} + z_t ∘ ĥ_t "
                 "(eq. 17).",
}


@exercise("3.4", points=3, title="one RotGRU cell step (RotLSTM paper, eqs. 11–17)",
          reference="Velici & Prügel-Bennett 2017, §5, eqs. 11–17 (the rotation acts on the "
                    "reset-gated state, eq. 15); chapter 3, §5",
          stronger_hint="the order matters: z = σ(W_z [h, x] + b_z); the reset gate σ(W_r [h, x] + "
                        "b_r) multiplies the previous state first (eq. 13), and only that gated "
                        "state is rotated, by the angles 2π σ(W_rot [h, x] + b_rot) (eqs. 14–15). "
                        "The candidate reads [rotated state, x_t]; h_t = (1 − z) ⊙ h + z ⊙ "
                        "tanh(candidate).")
def _(fn, rng):
    for lead, n, d_in, rotate in [((), 2, 1, True), ((), 4, 3, True), ((2,), 6, 2, True),
                                  ((3,), 4, 4, True), ((2,), 4, 3, False)]:
        params = {}
        for g in ("z", "r", "h", "rot") if rotate else ("z", "r", "h"):
            rows = n // 2 if g == "rot" else n
            params[f"W_{g}"] = randn(rng, rows, n + d_in) / np.float32(np.sqrt(n + d_in) / 2)
            params[f"b_{g}"] = np.float32(0.5) * randn(rng, rows)
        h, x = randn(rng, *lead, n), randn(rng, *lead, d_in)
        inputs = {"params": params, "h": h, "x_t": x}
        got = call(fn, inputs)
        expect(isinstance(got, (tuple, list)) and len(got) == 2,
               "the result must be the pair (h_t, h_t), like a lax.scan step.", inputs=inputs,
               hint="return `h_new, h_new`.")
        want = rotgru_np(params, h, x)
        variants = [v for v in _ROTGRU_MISTAKES if rotate or v not in ("no2pi", "neg",
                                                                         "rotate_h")]
        hints = [alternative(lambda v=v: rotgru_np(params, h, x, v), _ROTGRU_MISTAKES[v])
                 for v in variants]
        expect_close(got[0], want, inputs=inputs, rtol=1e-4, atol=1e-5,
                     what="the new state h_t (first item)", hints=hints)
        expect_close(got[1], want, inputs=inputs, rtol=1e-4, atol=1e-5,
                     what="the second item (the output h_t)")


# ---------------------------------------------------------------------------------------------
# Predict, then run
# ---------------------------------------------------------------------------------------------

TURN_THETA, TURN_GAMMA = 0.3, 0.95


@exercise("3.6", points=1, kind="value",
          title="predict: when a decaying rotation first points backwards",
          reference="RotRNN eq. 14 and Lemma 3 (D(θ)^t = D(tθ)); chapter 3, §3.2",
          stronger_hint="After t steps the pair is γ^t (cos tθ, sin tθ): γ^t > 0 only scales "
                        "it. The first coordinate turns negative when the angle tθ passes a "
                        "quarter turn, π/2; take the first whole step beyond it.")
def _(value, rng):
    want = math.floor((math.pi / 2) / TURN_THETA) + 1
    expect_prediction(value, want, what="the first step with a negative first coordinate",
                      hints=[
        alternative(want - 1, "at that step the angle tθ is still below π/2: the cosine is "
                              "positive, just."),
        alternative(math.ceil(math.pi / TURN_THETA), "that is half a turn, π: the first "
                                                     "coordinate is negative long before."),
        alternative(math.ceil(2 * math.pi / TURN_THETA), "that is a full turn, 2π: the pair "
                                                         "points forwards again there."),
    ])
