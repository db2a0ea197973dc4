"""The self-check framework (lrnn.course.check): messages, hints, robustness, grading mode."""
import numpy as np
import pytest

import lrnn
from lrnn.course import check as chk
from lrnn.course.check import check, result_of


@pytest.fixture(autouse=True)
def not_grading(monkeypatch):
    monkeypatch.delenv(chk.GRADING_ENV, raising=False)


# --------------------------------------------------------------------------------------
# Reference answers for chapters 1-2 pass their checks
# --------------------------------------------------------------------------------------

def scan_ref(a, b):
    return lrnn.linear_scan(a, b, method="sequential")


def chunked_ref(a, b, T):
    return lrnn.linear_scan(a, b, method="sequential")


def stack_ref(K1, D1, K2, D2):
    """The stacked layer by brute force: its response to an impulse in each input channel."""
    L, H = K1.shape[:2]
    K = np.zeros((L, H, H))
    for c in range(H):
        u = np.zeros((L, H))
        u[0, c] = 1.0
        K[:, :, c] = layer(K2, D2, layer(K1, D1, u))
    D = np.diagonal(K[0]).copy()
    K[0] -= np.diag(D)
    return K, D


def layer(K, D, u):
    return np.stack([sum(K[j] @ u[t - j] for j in range(t + 1)) for t in range(len(u))]) + D * u


def radius_ref(A):
    return np.max(np.abs(np.linalg.eigvals(A)))


def ring_ref(u1, u2, r_min, r_max, max_phase, T):
    """Lemma 3.2 draws μ = λ^T = e^(−Tν + iTθ); the slowest T-th root divides ν and θ by T."""
    nu_log, theta_log = lrnn.layers.lru.ring_from_uniforms(u1, u2, r_min=r_min, r_max=r_max,
                                                           max_phase=max_phase)
    return (np.asarray(nu_log, np.float64) - np.log(T),
            np.asarray(theta_log, np.float64) - np.log(T))


def cdf_ref(t, r_min, r_max):
    """P(−1/ln|λ| <= t): the ring's area inside the radius e^(−1/t), over the ring's area."""
    radius = np.clip(np.exp(-1 / np.asarray(t, np.float64)), r_min, r_max)
    return (radius - r_min) * (radius + r_min) / ((r_max - r_min) * (r_max + r_min))


def operator_ref(left, right):
    """Two affine steps in a row, by NumPy's matmul on column vectors (or element-wise)."""
    (a_l, b_l), (a_r, b_r) = left, right
    if np.ndim(a_l) == np.ndim(b_l):
        return a_r * a_l, a_r * b_l + b_r
    return np.matmul(a_r, a_l), np.matmul(a_r, np.expand_dims(b_l, -1))[..., 0] + b_r


def states_ref(params, u, x_init):
    """The library's scan of Λ and diag(γ) B u_k, started from its ``initial`` state."""
    b = np.asarray(u) @ np.asarray(lrnn.layers.lru.normalized_B(params)).T
    return lrnn.linear_scan(lrnn.layers.lru.eigenvalues(params), b, initial=x_init)


def kernel_ref(params, L):
    """The bidirectional layer's outputs (lrnn.layers.lru.apply) after a unit impulse in the
    middle of 2L − 1 steps, one input channel at a time: the output at step L − 1 + j is lag j."""
    H = params["D"].shape[0]
    u = np.zeros((H, 2 * L - 1, H), np.float32)
    u[:, L - 1, :] = np.eye(H)
    return np.transpose(np.asarray(lrnn.layers.lru.apply(params, u)), (1, 2, 0))


def gamma_ref(nu_log, T):
    """γ = 1/√(mean over k < T of E|x_k|²), E|x_k|² = E|x_{k−1}|² |λ|² + 1 step by step."""
    s = np.exp(-2 * np.exp(np.asarray(nu_log, np.float64)))
    variance, total = np.zeros_like(s), np.zeros_like(s)
    for _ in range(T):
        variance = s * variance + 1
        total = total + variance
    return -0.5 * np.log(total / T)


def blowup_radial_ref(r_min, r_max):
    """The mean of 1/(1 − r²) over r uniform on [r_min, r_max], by Gauss–Legendre quadrature."""
    if r_min == r_max:
        return 1 / (1 - r_max ** 2)
    x, w = np.polynomial.legendre.leggauss(400)
    r = r_min + (r_max - r_min) * (x + 1) / 2
    return float(np.sum(w / (1 - r ** 2)) / 2)


REFERENCES = {"1.1": operator_ref, "1.2": scan_ref, "1.3": chunked_ref,
              "1.4": stack_ref, "1.5": radius_ref, "2.1": ring_ref, "2.2": cdf_ref,
              "2.3": states_ref, "2.4": kernel_ref, "2.5": gamma_ref,
              "2.6": blowup_radial_ref}


@pytest.mark.slow
@pytest.mark.parametrize("ex_id", sorted(REFERENCES))
def test_reference_answers_pass(ex_id, capsys):
    assert check(ex_id, REFERENCES[ex_id]) is True
    out = capsys.readouterr().out
    assert out.startswith(f"✓ Exercise {ex_id} (")


def test_registry_metadata():
    exs = chk.exercises()
    for ex_id in REFERENCES:
        ex = exs[ex_id]
        assert ex.points > 0 and ex.title and ex.reference
    assert list(exs) == sorted(exs, key=lambda k: tuple(int(p) for p in k.split(".")))


# --------------------------------------------------------------------------------------
# Messages and hints
# --------------------------------------------------------------------------------------

def message(ex_id, fn):
    res = result_of(ex_id, fn)
    assert res.status in ("fail", "error", "not implemented"), res.message
    return res.message


def test_not_implemented_is_reported_not_raised(capsys):
    def stub(a, b):
        raise NotImplementedError("Exercise 1.2: write me")
    assert check("1.2", stub) is False
    out = capsys.readouterr().out
    assert "not implemented yet" in out and out.startswith("… Exercise 1.2")


def test_student_exception_reports_type_and_input():
    def buggy(A):
        return {}["missing"]
    msg = message("1.5", buggy)
    assert "KeyError" in msg and "on the input" in msg and "A = array of shape" in msg


def test_no_exception_escapes_even_for_base_exceptions():
    class Weird(BaseException):
        pass

    def weird(A):
        raise Weird("odd")
    res = result_of("1.5", weird)
    assert res.status == "error" and "Weird" in res.message


def test_solution_source_is_never_shown():
    def wrong(A):
        secret_marker_variable_xyz = np.linalg.norm(A, 2)
        return secret_marker_variable_xyz
    msg = message("1.5", wrong)
    assert "secret_marker" not in msg and "np.linalg" not in msg
    assert "expected:" in msg and "received:" in msg


def test_shape_hint_transposed():
    def transposed(a, b):
        return np.swapaxes(scan_ref(a, b), -1, -2)
    msg = message("1.2", transposed)
    assert "has shape" in msg and "hint:" in msg


def test_none_returned():
    msg = message("1.5", lambda A: None)
    assert "forget `return`" in msg


def test_operator_order_hint():
    msg = message("1.1", lambda l, r: (l[0] * r[0], l[0] * r[1] + l[1]))
    assert "you applied `right` first" in msg


def test_not_a_pair():
    msg = message("1.1", lambda l, r: l[0] * r[0])
    assert "must be a pair" in msg


def test_off_by_one_time_step_hint():
    def shifted(a, b):
        x = np.asarray(scan_ref(a, b))
        return np.concatenate([np.zeros_like(x[..., :1, :]), x[..., :-1, :]], axis=-2)
    assert "off by one time step" in message("1.2", shifted)


def test_reversed_time_hint():
    def backwards(a, b):
        return lrnn.linear_scan(a, b, reverse=True, method="sequential")
    assert "you scan from the end" in message("1.2", backwards)


def test_stacked_layer_hints():
    def wrong(**how):
        def stack(K1, D1, K2, D2):
            K = np.zeros_like(K1)
            for k in range(len(K1)):
                for i in range(k + 1):
                    K[k] += K1[k - i] @ K2[i] if how.get("swap") else K2[i] @ K1[k - i]
            if not how.get("no_cross"):
                K += K2 * D1 + D2[:, None] * K1
            return K, (D1 + D2 if how.get("add_skips") else D1 * D2)
        return stack
    assert "wrong order" in message("1.4", wrong(swap=True))
    assert "mix a kernel with a skip" in message("1.4", wrong(no_cross=True))
    assert "they multiply" in message("1.4", wrong(add_skips=True))
    assert "not by addition" in message("1.4", lambda K1, D1, K2, D2: (K1 + K2, D1 * D2))
    assert "must be a pair" in message("1.4", lambda K1, D1, K2, D2: K1)
    assert "has shape" in message("1.4", lambda K1, D1, K2, D2: (K1[0], D1))


def test_operator_norm_hint():
    assert "largest singular value" in message("1.5", lambda A: np.linalg.norm(A, 2))


def test_radius_specification_hints():
    """Gelfand's formula at a fixed k: too small a k misses 1e-4, too large a k underflows."""
    def at_power(k):
        return lambda A: float(np.linalg.norm(np.linalg.matrix_power(np.asarray(A, float), k))
                               ** (1 / k))
    assert "Your k is too small" in message("1.5", at_power(60))
    assert "underflow" in message("1.5", at_power(2 ** 12))


def test_conjugate_hint():
    msg = message("2.3", lambda p, u, x: np.conj(states_ref(p, u, x)))
    assert "conjugate" in msg


def test_missing_gamma_hint():
    def no_gamma(p, u, x):
        return states_ref(dict(p, gamma_log=np.zeros_like(p["gamma_log"])), u, x)
    assert "γ normalisation is missing" in message("2.3", no_gamma)


def test_real_instead_of_complex():
    msg = message("2.3", lambda p, u, x: np.asarray(states_ref(p, u, x)).real)
    assert "complex" in msg


def test_missing_skip_connection_hint():
    def no_skip(p, L):
        K = np.array(kernel_ref(p, L))
        K[L - 1] -= np.diag(p["D"])
        return K
    assert "D ⊙ u_k" in message("2.4", no_skip)


def test_constant_factor_hint():
    msg = message("2.5", lambda nl, T: 2 * gamma_ref(nl, T))
    assert "log γ²" in msg


def test_generic_constant_factor_hint():
    msg = message("1.2", lambda a, b: 3 * np.asarray(scan_ref(a, b)))
    assert "times a constant ≈ 3" in msg


def test_sign_hint():
    assert "wrong sign" in message("1.2", lambda a, b: -np.asarray(scan_ref(a, b)))


def test_capstone_hints_name_the_symptom():
    """Chapter 8: a post-norm model (8.4), a mask that exempts h0 (8.5), a jump that counts the
    held input once too often or forgets the start (8.8) and a carry counted as complex (8.10)
    fail with what their output shows; 8.4's message does not name the fix."""
    import jax
    from lrnn.course.check import ch08
    msg = message("8.4", lambda params, x, pool: ch08.np_model(params, x, pool, "post_norm"))
    assert "renormalised stream" in msg and "pre-norm" not in msg and "must be" not in msg

    def h0_exempt(params):
        keep = {"nu_log", "theta_log", "gamma_log", "B_re", "B_im", "M", "theta", "B", "U",
                "u1", "V", "h0"}
        mask = jax.tree_util.tree_map(lambda _: False, params)
        for block in mask["blocks"]:
            block["layer"] = {k: k in keep for k in block["layer"]}
        return mask
    assert "learned initial state h0" in message("8.5", h0_exempt)

    def jump(q, x, v, k, terms=None, start=True):
        lam = np.exp(-np.exp(np.float64(q["nu_log"])) + 1j * np.exp(np.float64(q["theta_log"])))
        c = np.exp(np.float64(q["gamma_log"])) * (v @ (q["B_re"] + 1j * q["B_im"]).T)
        x_k = lam ** k * x * start + c * (1 - lam ** (terms or k)) / (1 - lam)
        return x_k, (x_k @ (q["C_re"] + 1j * q["C_im"]).T).real + q["D"] * v
    assert "k + 1 steps of v" in message("8.8", lambda q, x, v, k: jump(q, x, v, k, k + 1))
    assert "does not change with the state x" in message(
        "8.8", lambda q, x, v, k: jump(q, x, v, k, start=False))


def test_a_loop_over_a_billion_steps_is_stopped_with_a_hint(monkeypatch):
    """8.8 with a loop that steps k times: right for the small k, and at k = 10^9 the check
    stops it and says why, where the cell would otherwise never end."""
    import threading
    from lrnn.course.check import ch08
    assert threading.current_thread() is threading.main_thread()    # where the alarm can ring
    monkeypatch.setattr(ch08, "HOLD_SECONDS", 1.0)

    def loop(q, x, v, k):
        lam = np.exp(-np.exp(np.float64(q["nu_log"])) + 1j * np.exp(np.float64(q["theta_log"])))
        c = np.exp(np.float64(q["gamma_log"])) * (v @ (q["B_re"] + 1j * q["B_im"]).T)
        for _ in range(k):
            x = lam * x + c
        return x, (x @ (q["C_re"] + 1j * q["C_im"]).T).real + q["D"] * v
    msg = message("8.8", loop)
    assert "did not come back within 1 s" in msg and "closed form" in msg, msg
    assert "1,000,000,000" in msg


def test_call_within_stops_python_code_and_restores_the_alarm():
    import signal
    import threading
    import time
    from lrnn.course.check import CheckFailure, StudentError, call_within

    def spin(seconds):
        end = time.monotonic() + seconds
        while time.monotonic() < end:
            pass
        return "done"
    before = signal.getsignal(signal.SIGALRM)
    start = time.monotonic()
    with pytest.raises(CheckFailure, match="the spin did not come back within 0.2 s"):
        call_within(0.2, spin, {"seconds": 60}, what="the spin", hint="h")
    assert time.monotonic() - start < 5
    assert signal.getsignal(signal.SIGALRM) is before and signal.getitimer(signal.ITIMER_REAL)[0] == 0
    assert call_within(5, spin, {"seconds": 0.01}, what="the spin", hint="h") == "done"
    with pytest.raises(StudentError, match="ZeroDivisionError"):
        call_within(5, lambda a: 1 / a, {"a": 0}, what="w", hint="h")
    out = []                                   # no alarm off the main thread: a plain call
    worker = threading.Thread(target=lambda: out.append(
        call_within(0.01, spin, {"seconds": 0.1}, what="w", hint="h")))
    worker.start()
    worker.join()
    assert out == ["done"]


def _np_chunk8(params, states, chunk):
    """The model's per-step outputs on one chunk (pool 'none'), float64, from the LRU states
    the previous chunk left; returns (the new states, the outputs)."""
    from lrnn.course.check import ch08
    u = np.asarray(chunk, np.float64) @ params["encoder"]["W"] + params["encoder"]["b"]
    new = []
    for p, x in zip(params["blocks"], states):
        q = p["layer"]
        lam = np.exp(-np.exp(np.float64(q["nu_log"])) + 1j * np.exp(np.float64(q["theta_log"])))
        b = (q["B_re"] + 1j * q["B_im"]) * np.exp(np.float64(q["gamma_log"]))[:, None]
        v = ch08.np_layer_norm(u, p["norm"]["scale"], p["norm"]["bias"])
        ys = []
        for k in range(v.shape[-2]):
            x = lam * x + v[..., k, :] @ b.T
            ys.append((x @ (q["C_re"] + 1j * q["C_im"]).T).real + q["D"] * v[..., k, :])
        u = u + ch08.np_glu(ch08.gelu_tanh(np.stack(ys, -2)), p["glu"]["W"], p["glu"]["b"])
        new.append(x)
    return new, u @ params["decoder"]["W"] + params["decoder"]["b"]


def test_capstone_padding_and_forgetting_hints_name_the_symptom():
    """Chapter 8: a model that pools over the padding, or divides the real steps' sum by L
    (8.4), and a weighted mean divided by the number of steps (8.9) fail with what their output
    shows; neither 8.4 message gives the fix."""
    from lrnn.course.check import ch08

    def pooled(params, x, pool, lengths, divide_by_L):
        u = ch08.np_stream(params, x)
        steps = u.shape[-2]
        n = np.full(u.shape[:-2], steps) if lengths is None else np.asarray(lengths)
        if pool == "last":
            z = np.take_along_axis(u, (n - 1)[..., None, None], axis=-2)[..., 0, :]
        else:
            real = (np.arange(steps) < n[..., None])[..., None]
            z = (u * real).sum(-2) / (steps if divide_by_L else n[..., None])
        return z @ params["decoder"]["W"] + params["decoder"]["b"]
    msg = message("8.4", lambda params, x, pool, lengths=None: ch08.np_model(params, x, pool))
    assert "counts the padding steps" in msg and "mask" not in msg
    msg = message("8.4", lambda params, x, pool, lengths=None: pooled(params, x, pool, lengths,
                                                                      True))
    assert "divides by L" in msg and "mask" not in msg

    def by_count(params, state, cfg, w, memory, chunk):
        if memory is None:
            memory = ([np.zeros((len(chunk), np.size(p["layer"]["nu_log"])), complex)
                       for p in params["blocks"]], 0.0, 0)
        states, total, count = memory
        states, out = _np_chunk8(params, states, chunk)
        n = out.shape[-2]
        total = w ** n * total + np.einsum("j,bjd->bd", w ** np.arange(n - 1, -1, -1.0), out)
        return (states, total, count + n), total / (count + n)
    assert "do not add up to 1" in message("8.9", by_count)
    assert "4 bytes each" in message("8.10", 3 * 16 * 96 * 8 * 2)


def test_ring_hints_name_the_symptom():
    """Exercise 2.1 (a ring for the T-step map): each typical mistake fails with the symptom
    it gives Λ^T, also one no hint names (|μ|³ uniform: too many near the outer edge)."""
    def lemma_for_lambda(u1, u2, r_min, r_max, max_phase, T):
        return ring_ref(u1, u2, r_min, r_max, max_phase, 1)
    assert "T times as fast" in message("2.1", lemma_for_lambda)

    def area_on_the_root_ring(u1, u2, r_min, r_max, max_phase, T):
        nu_log, _ = lrnn.layers.lru.ring_from_uniforms(u1, u2, r_min=r_min ** (1 / T),
                                                       r_max=r_max ** (1 / T))
        return nu_log, ring_ref(u1, u2, r_min, r_max, max_phase, T)[1]
    assert "sit near the inner edge" in message("2.1", area_on_the_root_ring)

    def no_half(u1, u2, r_min, r_max, max_phase, T):
        nu = -np.log(u1 * (r_max ** 2 - r_min ** 2) + r_min ** 2) / T
        return np.log(nu), np.log(max_phase * u2 / T)
    assert "squares of the ones the ring asks for" in message("2.1", no_half)

    def fast_phase(u1, u2, r_min, r_max, max_phase, T):
        return ring_ref(u1, u2, r_min, r_max, max_phase, T)[0], np.log(max_phase * u2)
    assert "past max_phase" in message("2.1", fast_phase)

    def cube_uniform(u1, u2, r_min, r_max, max_phase, T):
        mu = (r_min ** 3 + np.asarray(u1, np.float64) * (r_max ** 3 - r_min ** 3)) ** (1 / 3)
        return np.log(-np.log(mu) / T), np.log(max_phase * np.asarray(u2, np.float64) / T)
    assert "near the outer edge of the ring" in message("2.1", cube_uniform)


def test_cdf_linear_hint():
    assert "grows like r²" in message("2.2", lambda t, a, b: np.clip((np.exp(-1 / t) - a) / (b - a),
                                                                     0, 1))


def test_blowup_edge_case_hint():
    def naive(a, b):
        with np.errstate(all="ignore"):
            return (np.arctanh(b) - np.arctanh(a)) / (b - a)
    msg = message("2.6", naive)
    assert "r_min = r_max" in msg and "limit" in msg


def _norms_with_bias(A, B, gamma, alpha, x1, mu, T, cross=True, bias=True):
    """E‖x_t‖² of eq. 4 for inputs of mean μ, with the cross term and ‖Bμ‖² optional."""
    A, B = np.asarray(A, np.float64), np.asarray(B, np.float64)
    m, Bmu = np.asarray(x1, np.float64), B @ np.asarray(mu, np.float64)
    e = [m @ m]
    for _ in range(T - 1):
        extra = (2 * gamma * (A @ m) @ Bmu if cross else 0) + (Bmu @ Bmu if bias else 0)
        e.append(alpha ** 2 * (gamma ** 2 * e[-1] + np.sum(B ** 2) + extra))
        m = alpha * (gamma * A @ m + Bmu)
    return np.array(e)


def test_biased_norm_hints_name_the_missing_term():
    assert result_of("4.2", _norms_with_bias).passed
    theorem_1 = message("4.2", lambda *a: _norms_with_bias(*a, cross=False, bias=False))
    assert "Theorem 1's recursion for zero-mean inputs" in theorem_1
    assert "cross term" in message("4.2", lambda *a: _norms_with_bias(*a, cross=False))
    assert "‖Bμ‖² is missing" in message("4.2", lambda *a: _norms_with_bias(*a, bias=False))


def _backward_loop(params, u, scale_first_state=False, scaled_at=-1, flip=False, shift=0):
    """Exercise 4.4: the backward pass of a bidirectional RotRNN (App. B.2), a loop from t = L
    down to 1 over the library's γA and ξ, with the typical mistakes as options: the scaled
    step, the result left in the order the loop makes it, entry t holding x_(t+shift)."""
    GA = np.asarray(lrnn.layers.rotrnn.transition(params), np.float64)
    xi = np.asarray(lrnn.layers.rotrnn.xi(params), np.float64)
    B, u = np.asarray(params["B"], np.float64), np.asarray(u, np.float64)
    L = u.shape[-2]
    x, out = np.zeros(u.shape[:-2] + B.shape[:2]), []
    for t in reversed(range(L)):
        c = 1 / np.sqrt(np.sum(B ** 2, axis=(1, 2))) if scale_first_state and t == scaled_at % L \
            else xi
        x = np.einsum("hij,...hj->...hi", GA, x) \
            + c[:, None] * np.einsum("hnk,...k->...hn", B, u[..., t, :])
        out.append(x)
    xs = np.stack(out if flip else out[::-1], axis=-3)
    if shift:
        xs = np.concatenate([xs[..., 1:, :, :], np.zeros_like(xs[..., :1, :, :])], axis=-3)
    return xs


def test_backward_rotrnn_hints_name_the_symptom():
    assert result_of("4.4", _backward_loop).passed
    assert "reverse time order" in message("4.4", lambda p, u, **k: _backward_loop(p, u, flip=True,
                                                                               **k))
    assert "x_L is √(1 − γ²) times" in message(
        "4.4", lambda p, u, **k: _backward_loop(p, u, scaled_at=0, **k))
    assert "these are the forward states" in message(
        "4.4", lambda p, u, scale_first_state=False: lrnn.layers.rotrnn.hidden_states(
            p, u, scale_first_state=scale_first_state))
    assert "off by one step" in message("4.4", lambda p, u, **k: _backward_loop(p, u, shift=1,
                                                                                **k))


def test_fused_rotgru_reset_after_the_product_shows_its_symptom():
    """Exercise 3.4: a fused step that gates (and turns) the candidate's product R_h h_{t−1}
    instead of h_{t−1} passes the shut update and reset gates, not the reset shut on one pair."""
    import jax
    import jax.numpy as jnp
    from lrnn.orthogonal import rotate_pairs

    def reset_after(params, h, x_t):
        R = params["recurrent_kernel"]
        n = R.shape[0]
        a, b = x_t @ params["kernel"] + params["bias"], h @ R
        z = jax.nn.sigmoid(a[..., :n] + b[..., :n])
        s = jax.nn.sigmoid(a[..., n:2 * n] + b[..., n:2 * n]) * b[..., 2 * n:3 * n]
        if R.shape[1] > 3 * n:
            s = rotate_pairs(s, 2 * jnp.pi * jax.nn.sigmoid(a[..., 3 * n:] + b[..., 3 * n:]))
        h_new = (1 - z) * h + z * jnp.tanh(a[..., 2 * n:3 * n] + s)
        return h_new, h_new
    assert "first pair of the state only" in message("3.4", reset_after)


def test_rotation_recurrence_with_the_input_after_the_turn_is_named():
    """Exercise 3.2: the recurrence of chapter 3, §3.3 (input added after the turn) with an
    angle per step, and one that turns b_t by θ_{t−1}, each fail with their symptom."""
    import jax.numpy as jnp

    def scan(gamma, theta, b, input_factor):
        lam = jnp.asarray(gamma) * jnp.exp(1j * jnp.asarray(theta))
        x = lrnn.linear_scan(lam, input_factor(lam) * lrnn.scan.pairs_to_complex(jnp.asarray(b)))
        return lrnn.scan.complex_to_pairs(x)
    assert "your input is not rotated" in message(
        "3.2", lambda g, t, b: scan(g, t, b, lambda lam: 1.0))
    assert "rotated by θ_{t−1} instead of θ_t" in message(
        "3.2", lambda g, t, b: scan(g, t, b, lambda lam: jnp.roll(lam, 1, axis=0)))
    assert result_of("3.2", lambda g, t, b: scan(g, t, b, lambda lam: lam)).passed


def test_reflection_with_algorithm_2_sign_is_named():
    """Exercise 5.1: u = x − ‖x‖e₁ with β = +‖x‖ in float32 (Algorithm 2's sign), scaled and
    with x = 0 handled, fails on a nearly parallel x with the symptom named; with β of the
    other sign it passes."""
    import jax.numpy as jnp

    def reflect(sign_of_beta):
        def fn(x):
            big = jnp.max(jnp.abs(x), axis=-1, keepdims=True)
            big = jnp.where(big > 0, big, 1.0)
            y = x / big
            norm = jnp.sqrt(jnp.sum(y * y, axis=-1))
            beta = sign_of_beta(y[..., 0]) * norm
            u = y.at[..., 0].add(-beta)
            u = jnp.where(norm[..., None] > 0, u, jnp.eye(x.shape[-1])[0])
            return u, beta * big[..., 0]
        return fn
    assert result_of("5.1", reflect(lambda x1: jnp.where(x1 < 0, 1.0, -1.0))).passed
    text = message("5.1", reflect(lambda x1: jnp.ones_like(x1)))
    assert "H(u) x is not β e₁" in text and "x nearly parallel to +e₁" in text
    assert "cancellation when x is nearly parallel to e₁" in text

    def house(x):                                 # Golub & Van Loan's house: β = 2/vᵀv
        x = jnp.asarray(x, jnp.float32)
        sigma = jnp.sum(x[..., 1:] ** 2, axis=-1)
        mu = jnp.sqrt(x[..., 0] ** 2 + sigma)
        v1 = jnp.where(x[..., 0] <= 0, x[..., 0] - mu, -sigma / (x[..., 0] + mu))
        v1 = jnp.where(v1 == 0, 1.0, v1)
        v = jnp.concatenate([jnp.ones_like(x[..., :1]), x[..., 1:] / v1[..., None]], axis=-1)
        return v, 2 * v1 ** 2 / (sigma + v1 ** 2)
    text = message("5.1", house)
    assert "|β| is not ‖x‖" in text and "β equals 2/uᵀu" in text


def test_ornn_step_back_in_the_wrong_order_is_named():
    """Exercise 5.4: a step back that applies the reflections in Algorithm 1's order (W, not
    W⁻¹) fails with that symptom; the other order passes."""
    def step_back(order):
        def fn(params, h_t, x_t):
            U, y = np.asarray(params["U"], np.float64), np.asarray(h_t, np.float64)
            v = np.where(y < 0, 10 * y, y) - np.asarray(x_t) @ params["V"].T - params["b"]
            k = U.shape[1] - ("u1" in params)
            for j in order(range(k)):
                v = v - 2 * np.multiply.outer(v @ U[:, j], U[:, j]) / (U[:, j] @ U[:, j])
            if "u1" in params:
                v[..., -1] *= 1.0 if params["u1"] > 0 else -1.0
            return v
        return fn
    assert result_of("5.4", step_back(list)).passed
    assert "it applies W itself" in message("5.4", step_back(reversed))


def test_fill_chunks_hints_name_the_mistake():
    """Exercise 6.6: Little's law alone, the table's U = 16, one program per chunk."""
    assert "count the programs they make" in message("6.6", 16)
    assert "16 rows per lane" in message("6.6", 64)
    assert "32 of its channels" in message("6.6", 132)
    for wrong in (16, 64, 132):               # the hints name the mistake, never a count
        assert "44" not in message("6.6", wrong) and "three" not in message("6.6", wrong)
    assert "hint" not in message("6.6", 45)


def test_backward_scan_with_a_per_step_and_an_initial_state_names_the_mistake():
    """Exercise 6.3: the usual slips in the VJP of x_t = a_t x_(t−1) + b_t from x_init each fail
    with their symptom; the derivation they miss passes."""
    def vjp(next_a=lambda a: a[..., 1:, :], pair=lambda x_init, x: x_init,
            fold=lambda b_bar: b_bar, init=lambda a, b_bar, g: a[..., 0, :] * b_bar[..., 0, :]):
        def fn(a, x_init, x, x_bar):
            a, x_init, x, x_bar = (np.asarray(v, np.complex128) for v in (a, x_init, x, x_bar))
            coef = np.concatenate([next_a(a), np.zeros_like(a[..., :1, :])], axis=-2)
            rows, carry = [], 0
            for t in reversed(range(x.shape[-2])):
                carry = x_bar[..., t, :] + coef[..., t, :] * carry
                rows.insert(0, carry)
            b_bar = np.stack(rows, axis=-2)
            before = np.concatenate([pair(x_init, x)[..., None, :], x[..., :-1, :]], axis=-2)
            return fold(b_bar * before), b_bar, init(a, b_bar, x_bar)
        return fn
    assert result_of("6.3", vjp()).passed
    assert "shifted by one step" in message("6.3", vjp(next_a=lambda a: a[..., :-1, :]))
    assert "no conjugate" in message("6.3", vjp(next_a=lambda a: np.conj(a[..., 1:, :])))
    assert "not x_t" in message("6.3", lambda a, h, x, g: (
        vjp()(a, h, x, g)[1] * np.asarray(x), *vjp()(a, h, x, g)[1:]))
    assert "x_init here, not zero" in message("6.3", vjp(pair=lambda h, x: 0 * h))
    assert "ā is not summed" in message("6.3", vjp(fold=lambda v: v.sum(axis=-2)))
    assert "without a_0" in message("6.3", vjp(init=lambda a, b_bar, g: b_bar[..., 0, :]))
    assert "x̄_init is zero" in message("6.3", vjp(init=lambda a, b_bar, g: 0 * b_bar[..., 0, :]))
    assert "triple" in message("6.3", lambda a, h, x, g: vjp()(a, h, x, g)[:2])
    def moved(item, move):                      # one returned item moved along time
        def fn(a, h, x, g):
            out = list(vjp()(a, h, x, g))
            out[item] = move(out[item])
            return tuple(out)
        return fn
    reversed_b = message("6.3", moved(1, lambda v: v[..., ::-1, :]))
    assert "reverse time order" in reversed_b and "forwards" not in reversed_b
    late_a = message("6.3", moved(0, lambda v: np.concatenate([v[..., :1, :], v[..., :-1, :]],
                                                              axis=-2)))
    assert "one step late" in late_a and "x_init" in late_a and "= 0" not in late_a
    assert "reverse time order" in message("6.3", moved(0, lambda v: v[..., ::-1, :]))
    off = message("6.3", lambda a, h, x, g: (lambda r: (r[0], r[1] + 0.1 * np.asarray(x),
                                                        r[2]))(vjp()(a, h, x, g)))
    assert "b̄ (second item)" in off and "times a constant" not in off


def test_unknown_exercise_and_non_callable(capsys):
    assert check("9.99", print) is False
    assert "unknown exercise" in capsys.readouterr().out
    assert check("1.5", 3.0) is False
    assert "expected a function" in capsys.readouterr().out


def test_checks_are_deterministic():
    wrong = lambda A: np.linalg.norm(A, 2)  # noqa: E731
    assert result_of("1.5", wrong).message == result_of("1.5", wrong).message
    assert result_of("1.5", wrong, seed=0).message == result_of("1.5", wrong).message


def test_grading_mode_raises_on_failure_only(monkeypatch, capsys):
    monkeypatch.setenv(chk.GRADING_ENV, "1")
    assert check("1.5", radius_ref) is True
    with pytest.raises(chk.ExerciseFailed, match="largest singular value"):
        check("1.5", lambda A: np.linalg.norm(A, 2))
    with pytest.raises(chk.ExerciseFailed, match="not implemented"):
        check("1.5", lambda A: (_ for _ in ()).throw(NotImplementedError()))


def test_results_are_recorded():
    run_ok = check("1.5", radius_ref, quiet=True)
    assert run_ok and chk.RESULTS["1.5"].passed


# --------------------------------------------------------------------------------------
# The helpers themselves
# --------------------------------------------------------------------------------------

def test_expect_close_helpers():
    from lrnn.course.check import CheckFailure, alternative, expect_close, when
    e = np.array([1.0 + 1j, 2.0 - 1j])
    expect_close(e + 1e-7, e)
    with pytest.raises(CheckFailure) as info:
        expect_close(np.conj(e), e)
    assert "conjugate" in info.value.hint
    with pytest.raises(CheckFailure) as info:
        expect_close(e[:1], e)
    assert "shape" in info.value.message
    with pytest.raises(CheckFailure) as info:
        expect_close(np.array([np.nan, 1.0]), np.array([1.0, 1.0]))
    assert "NaN" in info.value.hint
    with pytest.raises(CheckFailure) as info:
        expect_close(np.array([5.0, 6.0]), np.array([1.0, 1.0]),
                     hints=[alternative(lambda: np.array([5.0, 6.0]), "my hint"),
                            when(lambda r, x: True, "other")])
    assert info.value.hint == "my hint"
    with pytest.raises(CheckFailure) as info:
        expect_close(np.array([1.0, 2.0, 0.0, 5.0]), np.array([1.0, 2.0, 3.0, 4.0]), time_axis=0)
    assert "time steps 0…1 are right and step 2 is wrong" in info.value.hint


def test_lazy_submodule_access():
    assert lrnn.course.check.check is check


def test_forbid_fails_the_block_in_which_the_reference_ran_and_nothing_after_it():
    """A forbidden function that ran inside the block, however it was reached, fails the
    block when it ends; outside the block the library works as ever."""
    from lrnn.course.check import ForbiddenCall, forbid
    with pytest.raises(ForbiddenCall, match="called lrnn.layers.lru.forward_blowup"):
        with forbid("lrnn.layers.lru.forward_blowup", "lrnn.linear_scan"):
            [lrnn.layers.lru.forward_blowup][0](0.1, 0.2)
    with pytest.raises(ForbiddenCall, match="lrnn.linear_scan"):
        with forbid("lrnn.layers.lru.forward_blowup", "lrnn.linear_scan"):
            lrnn.scan.linear_scan(np.ones(2), np.ones((3, 2)))
    with forbid("lrnn.layers.lru.forward_blowup"):
        np.ones(3).sum()
    assert lrnn.layers.lru.forward_blowup(0.5, 0.5) == pytest.approx(1 / 0.75)


# --------------------------------------------------------------------------------------
# Under the grader (in its own process): quiet, raising, no expected values
# --------------------------------------------------------------------------------------

def test_grading_mode_is_quiet_raises_and_hides_expected_values(capsys):
    from lrnn.course.check import grading_mode, under_autograder
    wrong = lambda A: np.linalg.norm(A, 2)  # noqa: E731
    shown = result_of("1.5", wrong).message
    assert "expected:" in shown
    with grading_mode():
        assert under_autograder()
        with pytest.raises(chk.ExerciseFailed) as info:
            check("1.5", wrong)
        assert check("1.5", radius_ref) is True
    assert capsys.readouterr().out == ""
    text = str(info.value)
    assert "received:" in text and "largest singular value" in text
    assert "expected" not in text
    assert not under_autograder()


def test_largest_intermediate_asks_a_remote_function():
    from lrnn.course.check import largest_intermediate

    class Remote:
        def __call__(self, *a):
            raise AssertionError("never called here")

        def __lrnn_probe__(self, what, *args):
            return (what, len(args))
    assert largest_intermediate(Remote(), 1, 2) == ("largest_intermediate", 2)
    import jax.numpy as jnp
    assert largest_intermediate(lambda x: jnp.outer(x, x), jnp.ones(5)) == 25
    assert largest_intermediate(lambda x: np.asarray(x) + 1, jnp.ones(5)) is None


# --------------------------------------------------------------------------------------
# The stronger hint after a repeated failure
# --------------------------------------------------------------------------------------

@pytest.fixture
def fresh_counts(monkeypatch):
    monkeypatch.setattr(chk._run, "FAILURES", {})


def _wrong_operator(left, right):
    return left[0] * right[0], left[0] * right[1] + left[1]        # right applied first


def test_first_failure_prints_exactly_the_usual_message(capsys, fresh_counts):
    assert check("1.1", _wrong_operator) is False
    assert capsys.readouterr().out == result_of("1.1", _wrong_operator).message + "\n"


def test_second_failure_adds_the_stronger_hint_and_a_pass_resets(capsys, fresh_counts):
    stronger = chk.get("1.1").stronger_hint
    check("1.1", _wrong_operator)
    assert "Still stuck?" not in capsys.readouterr().out
    check("1.1", _wrong_operator)
    second = capsys.readouterr().out
    assert second.startswith(result_of("1.1", _wrong_operator).message)
    assert f"Still stuck? A stronger hint: {stronger}" in second
    check("1.1", operator_ref)                                       # the right answer
    check("1.1", _wrong_operator)
    assert "Still stuck?" not in capsys.readouterr().out.split("✓")[-1]


def test_counts_are_per_exercise(capsys, fresh_counts):
    check("1.1", _wrong_operator)
    check("1.5", lambda A: np.linalg.norm(A, 2))
    out = capsys.readouterr().out
    assert "Still stuck?" not in out
    check("1.5", lambda A: np.linalg.norm(A, 2))
    assert chk.get("1.5").stronger_hint in capsys.readouterr().out


def test_not_implemented_does_not_count(capsys, fresh_counts):
    stub = lambda A: (_ for _ in ()).throw(NotImplementedError())   # noqa: E731
    for _ in range(3):
        check("1.5", stub)
    assert "Still stuck?" not in capsys.readouterr().out


def test_quiet_counts_but_prints_nothing(capsys, fresh_counts):
    check("1.1", _wrong_operator, quiet=True)
    check("1.1", _wrong_operator, quiet=True)
    assert capsys.readouterr().out == ""
    check("1.1", _wrong_operator)
    assert "Still stuck?" in capsys.readouterr().out


def test_the_grader_never_shows_the_stronger_hint(monkeypatch, fresh_counts):
    monkeypatch.setenv(chk.GRADING_ENV, "1")
    for _ in range(2):
        with pytest.raises(chk.ExerciseFailed) as failure:
            check("1.1", _wrong_operator)
        assert "Still stuck?" not in str(failure.value)


def test_every_exercise_has_a_stronger_hint_beyond_its_first_hints():
    exercises = chk.exercises()
    assert len(exercises) >= 31
    for ex_id, ex in exercises.items():
        assert ex.stronger_hint and len(ex.stronger_hint) >= 60, ex_id
        assert ex.stronger_hint not in ex.reference, ex_id
    with pytest.raises(ValueError, match="`stronger_hint`: got ''"):
        chk._core.exercise("99.9", points=1, title="t", reference="eq. 1", stronger_hint="")
