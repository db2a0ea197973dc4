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


def states_ref(params, u):
    return lrnn.layers.lru.hidden_states(params, u)


def apply_ref(params, u):
    return lrnn.layers.lru.apply(params, u)


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


REFERENCES = {"1.1": lrnn.scan.binary_operator, "1.2": scan_ref, "1.3": chunked_ref,
              "1.4": stack_ref, "1.5": radius_ref, "2.1": ring_ref, "2.2": cdf_ref,
              "2.3": states_ref, "2.4": apply_ref, "2.5": gamma_ref,
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
    msg = message("2.3", lambda p, u: np.conj(states_ref(p, u)))
    assert "conjugate" in msg


def test_missing_gamma_hint():
    def no_gamma(p, u):
        return states_ref(dict(p, gamma_log=np.zeros_like(p["gamma_log"])), u)
    assert "γ normalisation is missing" in message("2.3", no_gamma)


def test_real_instead_of_complex():
    msg = message("2.3", lambda p, u: np.asarray(states_ref(p, u)).real)
    assert "complex" in msg


def test_missing_skip_connection_hint():
    assert "D ⊙ u_k" in message("2.4", lambda p, u: apply_ref(p, u) - p["D"] * u)


def test_constant_factor_hint():
    msg = message("2.5", lambda nl, T: 2 * gamma_ref(nl, T))
    assert "log γ²" in msg


def test_generic_constant_factor_hint():
    msg = message("1.2", lambda a, b: 3 * np.asarray(scan_ref(a, b)))
    assert "times a constant ≈ 3" in msg


def test_sign_hint():
    assert "wrong sign" in message("1.2", lambda a, b: -np.asarray(scan_ref(a, b)))


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
    check("1.1", lambda l, r: (r[0] * l[0], r[0] * l[1] + r[1]))     # the right answer
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
