"""Bad input to the scans and to ``python -m lrnn bench``: each is a clear error that
names the argument and the value received, and nothing is run or lost first."""
import json

import jax.numpy as jnp
import numpy as np
import pytest

import lrnn
from lrnn.benchmarks import scan as bench

B = jnp.ones((5, 4))
A = jnp.full((4,), 0.5)


@pytest.mark.parametrize("value", ["no", "yes", 1, 0, None, np.array([True])])
def test_reverse_must_be_a_real_bool(value):
    with pytest.raises(ValueError, match=rf"`reverse`: got {value!r}".replace("[", r"\[")
                       .replace("(", r"\(") if not hasattr(value, "shape")
                       else r"`reverse`: got an array of shape \(1,\)"):
        lrnn.linear_scan(A, B, reverse=value)
    with pytest.raises(ValueError, match=r"`reverse`"):
        lrnn.rotation_scan(jnp.ones(2), jnp.ones(2), B, reverse=value)


def test_numpy_bools_are_accepted_as_bools():
    x = lrnn.linear_scan(A, B, reverse=np.bool_(True))
    np.testing.assert_allclose(x, lrnn.linear_scan(A, B, reverse=True))


@pytest.mark.parametrize("b,shown", [
    (None, "None"),
    ([["a", "b"], ["c", "d"]], r"dtype <U1"),
    ([[1.0, 2.0], [3.0]], "not a rectangular array"),
    (np.ones((3, 4), bool), "dtype bool"),
])
def test_b_must_be_a_rectangular_array_of_numbers(b, shown):
    with pytest.raises(ValueError, match=rf"`b`: got .*{shown}.*") as err:
        lrnn.linear_scan(jnp.ones(2), b)
    assert "numbers" in str(err.value) or "rectangular" in str(err.value)


def test_a_must_be_numbers():
    with pytest.raises(ValueError, match=r"`a`: got None"):
        lrnn.linear_scan(None, B)
    with pytest.raises(ValueError, match=r"`a`: got .*dtype <U"):
        lrnn.linear_scan(["x"] * 4, B)


def test_rotation_scan_rejects_integer_and_complex_b():
    with pytest.raises(ValueError, match=r"`b`: got an array of shape \(5, 4\) and dtype int32, "
                                         r"expected a real floating-point array"):
        lrnn.rotation_scan(jnp.ones(2), jnp.ones(2), np.ones((5, 4), np.int32))
    with pytest.raises(ValueError, match=r"`b`: got .*complex64.*real floating-point"):
        lrnn.rotation_scan(jnp.ones(2), jnp.ones(2), jnp.ones((5, 4), jnp.complex64))
    with pytest.raises(ValueError, match=r"`gamma`: got None"):
        lrnn.rotation_scan(None, jnp.ones(2), B)


def test_method_pallas_refuses_dtypes_it_cannot_run(x64):
    with pytest.raises(ValueError, match=r"`method`: got 'pallas' for float64 inputs"):
        lrnn.linear_scan(jnp.ones(4, jnp.float64), jnp.ones((5, 4), jnp.float64), method="pallas")
    with pytest.raises(ValueError, match=r"`method`: got 'fast'"):
        lrnn.linear_scan(A, B, method="fast")


# ----------------------------------------------------------------------------------------
# The benchmark's command line
# ----------------------------------------------------------------------------------------

@pytest.fixture
def nothing_runs(monkeypatch):
    """Fail the test if a benchmark starts measuring."""
    def forbidden(*args, **kwargs):
        raise AssertionError("the benchmark started before rejecting its arguments")
    monkeypatch.setattr(bench, "copy_bandwidth", forbidden)


def test_unknown_method_names_the_known_ones(nothing_runs):
    with pytest.raises(SystemExit, match=r"--methods: got \['nosuch'\], expected a comma-"
                                         r"separated subset of \['sequential', 'associative'"):
        bench.main(["scan", "--device", "cpu", "--methods", "nosuch"])


@pytest.mark.parametrize("flag,value", [("--repeats", "0"), ("--n", "-4"), ("--batch", "0"),
                                        ("--lengths", "1024,-1"), ("--copy-bytes", "0")])
def test_non_positive_sizes_are_refused(nothing_runs, flag, value):
    shown = value.split(",")[-1]
    with pytest.raises(SystemExit, match=rf"{flag}: got {shown}, expected a positive integer"):
        bench.main(["scan", "--device", "cpu", flag, value])


def test_bad_shapes_are_refused(nothing_runs):
    with pytest.raises(SystemExit, match=r"--shapes: got '8x0x4' in '8x0x4', expected B×L×N"):
        bench.main(["scan", "--device", "cpu", "--shapes", "8x0x4"])
    with pytest.raises(SystemExit, match=r"--shapes: got '8x4'"):
        bench.main(["scan", "--device", "cpu", "--shapes", "8x4"])


def test_out_into_a_missing_folder_is_refused_before_the_run(nothing_runs, tmp_path, capsys):
    """Refused as the command line is parsed (exit 2), in one line naming the option."""
    missing = tmp_path / "no" / "such" / "scan.json"
    md = missing.with_suffix(".md")
    for argv, flag, path in ((["scan", "--device", "cpu", "--out", str(missing)], "--out", missing),
                             (["scan", "--device", "cpu", "--targets-md", str(md)],
                              "--targets-md", md),
                             (["plans", "--interpret", "--out", str(missing)], "--out", missing),
                             (["targets", "--out", str(md)], "--out", md)):
        with pytest.raises(SystemExit) as refused:
            bench.main(argv)
        err = capsys.readouterr().err
        assert refused.value.code == 2 and f"{flag}: got '{path}'" in err, err
        assert "no folder" in err, err
    assert not missing.parent.exists()


def test_targets_of_a_missing_file_is_an_error(tmp_path):
    with pytest.raises(SystemExit, match=r"--scan: got '.*nothing.json', which is not a file"):
        bench.main(["targets", "--scan", str(tmp_path / "nothing.json")])


@pytest.mark.parametrize("value", ["", " ", ",", "auto,"])
def test_an_empty_method_list_is_refused(nothing_runs, value):
    with pytest.raises(SystemExit, match=r"--methods: got .*expected a comma-separated subset"):
        bench.main(["scan", "--device", "cpu", "--methods", value])


def _result(tmp_path, name, **data):
    path = tmp_path / name
    path.write_text(json.dumps(data))
    return str(path)


def test_a_result_of_the_wrong_benchmark_is_refused_naming_the_file(nothing_runs, tmp_path):
    scan_json = _result(tmp_path, "scan.json", benchmark="scan", results=[])
    layer_json = _result(tmp_path, "layer.json", benchmark="layer", results=[])
    with pytest.raises(SystemExit, match=r"--layer: got '.*scan.json', which holds a 'scan' "
                                         r"benchmark result; expected the JSON written by "
                                         r"`lrnn bench layer --out`"):
        bench.main(["targets", "--layer", scan_json])
    with pytest.raises(SystemExit, match=r"--scan: got '.*layer.json', which holds a 'layer'"):
        bench.main(["targets", "--scan", layer_json])
    with pytest.raises(SystemExit, match=r"--layer: got '.*scan.json'"):     # before the run
        bench.main(["scan", "--device", "cpu", "--layer", scan_json])
    with pytest.raises(SystemExit, match=r"--scan: got '.*list.json', which holds no benchmark"):
        bench.main(["targets", "--scan", _result(tmp_path, "list.json")])
    (tmp_path / "bad.json").write_text("{not json")
    with pytest.raises(SystemExit, match=r"--scan: got '.*bad.json', which is not readable JSON"):
        bench.main(["targets", "--scan", str(tmp_path / "bad.json")])


@pytest.mark.parametrize("value", ["-1", "0", "nan"])
def test_a_non_positive_time_budget_is_refused(nothing_runs, value):
    with pytest.raises(SystemExit, match=rf"--budget-s: got {value if value != 'nan' else 'nan'}"
                                         r"(\.0)?, expected a positive number of seconds"):
        bench.main(["plans", "--interpret", "--budget-s", value])


def test_unknown_xla_methods_in_plans_are_refused(nothing_runs):
    with pytest.raises(SystemExit, match=r"--xla-methods: got 'pallas'"):
        bench.main(["plans", "--interpret", "--xla-methods", "pallas"])


# ---------------------------------------------------------------- what auto runs

@pytest.mark.parametrize("shape, match", [
    (None, "`b_shape`: got None"), ("abc", "`b_shape`: got 'abc'"), ((0,), r"`b_shape`.*\(0,\)"),
    ((4,), "`b_shape`"), ((4, 0, 8), "L >= 1"), ((4, -1), "`b_shape`"), ((4.0, 8), "`b_shape`"),
    ((True, 8), "`b_shape`"), (5, "`b_shape`"),
])
def test_choose_method_and_describe_refuse_bad_shapes(shape, match):
    from lrnn.scan import choose_method, describe
    with pytest.raises(ValueError, match=match):
        choose_method(shape)
    with pytest.raises(ValueError, match=match):
        describe(shape)


@pytest.mark.parametrize("kw, match", [
    (dict(backend="nosuch"), "`backend`: got 'nosuch'.*'cpu'"), (dict(backend="GPU"), "`backend`"),
    (dict(time_invariant="no"), "`time_invariant`: got 'no'"),
    (dict(dtype="nosuch"), "`dtype`"), (dict(dtype=jnp.int32), "`dtype`.*floating"),
])
def test_choose_method_refuses_bad_options(kw, match):
    from lrnn.scan import choose_method
    with pytest.raises(ValueError, match=match):
        choose_method((4, 8), **kw)


def test_choose_method_answers_valid_requests():
    from lrnn.scan import choose_method, describe
    assert choose_method((4, 8), backend="cpu") == "sequential"
    assert choose_method([2, 4, 8], backend="cpu", dtype=jnp.float32) == "sequential"
    assert "sequential" in describe((8, 4096, 256)) or "associative" in describe((8, 4096, 256))


@pytest.mark.parametrize("dtype", [jnp.float16, jnp.bfloat16])
def test_rotation_scan_takes_half_precision_b_like_linear_scan(dtype):
    gamma, theta = jnp.full(2, 0.9), jnp.array([0.3, -1.2])
    b = jnp.linspace(-1, 1, 20).reshape(5, 4)
    x = lrnn.rotation_scan(gamma, theta, b.astype(dtype))
    want = lrnn.rotation_scan(gamma, theta, b.astype(dtype).astype(jnp.float32))
    assert x.dtype == jnp.result_type(dtype, jnp.float32) and x.shape == b.shape
    np.testing.assert_allclose(np.asarray(x, np.float32), np.asarray(want), rtol=1e-6, atol=1e-6)
    lin = lrnn.linear_scan(A.astype(dtype), B.astype(dtype))
    assert lin.dtype == dtype                       # linear_scan keeps it; both run


def test_forward_mode_through_the_scan_is_documented():
    """linear_scan has a custom VJP: jacfwd cannot go through it; the docstring says so and
    points to jacrev, which works."""
    import jax
    assert "jacfwd" in lrnn.linear_scan.__doc__ and "jacrev" in lrnn.linear_scan.__doc__
    jac = jax.jacrev(lambda b: lrnn.linear_scan(A, b).sum(0))(B)
    assert jac.shape == (4, 5, 4)
