"""The checkers of the exercises (lrnn.course.check.ch01 … ch08): reference answers written
independently of the checkers pass, also with TF32 matrix products emulated, and typical
mistakes fail with the hint that names them (every wrong answer here is a real mistake)."""
import math

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import lrnn
import lrnn.course.check as lc
from lrnn import orthogonal as o
from lrnn.course import precision


@pytest.fixture(autouse=True)
def not_grading(monkeypatch):
    monkeypatch.delenv(lc.GRADING_ENV, raising=False)


def _hint(ex, fn):
    res = lc.result_of(ex, fn)
    assert res.status in ("fail", "error"), res.message
    return res.message


# ------------------------------------------------------------------------------------------
# Reference answers, written from the papers (not from the checkers)
# ------------------------------------------------------------------------------------------

def chunked(a, b, T):
    return lrnn.linear_scan(a, b, method="sequential")


def radius(A):
    return float(np.max(np.abs(np.linalg.eigvals(np.asarray(A, np.float64)))))


def rotation_recurrence(gamma, theta, b):
    return lrnn.rotation_scan(gamma, theta, b, method="sequential")


def rotgru(params, h, x):
    return lrnn.layers.gru.cell({k: jnp.asarray(v) for k, v in params.items()},
                                 jnp.asarray(h), jnp.asarray(x))


def xi_closed_form(P, theta, B, gamma, rho):
    P, B = np.asarray(P, np.float64), np.asarray(B, np.float64)
    w = np.sum((P.T @ B).reshape(-1, 2, B.shape[1]) ** 2, axis=(1, 2))
    lam = rho * gamma * np.exp(1j * np.asarray(theta, np.float64))
    return float(np.sqrt((1 - gamma ** 2) / np.sum(w * np.real((1 + lam) / (1 - lam)))))


def reflector(x, y):
    x, y = np.asarray(x, np.float64), np.asarray(y, np.float64)
    if np.allclose(x, y):
        u = np.zeros_like(x)
        u[np.argmin(np.abs(x))] = 1.0
        return u - (u @ x) / (x @ x) * x
    return x - y


def wy_merge(U1, T1, U2, T2):
    return np.hstack([U1, U2]), np.block([[T1, U1.T @ U2], [np.zeros((T2.shape[0], T1.shape[0])),
                                                            T2]])


def ornn_step(params, h, x):
    U = jnp.asarray(params["U"])
    W = (o.householder_product(U, 1.0 if params["u1"] > 0 else -1.0) if "u1" in params
         else o.householder_product(U))
    z = jnp.asarray(h) @ W.T + jnp.asarray(x) @ jnp.asarray(params["V"]).T + params["b"]
    return jnp.maximum(z, z / 10)


def scan_bytes(shape, dtype="complex64", time_varying=False, passes=1):
    arrays = passes * (2 if time_varying else 1) + 1
    return arrays * math.prod(shape) * np.dtype(dtype).itemsize


def work_depth(L):
    """By tracing jax.lax.associative_scan with an operator that records its calls."""
    calls = []

    def op(left, right):
        calls.append(left[0].shape[0])
        return left[0] * right[0], right[0] * left[1] + right[1]
    jax.make_jaxpr(lambda x: jax.lax.associative_scan(op, (x, x)))(jnp.ones(L))
    return sum(calls), sum(1 for n in calls if n > 0)


def scan_vjp(a, x, x_bar):
    """Through JAX's autodiff of a plain loop (not lrnn's custom VJP)."""
    b = np.asarray(x) - np.concatenate([np.zeros_like(x[..., :1, :]),
                                        np.asarray(a) * np.asarray(x)[..., :-1, :]], axis=-2)

    def loop(a, b):
        def step(h, b_t):
            h = a * h + b_t
            return h, h
        _, xs = jax.lax.scan(step, jnp.zeros_like(b[..., 0, :]), jnp.moveaxis(b, -2, 0))
        return jnp.moveaxis(xs, 0, -2)
    _, vjp = jax.vjp(loop, jnp.asarray(a), jnp.asarray(b))
    return vjp(jnp.asarray(x_bar))


def fraction_of_floor(shape, seconds, copy_GBps, dtype="complex64", time_varying=False, passes=1):
    return scan_bytes(shape, dtype, time_varying, passes) / (copy_GBps * 1e9) / seconds


def param_count(layer, d_model, d_state, n_heads=1):
    key = jax.random.PRNGKey(1)
    params = (lrnn.layers.lru.init(key, d_model, d_state) if layer == "lru"
              else lrnn.layers.rotrnn.init(key, d_model, d_state, n_heads))
    return sum(int(np.size(v)) for v in jax.tree_util.tree_leaves(params))


def win_probability(a, b, higher_is_better=True):
    pairs = [(x, y) for x in a for y in b]
    sign = 1 if higher_is_better else -1
    return sum(1.0 if sign * (x - y) > 0 else 0.5 if x == y else 0.0 for x, y in pairs) / len(pairs)


REFERENCES = {
    "1.3": chunked, "1.5": radius, "3.1": o.skew_expm, "3.2": rotation_recurrence,
    "3.4": rotgru, "4.1": xi_closed_form, "5.1": reflector,
    "5.2": lambda U, s=None: o.householder_product(U) if s is None else o.householder_product(U, s),
    "5.3": wy_merge, "5.4": ornn_step, "6.1": scan_bytes, "6.2": work_depth,
    "6.3": scan_vjp, "6.4": fraction_of_floor, "7.1": lambda T, q: q ** (1 / T),
    "7.3": param_count, "7.4": win_probability,
}


#: Checkers over the quick tier's CPU limit per test (conftest.py): 7.3 trains models.
SLOW_CHECKS = {"7.3"}


@pytest.mark.parametrize("ex", [pytest.param(e, marks=pytest.mark.slow) if e in SLOW_CHECKS else e
                                for e in sorted(REFERENCES)])
def test_reference_passes(ex):
    assert lc.result_of(ex, REFERENCES[ex]).passed, lc.result_of(ex, REFERENCES[ex]).message


@pytest.mark.slow
@pytest.mark.parametrize("ex", ["1.3", "3.2", "3.4", "4.1", "5.3", "5.4", "6.3"])
def test_reference_passes_with_tf32_products(ex):
    """The checkers run the student's code under exact float32 products; with TF32 emulated on
    every product outside that policy, the verdict is the same."""
    with precision.tf32_emulated(), precision.exact_matmuls():
        assert lc.result_of(ex, REFERENCES[ex]).passed


def test_library_rotgru_follows_the_checker():
    """lrnn's RotGRU (the library reference) and the float64 transcription of eqs. 11–17 that
    the checker uses agree on a whole sequence."""
    from lrnn.course.check.ch03 import rotgru_np
    params = lrnn.layers.gru.init(jax.random.PRNGKey(0), 3, 6)
    params = {k: np.asarray(v) + 0.1 for k, v in params.items()}
    u = np.random.default_rng(0).standard_normal((20, 3)).astype(np.float32)
    h = np.zeros(6)
    for t in range(20):
        h = rotgru_np(params, h, u[t])
    assert np.allclose(np.asarray(lrnn.layers.gru.apply(params, u))[-1], h, atol=1e-5)


def test_stationary_xi_is_the_chapter_closed_form():
    """chapter 4's drift factor, weighted by the rotated rows of B, gives the same ξ as the
    exact stationary covariance (a discrete Lyapunov equation) that the checker uses."""
    from lrnn.course.check.ch04 import stationary_xi
    rng = np.random.default_rng(3)
    M = rng.standard_normal((6, 6))
    P = np.asarray(o.skew_expm(jnp.asarray(M, jnp.float32)), np.float64)
    for rho in (-0.8, 0.0, 0.5, 0.95):
        th, B = rng.uniform(0, np.pi, 3), rng.standard_normal((6, 2))
        assert np.isclose(stationary_xi(P, th, B, 0.97, rho), xi_closed_form(P, th, B, 0.97, rho),
                          rtol=1e-6)


def odd_even_recursion(L):
    """Exercise 6.2's derivation: the odd–even scan combines the L // 2 adjacent pairs, scans
    the half, then fixes up the (L + 1) // 2 - 1 remaining elements, one level each."""
    if L < 2:
        return 0, 0
    work, depth = odd_even_recursion(L // 2)
    fix = (L + 1) // 2 - 1
    return L // 2 + fix + work, 1 + depth + (1 if fix > 0 else 0)


def test_odd_even_work_and_depth_are_what_jax_does():
    from lrnn.course.check.ch06 import reference_work_depth
    for L in (1, 2, 3, 5, 7, 64, 1000, 1025, 4097, 65537):
        assert reference_work_depth(L) == work_depth(L) == odd_even_recursion(L)
    assert odd_even_recursion(1024)[1] == 2 * math.ceil(math.log2(1024)) - 1 == 19   # book §6.1


def test_ring_share_is_the_closed_form_of_lemma_3_2():
    """The check's quadrature against |λ|² uniform on [r_min², r_max²] (LRU Lemma 3.2)."""
    from lrnn.course.check.ch07 import reference_fraction
    for r_min, r_max, T, q in [(0.0, 1.0, 100, 0.5), (0.9, 0.999, 1000, 0.5), (0.4, 0.95, 50, 0.1),
                               (0.0, 0.9, 1000, 0.5), (0.5, 0.5, 2, 0.2), (0.5, 0.5, 2, 0.3)]:
        r = min(max(q ** (1 / T), r_min), r_max)
        closed = float(r_max >= q ** (1 / T)) if r_max == r_min else \
            (r_max ** 2 - r ** 2) / (r_max ** 2 - r_min ** 2)
        assert reference_fraction(r_min, r_max, T, q) == pytest.approx(closed, rel=1e-12, abs=1e-15)


def test_fraction_remembering_matches_ring_init():
    from lrnn.course.check.ch07 import reference_fraction
    r_star = 0.5 ** (1 / 200)
    for r_min, r_max in [(0.0, 0.999), (0.99, 0.999), (r_star, 0.999)]:
        nu_log, _ = lrnn.layers.lru.ring_init(jax.random.PRNGKey(2), 100_000, r_min=r_min, r_max=r_max)
        modulus = np.exp(-np.exp(np.asarray(nu_log, np.float64)))
        assert abs(np.mean(modulus ** 200 >= 0.5) - reference_fraction(r_min, r_max, 200, 0.5)) \
            < 0.01


# ------------------------------------------------------------------------------------------
# Typical mistakes get the hint that names them
# ------------------------------------------------------------------------------------------

def test_hints_chapter_1():
    from lrnn.course.check.ch01 import _chunk_join, _chunk_parts

    def no_carry(a, b, T):
        X, G, h, L = _chunk_parts(a, b, T)
        return _chunk_join(X, G, 0 * h, L)
    assert "starts from zero" in _hint("1.3", no_carry)
    assert "largest singular value" in _hint("1.5", lambda A: np.linalg.norm(A, 2))


def test_hints_chapter_3():
    assert "transpose" in _hint("3.1", lambda M: o.skew_expm(jnp.asarray(M).T))
    assert "−θ" in _hint("3.2", lambda g, t, b: rotation_recurrence(g, -t, b))
    assert "decay is missing" in _hint("3.2", lambda g, t, b: rotation_recurrence(1 + 0 * g, t, b))

    def dense(g, t, b):
        G = jnp.repeat(g, 2)[:, None] * o.block_rotation(t)

        def step(x, b_t):
            x = x @ G.T + b_t
            return x, x
        return jnp.moveaxis(jax.lax.scan(step, jnp.zeros_like(b[..., 0, :]),
                                         jnp.moveaxis(b, -2, 0))[1], 0, -2)
    assert "dense 2K×2K" in _hint("3.2", dense)
    assert "Pᵀ" in _hint("3.3", lambda P, t, k: P @ o.block_rotation(k * t))
    from lrnn.course.check.ch03 import rotgru_np
    for variant, words in [("rotate_h", "reset gate acts before the rotation"),
                           ("z_swapped", "update gate weighs the candidate"),
                           ("no_reset", "not [h_{t-1}, x_t]"), ("no2pi", "2π")]:
        msg = _hint("3.4", lambda p, h, x, v=variant: (rotgru_np(p, h, x, v),) * 2)
        assert words in msg, (variant, msg)


def test_hints_chapter_4():
    def white(P, theta, B, gamma, rho):
        return float(np.sqrt((1 - gamma ** 2) / np.sum(np.asarray(B, np.float64) ** 2)))
    assert "white-noise ξ" in _hint("4.1", white)

    def unrotated(P, theta, B, gamma, rho):
        return xi_closed_form(np.eye(len(P)), theta, B, gamma, rho)
    assert "rows of PᵀB" in _hint("4.1", unrotated)


def test_hints_chapter_5():
    assert "sends x to −y" in _hint("5.1", lambda x, y: np.asarray(x) + np.asarray(y))
    assert "orthogonal to x" in _hint("5.1", lambda x, y: np.asarray(x) - np.asarray(y))
    assert "reverse order" in _hint("5.2", lambda U, s=None: REFERENCES["5.2"](U, s).T)

    def eq12(U1, T1, U2, T2):
        U = np.hstack([U1, U2])
        G = U.T @ U
        return U, np.triu(G, 1) + 0.5 * np.diag(np.diag(G))
    assert "recomputed eq. 12" in _hint("5.3", eq12)
    assert "above the diagonal" in _hint("5.3", lambda U1, T1, U2, T2: (
        wy_merge(U1, T1, U2, T2)[0], wy_merge(U1, T1, U2, T2)[1].T))

    def relu_step(p, h, x):
        z = ornn_step(p, h, x)
        return jnp.where(z < 0, 0.0, z)                # φ(z) = max(z, 0) instead of max(z/10, z)
    assert "leaky ReLU" in _hint("5.4", relu_step)


def test_hints_chapter_6():
    assert "also writes x" in _hint("6.1", lambda s, d="complex64", tv=False, p=1: scan_bytes(
        s, d, tv, p) - math.prod(s) * np.dtype(d).itemsize)
    assert "Hillis–Steele count" in _hint("6.2", lambda L: (
        L * math.ceil(math.log2(L)) if L > 1 else 0, work_depth(L)[1]))
    assert "two levels per halving" in _hint("6.2", lambda L: (
        work_depth(L)[0], math.ceil(math.log2(L)) if L > 1 else 0))

    def forwards(a, x, g):
        a_bar, _ = scan_vjp(a, x, g)
        return a_bar, lrnn.linear_scan(a, g, method="sequential")
    assert "scanned forwards" in _hint("6.3", forwards)
    assert "inverse" in _hint("6.4", lambda *args, **kw: 1 / fraction_of_floor(*args, **kw))


def test_hints_chapter_7():
    assert "q^(1/T)" in _hint("7.1", lambda T, q: 1 - (1 - q) / T)
    from lrnn.course.check.ch07 import reference_fraction
    assert "share that forgets" in _hint("7.2", lambda a, b, T, q: 1 - reference_fraction(a, b, T,
                                                                                         q))
    assert "complex" in _hint("7.3", lambda layer, H, N, heads=1: param_count(
        layer, H, N, heads) - (2 * N * H if layer == "lru" else 0))
    assert "ties count" in _hint("7.4", lambda a, b, hib=True: float(np.mean(
        (np.asarray(a)[:, None] > np.asarray(b)[None, :]) if hib
        else (np.asarray(a)[:, None] < np.asarray(b)[None, :]))))


# ------------------------------------------------------------------------------------------
# Chapter 8: the deep model rebuilt (references from LRU Fig. 1, App. A and D, in NumPy)
# ------------------------------------------------------------------------------------------

def ln8(u, scale, bias):
    u = np.asarray(u, np.float64)
    z = (u - u.mean(-1, keepdims=True)) / np.sqrt(u.var(-1, keepdims=True) + 1e-5)
    return z * scale + bias


def glu8(y, W, b):
    z = np.asarray(y, np.float64) @ W + b
    h = z.shape[-1] // 2
    return z[..., :h] / (1 + np.exp(-z[..., h:]))


def lru8(q, v):
    lam = np.exp(-np.exp(q["nu_log"].astype(np.float64)) + 1j * np.exp(q["theta_log"]))
    bv = np.einsum("...lh,nh->...ln", v, (q["B_re"] + 1j * q["B_im"])) * np.exp(q["gamma_log"])
    x, state = np.zeros_like(bv), np.zeros_like(bv[..., 0, :])
    for k in range(bv.shape[-2]):
        state = lam * state + bv[..., k, :]
        x[..., k, :] = state
    return np.einsum("...ln,hn->...lh", x, q["C_re"] + 1j * q["C_im"]).real + q["D"] * v


def block8(p, u):
    v = ln8(u, p["norm"]["scale"], p["norm"]["bias"])
    y = np.asarray(jax.nn.gelu(jnp.asarray(lru8(p["layer"], v), jnp.float32)), np.float64)
    return np.asarray(u, np.float64) + glu8(y, p["glu"]["W"], p["glu"]["b"])


def model8(params, x, pool):
    u = np.asarray(x, np.float64) @ params["encoder"]["W"] + params["encoder"]["b"]
    for p in params["blocks"]:
        u = block8(p, u)
    z = u.mean(-2) if pool == "mean" else u[..., -1, :]
    return z @ params["decoder"]["W"] + params["decoder"]["b"]


def mask8(params):
    rec = {"nu_log", "theta_log", "gamma_log", "B_re", "B_im"}
    out = jax.tree_util.tree_map(lambda _: False, params)
    for b in out["blocks"]:
        b["layer"] = {k: k in rec for k in b["layer"]}
    return out


def step8(q, x, v):
    """One LRU step (LRU eq. 3, diagonal Λ) in float64: (x_new, y)."""
    lam = np.exp(-np.exp(q["nu_log"].astype(np.float64)) + 1j * np.exp(q["theta_log"]))
    b = (q["B_re"] + 1j * q["B_im"]) * np.exp(q["gamma_log"])[:, None]
    x_new = lam * np.asarray(x, np.complex128) + np.asarray(v, np.float64) @ b.T
    y = (x_new @ (q["C_re"] + 1j * q["C_im"]).T).real + q["D"] * np.asarray(v, np.float64)
    return x_new, y


def per_step8(params, x):
    """The per-step outputs of the model (pool 'none'), in float64, from model8's pieces."""
    u = np.asarray(x, np.float64) @ params["encoder"]["W"] + params["encoder"]["b"]
    for p in params["blocks"]:
        u = block8(p, u)
    return u @ params["decoder"]["W"] + params["decoder"]["b"]


def online8(params, state, cfg, memory, chunk):
    """8.9 in float64 with no library call: the memory is each block's LRU state (advanced by
    step8), the running sum of the per-step outputs and the count of steps."""
    states, total, count = memory if memory is not None else (None, 0.0, 0)
    u = np.asarray(chunk, np.float64) @ params["encoder"]["W"] + params["encoder"]["b"]
    if states is None:
        states = [np.zeros(u.shape[:-2] + p["layer"]["nu_log"].shape, np.complex128)
                  for p in params["blocks"]]
    new_states = []
    for p, x in zip(params["blocks"], states):
        v = ln8(u, p["norm"]["scale"], p["norm"]["bias"])
        ys = []
        for k in range(v.shape[-2]):
            x, y = step8(p["layer"], x, v[..., k, :])
            ys.append(y)
        y = np.asarray(jax.nn.gelu(jnp.asarray(np.stack(ys, -2), jnp.float32)), np.float64)
        u = u + glu8(y, p["glu"]["W"], p["glu"]["b"])
        new_states.append(x)
    out = u @ params["decoder"]["W"] + params["decoder"]["b"]
    total = total + out.sum(-2)
    count = count + u.shape[-2]
    return (new_states, total, count), total / count


CH8 = {"8.1": ln8, "8.2": glu8, "8.3": block8, "8.4": model8, "8.5": mask8, "8.8": step8,
       "8.9": online8}


@pytest.mark.slow
@pytest.mark.parametrize("ex", sorted(CH8))
def test_reference_passes_chapter_8(ex):
    res = lc.result_of(ex, CH8[ex])
    assert res.passed, res.message
    assert lc.get(ex).stronger_hint, f"exercise {ex} has no stronger hint"


def test_chapter_8_checker_transcription_is_the_library_model():
    """The float64 transcription behind the hints (np_model without a mistake) and this file's
    reference both compute lrnn.model.apply on the parameters of lrnn.model.init."""
    from lrnn import model
    from lrnn.course.check import ch08
    cfg = model.ModelConfig(layer="lru", d_input=2, d_output=3, depth=2, d_model=6, d_state=4,
                            pool="last", scan_method="sequential")
    params, state = model.init(jax.random.PRNGKey(5), cfg)
    params = jax.tree_util.tree_map(np.asarray, params)
    x = np.random.default_rng(1).standard_normal((2, 9, 2)).astype(np.float32)
    want = np.asarray(model.apply(params, state, x, cfg)[0])
    assert np.allclose(ch08.np_model(params, x, "last"), want, rtol=1e-5, atol=1e-6)
    assert np.allclose(model8(params, x, "last"), want, rtol=1e-5, atol=1e-6)
    assert not np.allclose(ch08.np_model(params, x, "last", "post_norm"), want, atol=1e-2)


def test_hints_chapter_8():
    def over_time(u, s, b):
        u = np.asarray(u, np.float64)
        return (u - u.mean(-2, keepdims=True)) / np.sqrt(u.var(-2, keepdims=True) + 1e-5) * s + b
    assert "over time (axis −2)" in _hint("8.1", over_time)
    assert "biased variance" in _hint("8.1", lambda u, s, b: (u - u.mean(-1, keepdims=True))
                                      / np.sqrt(u.var(-1, keepdims=True, ddof=1) + 1e-5) * s + b)
    assert "halves are swapped" in _hint("8.2", lambda y, W, b: glu8(
        y, np.roll(W, W.shape[1] // 2, 1), np.roll(b, b.shape[0] // 2)))

    def post_norm(p, u):
        v = lru8(p["layer"], np.asarray(u, np.float64))
        y = np.asarray(jax.nn.gelu(jnp.asarray(v, jnp.float32)), np.float64)
        n = p["norm"]
        return ln8(u + glu8(y, p["glu"]["W"], p["glu"]["b"]), n["scale"], n["bias"])
    assert "post-norm" in _hint("8.3", post_norm)

    def exact_gelu(p, u):
        v = ln8(u, p["norm"]["scale"], p["norm"]["bias"])
        y = np.asarray(jax.nn.gelu(jnp.asarray(lru8(p["layer"], v)), approximate=False))
        return u + glu8(y, p["glu"]["W"], p["glu"]["b"])
    assert "tanh approximation" in _hint("8.3", exact_gelu)
    assert "skip connection is missing" in _hint("8.3", lambda p, u: block8(p, u) - u)
    assert "wrong pooling" in _hint("8.4", lambda params, x, pool: model8(
        params, x, "last" if pool == "mean" else "mean"))

    def with_c(params):
        m = mask8(params)
        for b in m["blocks"]:
            b["layer"]["C_re"] = b["layer"]["C_im"] = True
        return m
    assert "read-out" in _hint("8.5", with_c)
    assert "only the LRU layer" in _hint("8.5", lambda params: jax.tree_util.tree_map(
        lambda _: True, params))



@pytest.mark.slow
def test_chapter_8_loop_reference_is_the_library_training():
    """8.6's reference (the library's optimiser, model and loss, step by step) logs the losses
    that lrnn.training.train logs, on the task's batches from lrnn.model.init's parameters; and
    the mistakes its hints name change them by far more than the check's tolerance."""
    from lrnn import model
    from lrnn.course.check import ch08
    from lrnn.training import train
    cfg = train.TrainConfig(task="adding", seq_len=7, depth=2, d_model=4, d_state=3,
                            batch_size=3, lr=5e-3, lr_factor=0.5, weight_decay=0.2,
                            warmup_frac=0.25, steps=8, eval_every=1, n_test=4, seed=3)
    with precision.exact_matmuls():
        want = np.asarray(train.train(cfg, progress=False)["history"]["train_loss"])
        task = train.load_task(cfg)
        params, _ = model.init(jax.random.PRNGKey(cfg.seed), train.model_config(cfg, task))
        xs, ys = (np.stack(part) for part in zip(*[task.train_batch(s, cfg.batch_size, cfg.seed)
                                                   for s in range(cfg.steps)]))
        opt = {"lr": cfg.lr, "lr_factor": cfg.lr_factor, "weight_decay": cfg.weight_decay,
               "warmup_frac": cfg.warmup_frac}
        _, got = ch08.reference_training(params, xs, ys, "mean", opt)
        assert np.allclose(got, want, rtol=1e-5, atol=0), np.max(np.abs(got - want) / want)
        for variant, _ in ch08._LOOP_HINTS:
            _, wrong = ch08.reference_training(params, xs, ys, "mean", opt, variant)
            assert np.max(np.abs(wrong - want) / want) > 10 * ch08.RTOL, variant


@pytest.mark.slow
def test_hints_chapter_8_loop():
    from lrnn.course.check import ch08
    for variant, words in [("decay_everywhere", "recurrent parameters got weight decay"),
                           ("after_update", "before the update")]:
        assert words in _hint("8.6", lambda params, xs, ys, pool, opt, v=variant:
                              ch08.reference_training(params, xs, ys, pool, opt, v))

@pytest.mark.slow
def test_hints_chapter_8_online():

    def read_old_state(q, x, v):
        x_new, _ = step8(q, x, v)
        return x_new, (np.asarray(x) @ (q["C_re"] + 1j * q["C_im"]).T).real + q["D"] * v
    assert "reads the new state" in _hint("8.8", read_old_state)
    assert "γ normalisation" in _hint("8.8", lambda q, x, v: step8(
        {**q, "gamma_log": np.zeros_like(q["gamma_log"])}, x, v))

    def from_zero(params, state, cfg, memory, chunk):
        memory, mean = online8(params, state, cfg, None if memory is None else
                               (None,) + tuple(memory[1:]), chunk)
        return memory, mean
    assert "zero state" in _hint("8.9", from_zero)

    def hoard(params, state, cfg, memory, chunk):
        seen = [np.asarray(chunk)] if memory is None else memory + [np.asarray(chunk)]
        return seen, per_step8(params, np.concatenate(seen, -2)).mean(-2)
    assert "memory grows" in _hint("8.9", hoard)



# Predictions (kind="value"): each checker's value against a computation that does not use its
# formula, in float64 NumPy.

def _first_step_below(a, level):
    x, t = 1.0, 0
    while abs(x) >= level:
        x, t = a * x, t + 1
    return t


def _ring_share_remembering(r_min, r_max, steps, n=2_000_001):
    r = np.linspace(r_min, r_max, n)                 # the ring's area density is ∝ r
    weight = r / np.trapezoid(r, r)
    return np.trapezoid(weight * (-1 / np.log(np.maximum(r, 1e-300)) > steps), r)


def _first_backwards(gamma, theta):
    x = np.array([1.0, 0.0])
    rot = np.array([[np.cos(theta), -np.sin(theta)], [np.sin(theta), np.cos(theta)]])
    for t in range(1, 1000):
        x = gamma * rot @ x
        if x[0] < 0:
            return t


def _drift_by_series(rho, gamma, theta, terms=400):
    lam = gamma * np.exp(1j * theta)
    j = np.arange(terms)
    powers = lam ** j
    corr = rho ** np.abs(j[:, None] - j[None, :])
    return float(np.real((1 - gamma ** 2) * powers @ corr @ np.conj(powers)))


def _fixed_directions(n, m, seed=0):
    rng = np.random.default_rng(seed)
    W = np.eye(n)
    for _ in range(m):
        u = rng.standard_normal(n)
        W = W @ (np.eye(n) - 2 * np.outer(u, u) / (u @ u))
    return int(np.sum(np.abs(np.linalg.eigvals(W) - 1) < 1e-8))


def _all_three_by_luck():
    import itertools
    ranks = list(itertools.permutations(range(6)))
    return sum(max(p[:3]) < min(p[3:]) for p in ranks) / len(ranks)


def _carry_bytes(depth, d_state, d_model, batch):
    from lrnn import model
    cfg = model.ModelConfig(layer="lru", d_input=1, depth=depth, d_model=d_model,
                            d_state=d_state, pool="last")
    params, _ = model.init(jax.random.PRNGKey(0), cfg)
    carry = model.init_carry(params, cfg, (batch,))
    return sum(leaf.nbytes for leaf in jax.tree_util.tree_leaves(carry))


PREDICTIONS = {
    "1.7": lambda: _first_step_below(0.95, 0.01),
    "2.8": lambda: _ring_share_remembering(0.5, 0.999, 100),
    "3.6": lambda: _first_backwards(0.95, 0.3),
    "4.6": lambda: _drift_by_series(0.8, 0.9, np.pi / 2, terms=3),
    "5.6": lambda: _fixed_directions(8, 3),
    "6.6": lambda: 2.94e12 * 0.53e-6 / (4 * 256 * 16),
    "7.6": _all_three_by_luck,
    "8.10": lambda: _carry_bytes(4, 128, 256, 16),
}


@pytest.mark.parametrize("ex", sorted(PREDICTIONS))
def test_prediction_checkers_accept_the_value_computed_another_way(ex):
    value = PREDICTIONS[ex]()
    assert lc.get(ex).kind == "value"
    assert lc.result_of(ex, value).passed, (value, lc.result_of(ex, value).message)
    assert lc.result_of(ex, ...).status == "not implemented"
    # A miss does not print the run's value: two misses say the same but for the number given.
    misses = [value * 3 + 1, value * 5 + 2]
    said = [lc.result_of(ex, m) for m in misses]
    assert [r.status for r in said] == ["fail", "fail"]
    assert said[0].message.replace(f"{misses[0]:g}", "N") == \
        said[1].message.replace(f"{misses[1]:g}", "N")


def test_prediction_answers_are_one_number():
    for bad, says in [("90", "expected one number"), ([90, 91], "expected one number"),
                      (None, "expected a number"), (True, "expected a number"),
                      (float("nan"), "finite"), (90 + 1j, "complex")]:
        assert says in lc.result_of("1.7", bad).message, bad
    assert lc.result_of("1.7", np.int64(90)).passed and lc.result_of("1.7", np.array(90.0)).passed


def test_prediction_hints_name_the_mistake():
    assert "one later" in lc.result_of("1.7", 89).message
    assert "|λ|², not |λ|" in lc.result_of("2.8", (0.999 - np.exp(-0.01)) / 0.499).message
    assert "does not rotate" in lc.result_of("4.6", _drift_by_series(0.8, 0.9, 0.0, terms=3)).message
    assert "stationary drift factor" in lc.result_of("4.6", 0.3172).message
    assert "one reflection" in lc.result_of("5.6", 7).message
    assert "not independent" in lc.result_of("7.6", 0.5 ** 9).message
    assert "8 bytes" in lc.result_of("8.10", 32768).message
