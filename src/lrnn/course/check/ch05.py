"""Checks for Exercises 5 · Householder reflections (solutions/05_householder.ipynb): oRNN
eqs. 6–9, the compact WY form (Prop. 1), Algorithm 1's forward pass and one oRNN step."""
from __future__ import annotations

import numpy as np

from ._core import alternative, call, expect, expect_close, exercise, randn
from .ch03 import largest_intermediate


def _H(u):
    u = np.asarray(u, np.float64)
    return np.eye(u.size) - 2 * np.outer(u, u) / (u @ u)


def _chain(U, u1=None, reverse=False):
    """W = H(U[:,0]) H(U[:,1]) ⋯ (oRNN eq. 8 in the eq. 9 layout), times H_1(u1) if m = n."""
    U = np.asarray(U, np.float64)
    n, m = U.shape
    cols = [U[:, j] for j in range(m - 1 if u1 is not None else m)]
    W = np.eye(n)
    for u in (cols[::-1] if reverse else cols):
        W = W @ _H(u)
    if u1 is not None:
        W = W @ np.diag([1.0] * (n - 1) + [float(u1)])
    return W


def _eq9(rng, n, m):
    U = randn(rng, n, m) * (np.arange(n)[:, None] >= np.arange(m)[None, :])
    if m == n:
        U[:, -1] = 0
    return U.astype(np.float32)


@exercise("5.1", points=1, title="one Householder reflection (oRNN eq. 6)",
          reference="oRNN §4, eq. 6 (k = n); lrnn.orthogonal.householder")
def _(fn, rng):
    for n in (1, 2, 3, 6):
        u = randn(rng, n) * np.float32(rng.uniform(0.2, 5))
        inputs = {"u": u}
        got = call(fn, inputs)
        u64 = u.astype(np.float64)
        expect_close(got, _H(u), inputs=inputs, rtol=1e-4, atol=1e-5, what="H(u)", hints=[
            alternative(np.eye(n) - np.outer(u64, u64) / (u64 @ u64),
                        "the factor 2 is missing: I − uuᵀ/‖u‖² is a projection, not a reflection."),
            alternative(np.eye(n) - 2 * np.outer(u64, u64),
                        "divide by ‖u‖²: the formula must not depend on the length of u."),
            alternative(np.eye(n) - 2 * np.outer(u64, u64) / np.sqrt(u64 @ u64),
                        "divide by ‖u‖², the squared norm, not ‖u‖."),
        ])


@exercise("5.2", points=2, title="the chain of reflections W (oRNN eqs. 7–9)",
          reference="oRNN §4, eqs. 7–9; lrnn.orthogonal.householder_product")
def _(fn, rng):
    for n, m, u1 in [(1, 1, -1.0), (3, 1, None), (4, 2, None), (6, 3, None), (4, 4, 1.0),
                     (5, 5, -1.0)]:
        U = _eq9(rng, n, m)
        inputs = {"U": U, "u1_sign": u1}
        got = call(fn, inputs)
        want = _chain(U, u1)
        hints = [alternative(_chain(U, u1, reverse=True),
                             "the reflections are multiplied in the reverse order: W = "
                             "H_n(u_n) ⋯ H_{n−m+1}(u_{n−m+1}), column 0 of U (u_n) leftmost.")]
        if u1 is not None:
            D1 = np.diag([1.0] * (n - 1) + [u1])
            hints += [alternative(D1 @ _chain(U[:, :-1], None) if n > 1 else D1,
                                  "H_1(u_1) is the rightmost factor (eq. 8 ends with H_1): "
                                  "multiply on the right, scaling the last column."),
                      alternative(_chain(U[:, :-1], None) if m > 1 else np.eye(n),
                                  "when m = n the product ends with H_1(u_1) = diag(1, …, 1, "
                                  "u_1) (eq. 7): u1_sign is missing."),
                      alternative(_chain(U[:, :-1], None) @ _H(np.eye(n)[-1]) if n > 1 else
                                  -np.eye(1), "the last column of U is not a reflection "
                                  "vector when m = n: use H_1(u1_sign) instead.")]
        expect_close(got, want, inputs=inputs, rtol=1e-4, atol=1e-5, what="W", hints=hints)


@exercise("5.3", points=2, title="the compact WY form I − U T⁻¹ Uᵀ (oRNN Prop. 1)",
          reference="oRNN Proposition 1, eqs. 12–13; lrnn.orthogonal.wy_matrix")
def _(fn, rng):
    for n, m in [(2, 1), (3, 2), (5, 3), (6, 5), (4, 1)]:
        U = _eq9(rng, n, m)
        inputs = {"U": U}
        got = call(fn, inputs)
        U64 = U.astype(np.float64)
        G = U64.T @ U64
        wrong_T = {
            "T has ½ on the diagonal only: the strict upper part striu(UᵀU) is taken whole, "
            "without a ½.": np.triu(G, 1) / 2 + np.diag(np.diag(G)) / 2,
            "the diagonal of T is ½ diag(UᵀU), not diag(UᵀU).": np.triu(G, 1) + np.diag(np.diag(G)),
            "T is upper triangular: striu, the strictly *upper* part of UᵀU.":
                np.tril(G, -1) + np.diag(np.diag(G)) / 2,
        }
        hints = [alternative(np.eye(n) - U64 @ np.linalg.solve(T, U64.T), h)
                 for h, T in wrong_T.items()]
        expect_close(got, _chain(U), inputs=inputs, rtol=1e-4, atol=1e-4,
                     what="I − U T⁻¹ Uᵀ", hints=hints)


@exercise("5.4", points=3, title="Algorithm 1's forward pass: W h in O(n·m)",
          reference="oRNN Algorithm 1, lines 4–10 and 16; App. B, eqs. 20–21; "
                    "lrnn.orthogonal.wy_transform")
def _(fn, rng):
    for n, m, lead in [(2, 1, ()), (4, 3, ()), (6, 2, (3,)), (5, 4, (2, 2)), (8, 8 - 1, ())]:
        U = _eq9(rng, n, m)
        h = randn(rng, *lead, n)
        inputs = {"U": U, "h": h}
        got = call(fn, inputs)
        W = _chain(U)
        hf = h.astype(np.float64)
        expect_close(got, hf @ W.T, inputs=inputs, rtol=1e-4, atol=1e-5, what="W h", hints=[
            alternative(hf @ W, "the reflections act in the wrong order (you computed Wᵀ h): "
                                "Algorithm 1 runs k = m down to 1, the last column of U first."),
        ])
    import jax.numpy as jnp
    n, m = 256, 4
    big = largest_intermediate(fn, jnp.ones((n, m), jnp.float32), jnp.ones((2, n), jnp.float32))
    expect(big is None or big < n * n,
           f"for n = {n}, m = {m} your function builds an array of {big} entries.",
           hint="you formed an n×n matrix: Algorithm 1 needs only dot products with the columns "
                "of U, O(n·m) time and O(n) extra memory.")


@exercise("5.5", points=2, title="one oRNN step h_t = φ(W h_{t−1} + V x_t + b)",
          reference="oRNN eq. 1 and §5 (leaky ReLU φ(z) = max(z/10, z)); lrnn.ornn.step")
def _(fn, rng):
    for n, m, d_in, lead in [(2, 1, 1, ()), (4, 2, 3, ()), (5, 5, 2, (3,)), (6, 3, 2, (2,)),
                             (3, 3, 1, ())]:
        params = {"U": _eq9(rng, n, m), "V": randn(rng, n, d_in), "b": randn(rng, n)}
        u1 = None
        if m == n:
            params["u1"] = np.float32(rng.choice([-0.7, 0.4, 2.0]))
            u1 = 1.0 if params["u1"] > 0 else -1.0
        h, x = randn(rng, *lead, n), randn(rng, *lead, d_in)
        inputs = {"params": params, "h": h, "x_t": x}
        got = call(fn, inputs)
        W = _chain(params["U"], u1)
        V, b = params["V"].astype(np.float64), params["b"].astype(np.float64)
        z = h.astype(np.float64) @ W.T + x.astype(np.float64) @ V.T + b
        want = np.maximum(z / 10, z)
        hints = [
            alternative(np.maximum(z, 0), "φ is the leaky ReLU max(z/10, z), not max(z, 0)."),
            alternative(np.minimum(z / 10, z), "φ(z) = max(z/10, z): the slope 1/10 is for "
                                               "negative z."),
            alternative(np.maximum(z - b, (z - b) / 10), "the bias b is missing."),
            alternative(z, "apply φ (leaky ReLU) to the pre-activation."),
        ]
        zt = h.astype(np.float64) @ W + x.astype(np.float64) @ V.T + b
        hints.append(alternative(np.maximum(zt / 10, zt), "you used Wᵀ: the reflections are "
                                                          "applied in the wrong order."))
        if u1 is not None:
            zr = h.astype(np.float64) @ _chain(params["U"], float(params["u1"])).T \
                + x.astype(np.float64) @ V.T + b
            hints.append(alternative(np.maximum(zr / 10, zr), "use the sign of u1 (+1 if u1 > 0, "
                                     "else −1, oRNN §5), not its value."))
            z1 = h.astype(np.float64) @ _chain(params["U"], -u1).T \
                + x.astype(np.float64) @ V.T + b
            hints.append(alternative(np.maximum(z1 / 10, z1), "u1 enters as its sign: +1 if "
                                     "u1 > 0, else −1."))
        expect_close(got, want, inputs=inputs, rtol=1e-4, atol=1e-5, what="h_t", hints=hints)
