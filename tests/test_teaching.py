"""Teaching standards of the course (issue 16): exercise notebooks run to the end with
unfinished exercises reported, not raised."""
from pathlib import Path

import nbformat
import pytest

from lrnn import exercises as ex

ROOT = Path(__file__).resolve().parents[1]
SOLUTION_FILES = sorted((ROOT / "solutions").glob(ex.NOTEBOOK_GLOB))


def read(path):
    return nbformat.read(path, as_version=4)


# --------------------------------------------------------------------------------------
# "Run all" on an exercise notebook runs to the end
# --------------------------------------------------------------------------------------

@pytest.fixture
def clean_demo_state():
    ex._UNFINISHED.clear()
    yield
    ex._UNFINISHED.clear()


def test_wrap_demo_indents_under_the_context_manager():
    src = "x = f(1)\n\nfor i in range(2):\n    print(x + i)"
    out = ex.wrap_demo(src, "t")
    assert out.splitlines()[0] == ex.DEMO_LINE
    assert out.splitlines()[1:] == ["    x = f(1)", "", "    for i in range(2):",
                                    "        print(x + i)"]
    compile(out, "<wrapped>", "exec")


@pytest.mark.parametrize("src, message", [
    ('s = """a\nb"""\nprint(s)', "multi-line string"),
    ("%time f(1)", "magics"),
    ("y = f(1)\ny", "bare expression"),
])
def test_wrap_demo_refuses_what_it_would_change(src, message):
    with pytest.raises(ex.BuildError, match=message):
        ex.wrap_demo(src, "t")


def test_demo_reports_an_unfinished_exercise_and_goes_on(capsys, clean_demo_state):
    with ex.demo():
        raise NotImplementedError("Exercise 1.2: a parallel scan — read eq. (1.3)")
    with ex.demo():                              # a later cell needs a result of the first one
        undefined_name_from_an_unfinished_cell  # noqa: B018, F821
    lines = capsys.readouterr().out.splitlines()
    assert lines[0].startswith("unfinished: exercise 1.2 (")
    assert lines[1].startswith("skipped:") and "1.2" in lines[1]


def test_demo_raises_real_errors(clean_demo_state):
    with pytest.raises(ZeroDivisionError):
        with ex.demo():
            1 / 0
    with pytest.raises(NameError):               # no unfinished exercise: a real NameError
        with ex.demo():
            undefined_name  # noqa: B018, F821


def test_demo_closes_half_drawn_figures(clean_demo_state, capsys):
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    with ex.demo():
        plt.figure()
        raise NotImplementedError("Exercise 4.2: …")
    assert plt.get_fignums() == []


@pytest.mark.parametrize("path", SOLUTION_FILES, ids=lambda p: p.name)
def test_exercise_notebooks_run_to_the_end(path):
    """No cell of a generated exercise notebook may raise: demo cells are wrapped, and nbval
    (which runs exercises/ in CI) fails on any untagged cell that raises."""
    sol = read(path)
    built = ex.build_notebook(sol, path.name)
    demos = [c for c in sol.cells if "exercise-raises" in c.metadata.get("tags", [])]
    wrapped = [c for c in built.cells if c.source.startswith(ex.DEMO_LINE)]
    assert len(wrapped) == len(demos)
    for cell in built.cells:
        assert "raises-exception" not in cell.metadata.get("tags", []), cell.source[:80]
    committed = read(ROOT / "exercises" / path.name)
    assert [c.source for c in committed.cells] == [c.source for c in built.cells]
