"""Orthogonal maps: the skew-symmetric exponential (RotRNN Lemma 2), block-diagonal rotations
(RotRNN Lemma 3, eq. 14), and Householder reflections in compact WY form (oRNN §4).

Rotations: ``skew_expm(M)``, ``block_rotation(theta)``, ``rotate_pairs(x, theta)``.
Reflections (oRNN): ``householder(u)`` (eq. 6), ``householder_product(U, u1_sign)`` (eqs. 7–9,
dense ``W``), ``wy_matrix(U, u1_sign)`` (Prop. 1, dense), ``wy_transform(U, h, u1_sign)``
(``W h`` in O(n·m), Algorithm 1), ``householder_qr(A)`` (Algorithm 2, Theorem 1).

Public functions check their arguments; the pure building blocks that the oRNN layer calls
inside its forward pass take checked, masked reflection columns (``cols``) and check nothing:
``reflection_columns``, ``reflect_identity`` (dense ``W``), ``compact_wy``, ``reflect_vectors``
and ``wy_transform_columns`` (``W h``, Algorithm 1 with its backward pass).

Layout of ``U`` (oRNN eq. 9): shape ``(n, m)``, ``m <= n``; column ``j`` (0-based) holds the
reflection vector ``u_{n-j} ∈ R^{n-j}`` in rows ``j, …, n-1``; entries above are ignored
(masked). When ``m = n`` the product ends with ``H_1(u_1) = diag(1, …, 1, u_1)`` (eq. 7),
which is not a reflection: ``u_1 = ±1`` is passed as ``u1_sign`` and the last column of ``U``
is ignored.
"""
from __future__ import annotations

from typing import NamedTuple

import jax
import jax.numpy as jnp
import numpy as np
from jax import lax

from ._validate import as_real_array, fail


def skew_expm(M):
    """``expm(M - Mᵀ)`` ∈ SO(n) for any real ``M`` of shape ``(..., n, n)`` (RotRNN Lemma 2).

    ``M - Mᵀ`` is skew-symmetric, so its exponential is orthogonal and has determinant
    ``exp(Tr[M - Mᵀ]) = 1``. A complex, boolean or non-numeric ``M`` is a ValueError (for a
    complex ``M`` the result would not be in SO(n)); a non-finite host ``M`` too."""
    host = _host_values(M)
    M = as_real_array("M", M, "(..., n, n)")
    if host is not None and not np.all(np.isfinite(host)):
        fail("M", M, "finite entries (inf or NaN give no rotation)")
    if M.ndim < 2 or M.shape[-1] != M.shape[-2]:
        fail("M", M, "a square matrix of shape (..., n, n)")
    return _skew_expm(M)


@jax.jit
def _skew_expm(M):
    S = M - jnp.swapaxes(M, -1, -2)
    if S.ndim == 2:
        return jax.scipy.linalg.expm(S)
    flat = S.reshape(-1, *S.shape[-2:])
    return jax.vmap(jax.scipy.linalg.expm)(flat).reshape(S.shape)


def block_rotation(theta):
    """The dense block-diagonal rotation ``D(θ)`` of shape ``(..., 2K, 2K)`` for ``θ`` of shape
    ``(..., K)``: 2×2 blocks ``[[cos θ_i, -sin θ_i], [sin θ_i, cos θ_i]]`` (RotRNN Lemma 3).
    For teaching and tests; ``rotate_pairs`` applies it without forming it."""
    theta = as_real_array("theta", theta, "(..., K) of angles")
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
    x = as_real_array("x", x, "(..., 2K)")
    theta = as_real_array("theta", theta, "(..., K) of angles")
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


# ----------------------------------------------------------------------------------------
# Householder reflections and the oRNN parametrisation (oRNN §4, eqs. 6–13, Algorithms 1–2)
# ----------------------------------------------------------------------------------------

#: The matrix products that build or apply a Householder product run at full float32
#: precision: under TF32 (the default on recent NVIDIA GPUs) ``W`` would be orthogonal to
#: about 1e-3 only. They are O(n²·m) once per forward pass, or O(n·m) per step: cheap.
EXACT = lax.Precision.HIGHEST


def _host_values(x):
    """``x`` as a NumPy array when it is host data (NumPy, Python numbers), else ``None``.

    Value checks (no zero reflection vector, ``u_1 = ±1``) run only on host data: reading a
    JAX array would wait for the device on every call, and under ``jit`` there is no value
    to read. A JAX array with a zero reflection vector gives NaN instead."""
    if isinstance(x, jax.Array):
        return None
    try:
        return np.asarray(x)
    except (TypeError, ValueError):
        return None


def _float(x, name="x", layout="(..., n)"):
    """``x`` as a real float JAX array; complex, boolean and text are a ValueError."""
    return as_real_array(name, x, layout)


def _require_reflectable(name, host, dtype, axis, what):
    """Host vectors that define a reflection in the dtype that computes it: finite, and
    ``‖u‖²`` neither 0 nor underflowing to 0 nor overflowing to inf there (``1e-30`` squares
    to 0 in float32)."""
    if not np.all(np.isfinite(host)):
        fail(name, host, f"finite {what} (inf or NaN define no reflection)")
    with np.errstate(over="ignore", under="ignore"):
        norm2 = np.sum(np.square(host.astype(dtype)), axis=axis)
    if not np.all(norm2 > 0):
        fail(name, host, f"nonzero {what} whose squared norm is a positive {np.dtype(dtype).name} "
             "(a zero vector has no reflection; rescale vectors tiny enough for ‖u‖² to "
             f"underflow to 0 in {np.dtype(dtype).name})")
    if not np.all(np.isfinite(norm2)):
        fail(name, host, f"{what} whose squared norm is finite in {np.dtype(dtype).name} "
             "(rescale them: a reflection depends only on the direction)")


def householder(u):
    """The Householder reflection ``H(u) = I - 2 u uᵀ / ‖u‖²`` (oRNN eq. 6 with ``k = n``).

    It is symmetric, orthogonal, its own inverse, maps ``u`` to ``-u``, fixes the hyperplane
    ``u^⊥`` and has determinant ``-1``.

    Args:
      u: shape ``(..., n)``, nonzero along the last axis.
    Returns:
      shape ``(..., n, n)``.
    Raises:
      ValueError (naming ``u``) for a zero vector given as NumPy data, which defines no
      reflection. A zero vector in a JAX array gives NaN (see ``_host_values``).
    """
    host = _host_values(u)
    u = _float(u, "u")
    if u.ndim < 1 or u.shape[-1] < 1:
        fail("u", u, "an array of shape (..., n) with n >= 1")
    if host is not None:
        _require_reflectable("u", host, u.dtype, -1, "vectors along the last axis")
    norm2 = jnp.sum(u * u, axis=-1)
    eye = jnp.eye(u.shape[-1], dtype=u.dtype)
    return eye - 2 * u[..., :, None] * u[..., None, :] / norm2[..., None, None]


def eq9_mask(n: int, m: int):
    """The ``(n, m)`` 0/1 mask of oRNN eq. 9: column ``j`` (0-based) holds ``u_{n-j}`` in
    rows ``j, …, n-1`` and zeros above. When ``m = n`` the last column is all zeros: its only
    eq.-9 entry would be the scalar ``u_1``, which is passed separately (``u1_sign``)."""
    mask = jnp.arange(n)[:, None] >= jnp.arange(m)[None, :]
    if m == n:
        mask = mask.at[:, n - 1].set(False)
    return mask


def require_reflection_count(name: str, m, n: int, n_name: str = "n"):
    """``1 <= m <= n``: at most ``n`` reflection vectors for a hidden size ``n`` (oRNN eq. 8)."""
    if not 1 <= m <= n:
        fail(name, m, f"a number of reflection vectors m with 1 <= m <= {n_name} = {n} "
             "(oRNN eq. 8)")


def reflection_columns(U):
    """The true Householder vectors of ``U`` (eq.-9 layout, masked): shape ``(n, m)`` when
    ``m < n`` and ``(n, n - 1)`` when ``m = n`` (the last column's place is taken by
    ``H_1(u_1)``). Pure: no checks."""
    n, m = U.shape
    cols = U * eq9_mask(n, m).astype(U.dtype)
    return cols[:, : n - 1] if m == n else cols


def check_reflections(U, u1_sign, name="U"):
    """Validate ``U`` (and ``u1_sign``) and return them as float arrays ``(U, u1)`` (``u1`` is
    ``None`` when ``m < n``). Shapes are always checked; values (no zero reflection vector,
    ``u1_sign = ±1``) only on host data (see ``_host_values``)."""
    host_U = _host_values(U)
    U = _float(U, name, "(n, m)")
    if U.ndim != 2 or U.shape[0] < 1 or U.shape[1] < 1:
        fail(name, U, "a matrix of shape (n, m) of reflection vectors laid out as oRNN eq. 9")
    n, m = U.shape
    require_reflection_count(f"{name} (its columns)", m, n)
    if m == n:
        if u1_sign is None:
            fail("u1_sign", u1_sign, "a scalar ±1 when U has m = n columns (the factor "
                 "H_1(u_1) of oRNN eq. 7 ends the product of eq. 8)")
        host_u1 = _host_values(u1_sign)
        u1 = _float(u1_sign, "u1_sign", "()")
        if u1.shape != ():
            fail("u1_sign", u1, "a scalar ±1 (oRNN eq. 7)")
        if host_u1 is not None and float(host_u1) not in (1.0, -1.0):
            fail("u1_sign", u1_sign, "exactly +1 or -1: H_1(u_1) of oRNN eq. 7 is orthogonal "
                 "only then")
    else:
        if u1_sign is not None:
            fail("u1_sign", u1_sign, f"None when U has m = {m} < n = {n} columns (H_1(u_1) "
                 "only enters when m = n)")
        u1 = None
    if host_U is not None:
        cols = np.asarray(host_U, float) * np.asarray(eq9_mask(n, m))
        cols = cols[:, : n - 1] if m == n else cols
        _require_reflectable(name, cols, U.dtype, 0, "reflection vectors on and below the "
                             "diagonal of every column")
    return U, u1


def apply_h1(u1, h):
    """``H_1(u_1) h``: multiply the last coordinate of ``h (..., n)`` by ``u_1`` (oRNN eq. 7)."""
    return h.at[..., -1].multiply(u1.astype(h.dtype))


def reflect_identity(cols, u1=None):
    """``W = H(cols[:, 0]) ⋯ H(cols[:, k-1]) · H_1(u1)`` (eq. 8), dense, built by applying the
    reflections one at a time to the rows of the identity (Algorithm 1's forward loop with
    ``n`` vectors at once): ``k`` rank-one updates of an ``(n, n)`` matrix, O(n²·k), with
    full-float32 products (:data:`EXACT`). Differentiated by JAX. Pure: no checks, no mask.

    Closer to float64 (values, orthogonality and gradients) than the compact WY form
    ``I - U T⁻¹ Uᵀ`` (``compact_wy``), but ``k`` dependent steps instead of a few products
    (``lrnn bench layer --construction`` measures both)."""
    n, k = cols.shape
    R = jnp.eye(n, dtype=cols.dtype)
    if u1 is not None:
        R = apply_h1(u1, R)                         # row i of R: (W e_i)ᵀ, built right to left
    if k == 0:
        return R.T
    N = jnp.sum(cols * cols, axis=0)

    def reflect(R, col):
        u, N_k = col
        return R - ((2 / N_k) * jnp.dot(R, u, precision=EXACT))[:, None] * u, None

    R, _ = lax.scan(reflect, R, (cols.T, N), reverse=True)
    return R.T


def householder_product(U, u1_sign=None):
    """The transition matrix of oRNN eq. 8, ``W = H_n(u_n) ⋯ H_{n-m+1}(u_{n-m+1})``, dense.

    ``U`` is laid out as in oRNN eq. 9: column ``j`` (0-based) is ``[0_j; u_{n-j}]``, so
    column 0 is ``u_n`` (the leftmost factor) and ``W = H(U[:,0]) H(U[:,1]) ⋯``. The part of
    ``U`` above the diagonal is masked to zero inside the function (the paper zeroes it after
    every gradient step; masking gives those entries zero gradient instead), so any ``(n, m)``
    array is a valid parameter.

    When ``m = n`` the product ends with ``H_1(u_1) = diag(1, …, 1, u_1)`` (eq. 7), which is
    not a reflection: the last column of ``U`` is then ignored and ``u_1`` is ``u1_sign``.
    So ``W = H(U[:,0]) ⋯ H(U[:,n-2]) · H_1(u1_sign)`` and ``det W = (-1)^(n-1) · u1_sign``;
    for ``m < n``, ``det W = (-1)^m``. By Theorem 1 every orthogonal matrix is reached when
    ``m = n`` (see ``householder_qr``).

    Computed by ``reflect_identity``: the reflections applied to the identity, O(n²·m).

    Args:
      U: shape ``(n, m)`` with ``m <= n``.
      u1_sign: ``None`` when ``m < n``; a scalar ``+1`` or ``-1`` when ``m = n`` (other values
        raise ValueError when given as host data).
    Returns:
      ``W`` of shape ``(n, n)``, orthogonal.
    """
    U, u1 = check_reflections(U, u1_sign)
    return reflect_identity(reflection_columns(U), u1)


def compact_wy(cols, u1=None):
    """``(I - U T⁻¹ Uᵀ) · H_1(u1)`` with ``T = striu(UᵀU) + ½ diag(UᵀU)`` (oRNN Prop. 1,
    eqs. 12–13) for reflection columns ``cols`` (no mask, no checks): one Gram matrix, one
    triangular solve and one product, so a few dependent steps for any ``k`` (what a GPU
    wants), at a slightly larger float32 error than ``reflect_identity``. Pure."""
    n, k = cols.shape
    W = jnp.eye(n, dtype=cols.dtype)
    if k:
        G = jnp.dot(cols.T, cols, precision=EXACT)
        T = jnp.triu(G, 1) + 0.5 * jnp.diag(jnp.diag(G))
        W = W - jnp.dot(cols, jax.scipy.linalg.solve_triangular(T, cols.T, lower=False),
                        precision=EXACT)
    if u1 is not None:
        W = apply_h1(u1, W)                       # W · H_1(u_1): scale the last column
    return W


def wy_matrix(U, u1_sign=None):
    """The compact WY form of oRNN Prop. 1, dense: ``I - U T⁻¹ Uᵀ`` with
    ``T = striu(UᵀU) + ½ diag(UᵀU)`` (eqs. 12–13), times ``H_1(u1_sign)`` when ``m = n``.

    Equal to ``householder_product(U, u1_sign)`` (computed by ``compact_wy``); arguments and
    masking as there. ``wy_transform`` applies it to vectors without forming it."""
    U, u1 = check_reflections(U, u1_sign)
    return compact_wy(reflection_columns(U), u1)


def _reflect_forward(U, h, keep=False):
    """Algorithm 1, lines 4–10: ``H_{m+1} = h``, then for ``k = m, …, 1``:
    ``h̃_k = (2/N_k) U_kᵀ H_{k+1}``, ``H_k = H_{k+1} - h̃_k U_k``. Returns ``H_1 = W h`` and,
    with ``keep``, what the backward pass needs: the stacked ``H_{k+1}`` (shape
    ``(m, ..., n)``), ``h̃`` (shape ``(m, ...)``) and ``N``."""
    N = jnp.sum(U * U, axis=0)

    def body(H, col):
        u, N_k = col
        h_tilde = (2 / N_k) * jnp.dot(H, u, precision=EXACT)
        return H - h_tilde[..., None] * u, ((H, h_tilde) if keep else None)

    C, kept = jax.lax.scan(body, h, (U.T, N), reverse=True)
    return (C, *kept, N) if keep else C


@jax.custom_vjp
def wy_transform_columns(U, h):
    """``(I - U T⁻¹ Uᵀ) h`` for reflection columns ``U`` of shape ``(n, k)`` (no masking, no
    checks, no ``H_1``) and ``h`` of shape ``(..., n)``; O(n·k) per vector. Its gradient is
    Algorithm 1, lines 11–18 (oRNN Theorem 2), recomputing the ``H`` columns locally as in
    oRNN §4.2 so that only ``U`` and ``h`` are kept for the backward pass."""
    return _reflect_forward(U, h)


def _wy_fwd(U, h):
    return _reflect_forward(U, h), (U, h)


def _wy_bwd(res, g):
    U, h = res
    _, H_next, h_tilde, N = _reflect_forward(U, h, keep=True)

    def body(g, col):                             # Algorithm 1, lines 11–15, k = 1, …, m
        u, N_k, H_k1, h_t = col
        C_tilde = (2 / N_k) * jnp.dot(g, u, precision=EXACT)
        g = g - C_tilde[..., None] * u
        G_k = -(h_t[..., None] * g + C_tilde[..., None] * H_k1)
        return g, G_k.reshape(-1, G_k.shape[-1]).sum(0)

    g_h, G = jax.lax.scan(body, g, (U.T, N, H_next, h_tilde))
    return G.T, g_h


wy_transform_columns.defvjp(_wy_fwd, _wy_bwd)


def reflect_vectors(cols, u1, h):
    """``W h`` for ``W = reflect_identity(cols, u1)`` without forming ``W``: ``H_1(u1)`` first
    (when given), then Algorithm 1 (``wy_transform_columns``). Pure: no checks, no mask."""
    if u1 is not None:
        h = apply_h1(u1, h)
    return wy_transform_columns(cols, h) if cols.shape[1] else h


def wy_transform(U, h, u1_sign=None):
    """``W h`` for the oRNN transition ``W = householder_product(U, u1_sign)`` without forming
    ``W``: the forward pass of oRNN Algorithm 1 (lines 4–10), one reflection at a time from
    the last column to the first, ``h ← h - (2/N_k)(U_kᵀ h) U_k`` with ``N_k = ‖U_k‖²``. It
    equals the compact WY form ``(I - U T⁻¹ Uᵀ) h`` (Prop. 1, eqs. 12–13; Appendix B,
    eqs. 20–21) and costs O(n·m) per vector. When ``m = n``, ``H_1(u1_sign)`` is applied to
    ``h`` first (remark after Prop. 1).

    Its reverse-mode gradient is Algorithm 1's backward pass (lines 11–18, Theorem 2).

    Args:
      U: shape ``(n, m)``, ``m <= n``, eq.-9 layout (masked as in ``householder_product``).
      h: shape ``(..., n)``; leading dimensions are batch dimensions.
      u1_sign: as in ``householder_product``.
    Returns:
      ``W h``, shape ``(..., n)``.
    """
    U, u1 = check_reflections(U, u1_sign)
    h = _float(h, "h")
    if h.ndim < 1 or h.shape[-1] != U.shape[0]:
        fail("h", h, f"shape (..., n) with n = {U.shape[0]} (the number of rows of U)")
    dtype = jnp.result_type(U.dtype, _float(h).dtype)
    return reflect_vectors(reflection_columns(U).astype(dtype), u1, h.astype(dtype))


class HouseholderQR(NamedTuple):
    """Result of ``householder_qr``: ``A = householder_product(U, u1_sign) @ R``."""
    U: jax.Array        # (n, n), eq.-9 layout; last column zero (u_1 is u1_sign)
    u1_sign: jax.Array  # () ±1, the u_1 of eq. 7
    R: jax.Array        # (n, n) upper triangular with positive diagonal


def householder_qr(A):
    """QR decomposition with the oRNN factors, oRNN Algorithm 2.

    For ``k = 1, …, n-1`` the column ``x = R[k:, k]`` is reflected onto ``‖x‖ e_1`` by
    ``H(u)`` with ``u = x - ‖x‖ e_1`` (normalised); if ``x`` already equals ``‖x‖ e_1`` that
    ``u`` is zero and the algorithm takes ``u = (0, …, 0, 1)`` instead, which leaves column
    ``k`` in place. Finally ``u_1 = sgn(R_nn)`` makes the last diagonal entry positive.
    (``u_1`` of ``x - ‖x‖ e_1`` is computed as ``-‖x_{2:}‖² / (x_1 + ‖x‖)`` when ``x_1 > 0``,
    the same number without cancellation.)

    For orthogonal ``A``, ``R = I`` and ``householder_product(U, u1_sign) = A``: every
    orthogonal matrix is in the image of the parametrisation (oRNN Theorem 1).

    Args:
      A: shape ``(n, n)``, full rank.
    Returns:
      ``HouseholderQR(U, u1_sign, R)`` (a named tuple): ``U`` of shape ``(n, n)`` in eq.-9
      layout with unit columns and a zero last column, ``u1_sign`` a scalar ±1, ``R`` upper
      triangular with positive diagonal, such that ``A = householder_product(U, u1_sign) @ R``.
    Raises:
      ValueError (naming ``A``) for a non-square or non-finite matrix, or one whose
      factorisation meets an exactly zero column (``R_kk = 0``: exact rank deficiency); the
      last two checks need values, so they run when ``A`` is host data (NumPy), not on JAX
      arrays (see ``_host_values``). A numerically singular matrix passes with a tiny
      positive ``R_kk``: the factorisation is still valid.
    """
    host = _host_values(A)
    A = _float(A, "A", "(n, n)")
    if A.ndim != 2 or A.shape[0] != A.shape[1] or A.shape[0] < 1:
        fail("A", A, "a square matrix of shape (n, n) (oRNN Algorithm 2)")
    if host is not None and not np.all(np.isfinite(host)):
        fail("A", A, "a finite matrix")
    U, u1, R = _householder_qr(A)
    if host is not None and not (np.all(np.isfinite(np.asarray(U)))
                                 and np.all(np.diag(np.asarray(R)) > 0)):
        fail("A", A, "a full-rank matrix (oRNN Algorithm 2 requires it)")
    return HouseholderQR(U, u1, R)


@jax.jit
def _householder_qr(A):
    n = A.shape[0]
    rows = jnp.arange(n)
    e_last = (rows == n - 1).astype(A.dtype)

    def body(k, carry):                 # step k + 1 of Algorithm 2, on full-length vectors
        R, U = carry
        x = jnp.where(rows >= k, R[:, k], 0)                    # R_{k..n,k}
        x_k = x[k]
        tail2 = jnp.sum(jnp.where(rows > k, x, 0) ** 2)
        sigma = jnp.sqrt(x_k ** 2 + tail2)
        aligned = (tail2 == 0) & (x_k >= 0)                     # R_kk = ‖R_{k..n,k}‖
        head = jnp.where(x_k > 0, -tail2 / jnp.where(x_k > 0, x_k + sigma, 1), x_k - sigma)
        u = jnp.where(rows == k, head, x)                       # x - ‖x‖ e_1
        u = jnp.where(aligned, e_last, u / jnp.where(aligned, 1, jnp.linalg.norm(u)))
        R = R - 2 * jnp.outer(u, jnp.dot(u, R, precision=EXACT))  # R ← H_{n-k}(u) R
        return R, U.at[:, k].set(u)

    R, U = jax.lax.fori_loop(0, n - 1, body, (A, jnp.zeros_like(A)))
    u1 = jnp.where(R[n - 1, n - 1] >= 0, 1, -1).astype(A.dtype)
    R = R.at[n - 1, :].multiply(u1)                             # R ← H_1(u_1) R
    return U, u1, jnp.triu(R)
