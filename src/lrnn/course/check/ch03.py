"""Checks for Exercises 3 · Rotations (solutions/03_rotations.ipynb): RotRNN Lemmas 2–3, eq. 14,
and one RotLSTM step (RotLSTM eqs. 3–10)."""
from __future__ import annotations

import numpy as np

from ._core import (alternative, call, expect, expect_close, exercise,  # noqa: F401
                    largest_intermediate, randn)   # largest_intermediate: used by ch05


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


@exercise("3.1", points=2, title="skew_expm: a rotation from any matrix (RotRNN Lemma 2)",
          reference="RotRNN Lemma 2 and App. A.2; lrnn.orthogonal.skew_expm")
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


@exercise("3.2", points=2, title="rotate_pairs: D(θ) x without forming D (RotRNN eq. 14)",
          reference="RotRNN App. B.1, eq. 14; lrnn.orthogonal.rotate_pairs")
def _(fn, rng):
    def rotate_pairs(x, theta):
        return np.asarray(x, np.float64) @ _block_rotation(theta).T

    for shape in [(2,), (6,), (4, 6), (2, 3, 2)]:
        k = shape[-1] // 2
        x = randn(rng, *shape)
        theta = rng.uniform(-np.pi, np.pi, k).astype(np.float32)
        inputs = {"x": x, "theta": theta}
        got = call(fn, inputs)
        want = np.asarray(rotate_pairs(x, theta))
        x64, c, s = x.astype(np.float64), np.cos(theta), np.sin(theta)
        halves = np.concatenate([x64[..., :k] * c - x64[..., k:] * s,
                                 x64[..., :k] * s + x64[..., k:] * c], -1)
        expect_close(got, want, inputs=inputs, rtol=1e-5, atol=1e-5, what="D(θ) x", hints=[
            alternative(np.asarray(rotate_pairs(x, -theta)),
                        "you rotate by −θ, the transposed rotation: eq. 14 adds "
                        "(−x₂, x₁, −x₄, x₃, …) ⊗ sin θ, the first of each pair with a minus."),
            alternative(halves, "pairs mis-ordered: eq. 14 rotates neighbours (x₁, x₂), "
                                "(x₃, x₄), …, not x_i with x_{i+K}."),
            alternative(x64 * np.repeat(c, 2), "the sin term of eq. 14 is missing."),
            alternative(x64 * np.tile(c, 2) + np.stack([-x64[..., 1::2], x64[..., ::2]], -1)
                        .reshape(x.shape) * np.tile(s, 2),
                        "each angle θ_i must be repeated for its pair (cos θ₁, cos θ₁, cos θ₂, "
                        "…), not the whole vector tiled twice."),
        ])
    x = randn(rng, 3, 4)
    inputs = {"x": x, "theta": np.zeros(2, np.float32)}
    expect_close(call(fn, inputs), x, inputs=inputs, atol=1e-6, what="D(0) x (must be x)")
    inputs = {"x": x, "theta": np.full(2, np.pi, np.float32)}
    expect_close(call(fn, inputs), -x, inputs=inputs, atol=1e-5, what="D(π) x (must be −x)")
    import jax.numpy as jnp
    big = largest_intermediate(fn, jnp.ones((2, 512), jnp.float32), jnp.ones(256, jnp.float32))
    expect(big is None or big < 512 * 512,
           f"for x of shape (2, 512) your function builds an array of {big} entries.",
           hint="you formed the dense 2K×2K matrix D(θ): eq. 14 needs only elementwise "
                "products, O(K) memory and time.")


@exercise("3.3", points=2, title="powers of a rotation via θ·k (RotRNN Lemma 3)",
          reference="RotRNN §3.2 and Lemma 3: A^k = P D(kθ) Pᵀ")
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


def _rotlstm_np(params, h, c, x, variant="ok"):
    """One (Rot)LSTM step in float64 NumPy (RotLSTM eqs. 3–10), with typical mistakes."""
    p = {k: np.asarray(v, np.float64) for k, v in params.items()}
    h, c, x = (np.asarray(v, np.float64) for v in (h, c, x))
    xcat = np.concatenate([x, h] if variant == "order" else [h, x], -1)
    f, i, o = (_sigmoid(xcat @ p[f"W_{g}"].T + p[f"b_{g}"]) for g in "fio")
    cand = np.tanh(xcat @ p["W_c"].T + p["b_c"])
    rotate = "W_rot" in p

    def rot(v):
        if not rotate:
            return v
        u = _sigmoid(xcat @ p["W_rot"].T + p["b_rot"])
        u = u if variant == "no2pi" else 2 * np.pi * u
        u = -u if variant == "neg" else u
        cu, su = np.repeat(np.cos(u), 2, -1), np.repeat(np.sin(u), 2, -1)
        sw = np.stack([-v[..., 1::2], v[..., ::2]], -1).reshape(v.shape)
        return v * cu + sw * su

    if variant == "before":
        d = f * rot(c) + i * cand
        c_new = d
    else:
        d = f * c + i * cand
        c_new = rot(d)
    if variant == "h":
        c_new = d
        return (rot(o * np.tanh(d)), c_new)
    h_new = o * np.tanh(d if variant == "tanh_d" else c_new)
    return h_new, c_new


@exercise("3.4", points=3, title="one RotLSTM cell step (RotLSTM eqs. 3–10)",
          reference="RotLSTM §3.1, eqs. 3–10; lrnn.rotlstm.cell")
def _(fn, rng):
    for lead, n, d_in, rotate in [((), 2, 1, True), ((), 4, 3, True), ((2,), 6, 2, True),
                                  ((3,), 4, 4, True), ((2,), 4, 3, False)]:
        # the layout of lrnn.rotlstm.init, with random biases so that every term matters
        params = {}
        for g in ("f", "i", "o", "c", "rot") if rotate else ("f", "i", "o", "c"):
            rows = n // 2 if g == "rot" else n
            params[f"W_{g}"] = randn(rng, rows, n + d_in) / np.float32(np.sqrt(n + d_in) / 2)
            params[f"b_{g}"] = np.float32(0.5) * randn(rng, rows)
        h, c, x = randn(rng, *lead, n), randn(rng, *lead, n), randn(rng, *lead, d_in)
        inputs = {"params": params, "carry": (h, c), "x_t": x}
        got = call(fn, inputs)
        expect(isinstance(got, (tuple, list)) and len(got) == 2
               and isinstance(got[0], (tuple, list)) and len(got[0]) == 2,
               "the result must be ((h_t, c_t), h_t), like a lax.scan step.", inputs=inputs,
               received=None, hint="return `(h_new, c_new), h_new`.")
        want_h, want_c = _rotlstm_np(params, h, c, x)
        wrong = {v: _rotlstm_np(params, h, c, x, v) for v in
                 ("order", "no2pi", "neg", "before", "h", "tanh_d")}
        messages = {
            "order": "concatenate [h_{t-1}, x_t] in that order (eq. 3): the first n columns of "
                     "each W act on h_{t-1}.",
            "no2pi": "the angles are u_t = 2π σ(W_rot x + b_rot) (eq. 7): the 2π is missing.",
            "neg": "you rotate by −u_t: the transposed rotation (check the sin signs, eq. 2).",
            "before": "rotate d_t, the memory after the forget and input gates (eqs. 8–9), "
                      "not c_{t-1}.",
            "h": "your c_t is d_t, unrotated: c_t = U(u_t) d_t (eq. 9); the rotation acts on "
                 "the memory, not on the output h_t.",
            "tanh_d": "h_t = o_t ∘ tanh(c_t) uses the rotated memory c_t (eq. 10), not d_t.",
        }
        expect_close(got[0][1], np.asarray(want_c), inputs=inputs, rtol=1e-4, atol=1e-5,
                     what="the new memory c_t (second item of the carry)",
                     hints=[alternative(wrong[v][1], messages[v]) for v in wrong]
                     + [alternative(want_h, "the carry is (h_t, c_t), in that order.")])
        expect_close(got[0][0], np.asarray(want_h), inputs=inputs, rtol=1e-4, atol=1e-5,
                     what="the new output h_t (first item of the carry)",
                     hints=[alternative(wrong[v][0], messages[v]) for v in wrong])
        expect_close(got[1], np.asarray(want_h), inputs=inputs, rtol=1e-4, atol=1e-5,
                     what="the second item (the output h_t)")
