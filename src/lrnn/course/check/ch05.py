"""Checks for Exercises 5 · Householder reflections (solutions/05_householder.ipynb): a
reflection onto the axis for Algorithm 2's step that stays accurate in float32, the gradient of
a chain of reflections (oRNN eqs. 6–9), merging compact WY blocks in LAPACK's form I − U T Uᵀ
(after Prop. 1) and an oRNN step run backwards, h_t → h_{t−1}, with W⁻¹ applied one reflection
at a time."""
from __future__ import annotations

import math

import numpy as np

from ._core import (alternative, as_array, call, exercise, expect, expect_close, expect_prediction,
                    largest_intermediate, randn, when)


def _H(u):
    u = np.asarray(u, np.float64)
    return np.eye(u.size) - 2 * np.outer(u, u) / (u @ u)


def _chain(U, u1=None):
    """W = H(U[:,0]) H(U[:,1]) ⋯ (oRNN eq. 8 in the eq. 9 layout), times H_1(u1) if m = n."""
    U = np.asarray(U, np.float64)
    n, m = U.shape
    cols = [U[:, j] for j in range(m - 1 if u1 is not None else m)]
    W = np.eye(n)
    for u in cols:
        W = W @ _H(u)
    if u1 is not None:
        W = W @ np.diag([1.0] * (n - 1) + [float(u1)])
    return W


def _eq9(rng, n, m):
    U = randn(rng, n, m) * (np.arange(n)[:, None] >= np.arange(m)[None, :])
    if m == n:
        U[:, -1] = 0
    return U.astype(np.float32)


#: The accuracy that Exercise 5.1 asks for, relative to ‖x‖: about 30 float32 roundings; the
#: sign that cancels misses it by a factor of 30 or more on the nearly parallel inputs below.
REFLECT_TOL = 3e-6


def reflection_errors(x, u, beta):
    """Per vector of a batch, in float64: ``(‖H(u)x − βe₁‖, ||β| − ‖x‖|, ‖x‖)`` for
    ``H(u) = I − 2uuᵀ/‖u‖²`` (oRNN eq. 6); NaN where u is zero or not finite."""
    x = np.asarray(x, np.float64).reshape(-1, np.shape(x)[-1])
    u = np.asarray(u, np.float64).reshape(x.shape)
    beta = np.asarray(beta, np.float64).reshape(-1)
    size = np.linalg.norm(u, axis=1, keepdims=True)              # float64: no overflow here
    with np.errstate(all="ignore"):
        v = u / size
        mirrored = x - 2 * v * np.sum(v * x, axis=1, keepdims=True)
    mirrored[:, 0] -= beta
    norm_x = np.linalg.norm(x, axis=1)
    miss = np.linalg.norm(mirrored, axis=1)
    return (np.where(np.isfinite(miss) & (size[:, 0] > 0), miss, np.nan),
            np.abs(np.abs(beta) - norm_x), norm_x)


def _axis_cases(rng):
    """(label, x) in float32: generic vectors, vectors within ~1e-4 of the directions ±e₁,
    vectors on the axis, x₁ = 0, x = 0, n = 1, entries near 1e25 and 1e-25, then a batch
    that mixes them."""
    def tilt(n, t, sign=1.0, scale=1.0):
        r = rng.standard_normal(n)
        r[0] = 0
        x = scale * (sign * np.eye(n)[0] + t * r / np.linalg.norm(r))
        return (x * rng.uniform(0.5, 2)).astype(np.float32)
    cases = [("a generic x", randn(rng, 4) * np.float32(2)),
             ("x nearly parallel to +e₁", tilt(4, 2e-4)),
             ("x nearly parallel to −e₁", tilt(4, 1e-4, -1.0)),
             ("x = c e₁ (already on the axis)", np.array([2.5, 0, 0, 0], np.float32)),
             ("x = c e₁ with c < 0", np.array([-1.5, 0, 0, 0], np.float32)),
             ("x₁ = 0", np.array([0, 3, -1, 2], np.float32)),
             ("x = 0", np.zeros(4, np.float32)),
             ("n = 1", np.array([-0.7], np.float32)),
             ("n = 1", np.array([1.3], np.float32)),
             ("entries near 1e25 (x² overflows float32)", randn(rng, 4) * np.float32(1e25)),
             ("entries near 1e-25 (x² underflows float32)", randn(rng, 4) * np.float32(1e-25)),
             ("x near 1e25, nearly parallel to +e₁", tilt(4, 3e-4, 1.0, 1e25)),
             ("x near 1e-25, nearly parallel to −e₁", tilt(4, 3e-4, -1.0, 1e-25))]
    rows = [randn(rng, 5), tilt(5, 1e-4), tilt(5, 2e-4, -1.0), np.eye(5, dtype=np.float32)[0],
            np.zeros(5, np.float32), tilt(5, 3e-4, 1.0, 1e25), tilt(5, 1e-4, -1.0, 1e-25),
            randn(rng, 5) * np.float32(1e-25), randn(rng, 5) * np.float32(1e25)]
    rows += [randn(rng, 5) for _ in range(12 - len(rows))]
    batch = np.stack([rows[i] for i in rng.permutation(len(rows))]).reshape(2, 2, 3, 5)
    return cases + [("a batch of shape (2, 2, 3, 5) mixing all of the above", batch)]


def _row_text(x):
    return "[" + ", ".join(f"{v:.6g}" for v in np.asarray(x, np.float64)) + "]"


@exercise("5.1", points=2, title="a reflection onto the axis that survives float32",
          reference="oRNN §4, eq. 6 (H(u) = I − 2uuᵀ/‖u‖²) and Algorithm 2, whose step "
                    "reflects a column x onto the axis; Golub & Van Loan, Matrix Computations, "
                    "§5.1.2–5.1.3 (computing the Householder vector)",
          stronger_hint="the two candidates are u = x − βe₁ with β = +‖x‖ or β = −‖x‖; they "
                        "differ only in u₁ = x₁ − β, which cancels when β has the sign of x₁ and "
                        "x is nearly parallel to e₁. Two routes avoid it: take the β whose sign "
                        "is opposite to x₁ (count x₁ = 0 as positive), so that x₁ − β adds two "
                        "numbers of the same sign; or keep β = +‖x‖ and, where x₁ > 0, rewrite "
                        "x₁ − ‖x‖ as a quotient in which nothing is subtracted (then guard the x "
                        "on the positive axis, where that u is zero). Compute ‖x‖ from x divided "
                        "by its own largest |entry| (one scale per vector, kept with keepdims) "
                        "and multiply β back; where x = 0, return u = e₁ and β = 0 with "
                        "jnp.where.")
def _(fn, rng):
    from ._types import CheckFailure
    for k, (label, x) in enumerate(_axis_cases(rng)):
        inputs = {"x": x}
        out = call(fn, inputs)
        if k == 0 and largest_intermediate(fn, x) is None:
            raise CheckFailure("your function cannot be traced by JAX (jax.make_jaxpr fails on "
                               "it), so it cannot run inside jax.jit.", inputs=inputs,
                               hint="tracing fails on NumPy conversions (np.asarray, float(…) "
                                    "of a traced value) and on a Python `if` on values.")
        expect(isinstance(out, (tuple, list)) and len(out) == 2,
               "expected a pair (u, beta).", inputs=inputs, received=out)
        u = as_array(out[0], inputs=inputs, what="u")
        beta = as_array(out[1], inputs=inputs, what="beta")
        expect(u.shape == x.shape, f"u has shape {u.shape}, expected {x.shape}.", inputs=inputs,
               hint="u is one vector per vector of x: the shape of x.")
        expect(beta.shape == x.shape[:-1], f"beta has shape {beta.shape}, expected "
               f"{x.shape[:-1]}: one number per vector.", inputs=inputs,
               hint="drop the last axis (no keepdims) when you compute β." if
               beta.shape == x.shape[:-1] + (1,) else None)
        miss, beta_miss, norm_x = reflection_errors(x, u, beta)
        flat_x = x.reshape(-1, x.shape[-1])
        batch = x.ndim > 1

        def where(i):
            index = tuple(int(k) for k in np.unravel_index(i, x.shape[:-1]))
            return (f"vector x{list(index)} of the batch, "
                    if batch else "") + f"x = {_row_text(flat_x[i])} ({label})"

        bad_u = np.flatnonzero(np.isnan(miss))
        if bad_u.size:
            i = bad_u[0]
            tiny_or_huge = 0 < np.max(np.abs(flat_x[i])) and not 1e-20 < np.max(
                np.abs(flat_x[i])) < 1e20
            raise CheckFailure(
                "u is zero or not finite: H(u) = I − 2uuᵀ/‖u‖² is not defined.", inputs=inputs,
                received=u.reshape(flat_x.shape)[i], detail=f"at {where(i)}",
                hint="x = 0: every u maps it to 0 = βe₁ with β = 0, so return a finite "
                     "nonzero u (a division by ‖x‖ = 0?)." if norm_x[i] == 0 else
                     "x already lies on the axis: for one of the two signs of β, x − βe₁ "
                     "is the zero vector." if not np.any(flat_x[i, 1:]) else
                     _RANGE_HINT if tiny_or_huge else None)
        scale = np.where(norm_x > 0, norm_x, 1.0)
        rel_beta, rel_miss = beta_miss / scale, miss / scale
        for rel, on_beta in ((rel_beta, True), (rel_miss, False)):
            i = int(np.nanargmax(np.where(np.isfinite(rel), rel, np.inf)))
            if rel[i] <= REFLECT_TOL:
                continue
            row, b = flat_x[i], float(np.asarray(beta, np.float64).reshape(-1)[i])
            xi, ui = row.astype(np.float64), u.reshape(flat_x.shape)[i].astype(np.float64)
            mirrored = xi - 2 * ui * (ui @ xi) / (ui @ ui)            # u is finite and nonzero
            if on_beta and np.isfinite(b) and b != 0 and math.isclose(
                    b, 2 / (ui @ ui), rel_tol=1e-3):
                hint = ("your β equals 2/uᵀu for the u you return: that is the β of Golub & Van "
                        "Loan's `house` (H = I − βuuᵀ). Here β is the value H(u)x takes on the "
                        "axis.")
            elif batch and _alone_passes(fn, row):
                hint = ("this vector passes on its own but not inside the batch, among vectors "
                        "of other scales and signs.")
            else:
                hint = _accuracy_hint(xi, mirrored, b)
            what = "|β| is not ‖x‖" if on_beta else "H(u) x is not β e₁"
            raise CheckFailure(
                f"{what} to float32 accuracy: the error relative to ‖x‖ is {rel[i]:.1e} "
                f"(allowed {REFLECT_TOL:.0e}).", inputs=inputs,
                expected=None if on_beta else b * np.eye(len(xi))[0],
                received=b if on_beta else mirrored, detail=f"at {where(i)}", hint=hint)


_RANGE_HINT = ("squares of entries near 1e25 overflow float32 (largest number 3.4e38) and "
               "squares near 1e-25 underflow to 0.")


def _accuracy_hint(x, mirrored, beta):
    """The symptom behind an inaccurate (u, β) on the float64 vector ``x``, if one applies."""
    norm = float(np.linalg.norm(x))
    big = float(np.max(np.abs(x)))
    if np.allclose(mirrored, -x, rtol=0, atol=1e-3 * norm) and x[0] == 0:
        return "your reflection sends x to −x, as H(x) does: with x₁ = 0, is the sign you use 0?"
    if not np.isfinite(beta) or (norm > 0 and beta == 0) or not 1e-20 < big < 1e20:
        return _RANGE_HINT
    if beta * x[0] > 0 and np.linalg.norm(x[1:]) < 1e-2 * norm:
        return ("the error appears as x turns towards ±e₁ with β of the sign of x₁: u₁ = x₁ − β "
                "subtracts two nearly equal float32 numbers (cancellation when x is nearly "
                "parallel to e₁) and keeps only their rounding error.")
    return None


def _alone_passes(fn, row):
    """Whether the student's function meets the specification on ``row`` alone."""
    try:
        u, beta = fn(row)
        miss, beta_miss, norm_x = reflection_errors(row, u, beta)
    except Exception:  # noqa: BLE001 - only a hint depends on it
        return False
    scale = max(float(norm_x[0]), 1e-300)
    return bool(miss[0] / scale <= REFLECT_TOL and beta_miss[0] / scale <= REFLECT_TOL)


def _bilinear(U, h, g, norms=None):
    """gᵀ W h with W = H(U[:,0]) ⋯ H(U[:,m−1]), applied to h factor by factor (float64); with
    ``norms``, each reflection divides by a fixed ‖u_j‖² instead of its own."""
    v = np.asarray(h, np.float64)
    cols = list(range(np.shape(U)[1]))
    for j in cols[::-1]:
        u = U[:, j]
        v = v - 2 * (u @ v) / (u @ u if norms is None else norms[j]) * u
    return float(np.asarray(g, np.float64) @ v)


def _numerical_gradient(U, h, g, eps=1e-6, **kwargs):
    """Central differences of gᵀ W h over the entries of eq. 9 (on and below the diagonal)."""
    U = np.asarray(U, np.float64)
    grad = np.zeros_like(U)
    for i, j in zip(*np.nonzero(np.tril(np.ones_like(U)))):
        step = np.zeros_like(U)
        step[i, j] = eps
        grad[i, j] = (_bilinear(U + step, h, g, **kwargs)
                      - _bilinear(U - step, h, g, **kwargs)) / (2 * eps)
    return grad


@exercise("5.2", points=2, title="∂(gᵀWh)/∂U: the gradient of a chain of reflections",
          reference="oRNN §4, eqs. 6–9 (H(u) = I − 2uuᵀ/‖u‖², W = H_n(u_n) ⋯ "
                    "H_{n−m+1}(u_{n−m+1}) in the eq. 9 layout); chapter 5, §5.5 (smoothness)",
          stronger_hint="only one factor of W depends on u_j: gᵀ W h = aᵀ H(u_j) b, with b the "
                        "factors to its right applied to h and a the factors to its left applied "
                        "(transposed, i.e. in reverse order) to g. Differentiate aᵀb − "
                        "2 (aᵀu)(uᵀb)/(uᵀu) by the product and quotient rules: the denominator "
                        "depends on u too. Build all b's in one sweep from the right, then walk "
                        "from the left updating a; zero the entries above the diagonal.")
def _(fn, rng):
    for n, m in [(2, 1), (3, 1), (4, 2), (6, 3), (5, 4)]:
        U = _eq9(rng, n, m) * np.float32(rng.uniform(0.5, 2.0))     # m < n: no H_1
        h, g = randn(rng, n), randn(rng, n)
        inputs = {"U": U, "h": h, "g": g}
        got = call(fn, inputs)
        U64 = U.astype(np.float64)
        want = _numerical_gradient(U64, h, g)
        norms = np.sum(U64 ** 2, axis=0)
        lower = np.tri(n, m, dtype=bool)
        hints = [
            alternative(_numerical_gradient(U64, h, g, norms=norms), "right when ‖u_j‖² is held "
                        "fixed: the denominator uᵀu of H(u) depends on u as well (H(cu) = H(u), "
                        "so the gradient must be orthogonal to each u_j)."),
            alternative(_numerical_gradient(U64, g, h), "that is the gradient of gᵀ Wᵀ h = "
                        "hᵀ W g: the factors run in the reverse order (or h and g trade places). "
                        "W = H(U[:,0]) ⋯ H(U[:,m−1]): the factors right of H(U[:,j]) act on h, "
                        "those to its left on g."),
            when(lambda got, want: (got.shape == want.shape and np.allclose(
                     got[lower], want[lower], rtol=1e-3, atol=1e-4)),
                 "the entries below the diagonal are right; above it U holds the fixed zeros of "
                 "eq. 9, not parameters: their gradient is 0."),
        ]
        expect_close(got, want, inputs=inputs, rtol=1e-4, atol=1e-5 * (1 + np.abs(want).max()),
                     what="∂(gᵀWh)/∂U", hints=hints)


def _random_upper(rng, m):
    """An upper-triangular m×m matrix that is not the T of any product of reflections."""
    T = np.triu(rng.standard_normal((m, m)))
    T[np.diag_indices(m)] = rng.uniform(0.5, 2.0, m) * rng.choice([-1.0, 1.0], m)
    return T.astype(np.float32)


def _lapack_T(U):
    """T with I − U T Uᵀ = H(U[:,0]) ⋯ H(U[:,m−1]): the inverse of oRNN eq. 12's T."""
    G = np.asarray(U, np.float64).T @ np.asarray(U, np.float64)
    return np.linalg.inv(np.triu(G, 1) + 0.5 * np.diag(np.diag(G)))


def _T_of(U, product):
    """The T of product = I − U T Uᵀ, read off with the pseudo-inverse of U (full column rank)."""
    P = np.linalg.pinv(np.asarray(U, np.float64))
    return P @ (np.eye(P.shape[1]) - product) @ P.T


@exercise("5.3", points=3, title="merging compact WY blocks, LAPACK's form I − U T Uᵀ",
          reference="oRNN Proposition 1, eqs. 12–13 (W = I − U T⁻¹ Uᵀ), here without the "
                    "inverse: multiply two blocks W_i = I − U_i T_i U_iᵀ out and match the terms",
          stronger_hint="expand (I − U_1 T_1 U_1ᵀ)(I − U_2 T_2 U_2ᵀ): besides I and the two "
                        "blocks' own terms there is one product of four factors. Write I − U T Uᵀ "
                        "with U = [U_1 U_2] and T = [[T_1, S], [0, T_2]] by blocks: S appears "
                        "once, in the term U_1 S U_2ᵀ. Match it with the cross term, sign "
                        "included; no inverse is needed.")
def _(fn, rng):
    for n, m1, m2, general in [(3, 1, 1, False), (5, 2, 2, False), (6, 3, 2, True),
                               (4, 1, 3, True), (7, 2, 4, True)]:
        U1, U2 = randn(rng, n, m1), randn(rng, n, m2)
        T1 = _random_upper(rng, m1) if general else _lapack_T(U1).astype(np.float32)
        T2 = _random_upper(rng, m2) if general else _lapack_T(U2).astype(np.float32)
        inputs = {"U1": U1, "T1": T1, "U2": U2, "T2": T2}
        got = call(fn, inputs)
        expect(isinstance(got, (tuple, list)) and len(got) == 2,
               "the result must be the pair (U, T).", inputs=inputs, hint="`return U, T`.")
        U64 = np.hstack([U1, U2]).astype(np.float64)
        expect_close(got[0], U64, inputs=inputs, rtol=1e-6, atol=1e-6,
                     what="U (first item): the columns of U1, then those of U2", hints=[
                         alternative(np.hstack([U2, U1]), "the factor on the left, W1, "
                                     "contributes the first columns: U = [U1 U2]."),
                     ])
        W1 = np.eye(n) - U1.astype(np.float64) @ T1 @ U1.T.astype(np.float64)
        W2 = np.eye(n) - U2.astype(np.float64) @ T2 @ U2.T.astype(np.float64)
        want = _T_of(U64, W1 @ W2)
        want[m1:, :m1] = 0.0
        G12 = U1.astype(np.float64).T @ U2.astype(np.float64)
        corner = want[:m1, m1:]
        Z21, Z12 = np.zeros((m2, m1)), np.zeros((m1, m2))
        scale = 1 + np.abs(want).max()
        swapped = ([alternative(np.block([[T1, -T2 @ G12 @ T1], [Z21, T2]]),
                                "T1 and T2 are swapped in the coupling block: W1 is the left "
                                "factor, so T1 multiplies from the left.")] if m1 == m2 else [])
        expect_close(got[1], want, inputs=inputs, rtol=1e-4, atol=1e-4 * scale,
                     what="T (second item)", hints=swapped + [
            alternative(np.block([[T1, G12], [Z21, T2]]),
                        "U1ᵀU2 is the coupling block of the inverted form I − U T⁻¹ Uᵀ (eq. 12); "
                        "here T is not inverted, and T1, T2 enter the cross term."),
            alternative(np.block([[T1, Z12], [corner.T, T2]]),
                        "the coupling block sits above the diagonal: T is upper "
                        "block-triangular, with the lower-left block zero."),
            alternative(np.block([[T1, -corner], [Z21, T2]]),
                        "sign of the coupling block: multiplying the two blocks out gives the "
                        "cross term with a + sign, while I − U T Uᵀ subtracts U1 S U2ᵀ."),
            alternative(np.block([[T1, -G12], [Z21, T2]]),
                        "the coupling block has the right sign but misses T1 and T2: the cross "
                        "term is a product of four factors, U1 T1 U1ᵀ U2 T2 U2ᵀ."),
            alternative(_lapack_T(U64), "you recomputed T from U = [U1 U2] alone: here T1, T2 "
                        "are given and need not come from reflections (any upper-triangular "
                        "T_i); keep them and find the block that couples them."),
            alternative(np.block([[T1, Z12], [Z21, T2]]),
                        "a block-diagonal T gives I − U1T1U1ᵀ − U2T2U2ᵀ, not the product: the "
                        "cross term of W1 W2 needs an off-diagonal block."),
        ])


def _leaky(z):
    return np.maximum(z / 10, z)


def _leaky_inverse(y):
    """φ⁻¹ of the leaky ReLU φ(z) = max(z/10, z) (oRNN §5): y on y ≥ 0, 10 y below."""
    return np.where(y >= 0, y, 10 * y)


def _sign_first(U, u1):
    """The factors of W = H(U[:,0]) ⋯ H(U[:,m−2]) H_1(u1) with H_1 moved to the left end."""
    n = np.shape(U)[0]
    return np.diag([1.0] * (n - 1) + [u1]) @ _chain(np.asarray(U)[:, :-1])


#: A JAX answer for n = 64 may hold arrays of n·m entries, never one of n² (W itself).
BACK_N, BACK_M = 64, 4


@exercise("5.4", points=2, title="an oRNN step run backwards, W⁻¹ in O(nm)",
          reference="oRNN eq. 1 with a bias, eqs. 6–9 (W = H_n(u_n) ⋯ H_{n−m+1}(u_{n−m+1}), "
                    "H_1 of eq. 7 when m = n), §5 (leaky ReLU φ(z) = max(z/10, z), the sign of "
                    "u_1); chapter 5, §5.1 (a reflection is its own inverse)",
          stronger_hint="undo the operations of the forward step in the reverse order: first φ "
                        "(its inverse keeps positive entries and multiplies negative ones by "
                        "10), then the input V x_t + b (subtract it), then W. W is orthogonal, "
                        "so W⁻¹ = Wᵀ, the same factors in the opposite order, each its own "
                        "inverse: the leftmost factor H(U[:,0]) acts first, H_1's sign (when "
                        "m = n) last.")
def _(fn, rng):
    # u1 < 0 in the first case with m = n: a sign +1 would hide where H_1 acts
    for n, m, d_in, lead, u1_value in [(2, 1, 1, (), None), (4, 2, 3, (), None),
                                       (5, 5, 2, (3,), -0.7), (6, 3, 2, (2,), None),
                                       (3, 3, 1, (), 2.0), (4, 4, 2, (), -0.4)]:
        params = {"U": _eq9(rng, n, m), "V": randn(rng, n, d_in), "b": randn(rng, n)}
        u1 = None
        if m == n:
            params["u1"] = np.float32(u1_value)
            u1 = 1.0 if params["u1"] > 0 else -1.0
        W = _chain(params["U"], u1)
        x = randn(rng, *lead, d_in)
        drive = (x.astype(np.float64) @ params["V"].astype(np.float64).T
                 + params["b"].astype(np.float64))
        before = randn(rng, *lead, n)               # h_t: the step applied to a random state
        h_t = _leaky(before.astype(np.float64) @ W.T + drive).astype(np.float32)
        inputs = {"params": params, "h_t": h_t, "x_t": x}
        got = call(fn, inputs)
        y = h_t.astype(np.float64)
        pre = _leaky_inverse(y)
        want = np.linalg.solve(W, (pre - drive)[..., None])[..., 0]      # W h_{t−1} = φ⁻¹ − d

        def back(M, value=pre - drive):
            return value @ M.T
        W_inv = np.linalg.inv(W)
        hints = [
            alternative(lambda: back(W), "your step back is right with one reflection and wrong "
                        "with two or more: it applies W itself (the factors in eq. 8's order, "
                        "the last column first). W⁻¹ undoes the factors of W in the opposite "
                        "order: the leftmost factor of W must act first."),
            alternative(lambda: back(W_inv, _leaky(y) - drive),
                        "you applied φ to h_t again: undo it instead. φ⁻¹ keeps the positive "
                        "entries and multiplies the negative ones by 10."),
            alternative(lambda: back(W_inv, y - drive),
                        "φ is not undone: h_t is φ of the pre-activation, so apply φ⁻¹ (the "
                        "negative entries times 10) before you subtract the input."),
            alternative(lambda: back(W_inv, _leaky_inverse(y - drive)),
                        "φ was applied last in the forward step, to W h_{t−1} + V x_t + b: "
                        "undo it first, on h_t, and only then subtract the input."),
            alternative(lambda: back(W_inv, pre + drive), "the input V x_t + b was added in "
                                                           "the forward step: subtract it."),
            alternative(lambda: back(W_inv, pre), "the input V x_t + b is missing: subtract it "
                                                  "before you undo W."),
            alternative(lambda: back(W_inv, pre - drive + params["b"]),
                        "the bias b is missing: the forward step adds V x_t + b."),
            alternative(lambda: pre @ W_inv.T - drive, "V x_t + b entered after W acted in the "
                        "forward step: subtract it before you apply W⁻¹, not after."),
            alternative(lambda: _leaky(back(W_inv)), "φ belongs to the forward step: the step "
                                                     "back applies φ⁻¹ to h_t, and nothing "
                                                     "after W⁻¹."),
            alternative(lambda: _leaky(y @ W.T + drive),
                        "that is the next state h_{t+1}, one step forward from h_t: the "
                        "exercise asks for h_{t−1}."),
        ]
        if u1 is not None:
            hints += [
                alternative(lambda: back(_sign_first(params["U"], u1).T),
                            "right when m < n, wrong when m = n: H_1 is the rightmost factor "
                            "of W (eq. 8), so in W⁻¹ it is the leftmost, and its sign reaches "
                            "the last coordinate after the reflections, not before."),
                alternative(lambda: back(_chain(params["U"], float(params["u1"])).T),
                            "use the sign of u1 (+1 if u1 > 0, else −1, oRNN §5), not its "
                            "value."),
                alternative(lambda: back(_chain(params["U"], -u1).T), "u1 enters as its sign: "
                                                                      "+1 if u1 > 0, else −1."),
            ]
        expect_close(got, want, inputs=inputs, rtol=1e-4, atol=1e-4, what="h_{t−1}",
                     hints=hints)
    import jax.numpy as jnp
    U = jnp.asarray(_eq9(rng, BACK_N, BACK_M))
    probe = {"U": U, "V": jnp.ones((BACK_N, 2), jnp.float32), "b": jnp.zeros(BACK_N, jnp.float32)}
    big = largest_intermediate(fn, probe, jnp.ones((3, BACK_N), jnp.float32),
                               jnp.ones((3, 2), jnp.float32))
    expect(big is None or big < BACK_N * BACK_N,
           f"for n = {BACK_N} and m = {BACK_M} reflections your function builds an array of "
           f"{big} entries: an n × n matrix.",
           hint="apply the m reflections to the vector one at a time (each costs O(n)) instead "
                "of forming W or its inverse: O(nm), not O(n²m).")


# ---------------------------------------------------------------------------------------------
# Predict, then run
# ---------------------------------------------------------------------------------------------

FIXED_N, FIXED_M = 8, 3


@exercise("5.6", points=1, kind="value",
          title="predict: how many eigenvalues of a product of reflections are real",
          reference="oRNN eqs. 6–8 (H(u) = I − 2uuᵀ/‖u‖², det W = (−1)^m); chapter 5, §5.1",
          stronger_hint="Split R⁸ into the span of u_1, u_2, u_3 and its orthogonal complement: "
                        "the product maps each to itself. On the complement every factor is the "
                        "identity. On the span it is a 3 × 3 orthogonal map with determinant "
                        "(−1)³; its eigenvalues have modulus 1, the non-real ones come in "
                        "conjugate pairs, and their product is the determinant. With random u's "
                        "it turns a plane by an angle that is neither 0 nor π.")
def _(value, rng):
    fixed = FIXED_N - FIXED_M                         # eigenvalue 1: the complement of the span
    want = fixed + FIXED_M % 2                        # odd m: one −1; the rest are turning pairs
    expect_prediction(value, want, what="the number of real eigenvalues", hints=[
        alternative(fixed, "those are the eigenvalues equal to 1. Inside the span of the three "
                           "u's the product is an orthogonal map as well: what does its "
                           "determinant force?"),
        alternative(FIXED_N, "not all of them: inside the span of the u's, random reflections "
                             "turn a plane, and a turn by an angle other than 0 or π has no "
                             "real eigenvalue."),
        alternative(FIXED_M, "that looks at the span of the u's only; every direction "
                             "orthogonal to all three is left alone, eigenvalue 1."),
        alternative(fixed + 2, "the determinant is (−1)³, the product of the eigenvalues: a "
                               "count of −1's that it allows, with a 3 × 3 orthogonal map, is "
                               "not that one."),
    ])
