"""Course demos the grader does not run (``grader-skip``): the rule that makes skipping safe
(``lrnn.course.grading.solutions.skippable_cells``), the plan that skips them unless a student's
cell reads their names, and a real grading where a skipped demo would have raised."""
import shutil
from pathlib import Path

import nbformat
import pytest

from lrnn.course import grading as g
from lrnn.course.exercises import BuildError, build_notebook, wrap_demo
from lrnn.course.grading.score import AFTER_TEST_NOTE
from lrnn.course.grading.solutions import GRADER_SKIP, skippable_cells
from lrnn.course.grading.steps import plan
from submissions import build

ROOT = Path(__file__).resolve().parents[1]


def notebook(*cells):
    """Code cells from (source, tags) pairs or plain sources; a dict is the test cell ex1.1."""
    nb = nbformat.v4.new_notebook()
    for c in cells:
        if isinstance(c, dict):
            cell = nbformat.v4.new_code_cell(c["source"])
            cell.metadata["nbgrader"] = {"grade": True, "solution": False, "locked": True,
                                         "grade_id": "ex1.1", "points": 2,
                                         "schema_version": 3}
        else:
            source, tags = (c, []) if isinstance(c, str) else c
            cell = nbformat.v4.new_code_cell(source)
            if tags:
                cell.metadata["tags"] = list(tags)
        nb.cells.append(cell)
    return nb


DEMO = ("curve = []\nfor step in range(3):\n    curve.append(step ** 2)\n"
        "print(max(curve))", [GRADER_SKIP])


def test_a_demo_of_its_own_names_is_skippable():
    texts = skippable_cells(notebook("import numpy as np\nx = np.ones(3)", DEMO, "print(x)"))
    assert texts == {DEMO[0]: frozenset({"curve", "step"})}


def test_a_demo_that_calls_exercises_is_skipped_as_the_student_receives_it():
    texts = skippable_cells(notebook(("y = f(2)\nprint(y)", [GRADER_SKIP, "exercise-raises"])))
    assert set(texts) == {wrap_demo("y = f(2)\nprint(y)", "test")}


@pytest.mark.parametrize("cells, problem", [
    (["x = 1", ("x = 2", [GRADER_SKIP]), "print(x)"], "binds ['x'], which cell 2 reads"),
    ([("trained = 5", [GRADER_SKIP]), {"source": 'check("1.1", f)\nassert trained'}],
     "binds ['trained'], which cell 1 reads"),
    (["params = {}", ("params['W'] = 0", [GRADER_SKIP])], "changes params['W']"),
    (["import numpy as np", ("np.random.seed(0)", [GRADER_SKIP])], "changes np.random.seed"),
    (["cfg = [1]", ("cfg.append(2)", [GRADER_SKIP])], "changes cfg.append"),
    (["import jax", ("jax.config.update('jax_enable_x64', True)", [GRADER_SKIP])],
     "changes jax.config.update"),
    ([("def f():\n    global z\n    z = 1\nglobal w\nw = 2", [GRADER_SKIP])],
     "declares global names"),
    ([("x = (", [GRADER_SKIP])], "Python the grader can read"),
    ([{"source": 'check("1.1", f)'}], None),
])
def test_the_rule_refuses_what_a_later_cell_could_depend_on(cells, problem):
    nb = notebook(*cells)
    if problem is None:
        nb.cells[0].metadata["tags"] = [GRADER_SKIP]          # a test cell cannot be skipped
        problem = "only an ordinary code cell"
    with pytest.raises(BuildError, match=problem.replace("[", r"\[").replace("(", r"\(")):
        skippable_cells(nb)


def test_own_objects_may_change():
    nb = notebook(("h = [0] * 4\nh[0] = 1\nh.append(2)\nout = {}\nout['a'] = h", [GRADER_SKIP]))
    assert skippable_cells(nb)[nb.cells[0].source] == frozenset({"h", "out"})


def test_the_plan_skips_unless_a_student_cell_reads_the_demo():
    table = [{"grade_id": "ex1.1", "kind": "test"}]
    skip = {DEMO[0]: frozenset({"curve", "step"})}
    nb = notebook("x = 1", DEMO[0], "print(x)", {"source": 'check("1.1", f)'})
    steps, _, _ = plan(nb, table, skip)
    assert [s.kind for s in steps] == ["code", "skip", "code", "test"]
    nb.cells.insert(2, nbformat.v4.new_code_cell("print(len(curve))"))   # the student's cell
    steps, _, _ = plan(nb, table, skip)
    assert [s.kind for s in steps] == ["code", "code", "code", "code", "test"]
    nb.cells[1].source += "\n# my note"                      # an edited copy always runs
    steps, _, _ = plan(nb, table, skip)
    assert steps[1].kind == "code"


def test_every_solution_notebook_obeys_the_rule():
    """``load_solutions`` applies the rule: a course whose skipped demos broke it could not
    be graded at all. The build keeps the tag in the exercise notebooks."""
    sols = g.load_solutions(ROOT / "solutions")
    for stem, sol in sols.items():
        given = nbformat.read(ROOT / "exercises" / f"{stem}.ipynb", as_version=4)
        delivered = {c.source.strip() for c in given.cells if c.cell_type == "code"
                     and GRADER_SKIP in c.metadata.get("tags", [])}
        assert delivered == set(sol["skip_cells"]), stem


@pytest.mark.slow
def test_a_skipped_demo_is_not_run_and_costs_nothing(tmp_path):
    """Chapter 1 with its last plain demo made to raise and tagged ``grader-skip``: the
    completed notebook keeps full marks and the feedback says the demo was not run and
    reports no failing cell; without the tag the demo runs (the feedback's coarse note on
    cells after a hidden test)."""
    solutions = tmp_path / "solutions"
    solutions.mkdir()
    src = nbformat.read(ROOT / "solutions" / "01_linear_recurrence.ipynb", as_version=4)
    demo = max(i for i, c in enumerate(src.cells) if c.cell_type == "code" and
               not c.metadata.get("tags") and not c.metadata.get("nbgrader"))
    src.cells[demo].source = ("raise RuntimeError('a long demo')\n" + src.cells[demo].source)
    src.cells[demo].metadata["tags"] = [GRADER_SKIP]
    nbformat.write(src, solutions / "01_linear_recurrence.ipynb")
    given = build_notebook(src, "01_linear_recurrence.ipynb")
    done = build.solution(1)
    for mine, theirs in zip(done.cells, given.cells):
        if build.grade_id(mine) is None and mine.cell_type == "code":
            mine.source = theirs.source
    sub = tmp_path / "subs"
    sub.mkdir()
    build.write(done, sub, "alice", 1)
    rows = g.grade([sub], tmp_path / "gb.csv", solutions=solutions, sandbox="none",
                   feedback_dir=tmp_path / "fb")
    assert rows[0]["status"] == "graded"
    assert float(rows[0]["total"]) == float(rows[0]["max_total"]) == 15
    feedback = next((tmp_path / "fb").iterdir()).read_text(encoding="utf-8")
    assert f"Cell {demo}: a demonstration of the course that no grade depends on" in feedback
    assert AFTER_TEST_NOTE not in feedback
    shutil.rmtree(tmp_path / "fb")
    src.cells[demo].metadata["tags"].remove(GRADER_SKIP)
    nbformat.write(src, solutions / "01_linear_recurrence.ipynb")
    rows = g.grade([sub], tmp_path / "gb2.csv", solutions=solutions, sandbox="none",
                   feedback_dir=tmp_path / "fb")
    feedback = next((tmp_path / "fb").iterdir()).read_text(encoding="utf-8")
    assert AFTER_TEST_NOTE in feedback            # the demo ran, after a test: coarse note


def test_wrapping_a_demo_parses_under_the_lock_and_retries(monkeypatch):
    """The grader loads the solutions in several threads (entry points in parallel): the
    build's parse of a skipped demo takes the parser lock and retries CPython 3.11's spurious
    "recursion depth mismatch" like every other parse of the grader."""
    import ast
    from lrnn.course.grading import solutions
    want = wrap_demo("y = f(2)\nprint(y)", "test")
    real, locked = ast.parse, []

    def flaky(source, *args, **kwargs):
        locked.append(solutions._PARSE_LOCK.locked())
        if len(locked) < solutions._PARSE_TRIES:
            raise SystemError("AST constructor recursion depth mismatch (before=39, after=32)")
        return real(source, *args, **kwargs)

    monkeypatch.setattr(solutions.ast, "parse", flaky)
    text = solutions._delivered("y = f(2)\nprint(y)", ["exercise-raises"], "test")
    monkeypatch.undo()
    assert text == want
    assert locked == [True] * solutions._PARSE_TRIES
