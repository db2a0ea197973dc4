"""Bad inputs to the orthogonal maps: checked in the dtype that will compute them
(float32 underflow and overflow of ‖u‖², inf, NaN), and complex, boolean or text inputs are a
ValueError naming the argument instead of an error from inside JAX or a matrix outside O(n)."""
import jax.numpy as jnp
import numpy as np
import pytest

from lrnn import orthogonal as orth


@pytest.mark.parametrize("u, match", [
    (np.full(3, 1e-30), "`u`.*squared norm is a positive float32"),
    (np.full(3, 1e30), "`u`.*squared norm is finite in float32"),
    (np.array([1.0, np.inf, 0.0]), "`u`.*finite"),
    (np.array([1.0, np.nan, 0.0]), "`u`.*finite"),
    (np.zeros(3), "`u`.*nonzero"),
    (np.array([[1.0, 0.0], [0.0, 0.0]]), "`u`.*nonzero"),
    (np.array([1 + 1j, 0]), "`u`.*not complex"),
    (np.array(["a", "b"]), "`u`.*real numeric"),
    (np.array([True, False]), "`u`.*real numeric"),
])
def test_householder_checks_in_the_computing_dtype(u, match):
    with pytest.raises(ValueError, match=match):
        orth.householder(u)


def test_small_but_representable_vectors_still_reflect():
    H = np.asarray(orth.householder(np.array([1e-15, 2e-15, 0.0])))
    np.testing.assert_allclose(H @ H.T, np.eye(3), atol=1e-6)
    assert np.all(np.isfinite(H))


@pytest.mark.parametrize("U, match", [
    (np.full((3, 2), 1e-30), "`U`.*positive float32"),
    (np.array([[1.0, 0], [np.inf, 1.0], [0, 1.0]]), "`U`.*finite"),
    (np.ones((3, 2)) * 1j, "`U`.*not complex"),
])
def test_reflection_matrices_check_their_vectors(U, match):
    with pytest.raises(ValueError, match=match):
        orth.householder_product(U)
    with pytest.raises(ValueError, match=match):
        orth.wy_transform(U, np.ones(3))


@pytest.mark.parametrize("M, match", [
    (np.eye(3) * 1j, "`M`.*not complex"), (np.array([["a"]]), "`M`.*real numeric"),
    (np.full((2, 2), np.inf), "`M`.*finite"), (np.ones(3), "`M`.*square"),
])
def test_skew_expm_refuses_what_gives_no_rotation(M, match):
    with pytest.raises(ValueError, match=match):
        orth.skew_expm(M)


@pytest.mark.parametrize("call, match", [
    (lambda: orth.rotate_pairs(np.ones(4) * 1j, np.ones(2)), "`x`.*not complex"),
    (lambda: orth.rotate_pairs(np.ones(4), np.array(["a", "b"])), "`theta`.*real numeric"),
    (lambda: orth.block_rotation(np.ones(2) + 1j), "`theta`.*not complex"),
    (lambda: orth.wy_transform(np.tril(np.ones((3, 2))), np.ones(3) * 1j), "`h`.*not complex"),
    (lambda: orth.householder_qr(np.eye(2) * 1j), "`A`.*not complex"),
    (lambda: orth.householder_product(np.tril(np.ones((2, 2))), "1"), "`u1_sign`"),
])
def test_the_other_maps_name_their_argument(call, match):
    with pytest.raises(ValueError, match=match):
        call()


def test_integer_inputs_are_still_taken_as_floats():
    np.testing.assert_allclose(orth.householder(np.array([1, 2, 0])),
                               orth.householder(np.array([1.0, 2.0, 0.0])))
    R = orth.skew_expm(np.array([[0, 1], [0, 0]]))
    np.testing.assert_allclose(np.asarray(R) @ np.asarray(R).T, np.eye(2), atol=1e-6)
    assert jnp.issubdtype(R.dtype, jnp.floating)
