"""Checks for Exercises 3 · Rotations (solutions/03_rotations.ipynb): RotRNN Lemma 2 measured
against a specification, a rotation recurrence that turns its input too, with an angle per
step, as a complex diagonal scan, the principal real power of a rotation (Lemma 3), and a
broken RotGRU step with fused weights to mend (RotLSTM paper, eqs. 11–17), probed by its
symptoms first."""
from __future__ import annotations

import math

import numpy as np

from ._core import (alternative, call, exercise, expect, expect_close, expect_prediction,
                    expect_shape, largest_intermediate, randn, when)


def _block_rotation(theta):
    """Dense D(θ) in float64, (2K, 2K): 2×2 blocks [[cos, -sin], [sin, cos]] (RotRNN Lemma 3)."""
    theta = np.asarray(theta, np.float64)
    d = np.zeros((2 * theta.size, 2 * theta.size))
    for i, t in enumerate(theta):
        d[2 * i:2 * i + 2, 2 * i:2 * i + 2] = [[np.cos(t), -np.sin(t)], [np.sin(t), np.cos(t)]]
    return d


def _expm(S):
    import scipy.linalg
    with np.errstate(all="ignore"):             # exp(M) of a typical mistake may overflow
        return scipy.linalg.expm(np.asarray(S, np.float64))


def _skew_input(rng, n, norm):
    """A float32 M whose S = M − Mᵀ has spectral norm ``norm`` (M itself not skew)."""
    M = rng.standard_normal((n, n))
    S = M - M.T
    return (M * (norm / max(np.linalg.norm(S, 2), 1e-12))).astype(np.float32)


def _rotation_input(rng, angles):
    """A float32 M with M − Mᵀ = Q blockdiag(θ_i J) Qᵀ: exp(M − Mᵀ) turns plane i by θ_i; the
    symmetric part added to M cancels in M − Mᵀ."""
    n = 2 * len(angles)
    Q, _ = np.linalg.qr(rng.standard_normal((n, n)))
    B = np.zeros((n, n))
    for i, t in enumerate(angles):
        B[2 * i + 1, 2 * i], B[2 * i, 2 * i + 1] = t, -t
    sym = rng.standard_normal((n, n))
    return (Q @ B @ Q.T / 2 + (sym + sym.T)).astype(np.float32)


#: The specification of Exercise 3.1 (stated in its prompt).
SKEW_EXPM_ATOL, SKEW_EXPM_ORTH, SKEW_EXPM_DET, SKEW_EXPM_NORM = 1e-4, 1e-4, 1e-3, 50.0


def skew_expm_cases(rng):
    """The inputs of Exercise 3.1, easiest first: (M, ‖M − Mᵀ‖₂)."""
    cases = [_skew_input(rng, 1, 1.0), _skew_input(rng, 2, 1.0), _skew_input(rng, 3, 2.0)]
    sym = rng.standard_normal((4, 4))
    cases.append((sym + sym.T).astype(np.float32))
    cases += [_rotation_input(rng, [np.pi - 1e-3, 0.3]),
              _rotation_input(rng, [np.pi, np.pi - 1e-4, 1.0]),
              _skew_input(rng, 5, 10.0), _skew_input(rng, 4, SKEW_EXPM_NORM),
              _skew_input(rng, 6, SKEW_EXPM_NORM), _rotation_input(rng, [49.0, 31.4, 2.0])]
    return [(M, float(np.linalg.norm(M.astype(np.float64) - M.T, 2))) for M in cases]


@exercise("3.1", points=2, title="a rotation to a specification (RotRNN Lemma 2)",
          reference="RotRNN Lemma 2 and App. A.2 (exp(S) = Σ S^k/k!, AᵀA = I, det A = 1); "
                    "chapter 3, §3.1",
          stronger_hint="scaling and squaring: exp(S) = exp(S/2^s)^(2^s). Pick s so that "
                        "‖S‖/2^s is below about ½, where a dozen terms of the Taylor series are "
                        "accurate and no term is large, then square the result s times. (Or "
                        "diagonalise the Hermitian matrix iS = V diag(w) Vᴴ: exp(S) = V "
                        "diag(e^(−iw)) Vᴴ, real up to rounding.)")
def _(fn, rng):
    for M, norm in skew_expm_cases(rng):
        n = M.shape[0]
        inputs = {"M": M}
        got = call(fn, inputs)
        S = M.astype(np.float64) - M.T
        want = _expm(S)
        k = max(1, math.floor(norm))                     # the largest term of Σ ‖S‖^k / k!
        peak = math.exp(k * math.log(max(norm, 1e-30)) - math.lgamma(k + 1))
        expect_close(got, want, inputs=inputs, rtol=0.0, atol=SKEW_EXPM_ATOL,
                     what=f"exp(M − Mᵀ) at ‖M − Mᵀ‖₂ = {norm:.3g}", hints=[
            alternative(lambda: _expm(M), "you exponentiated M itself; Lemma 2 uses S = M − Mᵀ."),
            alternative(lambda: _expm(-S), "you return the transpose (the inverse rotation): "
                                           "S = M − Mᵀ, not Mᵀ − M."),
            alternative(lambda: _expm(S / 2), "S = M − Mᵀ has no factor ½."),
            alternative(np.eye(n) + S, "only two terms of the series: I + S is exp(S) only "
                                       "to first order."),
            when(lambda rec, exp: norm > 5,
                 f"the smaller inputs passed. At this norm the terms S^k/k! of the series grow "
                 f"to about {peak:.0e} before they shrink, and their sum is of size 1: rounding "
                 f"errors of the large terms swamp the result, and a fixed number of terms "
                 f"stops short of the tail."),
        ])
        A = np.asarray(got, np.float64).real
        orth = float(np.max(np.abs(A.T @ A - np.eye(n))))
        expect(orth <= SKEW_EXPM_ORTH,
               f"AᵀA − I reaches {orth:.1e} at ‖M − Mᵀ‖₂ = {norm:.3g}; the specification asks "
               f"for {SKEW_EXPM_ORTH:g}.", inputs=inputs,
               hint="each matrix product adds a rounding error of about 10⁻⁷ (float32) and "
                    "nothing pulls the result back: count the products your method makes.")
        det = float(np.linalg.det(A))
        expect(abs(det - 1) <= SKEW_EXPM_DET,
               f"det A = {det:.6f} at ‖M − Mᵀ‖₂ = {norm:.3g}; a rotation has det A = 1 "
               f"(to {SKEW_EXPM_DET:g}).", inputs=inputs)


def _rotation_recurrence(gamma, theta, b, sign=1.0, pairs="neighbours", use_gamma=True,
                         angles="own", inputs="turned"):
    """x_t = γ D(θ_t)(x_{t-1} + b_t), float64 loop with dense 2×2 blocks, θ of shape (L, K):
    the input is added before the turn. And typical mistakes: ``angles`` (the whole step turned
    by θ_{t-1}, θ_0 or θ_0 + … + θ_t), ``inputs`` ("after": b_t added after the turn, the
    recurrence of chapter 3, §3.3; "undecayed": b_t turned but not scaled; "previous": b_t
    turned and scaled by step t − 1's block, "wrapped" likewise with b_0 by the last block;
    "sum": the returned state is x_{t-1} + b_t)."""
    gamma = np.asarray(gamma, np.float64) if use_gamma else np.ones(np.shape(theta)[-1])
    theta = sign * np.asarray(theta, np.float64)
    if angles == "previous":                  # step t turned by θ_{t-1}
        theta = np.concatenate([theta[:1], theta[:-1]])
    elif angles == "first":                   # every step turned by θ_0
        theta = np.broadcast_to(theta[:1], theta.shape)
    elif angles == "cumulative":              # step t turned by θ_0 + … + θ_t
        theta = np.cumsum(theta, axis=0)
    b = np.asarray(b, np.float64)
    K = b.shape[-1] // 2
    perm = np.argsort(np.arange(2 * K).reshape(2, K).T.reshape(-1))
    blocks = []
    for t in range(b.shape[-2]):
        G = np.repeat(gamma, 2)[:, None] * _block_rotation(theta[t])
        blocks.append(G[perm][:, perm] if pairs == "halves" else G)   # halves: (x_i, x_{i+K})
    x = np.zeros(b.shape[:-2] + (2 * K,))
    out = np.empty_like(b)
    for t, G in enumerate(blocks):
        b_t = b[..., t, :]
        if inputs == "turned":
            new = (x + b_t) @ G.T
        elif inputs == "after":
            new = x @ G.T + b_t
        elif inputs == "undecayed":
            new = x @ G.T + b_t @ (G / np.repeat(gamma, 2)[:, None]).T
        elif inputs == "previous":            # step 0 has no previous block: b_0 as it is
            new = x @ G.T + (b_t @ blocks[t - 1].T if t else b_t)
        elif inputs == "wrapped":             # the blocks shifted cyclically: b_0 by the last
            new = x @ G.T + b_t @ blocks[t - 1].T
        else:                                 # "sum": the state before step t's turn
            out[..., t, :] = x + b_t
            x = (x + b_t) @ G.T
            continue
        x = out[..., t, :] = new
    return out


@exercise("3.2", points=3, title="a rotation recurrence that turns its input too",
          reference="RotRNN eq. 6 and Lemma 3 (this variant adds the input before the turn, with "
                    "an angle per step); RotLSTM eqs. 8–9 (c_t = U(u_t) d_t, the turn after the "
                    "input); chapter 3, §3.3 (γR(θ) on (x₁, x₂) is γe^{iθ} on x₁ + i x₂); "
                    "chapter 1 (a_t may change with t)",
          stronger_hint="read each pair as z = x_(2i) + i·x_(2i+1): step t is z_t = λ_t (z_(t−1) + "
                        "b̃_t) with λ_t = γ e^(iθ_t), one complex number per step and pair. "
                        "Multiply the bracket out: the coefficient of z_(t−1) is λ_t, and the "
                        "input of the diagonal scan is b̃_t after the turn and decay of its own "
                        "step, not b̃_t itself. Scan with a coefficient that changes with t "
                        "(chapter 1), then put (Re, Im) back at the positions 2i and 2i + 1.")
def _(fn, rng):
    # two steps first: one step cannot tell where the input enters from when it turns
    for lead, L, K in [((), 2, 1), ((), 6, 1), ((), 9, 3), ((2,), 7, 2), ((2, 3), 5, 2)]:
        gamma = rng.uniform(0.5, 0.999, K).astype(np.float32)
        theta = rng.uniform(-np.pi, np.pi, (L, K)).astype(np.float32)
        b = randn(rng, *lead, L, 2 * K)
        inputs = {"gamma": gamma, "theta": theta, "b": b}
        got = call(fn, inputs)
        want = _rotation_recurrence(gamma, theta, b)
        hints = [
            alternative(lambda: _rotation_recurrence(gamma, theta, b, inputs="after"),
                        "your input is not rotated: you add b_t after the turn, γD(θ_t)x_{t−1} + "
                        "b_t (the recurrence of §3.3). Here b_t is added first, and the turn and "
                        "the decay of step t act on the sum x_{t−1} + b_t."),
            alternative(lambda: _rotation_recurrence(gamma, theta, b, inputs="undecayed"),
                        "b_t is turned by θ_t but not scaled by γ: the decay multiplies the whole "
                        "sum x_{t−1} + b_t."),
            alternative(lambda: _rotation_recurrence(gamma, theta, b, inputs="previous"),
                        "b_t is rotated by θ_{t−1} instead of θ_t (and scaled at step t − 1): "
                        "the step that adds b_t turns it by its own angles, the row t of θ."),
            alternative(lambda: _rotation_recurrence(gamma, theta, b, inputs="wrapped"),
                        "b_t is rotated by θ_{t−1} instead of θ_t (and b_0 by the last step's "
                        "angles): the step that adds b_t turns it by its own angles, the row t "
                        "of θ."),
            alternative(lambda: _rotation_recurrence(gamma, theta, b, inputs="sum"),
                        "you return x_{t−1} + b_t, the sum before step t turns it: x_t is that "
                        "sum after the turn by θ_t and the decay γ, one step later in the "
                        "recurrence."),
            alternative(lambda: _rotation_recurrence(gamma, theta, b, sign=-1.0),
                        "you turn by −θ_t: the pair (x₁, x₂) is the complex number x₁ + i x₂, "
                        "and the block turns it counter-clockwise (or you took x₁ − i x₂)."),
            alternative(lambda: _rotation_recurrence(gamma, theta, b, use_gamma=False),
                        "the decay is missing: the states keep their length from step to step."),
            alternative(lambda: _rotation_recurrence(gamma, theta, b, angles="first"),
                        "every step turns by the angles of the first step, θ_0: the angle "
                        "changes with t."),
            alternative(lambda: _rotation_recurrence(gamma, theta, b, angles="previous"),
                        "step t turns by the angles of step t − 1: the step that takes "
                        "x_{t−1} + b_t to x_t uses θ_t, the row of θ at the time of b_t."),
            alternative(lambda: _rotation_recurrence(gamma, theta, b, angles="cumulative"),
                        "step t turns by θ_0 + … + θ_t: each step turns by its own θ_t, and the "
                        "state adds up the turns by itself."),
        ]
        if K > 1:
            hints.append(alternative(lambda: _rotation_recurrence(gamma, theta, b,
                                                                  pairs="halves"),
                                     "pairs mis-ordered: the blocks act on neighbours "
                                     "(x₀, x₁), (x₂, x₃), …, not on x_i and x_{i+K}."))
        hints.append(when(lambda rec, exp: rec.shape == exp.shape and np.allclose(
                              rec[..., 0, :], exp[..., 0, :], rtol=1e-3, atol=1e-4),
                          "x_0 is right and a later state is not, so b_t enters right at the "
                          "first step: look at what step t does to x_{t−1}. It is turned by θ_t "
                          "and scaled by γ once, at step t, like b_t."))
        expect_close(got, want, inputs=inputs, rtol=2e-4, atol=2e-5, time_axis=-2, dtype="real",
                     what="the states x, shape (..., L, 2K)", hints=hints)
    import jax.numpy as jnp
    big = largest_intermediate(fn, jnp.full(128, 0.9, jnp.float32),
                               jnp.full((4, 128), 0.3, jnp.float32),
                               jnp.ones((4, 256), jnp.float32))
    expect(big is None or big < 256 * 256,
           f"for L = 4 and 2K = 256 your function builds an array of {big} entries.",
           hint="you formed dense 2K×2K transitions: as complex numbers each step is "
                "elementwise, K independent channels.")


def _principal_power(A, s):
    """A^s = exp(s log A), log A the principal logarithm, from the eigendecomposition of A
    (float64; every eigenvalue angle in (−π, π))."""
    lam, V = np.linalg.eig(np.asarray(A, np.float64))
    return np.real((V * np.exp(1j * s * np.angle(lam))) @ np.linalg.inv(V))


def _wrapped_away_from_pi(rng, K, margin=0.05):
    """K angles in (−3π, 3π) whose representatives in (−π, π] stay ``margin`` from ±π (where
    the principal power jumps)."""
    base = rng.uniform(-np.pi + margin, np.pi - margin, K)
    return base + 2 * np.pi * rng.integers(-1, 2, K)


def _block_power(P, theta, s):
    return P @ _block_rotation(s * np.asarray(theta, np.float64)) @ P.T


@exercise("3.3", points=2, title="the principal real power A^s of a rotation",
          reference="RotRNN Lemma 3 and §3.2 (A = P D(θ) Pᵀ, D(θ)^k = D(kθ)); chapter 3, §3.2; "
                    "the principal power A^s = exp(s log A)",
          stronger_hint="the angles θ_i of A are only known up to a multiple of 2π: D(θ) and "
                        "D(θ + 2π) are the same matrix, but their s-th powers differ when s is "
                        "not an integer. The principal logarithm reads every eigenvalue e^(±iθ_i) "
                        "with its angle in (−π, π]: bring each θ_i into that interval first, "
                        "then scale by s inside the P … Pᵀ sandwich.")
def _(fn, rng):
    cases = [(2, [0.0, 1.0, 0.5, 2.0]), (2, [0.5]), (4, [0.5, -0.5, 1.5, 0.25]),
             (6, [1 / 3, -3, 7, 2.5])]
    for n, powers in cases:
        M = rng.standard_normal((n, n))
        P = _expm(M - M.T)
        theta = _wrapped_away_from_pi(rng, n // 2)
        if n == 2 and powers == [0.5]:
            theta = np.array([np.pi + 0.6])          # one angle beyond π: the branch matters
        A = P @ _block_rotation(theta) @ P.T
        wrapped = np.angle(np.exp(1j * theta))
        for s in powers:
            inputs = {"P": P.astype(np.float32), "theta": theta.astype(np.float32), "s": s}
            got = call(fn, inputs)
            want = _principal_power(A, s)
            expect_close(got, want, inputs=inputs, rtol=1e-3, atol=1e-3, what=f"A^{s:g}",
                         dtype="real", hints=[
                alternative(lambda: _block_power(P, theta, s),
                            "your matrix is an s-th power of A, but not the principal one: "
                            "some of its eigenvalue angles lie outside (−|s|π, |s|π]."),
                alternative(lambda: _block_power(P, np.mod(theta, 2 * np.pi), s),
                            "your matrix is an s-th power of A, but not the principal one: "
                            "some of its eigenvalue angles lie outside (−|s|π, |s|π]."),
                alternative(lambda: _block_power(P, wrapped, np.trunc(s)),
                            "the power was rounded to an integer: s is a real number."),
                alternative(A, "you return A itself."),
                alternative(lambda: P @ _block_rotation(s * wrapped),
                            "forgot Pᵀ on the right (Lemma 3: A = P D Pᵀ)."),
                alternative(lambda: _block_rotation(s * wrapped),
                            "forgot P and Pᵀ: that matrix is the power only in the rotated "
                            "basis."),
                alternative(lambda: P.T @ _block_rotation(s * wrapped) @ P,
                            "P and Pᵀ are swapped: A = P D Pᵀ (Lemma 3)."),
                alternative(lambda: _block_power(P, -wrapped, s),
                            "transposed rotation: that is A^(−s); check the sign of the sin "
                            "entries of D."),
            ])


def _sigmoid(z):
    return 1.0 / (1.0 + np.exp(-z))


def _rotate_pairs64(v, u):
    cu, su = np.repeat(np.cos(u), 2, -1), np.repeat(np.sin(u), 2, -1)
    swapped = np.stack([-v[..., 1::2], v[..., ::2]], -1).reshape(v.shape)
    return v * cu + swapped * su


def rotgru_np(params, h, x, variant="ok"):
    """One (Rot)GRU step in float64 NumPy (RotLSTM paper, eqs. 11–17), and typical mistakes
    (``variant``: one name of ``_ROTGRU_MISTAKES``, or several joined by "+")."""
    wrong = set(variant.split("+"))
    p = {k: np.asarray(v, np.float64) for k, v in params.items()}
    h, x = np.asarray(h, np.float64), np.asarray(x, np.float64)
    xcat = np.concatenate([h, x], -1)                                        # eq. 11
    z = _sigmoid(xcat @ p["W_z"].T + p["b_z"])                               # eq. 12
    reset = _sigmoid(xcat @ p["W_r"].T + p["b_r"])
    d = h * reset                                                            # eq. 13
    r = d
    if "W_rot" in p:
        u = _sigmoid(xcat @ p["W_rot"].T + p["b_rot"])                       # eq. 14
        u = u if "no2pi" in wrong else 2 * np.pi * u
        u = -u if "neg" in wrong else u
        r = _rotate_pairs64(h if "rotate_h" in wrong else d, u)              # eq. 15
        if "rotate_h" in wrong:
            r = r * reset
    if "no_reset" in wrong:
        r = h
    h_hat = np.tanh(np.concatenate([r, x], -1) @ p["W_h"].T + p["b_h"])      # eq. 16
    if "z_swapped" in wrong:
        return z * h + (1 - z) * h_hat
    return (1 - z) * h + z * h_hat                                           # eq. 17


_ROTGRU_MISTAKES = {
    "no2pi": "the angles are a fraction of a turn: with σ(W_rot x + b_rot) near 1 the state "
             "should come round almost to where it was (eq. 14).",
    "neg": "the pairs turn the wrong way: the rotation is transposed (the sin terms have the "
           "wrong sign, eq. 2).",
    "rotate_h": "the reset gate and the rotation are applied in the other order (eqs. 13, 15).",
    "no_reset": "the candidate reads the whole previous state: the reset gate has no effect "
                "on it (eqs. 13, 16).",
    "z_swapped": "the update gate weighs the previous state where it should weigh the "
                 "candidate (eq. 17).",
}


# ---------------------------------------------------------------------------------------------
# Exercise 3.4: the same cell with its weights fused, as Keras stores a GRU's
# ---------------------------------------------------------------------------------------------

def _blocks(n, width):
    """Slices of the fused columns by gate: update gate, reset gate, candidate (n columns
    each), then the n/2 angles when ``width`` holds them."""
    edges = {"z": (0, n), "r": (n, 2 * n), "h": (2 * n, 3 * n)}
    if width > 3 * n:
        edges["rot"] = (3 * n, width)
    return {g: slice(*e) for g, e in edges.items()}


def unfuse(params):
    """The fused weights as the per-gate matrices of eqs. 12–16: W_g = [recurrentᵀ, kernelᵀ]
    on [h_{t−1}, x_t] (on [r_t, x_t] for W_h), b_g the bias columns."""
    K, R, b = (np.asarray(params[k], np.float64) for k in ("kernel", "recurrent_kernel", "bias"))
    out = {}
    for g, cols in _blocks(R.shape[0], R.shape[1]).items():
        out[f"W_{g}"] = np.concatenate([R[:, cols].T, K[:, cols].T], axis=1)
        out[f"b_{g}"] = b[cols]
    return out


def rotgru_fused_np(params, h, x, variant="ok"):
    """One fused (Rot)GRU step in float64 (eqs. 11–17), and typical mistakes: those of
    ``rotgru_np`` and, for this layout, "zr_swapped" (the update and reset blocks traded) and
    "reset_after" (the reset gate and the rotation applied to the candidate's product
    R_h h_{t−1} instead of to h_{t−1}); several joined by "+"."""
    wrong = set(variant.split("+"))
    gates = unfuse(params)
    if "zr_swapped" in wrong:
        for k in ("W", "b"):
            gates[f"{k}_z"], gates[f"{k}_r"] = gates[f"{k}_r"], gates[f"{k}_z"]
    rest = "+".join(sorted(wrong - {"zr_swapped", "reset_after"})) or "ok"
    if "reset_after" not in wrong:
        return rotgru_np(gates, h, x, rest)
    h, x = np.asarray(h, np.float64), np.asarray(x, np.float64)
    n = h.shape[-1]
    xcat = np.concatenate([h, x], -1)
    z = _sigmoid(xcat @ gates["W_z"].T + gates["b_z"])
    product = (h @ gates["W_h"][:, :n].T) * _sigmoid(xcat @ gates["W_r"].T + gates["b_r"])
    if "W_rot" in gates:
        product = _rotate_pairs64(product, 2 * np.pi * _sigmoid(xcat @ gates["W_rot"].T
                                                               + gates["b_rot"]))
    h_hat = np.tanh(product + x @ gates["W_h"][:, n:].T + gates["b_h"])
    return (1 - z) * h + z * h_hat


#: The two mistakes of the broken fused step that Exercise 3.4 gives.
ROTGRU_BROKEN = "zr_swapped+reset_after"

_FUSED_MISTAKES = {
    "zr_swapped": "your step behaves as if the update and the reset gate had traded columns: "
                  "shutting the first n bias columns resets the state instead of keeping it "
                  "(eqs. 12–13, the blocks z, r, h, angles).",
    "reset_after": "your reset gate and rotation act on the candidate's product of h_{t−1} "
                   "with its recurrent columns, not on h_{t−1} before that product reads it: a "
                   "pair of h_{t−1} that the reset gate shuts still reaches every entry of ĥ_t "
                   "(eqs. 13, 15, 16).",
    **_ROTGRU_MISTAKES,
}


def _fused_params(rng, n, d_in, rotate=True):
    width = 3 * n + (n // 2 if rotate else 0)
    scale = np.float32(np.sqrt(n + d_in) / 2)
    return {"kernel": randn(rng, d_in, width) / scale,
            "recurrent_kernel": randn(rng, n, width) / scale,
            "bias": np.float32(0.5) * randn(rng, width)}


def _fused_with(params, bias=None, plain=False, reader=None):
    """A copy of fused ``params``: ``bias`` {gate: value or array} sets bias columns; ``plain``
    drops the angle columns; ``reader`` = c makes the candidate read c·r_t only."""
    out = {k: np.array(v, np.float32) for k, v in params.items()}
    n = out["recurrent_kernel"].shape[0]
    cols = _blocks(n, out["bias"].shape[-1])
    for g, v in (bias or {}).items():
        out["bias"][cols[g]] = v
    if reader is not None:
        out["kernel"][:, cols["h"]] = 0
        out["bias"][cols["h"]] = 0
        out["recurrent_kernel"][:, cols["h"]] = reader * np.eye(n, dtype=np.float32)
    if plain:
        out = {k: v[..., :3 * n] for k, v in out.items()}
    return out


def _state(fn, inputs, what):
    got = call(fn, inputs)
    expect(isinstance(got, (tuple, list)) and len(got) == 2,
           "the result must be the pair (h_t, h_t), like a lax.scan step.", inputs=inputs,
           hint="return `h_new, h_new`.")
    return expect_shape(got[0], np.shape(inputs["h"]), inputs=inputs, what=what).astype(
        np.float64)


#: A gate bias that saturates σ: σ(−40) ≈ 4·10⁻¹⁸, σ(+40) = 1 in float32.
SHUT = 40.0


def _rotgru_probes(fn, rng):
    """Experiments whose outcome eqs. 11–17 fix without computing a step."""
    n, d_in = 4, 3
    params = _fused_params(rng, n, d_in)
    h, h2, x = randn(rng, 2, n), randn(rng, 2, n), randn(rng, 2, d_in)

    inputs = {"params": _fused_with(params, bias={"z": -SHUT}), "h": h, "x_t": x}
    got = _state(fn, inputs, "h_t")
    expect(np.allclose(got, h, rtol=1e-5, atol=1e-6),
           "with the update gate shut (its bias columns, the first n, at −40, so z_t ≈ 0) a GRU "
           "step keeps its state, h_t = h_{t-1} (eq. 17); this step changes it.", inputs=inputs,
           expected=h, received=got)

    reset_shut = _fused_with(params, bias={"z": SHUT, "r": -SHUT})
    inputs = {"params": reset_shut, "h": h, "x_t": x}
    got = _state(fn, inputs, "h_t")
    got2 = _state(fn, {"params": reset_shut, "h": h2, "x_t": x}, "h_t")
    expect(np.allclose(got, got2, rtol=1e-5, atol=1e-6),
           "with the reset gate shut (its bias columns at −40) and the update gate open (at +40, "
           "so h_t = ĥ_t), no part of h_{t-1} should reach the candidate (eqs. 13–16): h_t "
           "should be the same for every h_{t-1}, and here it changes with h_{t-1}.",
           inputs=inputs, expected=got, received=got2,
           hint=f"the second h_{{t-1}} tried was {np.array2string(h2, precision=3)}.")

    plain = _state(fn, {"params": _fused_with(params, plain=True), "h": h, "x_t": x},
                   "h_t of the plain GRU (params without the angle columns)")
    for sign, gate in ((-1, "0"), (1, "1")):
        inputs = {"params": _fused_with(params, bias={"rot": sign * SHUT}), "h": h, "x_t": x}
        got = _state(fn, inputs, "h_t")
        expect(np.allclose(got, plain, rtol=1e-4, atol=1e-5),
               f"with the rotation gate saturated, σ(W_rot x + b_rot) = {gate} (its bias columns "
               f"at {sign * SHUT:+g}), every pair comes back to where it was, so the step should "
               f"equal your plain GRU step (the same params without the angle columns); it does "
               f"not.", inputs=inputs, expected=plain, received=got)

    first_pair_shut = np.full(n, SHUT, np.float32)
    first_pair_shut[:2] = -SHUT
    partial = _fused_with(params, bias={"z": SHUT, "r": first_pair_shut, "rot": SHUT})
    h_other = np.array(h)
    h_other[..., :2] = h2[..., :2]
    inputs = {"params": partial, "h": h, "x_t": x}
    got = _state(fn, inputs, "h_t")
    got2 = _state(fn, {"params": partial, "h": h_other, "x_t": x}, "h_t")
    expect(np.allclose(got, got2, rtol=1e-5, atol=1e-6),
           "with the reset gate shut on the first pair of the state only (its bias −40 there, "
           "+40 elsewhere), the update gate open and the rotation gate saturated, the first two "
           "entries of h_{t-1} should not reach h_t at all (eqs. 13, 15–17); here changing them "
           "changes h_t.", inputs=inputs, expected=got, received=got2,
           hint=f"the second h_{{t-1}} tried was {np.array2string(h_other, precision=3)}.")

    c = 0.5
    reader = _fused_with(params, bias={"z": SHUT}, reader=c)
    inputs = {"params": reader, "h": h, "x_t": x}
    got = _state(fn, inputs, "h_t")
    gates = unfuse(reader)
    xcat = np.concatenate([h, x], -1).astype(np.float64)
    d_norm = np.linalg.norm(h * _sigmoid(xcat @ gates["W_r"].T + gates["b_r"]), axis=-1)
    r_norm = np.linalg.norm(np.arctanh(np.clip(got, -1 + 1e-7, 1 - 1e-7)) / c, axis=-1)
    expect(np.allclose(r_norm, d_norm, rtol=1e-3, atol=1e-5),
           "with the update gate open (+40) and the candidate's columns reading ½·r_t only (its "
           "kernel and bias columns 0, its recurrent columns ½·I), the step returns h_t = "
           "tanh(r_t / 2), which shows the rotated state r_t = 2 artanh(h_t). A rotation keeps "
           "lengths, so ‖r_t‖ should be the length of the reset-gated state d_t = h_{t-1} ∘ "
           "σ(W_r [h_{t-1}, x_t] + b_r) (eqs. 13, 15); it is not.", inputs=inputs,
           expected=d_norm, received=r_norm, hint="expected: ‖d_t‖ for each batch row; "
                                                  "received: ‖r_t‖.")


@exercise("3.4", points=3, title="find the bugs in a fused RotGRU step (eqs. 11–17)",
          reference="Velici & Prügel-Bennett 2017, §5, eqs. 11–17; chapter 3, RotGRU",
          stronger_hint="read each gate's columns off the layout z, r, h, angles: z takes the "
                        "first n, and z = 0 must give back h_{t-1} (eq. 17). The reset gate "
                        "and the rotation act on h_{t-1} itself, d_t = h_{t-1} ∘ σ(·) and r_t "
                        "= U(u_t) d_t (eqs. 13, 15); only then do the candidate's recurrent "
                        "columns read r_t (eq. 16), so that product cannot share one matrix "
                        "product with the gates'.")
def _(fn, rng):
    _rotgru_probes(fn, rng)
    for lead, n, d_in, rotate in [((), 2, 1, True), ((), 4, 3, True), ((2,), 6, 2, True),
                                  ((3,), 4, 4, True), ((2,), 4, 3, False)]:
        params = _fused_params(rng, n, d_in, rotate)
        h, x = randn(rng, *lead, n), randn(rng, *lead, d_in)
        inputs = {"params": params, "h": h, "x_t": x}
        got = call(fn, inputs)
        expect(isinstance(got, (tuple, list)) and len(got) == 2,
               "the result must be the pair (h_t, h_t), like a lax.scan step.", inputs=inputs,
               hint="return `h_new, h_new`.")
        want = rotgru_fused_np(params, h, x)
        variants = [v for v in _FUSED_MISTAKES if rotate or v not in ("no2pi", "neg",
                                                                        "rotate_h")]
        hints = [alternative(lambda v=v: rotgru_fused_np(params, h, x, v), _FUSED_MISTAKES[v])
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
        alternative(want - 1, "check the angle tθ at the step you give: has the first "
                              "coordinate turned negative there?"),
        alternative(math.ceil(math.pi / TURN_THETA), "that is half a turn, π: the first "
                                                     "coordinate is negative long before."),
        alternative(math.ceil(2 * math.pi / TURN_THETA), "that is a full turn, 2π: the pair "
                                                         "points forwards again there."),
    ])
