"""Step 2, the library: each check against a float64 NumPy transcription of its equation."""
from __future__ import annotations

import time

import numpy as np

from ...scan import reference
from .results import FAIL, PASS, Result, _rel_err


def _scan_methods():
    import jax
    methods = ["sequential", "associative", "chunked", "auto"]
    if jax.default_backend() == "gpu":
        methods.insert(3, "pallas")
    return methods


def check_scan(method, linear_scan=None, shape=(2, 1000, 32)):
    """Complex time-invariant λ (|λ| up to 0.999) and real time-varying a run backwards."""
    import jax
    import jax.numpy as jnp
    import lrnn
    linear_scan = linear_scan or lrnn.linear_scan
    rng = np.random.default_rng(1)
    B, L, N = shape
    lam = (rng.uniform(0.9, 0.999, N) * np.exp(1j * rng.uniform(0, np.pi, N))).astype(np.complex64)
    b = (rng.standard_normal(shape) + 1j * rng.standard_normal(shape)).astype(np.complex64)
    forward = jax.jit(lambda a_, b_: linear_scan(a_, b_, method=method))
    backward = jax.jit(lambda a_, b_: linear_scan(a_, b_, reverse=True, method=method))
    e1 = _rel_err(forward(jnp.asarray(lam), jnp.asarray(b)), reference.linear_scan(lam, b))
    a = rng.uniform(0.5, 1.0, shape).astype(np.float32)
    br = rng.standard_normal(shape).astype(np.float32)
    e2 = _rel_err(backward(jnp.asarray(a), jnp.asarray(br)), reference.linear_scan(a, br, reverse=True))
    return max(e1, e2), f"complex λ: {e1:.1e}; time-varying a, reverse: {e2:.1e}"


def check_scan_gradient(method, linear_scan=None, shape=(2, 500, 16)):
    import jax
    import jax.numpy as jnp
    import lrnn
    linear_scan = linear_scan or lrnn.linear_scan
    rng = np.random.default_rng(2)
    a = rng.uniform(0.9, 0.999, shape[-1]).astype(np.float32)
    b = rng.standard_normal(shape).astype(np.float32)
    g = rng.standard_normal(shape).astype(np.float32)
    loss = lambda a_, b_: jnp.sum(jnp.asarray(g) * linear_scan(a_, b_, method=method))  # noqa: E731
    da, db = jax.jit(jax.grad(loss, argnums=(0, 1)))(jnp.asarray(a), jnp.asarray(b))
    da_ref, db_ref = reference.linear_scan_vjp(a, reference.linear_scan(a, b), g)
    e_a, e_b = _rel_err(da, da_ref), _rel_err(db, db_ref)
    return max(e_a, e_b), f"∂/∂b: {e_b:.1e}; ∂/∂a: {e_a:.1e}"


def check_scan_float64(linear_scan=None):
    """``method="auto"`` on float64 inputs must choose a method that runs them."""
    import jax
    import jax.numpy as jnp
    import lrnn
    linear_scan = linear_scan or lrnn.linear_scan
    previous = jax.config.jax_enable_x64
    jax.config.update("jax_enable_x64", True)
    try:
        rng = np.random.default_rng(3)
        a = rng.uniform(0.9, 0.999, 16)
        b = rng.standard_normal((2, 512, 16))
        x = linear_scan(jnp.asarray(a), jnp.asarray(b), method="auto")
        dtype = str(x.dtype)
        err = _rel_err(x, reference.linear_scan(a, b))
    finally:
        jax.config.update("jax_enable_x64", previous)
    if dtype != "float64":
        return float("inf"), f"returned {dtype}, not float64"
    return err, f"float64 result, error {err:.1e}"


def check_rotation_scan(rotation_scan=None):
    import jax.numpy as jnp
    import lrnn
    rotation_scan = rotation_scan or lrnn.rotation_scan
    rng = np.random.default_rng(4)
    K, L = 8, 512
    gamma = rng.uniform(0.9, 0.999, K)
    theta = rng.uniform(-np.pi, np.pi, K)
    b = rng.standard_normal((2, L, 2 * K))
    ref = reference.rotation_scan(gamma, theta, b)         # x_t = γ R(θ) x_{t-1} + b_t (eq. 14)
    got = rotation_scan(jnp.asarray(gamma, jnp.float32), jnp.asarray(theta, jnp.float32),
                        jnp.asarray(b, jnp.float32))
    err = _rel_err(got, ref)
    return err, f"error {err:.1e} against 2×2 rotations in float64"


def check_skew_expm(skew_expm=None):
    import jax.numpy as jnp
    import scipy.linalg
    from lrnn import orthogonal
    skew_expm = skew_expm or orthogonal.skew_expm
    rng = np.random.default_rng(5)
    M = rng.standard_normal((3, 16, 16))
    Q = np.asarray(skew_expm(jnp.asarray(M, jnp.float32)), np.float64)
    ref = np.stack([scipy.linalg.expm(m - m.T) for m in M])
    e_ref = _rel_err(Q, ref)
    e_orth = float(np.max(np.abs(np.swapaxes(Q, -1, -2) @ Q - np.eye(16))))
    det = np.linalg.det(Q)
    e_det = float(np.max(np.abs(det - 1)))
    return max(e_ref, e_orth, e_det), (f"vs SciPy expm(M - Mᵀ): {e_ref:.1e}; |QᵀQ - I|: {e_orth:.1e}; "
                                       f"|det Q - 1|: {e_det:.1e}")


def check_householder(householder_product=None):
    import jax.numpy as jnp
    from lrnn import orthogonal
    householder_product = householder_product or orthogonal.householder_product
    rng = np.random.default_rng(6)
    n, m = 16, 8
    U = np.tril(rng.standard_normal((n, m)))          # column j is [0_j; u_{n-j}] (oRNN eq. 9)
    W = np.eye(n)
    for j in range(m):                                # W = H(U[:,0]) H(U[:,1]) ... (eq. 8)
        u = U[:, j]
        W = W @ (np.eye(n) - 2 * np.outer(u, u) / (u @ u))
    got = np.asarray(householder_product(jnp.asarray(U, jnp.float32)), np.float64)
    e_ref = _rel_err(got, W)
    e_orth = float(np.max(np.abs(got.T @ got - np.eye(n))))
    Wn = np.asarray(householder_product(jnp.asarray(np.tril(rng.standard_normal((n, n))), jnp.float32),
                                        u1_sign=-1.0), np.float64)
    e_det = abs(np.linalg.det(Wn) - (-1) ** (n - 1) * -1.0)
    return max(e_ref, e_orth, e_det), (f"vs product of reflections: {e_ref:.1e}; |WᵀW - I|: "
                                       f"{e_orth:.1e}; m = n, u₁ = -1: |det W - (-1)ⁿ⁻¹u₁| = {e_det:.1e}")


def check_lru(apply=None):
    import jax
    import jax.numpy as jnp
    from lrnn.layers import lru
    apply = apply or lru.apply
    H, N, L = 4, 16, 300
    p = {k: np.asarray(v, np.float64) for k, v in
         lru.init(jax.random.PRNGKey(7), H, N, r_min=0.9, r_max=0.999).items()}
    u = np.random.default_rng(7).standard_normal((2, L, H))
    lam = np.exp(-np.exp(p["nu_log"]) + 1j * np.exp(p["theta_log"]))          # §3.3
    B = np.exp(p["gamma_log"])[:, None] * (p["B_re"] + 1j * p["B_im"])         # §3.4: γ ⊙ B
    C = p["C_re"] + 1j * p["C_im"]
    x, ys = np.zeros((2, N), complex), []
    for t in range(L):                     # x_k = Λ x_{k-1} + γ ⊙ B u_k; y_k = Re(C x_k) + D ⊙ u_k
        x = lam * x + u[:, t] @ B.T
        ys.append((x @ C.T).real + p["D"] * u[:, t])
    ref = np.stack(ys, axis=1)
    got = apply({k: jnp.asarray(v, jnp.float32) for k, v in p.items()}, jnp.asarray(u, jnp.float32))
    err = _rel_err(got, ref)
    return err, f"error {err:.1e} against LRU §3.3–3.4 in float64"


def check_rotrnn(apply=None):
    import jax
    import jax.numpy as jnp
    import scipy.linalg
    from lrnn.layers import rotrnn
    apply = apply or rotrnn.apply
    K, heads, n, L = 4, 2, 4, 200
    p = {k: np.asarray(v, np.float64) for k, v in
         rotrnn.init(jax.random.PRNGKey(8), K, heads * n, heads).items()}
    u = np.random.default_rng(8).standard_normal((L, K))
    gamma = np.exp(-np.exp(p["nu_log"]))                                     # App. B.3
    theta = p["theta"].reshape(heads, n // 2)
    Bh = p["B"]                                                              # (H, n, K)
    xi = np.sqrt((1 - gamma ** 2) / np.sum(Bh ** 2, axis=(1, 2)))            # §3.1
    A = []
    for h in range(heads):                 # A_h = γ_h P_h D(θ_h) P_hᵀ, P_h = expm(M_h - M_hᵀ) (eq. 6)
        P = scipy.linalg.expm(p["M"][h] - p["M"][h].T)
        D = scipy.linalg.block_diag(*[[[np.cos(t), -np.sin(t)], [np.sin(t), np.cos(t)]] for t in theta[h]])
        A.append(gamma[h] * P @ D @ P.T)
    x, ys = np.zeros((heads, n)), []
    for t in range(L):
        x = np.stack([A[h] @ x[h] + xi[h] * Bh[h] @ u[t] for h in range(heads)])
        ys.append(p["C"] @ x.reshape(-1) + p["D"] * u[t])
    ref = np.stack(ys)
    got = apply({k: jnp.asarray(v, jnp.float32) for k, v in p.items()}, jnp.asarray(u, jnp.float32))
    err = _rel_err(got, ref)
    return err, f"error {err:.1e} against RotRNN eq. 6 with dense matrices in float64"


def library_checks() -> list[tuple[str, object, float]]:
    """``(name, check function, tolerance on its relative error)``; a check returns
    ``(error, detail)``. float32 tolerances: 1e-4 for recurrences over hundreds of steps, 1e-5
    for single matrix functions; float64 ones: 1e-10."""
    checks = []
    for m in _scan_methods():
        checks.append((f"linear_scan method={m!r} vs float64 loop", lambda m=m: check_scan(m), 1e-4))
        checks.append((f"linear_scan method={m!r} gradient vs float64 adjoint",
                       lambda m=m: check_scan_gradient(m), 1e-4))
    checks += [
        ("linear_scan method='auto' on float64 inputs", check_scan_float64, 1e-10),
        ("rotation_scan vs float64 rotations (RotRNN eq. 14)", check_rotation_scan, 1e-4),
        ("skew_expm orthogonal, = SciPy expm (RotRNN Lemma 2)", check_skew_expm, 1e-5),
        ("householder_product orthogonal, = reflections (oRNN eq. 8)", check_householder, 1e-5),
        ("LRU layer vs NumPy transcription", check_lru, 1e-4),
        ("RotRNN layer vs NumPy transcription", check_rotrnn, 1e-4),
    ]
    return checks


def run_check(name, fn, tol, section="library") -> Result:
    from .. import precision
    start = time.perf_counter()
    try:
        with precision.exact_matmuls():
            err, detail = fn()
        status = PASS if err <= tol else FAIL
        detail = f"{detail} (tolerance {tol:.0e})"
        data = {"error": err, "tolerance": tol}
    except Exception as e:  # noqa: BLE001 - a crash is a failed check
        status, detail, data = FAIL, f"raised {type(e).__name__}: {str(e)[:300]}", {}
    return Result(section, name, status, detail, time.perf_counter() - start, data)
