"""The precision policy: checks and grading give the same verdict on a CPU and on
a GPU whose float32 matrix products run in TF32.

On a CPU, ``LRNN_EMULATE_TF32=1`` / ``precision.tf32_emulated()`` round the operands of every
float32 product that JAX's precision setting lets a GPU run in TF32, as an A100/L4/H100 would.
Under it:

* every chapter's model solution, handed in as students hand it in, gets full marks from the
  grader (the variable reaches the sandboxed kernel; the grader's own references run under
  the emulation too): CI's Colab lane (.ci/colab_lane.sh) grades them so;
* the self-check of every solution passes, in process, and fails as soon as the policy
  (``exact_matmuls`` around the checker) is taken away: the emulation catches a regression;
* a planted precision-fragile exercise (a product forced to DEFAULT precision, compared at
  rtol = 1e-5) fails, in the kernel and in the grader's process, and passes without the
  emulation.
"""
import contextlib
import shutil
from pathlib import Path

import jax
import jax.numpy as jnp
import nbformat
import numpy as np
import pytest

from lrnn.course import grading as g
from lrnn.course.check import _core, _run
from lrnn.course import exercises as ex
from lrnn.course import precision

ROOT = Path(__file__).resolve().parents[1]
SOLUTIONS = ROOT / "solutions"
SOLUTION_FILES = sorted(SOLUTIONS.glob(ex.NOTEBOOK_GLOB))


# --------------------------------------------------------------------------------------
# The emulation itself
# --------------------------------------------------------------------------------------

def test_round_to_tf32_keeps_ten_mantissa_bits():
    x = np.array([1 + 2 ** -10, 1 + 2 ** -11, 1 + 3 * 2 ** -11, 1 + 2 ** -12, -3.0,
                  np.inf, np.nan], np.float32)
    y = np.asarray(precision.round_to_tf32(x))
    assert y[0] == x[0]                        # representable in 10 bits
    assert y[1] == 1.0                         # a tie rounds to even
    assert y[2] == 1 + 2 ** -9                 # a tie rounds to even (upwards)
    assert y[3] == 1.0 and y[4] == -3.0 and np.isinf(y[5]) and np.isnan(y[6])


@pytest.mark.slow
def test_emulation_follows_the_precision_setting():
    a = np.random.default_rng(0).standard_normal((64, 64)).astype(np.float32)
    exact = a.astype(np.float64) @ a.astype(np.float64)

    def err(z):
        return np.max(np.abs(np.asarray(z, np.float64) - exact)) / np.max(np.abs(exact))
    with precision.tf32_emulated():
        with jax.default_matmul_precision("default"):
            rounded = err(jnp.matmul(a, a))
        with precision.exact_matmuls():
            full = err(jnp.matmul(a, a))
    assert rounded > 1e-4 and full < 1e-5


# --------------------------------------------------------------------------------------
# Self-checks of every solution, in process
# --------------------------------------------------------------------------------------

def solution_namespaces():
    """Each solution notebook's imports and solution cells, run in a namespace of its own."""
    out = {}
    for path in SOLUTION_FILES:
        nb = nbformat.read(path, as_version=4)
        ns = {"__name__": "__solution__"}
        exec("import lrnn", ns)
        for cell in nb.cells:
            if cell.cell_type != "code":
                continue
            kind = ex.cell_kind(cell)
            is_import = kind == "" and all(
                line.startswith(("import ", "from ")) or not line.strip()
                for line in cell.source.splitlines())
            if kind == "solution" or is_import:
                exec(compile(cell.source, f"{path.name}", "exec"), ns)
        out[path.stem] = ns
    return out


def graded_exercises():
    """(exercise id, function name, notebook stem) of every autograded exercise."""
    import re
    found = []
    for path in SOLUTION_FILES:
        for row in ex.exercise_table(nbformat.read(path, as_version=4)):
            if row["kind"] == "test":
                name = re.search(r'check\("[\d.]+",\s*(\w+)', row["source"]).group(1)
                found.append((row["exercise"], name, path.stem))
    return found


@pytest.fixture(scope="module")
def namespaces():
    return solution_namespaces()


@pytest.mark.slow
def test_without_the_policy_the_emulation_fails_solutions_and_with_it_they_pass(namespaces,
                                                                             monkeypatch):
    """Take the policy out of check() (``exact_matmuls`` replaced by nothing, JAX's DEFAULT
    precision in force): under TF32 emulation official solutions fail their self-checks, so
    a regression of the policy cannot go unnoticed. Put it back: the first of them passes.
    (Every solution passing under emulation, with both seeds and the hidden tests, is the
    Colab lane's graded run under emulation, .ci/colab_lane.sh.)"""
    cases = graded_exercises()
    assert len(cases) >= 24
    failed = []
    with precision.tf32_emulated():
        with monkeypatch.context() as m, jax.default_matmul_precision("default"):
            m.setattr(_run, "_exact_matmuls", contextlib.nullcontext)
            for ex_id, name, stem in reversed(cases):     # the matmul-heavy chapters first
                if not _core.result_of(ex_id, namespaces[stem][name]).passed:
                    failed.append((ex_id, name, stem))
                if len(failed) == 3:
                    break
        assert len(failed) == 3, failed
        with jax.default_matmul_precision("default"):       # the policy is check()'s own
            ex_id, name, stem = failed[0]
            result = _core.result_of(ex_id, namespaces[stem][name])
            assert result.passed, result.message


# --------------------------------------------------------------------------------------
# The grader, with the sandboxed kernel and the grader's process under emulation (every
# chapter's model solution, graded this way: .ci/colab_lane.sh)
# --------------------------------------------------------------------------------------

PLANTED_TESTS = {
    # A function whose product runs at DEFAULT precision (TF32 on a GPU), compared at 1e-5.
    "ex99.1": '''_A = np.random.default_rng(0).standard_normal((48, 48)).astype(np.float32)
### BEGIN HIDDEN TESTS
assert np.allclose(np.asarray(fragile_product(_A, _A), np.float64),
                   _A.astype(np.float64) @ _A.astype(np.float64), rtol=1e-5, atol=1e-5), \\
    "a product at DEFAULT precision is not exact"
### END HIDDEN TESTS''',
    # The grader's own reference at DEFAULT precision, compared at 1e-5.
    "ex99.2": '''_A = np.random.default_rng(1).standard_normal((48, 48)).astype(np.float32)
### BEGIN HIDDEN TESTS
with jax.default_matmul_precision("default"):
    _want = np.asarray(jnp.matmul(_A, _A), np.float64)
assert np.allclose(_want, np.asarray(product(_A, _A), np.float64), rtol=1e-5, atol=1e-5), \\
    "the reference at DEFAULT precision is not exact"
### END HIDDEN TESTS''',
    # The control: the policy in force on both sides, the same comparison.
    "ex99.3": '''_A = np.random.default_rng(2).standard_normal((48, 48)).astype(np.float32)
### BEGIN HIDDEN TESTS
assert np.allclose(np.asarray(product(_A, _A), np.float64),
                   _A.astype(np.float64) @ _A.astype(np.float64), rtol=1e-5, atol=1e-5), \\
    "a product under the policy is exact"
### END HIDDEN TESTS''',
}
PLANTED_SOLUTION = '''def fragile_product(A, B):
    ### BEGIN SOLUTION
    with jax.default_matmul_precision("default"):     # TF32 allowed: precision-fragile
        return jnp.matmul(A, B)
    ### END SOLUTION


def product(A, B):
    ### BEGIN SOLUTION
    return jnp.matmul(A, B)
    ### END SOLUTION'''


def planted_notebook():
    cells = [nbformat.v4.new_markdown_cell("# Exercises 99 · Planted"),
             nbformat.v4.new_code_cell("import numpy as np\nimport jax\nimport jax.numpy as jnp"),
             ex.solution_cell(PLANTED_SOLUTION, "ex99.1-solution")]
    cells += [ex.test_cell(src, gid, 1) for gid, src in PLANTED_TESTS.items()]
    return nbformat.v4.new_notebook(cells=cells)


@pytest.mark.notebook
@pytest.mark.parametrize("emulate", [True, False])
def test_planted_precision_fragile_checks_fail_only_under_emulation(tmp_path, monkeypatch,
                                                                     emulate):
    sol_dir, subs = tmp_path / "solutions", tmp_path / "subs"
    sol_dir.mkdir()
    subs.mkdir()
    nbformat.write(planted_notebook(), sol_dir / "99_planted.ipynb")
    shutil.copy(sol_dir / "99_planted.ipynb", subs / "99_planted.ipynb")
    context = contextlib.nullcontext()
    if emulate:
        monkeypatch.setenv(precision.EMULATE_ENV, "1")
        context = precision.tf32_emulated()
    else:
        monkeypatch.delenv(precision.EMULATE_ENV, raising=False)
    with context:
        rows = g.grade([subs], tmp_path / "gb.csv", feedback_dir=tmp_path / "fb",
                       solutions=sol_dir, cell_timeout=60, log=lambda *a: None)
    (row,) = rows
    assert row["status"] == "graded"
    got = {k: float(row[k]) for k in PLANTED_TESTS}
    if emulate:
        assert got == {"ex99.1": 0, "ex99.2": 0, "ex99.3": 1}, got
        text = next((tmp_path / "fb").iterdir()).read_text(encoding="utf-8")
        assert "a product at DEFAULT precision is not exact" in text
        assert "the reference at DEFAULT precision is not exact" in text
    else:
        assert got == dict.fromkeys(PLANTED_TESTS, 1), got
