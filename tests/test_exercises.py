"""The exercise build (lrnn.course.exercises): exercises/ is generated from solutions/, nothing of the
solutions leaks, the notebooks open like the chapters, and the grader gives full marks to every
solution notebook and zero (for code) to every exercise notebook."""
import io
import re
import shutil
import subprocess
import sys
from pathlib import Path

import nbformat
import pytest

from lrnn.course import exercises as ex
from lrnn.course.check import exercises as registered

ROOT = Path(__file__).resolve().parents[1]
SOLUTIONS = ROOT / "solutions"
EXERCISES = ROOT / "exercises"
SOLUTION_FILES = sorted(SOLUTIONS.glob(ex.NOTEBOOK_GLOB))
REPO = "https://github.com/lrnn-course/lrnn"
SETUP = '''# Setup: install lrnn, changing none of the packages that Colab preinstalled.
import importlib.util, os, subprocess, sys
if importlib.util.find_spec("lrnn") is None:
    spec = os.environ.get("LRNN_INSTALL_SOURCE", "lrnn @ git+https://github.com/lrnn-course/lrnn")
    subprocess.run([sys.executable, "-m", "pip", "install", "-q", "--no-deps", spec], check=True)
    import lrnn.course.colab; lrnn.course.colab.install_missing()
import lrnn
env = lrnn.course.setup.environment()'''


def read(path):
    return nbformat.read(path, as_version=4)


# --------------------------------------------------------------------------------------
# The committed exercises/ is what the build generates
# --------------------------------------------------------------------------------------

def test_build_check_passes():
    proc = subprocess.run([sys.executable, "-m", "lrnn.course.exercises", "build", "--check"],
                          cwd=ROOT, capture_output=True, text=True)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "up to date" in proc.stdout


def test_build_check_detects_drift_and_build_repairs_it(tmp_path):
    sol, exe = tmp_path / "solutions", tmp_path / "exercises"
    shutil.copytree(SOLUTIONS, sol)
    shutil.copytree(EXERCISES, exe)
    first = sorted(exe.glob(ex.NOTEBOOK_GLOB))[0]
    first.write_text(first.read_text(encoding="utf-8").replace(
        'raise NotImplementedError(\\"Exercise', 'raise NotImplemented(\\"Exercise', 1),
        encoding="utf-8")
    (exe / "99_stale.ipynb").write_text("{}", encoding="utf-8")
    second = sorted(exe.glob(ex.NOTEBOOK_GLOB))[1]
    second.unlink()
    out = io.StringIO()
    assert ex.build(sol, exe, check=True, out=out) == 1
    text = out.getvalue()
    assert f"differs: exercises/{first.name}" in text
    assert re.search(r"^\s*-.*raise NotImplemented\(", text, re.M), text
    assert f"missing: exercises/{second.name}" in text and "99_stale.ipynb" in text
    edited = first.read_bytes()
    out = io.StringIO()
    assert ex.build(sol, exe, out=out) == 2       # an edited notebook: nothing is written
    assert f"{first.name}: edited since the build wrote it" in out.getvalue()
    assert first.read_bytes() == edited and not (exe / second.name).exists()
    out = io.StringIO()
    assert ex.build(sol, exe, force=True, out=out) == 1   # repairs, never deletes a notebook
    assert (exe / "99_stale.ipynb").exists() and "have no solution" in out.getvalue()
    (backup,) = exe.glob(f"{first.name}.backup-*")
    assert backup.read_bytes() == edited
    (exe / "99_stale.ipynb").unlink()
    backup.unlink()
    assert ex.build(sol, exe, check=True, out=io.StringIO()) == 0


def test_build_is_deterministic(tmp_path):
    a = ex.generate(SOLUTIONS)
    b = ex.generate(SOLUTIONS)
    assert a == b and set(a) == {p.name for p in SOLUTION_FILES}
    for text in a.values():
        assert text.endswith("}\n")


# --------------------------------------------------------------------------------------
# The transformations, on a small notebook
# --------------------------------------------------------------------------------------

def toy(points=2):
    nb = nbformat.v4.new_notebook()
    nb.cells = [
        nbformat.v4.new_markdown_cell(
            f"# Exercises 1 · Toy\n\n[![Open In Colab](x)]({REPO}/blob/main/solutions/01_toy.ipynb)"),
        ex.solution_cell("def spectral_radius(A):\n    '''doc'''\n    ### BEGIN SOLUTION\n"
                         "    return 42\n    ### END SOLUTION", "ex1.5-solution"),
        ex.test_cell('check("1.5", spectral_radius)\n### BEGIN HIDDEN TESTS\nassert secret()\n'
                     '### END HIDDEN TESTS', "ex1.5", points,
                     tags=["nbval-check-output"]),
        ex.solution_cell("### BEGIN SOLUTION\nvalue = 3\n### END SOLUTION", "ex1.5-solution-2"),
        nbformat.v4.new_code_cell("print(spectral_radius(1))",
                                  metadata={"tags": ["exercise-raises"]}),
        nbformat.v4.new_markdown_cell("instructor note", metadata={"tags": ["solutions-only"]}),
        ex.manual_cell("**Model answer.** because.\n\n**Rubric.** 1 point.", "ex1.6", 2),
    ]
    nb.cells[2].outputs = [nbformat.v4.new_output("stream", text="✓ Exercise 1.5\n")]
    nb.cells[2].execution_count = 3
    return nb


def test_transformations():
    out = ex.build_notebook(toy(), "toy")
    src = [c.source for c in out.cells]
    assert "/blob/main/exercises/01_toy.ipynb" in src[0]
    assert src[1].splitlines()[-1].startswith('    raise NotImplementedError("Exercise 1.5: ')
    comments = " ".join(line.strip().lstrip("# ") for line in src[1].splitlines()
                        if line.strip().startswith("#"))
    assert f"Read: {registered()['1.5'].reference}." in comments and "return 42" not in src[1]
    assert src[2] == 'check("1.5", spectral_radius)'
    assert out.cells[2].outputs == [] and out.cells[2].execution_count is None
    assert "nbval-check-output" not in out.cells[2].metadata.get("tags", [])
    assert out.cells[2].metadata["nbgrader"]["points"] == 2
    assert src[3].splitlines()[-1].startswith("raise NotImplementedError(")   # top-level region
    assert out.cells[3].metadata["tags"] == ["raises-exception", "remove-output"]
    assert src[4] == ex.DEMO_LINE + "\n    print(spectral_radius(1))"   # runs on, no raise
    assert "tags" not in out.cells[4].metadata and out.cells[4].outputs == []
    assert "instructor note" not in src
    assert src[5] == ex.ANSWER_PLACEHOLDER
    assert out.cells[5].metadata["nbgrader"]["grade_id"] == "ex1_6"       # nbgrader's schema


@pytest.mark.parametrize("mutate, message", [
    (lambda nb: nb.cells[2].metadata["nbgrader"].update(points=5), "points"),
    (lambda nb: setattr(nb.cells[1], "source", "### BEGIN SOLUTION\nx = 1"), "without"),
    (lambda nb: nb.cells[3].metadata["nbgrader"].update(grade_id="ex1.5"), "duplicate"),
    (lambda nb: setattr(nb.cells[2], "source", "print(1)"), "no visible check"),
    (lambda nb: nb.cells[2].metadata["nbgrader"].update(grade_id="ex9.9"), "no checker"),
])
def test_build_errors(mutate, message):
    nb = toy()
    mutate(nb)
    with pytest.raises(ex.BuildError, match=message):
        ex.build_notebook(nb, "toy")


# --------------------------------------------------------------------------------------
# Every solution / exercise notebook
# --------------------------------------------------------------------------------------

@pytest.mark.parametrize("path", SOLUTION_FILES, ids=lambda p: p.name)
def test_solution_notebook_structure(path):
    nb = read(path)
    n = int(path.name[:2])
    head = nb.cells[0].source.splitlines()
    assert re.fullmatch(rf"# Exercises {n} · \S.*", head[0])
    badge = (f"[![Open In Colab](https://colab.research.google.com/assets/colab-badge.svg)]"
             f"(https://colab.research.google.com/github/lrnn-course/lrnn/blob/main/"
             f"solutions/{path.name})")
    assert badge in head
    assert nb.cells[1].source.startswith("## Learning objectives")
    assert nb.cells[2].source == SETUP
    table = ex.exercise_table(nb, path.name)
    auto = [r for r in table if r["kind"] == "test"]
    assert len(auto) >= 4, "at least 4 autograded exercises per chapter"
    reg = registered()
    for row in table:
        assert row["exercise"].startswith(f"{n}.")
        assert row["points"] > 0
    for i, cell in enumerate(nb.cells):
        meta = cell.metadata.get("nbgrader", {})
        if meta.get("grade") and not meta.get("solution"):
            ex_id = meta["grade_id"][2:]
            assert reg[ex_id].points == meta["points"]
            text = "".join(o.get("text", "") for o in cell.outputs)
            assert text.startswith(f"✓ Exercise {ex_id} "), f"cell {i}: {text[:200]}"
            assert "✗" not in text
        if cell.cell_type == "code":
            assert not [o for o in cell.outputs if o.output_type == "error"], f"cell {i}"
    headings = "\n".join(c.source for c in nb.cells if c.cell_type == "markdown")
    for row in table:
        assert re.search(rf"## Exercise {re.escape(row['exercise'])} · .*\({row['points']:g} "
                         rf"points?", headings), f"heading with points for {row['exercise']}"


def test_enough_exercises_in_the_course():
    auto = [r for p in SOLUTION_FILES for r in ex.exercise_table(read(p)) if r["kind"] == "test"]
    manual = [r for p in SOLUTION_FILES for r in ex.exercise_table(read(p))
              if r["kind"] == "manual"]
    assert len(auto) >= 22 and len(manual) >= 2


@pytest.mark.parametrize("path", SOLUTION_FILES, ids=lambda p: p.name)
def test_exercise_notebook_reveals_no_solution(path):
    sol = read(path)
    exe = read(EXERCISES / path.name)
    text = nbformat.writes(exe)
    for marker in (ex.BEGIN_SOLUTION, ex.END_SOLUTION, ex.BEGIN_HIDDEN, ex.END_HIDDEN):
        assert marker not in text
    assert f"/blob/main/exercises/{path.name}" in exe.cells[0].source
    hidden, visible = [], set()
    for cell in sol.cells:
        for kind, (begin, end) in (("solution", (ex.BEGIN_SOLUTION, ex.END_SOLUTION)),
                                   ("hidden", (ex.BEGIN_HIDDEN, ex.END_HIDDEN))):
            for k, value in ex._split_region(cell.source.split("\n"), begin, end, "x"):
                if k == "region":
                    hidden += [ln.strip() for ln in value[1] if len(ln.strip()) > 25]
                else:
                    visible.add(value.strip())
    exe_sources = "\n".join(c.source for c in exe.cells)
    leaked = [ln for ln in hidden if ln in exe_sources and ln not in visible]
    assert not leaked, leaked[:3]
    for cell in exe.cells:
        if cell.metadata.get("nbgrader", {}).get("solution") and cell.cell_type == "code":
            assert cell.outputs == []
            assert "NotImplementedError(\"Exercise " in cell.source or \
                re.search(rf"^\w+ = {re.escape(ex.VALUE_STUB)}$", cell.source, re.M), cell.source


# --------------------------------------------------------------------------------------
# The grader on the real notebooks
# --------------------------------------------------------------------------------------

# Every chapter's exercise notebook completed with the model solution is graded with full marks
# in the Colab lane (.ci/colab_lane.sh, under emulated TF32); the distributed exercise notebooks,
# executed to the end with zero marks, in tests/test_submissions.py.


# --------------------------------------------------------------------------------------
# The generators agree: scripts/sync_headers.py, then the build
# --------------------------------------------------------------------------------------

def test_the_build_recognises_its_notebooks_after_sync_headers(tmp_path):
    """Following _config.yml's instruction (a new repository URL and branch, then
    `python scripts/sync_headers.py`), `lrnn exercises build` finds its own unedited notebooks
    (restamped by the sync) and writes nothing; a notebook with a student's answer stays
    refused, its stamp not renewed; modes are kept."""
    import importlib.util
    spec = importlib.util.spec_from_file_location("sync_headers_", ROOT / "scripts" / "sync_headers.py")
    sync = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(sync)
    sol, exe = tmp_path / "solutions", tmp_path / "exercises"
    shutil.copytree(SOLUTIONS, sol)
    shutil.copytree(EXERCISES, exe)
    config = (ROOT / "_config.yml").read_text(encoding="utf-8")
    (tmp_path / "_config.yml").write_text(config.replace(
        "url: https://github.com/lrnn-course/lrnn", "url: https://github.com/a-fork/lrnn").replace(
        "branch: main", "branch: dev"), encoding="utf-8")
    names = sorted(p.name for p in exe.glob(ex.NOTEBOOK_GLOB))
    student = exe / names[1]
    student.write_text(student.read_text(encoding="utf-8").replace(
        "YOUR ANSWER HERE", "my own answer", 1), encoding="utf-8")
    (exe / names[0]).chmod(0o640)
    with io.StringIO() as buf, __import__("contextlib").redirect_stdout(buf):
        assert sync.main(["--root", str(tmp_path)]) == 0
        assert f"rewritten: exercises/{names[0]}" in buf.getvalue()
    synced = {n: (exe / n).read_bytes() for n in names}
    assert b"a-fork/lrnn/blob/dev/exercises/" in synced[names[0]]
    assert oct((exe / names[0]).stat().st_mode & 0o777) == oct(0o640)
    out = io.StringIO()
    assert ex.build(sol, exe, out=out) == 2                # the student's answer is refused
    text = out.getvalue()
    assert f"{names[1]}: edited since the build wrote it" in text
    assert "1 notebook(s)" in text, text
    assert {n: (exe / n).read_bytes() for n in names} == synced
    student.write_bytes(ex.generate(sol)[names[1]].encode("utf-8"))   # the answer saved away
    out = io.StringIO()
    assert ex.build(sol, exe, out=out) == 0, out.getvalue()
    assert "wrote" not in out.getvalue() and not list(exe.glob("*.backup-*"))
    assert {n: (exe / n).read_bytes() for n in names if n != names[1]} == \
        {n: t for n, t in synced.items() if n != names[1]}
    assert ex.build(sol, exe, check=True, out=io.StringIO()) == 0


def test_a_prediction_becomes_an_assignment_of_ellipsis_not_a_raise():
    """A prediction (``kind="value"``) answered at top level: the exercise version assigns
    ``...`` to each name the model answer sets, so "Run all" goes on, and its check says "no
    prediction yet"; nothing of the answer or its derivation remains."""
    nb = nbformat.v4.new_notebook(cells=[
        ex.solution_cell("### BEGIN SOLUTION\n# 0.95^t < 0.01 <=> t > 89.8\nfirst_step_below_1pc = 90\n"
                         "### END SOLUTION", "ex1.7-solution"),
        ex.test_cell('check("1.7", first_step_below_1pc)', "ex1.7", 1),
    ])
    out = ex.build_notebook(nb, "toy")
    lines = out.cells[0].source.splitlines()
    assert lines[-1] == f"first_step_below_1pc = {ex.VALUE_STUB}"
    assert all(line.startswith("# Read: ") or line.startswith("#  ") or line == lines[-1]
               or line.startswith("# ") for line in lines)
    assert "90" not in out.cells[0].source and "89.8" not in out.cells[0].source
    assert "raises-exception" not in out.cells[0].metadata.get("tags", [])
    namespace = {}
    exec(out.cells[0].source, namespace)
    assert namespace["first_step_below_1pc"] is Ellipsis
    result = lc_result("1.7", namespace["first_step_below_1pc"])
    assert result.status == "not implemented" and "no prediction yet" in result.message


def test_a_prediction_that_assigns_nothing_stops_the_build():
    nb = nbformat.v4.new_notebook(cells=[
        ex.solution_cell("### BEGIN SOLUTION\nprint(90)\n### END SOLUTION", "ex1.7-solution"),
        ex.test_cell('check("1.7", first_step_below_1pc)', "ex1.7", 1),
    ])
    with pytest.raises(ex.BuildError, match="assigns no name"):
        ex.build_notebook(nb, "toy")


def lc_result(ex_id, answer):
    from lrnn.course.check import result_of
    return result_of(ex_id, answer)
