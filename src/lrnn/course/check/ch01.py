"""Checks for Exercises 1 · The linear recurrence (solutions/01_linear_recurrence.ipynb)."""
from __future__ import annotations

import math

import numpy as np

from ._core import (alternative, call, crandn, exercise, expect, expect_close, expect_prediction,
                    expect_shape, randn, reference_scan, when)



def _scan_inputs(rng, shape, complex_):
    """Decays ``a`` (|a| < 1) and inputs ``b`` of ``shape``, complex64 or float32."""
    if complex_:
        return crandn(rng, *shape) * np.float32(0.9), crandn(rng, *shape)
    return rng.uniform(-1.0, 1.0, shape).astype(np.float32), randn(rng, *shape)


def _affine_step(a, b, x):
    """x -> a x + b: ``a`` element-wise (the shape of ``b``) or one matrix per element acting
    on the last axis (one axis more than ``b``)."""
    if np.ndim(a) == np.ndim(b) + 1:
        return np.einsum("...ij,...j->...i", a, x) + b
    return a * x + b


def composed_step(left, right):
    """The step equal to ``left`` then ``right``, in float64 (complex128), read off the composed
    map itself: its offset is where it sends 0, its transition what it does to 1 (element-wise)
    or to each basis vector (a matrix, column by column)."""
    dtype = np.result_type(*left, *right, np.float64)
    (a_l, b_l), (a_r, b_r) = ((np.asarray(a, dtype), np.asarray(b, dtype)) for a, b in
                              (left, right))

    def both(x):
        return _affine_step(a_r, b_r, _affine_step(a_l, b_l, x))
    offset = both(np.zeros(b_l.shape, dtype))
    if np.ndim(a_l) == np.ndim(b_l) + 1:
        n = b_l.shape[-1]
        columns = [both(np.broadcast_to(np.eye(n, dtype=dtype)[i], b_l.shape)) - offset
                   for i in range(n)]
        return np.stack(columns, axis=-1), offset
    return both(np.ones(b_l.shape, dtype)) - offset, offset


def _operator_cases(rng):
    """(left, right) pairs: element-wise transitions first (eq. 1.3), then matrices: one 2×2
    matrix, three 2×2 blocks, a batch of dense 3×3 matrices (random, so that they do not
    commute) and a complex batch."""
    for shape in [(3,), (1,), (2, 4)]:
        yield tuple((crandn(rng, *shape), crandn(rng, *shape)) for _ in range(2))
    for lead, n, cplx in [((), 2, False), ((3,), 2, False), ((2, 4), 3, False), ((2,), 2, True)]:
        draw = crandn if cplx else randn
        yield tuple((draw(rng, *lead, n, n) * np.float32(0.8), draw(rng, *lead, n))
                    for _ in range(2))


@exercise("1.1", points=2, title="the scan operator for matrix transitions",
          reference="chapter 1, eq. (1.3) (the composition of two affine steps), for "
                    "x_t = A_t x_{t-1} + b_t with a matrix A_t: LRU §3.1 (a dense linear RNN), "
                    "RotRNN App. B.1 (2×2 blocks in the scan)",
          stronger_hint="apply the left step first, then the right one: x ↦ A_r (A_l x + b_l) + "
                        "b_r. Distribute A_r and read off the new matrix (what multiplies x) and "
                        "the new offset (the constant). Matrices do not commute, so keep the "
                        "order of the product; A_r b_l is a matrix-vector product over the last "
                        "axis (for a batch: A @ b[..., None], then drop the new axis). When a has "
                        "the shape of b, the same steps element by element give eq. (1.3).")
def _(fn, rng):
    for (a_l, b_l), (a_r, b_r) in _operator_cases(rng):
        inputs = {"left": (a_l, b_l), "right": (a_r, b_r)}
        got = call(fn, inputs)
        expect(isinstance(got, (tuple, list)) and len(got) == 2,
               f"the result must be a pair (a, b), received a {type(got).__name__}"
               + (f" of length {len(got)}" if isinstance(got, (tuple, list)) else "") + ".",
               inputs=inputs, hint="return the new transition and the new offset: `return a, b`.")
        want_a, want_b = composed_step((a_l, b_l), (a_r, b_r))
        matrix = a_l.ndim == b_l.ndim + 1
        if not matrix:
            expect_close(got[0], want_a, inputs=inputs, what="the decay a (first item)", hints=[
                alternative(a_l + a_r, "decays compose by multiplication, not addition."),
            ])
            expect_close(got[1], want_b, inputs=inputs, what="the input b (second item)", hints=[
                alternative(a_l * b_r + b_l, "you applied `right` first: the result must be "
                            "'left, then right', x -> a_r (a_l x + b_l) + b_r."),
                alternative(a_r * b_l, "the input b_r of the right element is missing."),
                alternative(b_l + b_r, "b_l must be multiplied by the decay of the right "
                                       "element."),
            ])
            continue
        a64_l, a64_r = a_l.astype(np.complex128), a_r.astype(np.complex128)
        expect_close(got[0], want_a, inputs=inputs, what="the matrix a (first item)", hints=[
            alternative(lambda: a64_l @ a64_r, "the product is in the wrong order: `left` acts "
                        "first, so its matrix stands on the right, A_r A_l, and matrices do not "
                        "commute."),
            alternative(lambda: a64_r * a64_l, "you multiplied the matrices entry by entry: two "
                        "linear maps in a row compose by the matrix product."),
            alternative(lambda: a64_l + a64_r, "transitions compose by a product, not a sum."),
        ])
        expect(np.shape(got[1]) == b_l.shape,
               f"the offset b (second item) has shape {np.shape(got[1])}, expected "
               f"{b_l.shape}, the shape of b_l and b_r.", inputs=inputs,
               hint="A_r b_l is a matrix-vector product over the last axis: with `*` NumPy "
                    "broadcasts the vector against the rows of the matrix instead.")
        rows = np.einsum("...ij,...i->...j", a64_r, b_l)
        expect_close(got[1], want_b, inputs=inputs, what="the offset b (second item)", hints=[
            alternative(lambda: np.einsum("...ij,...j->...i", a64_l, b_r) + b_l,
                        "you applied `right` first: the result must be 'left, then right', "
                        "x -> A_r (A_l x + b_l) + b_r."),
            alternative(lambda: rows + b_r, "that multiplies b_l by the transpose of A_r (b_l "
                        "as a row vector, b_l A_r): the matrix acts on the column vector, "
                        "A_r b_l."),
            alternative(lambda: want_b - b_r, "the offset b_r of the right element is "
                                              "missing."),
            alternative(lambda: b_l + b_r, "b_l must pass through the matrix of the right "
                                           "element."),
        ])


@exercise("1.2", points=4, title="a parallel scan from the binary operator",
          reference="chapter 1, eq. (1.3) and §1.3 (Hillis–Steele: in round r, combine with "
                    "the element 2^r steps to the left)",
          stronger_hint="keep a shift s = 1, 2, 4, … below L. In each round every position t "
                        "combines the pair s steps to its left (the *left* argument) with its own "
                        "pair (the *right* one); positions t < s have no such neighbour, so give "
                        "them the identity step a = 1, b = 0. After ⌈log₂ L⌉ rounds the b-part "
                        "holds x_t.")
def _(fn, rng):
    cases = [((5, 2), False), ((1, 3), False), ((2, 1), False), ((8, 3), True),
             ((13, 2), False), ((2, 16, 3), True), ((2, 3, 7, 2), False)]
    for shape, complex_ in cases:
        a, b = _scan_inputs(rng, shape, complex_)
        inputs = {"a": a, "b": b}
        got = call(fn, inputs)
        want = reference_scan(a, b)
        expect_close(got, want.astype(np.result_type(a, b)), inputs=inputs, rtol=1e-4,
                     atol=1e-5, time_axis=-2, hints=[
                         alternative(lambda: reference_scan(a[..., ::-1, :],
                                                         b[..., ::-1, :])[..., ::-1, :],
                                     "you scan from the end of the sequence: position t must "
                                     "combine the steps 0…t, from left to right."),
                         alternative(np.cumsum(b, axis=-2),
                                     "you summed the inputs (a cumulative sum): the decays a_t "
                                     "must multiply the earlier states."),
                         alternative(np.cumprod(a, axis=-2) * np.cumsum(b, axis=-2),
                                     "the decay of step t applies to the state, not to all "
                                     "inputs at once: combine pairs with the binary operator."),
                     ])


def _chunk_parts(a, b, T):
    """Float64 pieces of a chunked scan: per chunk, the scan from zero ``X`` and the running
    products ``G`` of the decays (both ``(..., C, T, N)``, the sequence padded with a = 1,
    b = 0 to a multiple of T), and the states ``h`` entering each chunk ``(..., C, N)``."""
    a = np.broadcast_to(np.asarray(a), np.shape(b)).astype(np.result_type(a, b, np.float64))
    b = np.asarray(b).astype(a.dtype)
    L, N = b.shape[-2:]
    C = -(-L // T)
    pad = C * T - L
    widths = [(0, 0)] * (b.ndim - 2) + [(0, pad), (0, 0)]
    a = np.pad(a, widths, constant_values=1).reshape(*b.shape[:-2], C, T, N)
    b = np.pad(b, widths).reshape(*b.shape[:-2], C, T, N)
    X = reference_scan(a, b)
    G = np.cumprod(a, axis=-2)
    h = np.zeros(b.shape[:-3] + (C, N), a.dtype)
    for c in range(1, C):
        h[..., c, :] = G[..., c - 1, -1, :] * h[..., c - 1, :] + X[..., c - 1, -1, :]
    return X, G, h, L


def _chunk_join(X, G, h, L):
    x = X + G * h[..., None, :]
    return x.reshape(*x.shape[:-3], -1, x.shape[-1])[..., :L, :]


@exercise("1.3", points=3, title="a chunked scan, parallel inside the chunks",
          reference="chapter 1, eq. (1.3) and the unrolled state eq. (1.1): the state entering "
                    "a chunk is carried through the chunk's decays",
          stronger_hint="pad L up to C·T steps (a with 1, b with 0), reshape to (…, C, T, N) and "
                        "scan every chunk from a zero state with your parallel scan. The state h_c "
                        "entering chunk c obeys h_c = (product of chunk c−1's a) · h_{c−1} + (last "
                        "local state of chunk c−1): a short loop over the chunks. Then add "
                        "(running product of a inside the chunk) · h_c to each local state and cut "
                        "the padding.")
def _(fn, rng):
    cases = [((12, 2), 4, False), ((1, 3), 1, False), ((7, 2), 3, False), ((5, 1), 8, False),
             ((10, 3), 1, True), ((2, 13, 2), 4, True), ((2, 1, 9, 3), 2, False)]
    for shape, T, complex_ in cases:
        a, b = _scan_inputs(rng, shape, complex_)
        inputs = {"a": a, "b": b, "T": T}
        got = call(fn, inputs)
        X, G, h, L = _chunk_parts(a, b, T)
        want = _chunk_join(X, G, h, L)
        no_carry = _chunk_join(X, G, np.zeros_like(h), L)
        excl = np.concatenate([np.ones_like(G[..., :1, :]), G[..., :-1, :]], axis=-2)
        shifted = _chunk_join(X, excl, h, L)
        last_only = _chunk_join(X, np.broadcast_to(G[..., -1:, :], G.shape), h, L)
        expect_close(got, want.astype(np.result_type(a, b)), inputs=inputs, rtol=1e-4,
                     atol=1e-5, time_axis=-2, hints=[
                         alternative(no_carry, "every chunk starts from zero: add the state "
                                     "carried in from the previous chunks, h, times the "
                                     "decays a_0 ⋯ a_k of the chunk so far."),
                         alternative(shifted, "the carried state h enters through the decay of "
                                     "the chunk's first step too: at position k it is "
                                     "multiplied by a_0 a_1 ⋯ a_k (k + 1 factors)."),
                         alternative(last_only, "the carried state is multiplied by the product "
                                     "of the decays up to position k, not by the whole chunk's "
                                     "product."),
                     ])


def run_layer(K, D, u):
    """y_t = Σ_{k≤t} K_k u_{t−k} + D ⊙ u_t (eq. 1.2) in float64, one output step at a time:
    K (L, H, H), D (H,), u (..., L, H) -> y (..., L, H)."""
    K, D, u = (np.asarray(v, np.float64) for v in (K, D, u))
    y = np.zeros(u.shape)
    for t in range(u.shape[-2]):
        for k in range(t + 1):
            y[..., t, :] += u[..., t - k, :] @ K[k].T
    return y + D * u


def _stacked(K1, D1, K2, D2, *, order="right", cross=True, skip="product"):
    """The kernel and skip of layer 2 after layer 1, or one of the typical wrong ones."""
    K1, D1, K2, D2 = (np.asarray(v, np.float64) for v in (K1, D1, K2, D2))
    K = np.zeros_like(K1)
    for k in range(len(K1)):
        for i in range(k + 1):
            K[k] += K2[i] @ K1[k - i] if order == "right" else K1[k - i] @ K2[i]
    if cross:
        K += K2 * D1 + D2[:, None] * K1
    return K, (D1 * D2 if skip == "product" else D1 + D2)


@exercise("1.4", points=3, title="two linear layers in a row are one layer",
          reference="chapter 1, eqs. (1.1)–(1.2) (a layer as the causal convolution with K_k = "
                    "C A^k B plus the skip D; LRU eq. 4)",
          stronger_hint="write v_s = Σ_j K¹_j u_{s−j} + D¹ u_s and put it into y_t = Σ_i K²_i "
                        "v_{t−i} + D² v_t. Four products appear: K² with K¹ (a convolution of the "
                        "two kernels, K²_i K¹_j with i + j = k: the first layer's matrix on the "
                        "right), K² with D¹, D² with K¹ (each at lag k alone), and D² with D¹ "
                        "(the new skip). Diagonal D¹ scales the columns of K², D² the rows of K¹.")
def _(fn, rng):
    for batch, length, h in [((), 1, 1), ((), 4, 1), ((2,), 5, 2), ((3,), 7, 3)]:
        K1, K2 = (randn(rng, length, h, h) * np.float32(0.7) for _ in range(2))
        D1, D2 = randn(rng, h), randn(rng, h)
        inputs = {"K1": K1, "D1": D1, "K2": K2, "D2": D2}
        got = call(fn, inputs)
        expect(isinstance(got, (tuple, list)) and len(got) == 2,
               f"the result must be a pair (K, D), received a {type(got).__name__}"
               + (f" of length {len(got)}" if isinstance(got, (tuple, list)) else "") + ".",
               inputs=inputs, hint="return the stacked layer's kernel and skip: `return K, D`.")
        K = expect_shape(got[0], (length, h, h), inputs=inputs, what="the kernel K (first item)")
        D = expect_shape(got[1], (h,), inputs=inputs, what="the skip D (second item)")
        u = randn(rng, *batch, length, h)
        shown = dict(inputs, u=u)
        want = run_layer(K2, D2, run_layer(K1, D1, u))

        def output_of(**wrong):
            return lambda: run_layer(*_stacked(K1, D1, K2, D2, **wrong), u)
        expect_close(run_layer(K, D, u), want, inputs=shown, rtol=1e-4, atol=1e-4,
                     what="the output of your layer on u, against the two layers in a row",
                     time_axis=-2, hints=[
            alternative(output_of(order="left"),
                        "the products of kernels are in the wrong order: the first layer acts "
                        "first, so its matrix stands on the right, and matrices do not commute."),
            alternative(output_of(cross=False),
                        "the terms that mix a kernel with a skip are missing: the second "
                        "layer's kernel also convolves what the first layer's skip passes on, "
                        "and the second skip passes on what the first kernel made."),
            alternative(output_of(skip="sum"),
                        "the two skips act one after the other, on the same step: they "
                        "multiply, they do not add."),
            alternative(lambda: run_layer(K1 + K2, D1 * D2, u),
                        "stacking composes the layers: the kernels combine by convolution, not "
                        "by addition."),
        ])


@exercise("1.5", points=2, title="the spectral radius from the growth of A^k",
          reference="chapter 1, §1.2 (‖A^k‖ grows or decays like ρ(A)^k) and Gelfand's "
                    "formula ρ(A) = lim ‖A^k‖^(1/k); LRU §3.2.1",
          stronger_hint="Gelfand's formula ρ(A) = lim ‖A^k‖^(1/k), with k = 2^j by repeated "
                        "squaring. Keep the logarithm of the norm apart: after each squaring "
                        "divide the matrix by its norm and add the log of that norm to twice the "
                        "running log, so nothing overflows or underflows; ρ ≈ exp(log ‖A^k‖ / k). "
                        "A matrix whose powers vanish has ρ = 0.")
def _(fn, rng):
    jordan = (0.9 * np.eye(8) + 5.0 * np.eye(8, k=1)).astype(np.float32)   # ‖A^k‖ ~ k^7 ρ^k
    mats = [np.array([[0.5]], np.float32),
            np.array([[0.0, 2.0], [-0.5, 0.0]], np.float32),    # complex eigenvalues ±i
            np.array([[0.9, 5.0], [0.0, 0.3]], np.float32),     # non-normal: ‖A‖ ≫ ρ(A)
            np.array([[0.9, 5.0], [0.0, 0.9]], np.float32),     # a Jordan block: ‖A^k‖ ~ k ρ^k
            np.eye(4, k=1, dtype=np.float32),                   # nilpotent: ρ = 0
            jordan,
            (randn(rng, 8, 8) * np.float32(9.0 / np.sqrt(8))).astype(np.float32),   # ρ near 10
            (randn(rng, 6, 6) / np.float32(np.sqrt(6))).astype(np.float32)]
    for A in mats:
        inputs = {"A": A}
        got = call(fn, inputs)
        A64 = A.astype(np.float64)
        eig = np.linalg.eigvals(A64)
        want = np.max(np.abs(eig))
        expect_close(got, np.float64(want), inputs=inputs, rtol=1e-4, atol=1e-5, hints=[
            alternative(np.linalg.norm(A64, 2), "that is the largest singular value (the "
                        "operator norm ‖A‖₂); the spectral radius is the largest |eigenvalue|, "
                        "smaller for non-normal A."),
            alternative(np.max(eig.real), "take the modulus |λ| of the eigenvalues, not their "
                                          "real part."),
            alternative(np.max(np.abs(A64)), "the largest entry of A is not its spectral radius."),
            when(lambda r, e: np.ndim(r) == 0 and r < 0, "a radius cannot be negative."),
            when(lambda r, e: np.ndim(r) == 0 and e > 0 and abs(float(r) / e - 1) < 0.05,
                 "close, but not within the specification's 10⁻⁴: ‖A^k‖^(1/k) = ρ · c_k^(1/k), "
                 "where c_k = ‖A^k‖/ρ^k grows at most like a power of k, so the error is about "
                 "ln(c_k)/k. Your k is too small for this matrix."),
            when(lambda r, e: np.ndim(r) == 0 and e > 0 and float(r) == 0,
                 "you return 0 for a matrix whose powers do not vanish: did A^k underflow to "
                 "zero in floating point on the way to a large k?"),
        ])


# ---------------------------------------------------------------------------------------------
# Predict, then run
# ---------------------------------------------------------------------------------------------

IMPULSE_A, IMPULSE_LEVEL = 0.95, 0.01


@exercise("1.7", points=1, kind="value",
          title="predict: the first step an impulse falls below 1 %",
          reference="chapter 1, §1.1 (unroll x_t = a x_{t-1} + b_t for one impulse)",
          stronger_hint="After the impulse b_0 = 1 every step multiplies the state by a, so "
                        "x_t = a^t. Solve a^t < 0.01 with logarithms (ln a is negative: the "
                        "inequality flips) and take the first whole step that satisfies it.")
def _(value, rng):
    want = math.ceil(math.log(IMPULSE_LEVEL) / math.log(IMPULSE_A))
    expect_prediction(value, want, what="the first step below 1 %", hints=[
        alternative(want - 1, "check x_t at the step you give: is it below 1 % there, or "
                              "still above it?"),
        alternative(1 / (1 - IMPULSE_A), "1/(1 − a) = 20 steps is the time constant, the "
                                         "steps to fall by about a factor e, not to 1 %."),
        alternative(round(math.log(1 / IMPULSE_LEVEL) / (1 - IMPULSE_A)),
                    "ln(1/a) is close to 1 − a, not equal: use the exact logarithm."),
    ])
