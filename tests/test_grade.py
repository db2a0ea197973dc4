"""The autograder (lrnn.grade) on bad submissions: one wrong exercise, a crash, an infinite
loop, megabytes of output, sys.exit/os._exit, deleted files, unparseable files; gradebook
atomicity, resuming, and independence of the grading order.

The submissions are made from solutions/01_linear_recurrence.ipynb, cut down to its imports
and graded cells so that every run takes a few seconds."""
import csv
import os
import re
import shutil
import time
from pathlib import Path

import nbformat
import pytest

from lrnn import grade as g

pytestmark = pytest.mark.notebook

ROOT = Path(__file__).resolve().parents[1]
SOLUTIONS = ROOT / "solutions"
SOURCE = SOLUTIONS / "01_linear_recurrence.ipynb"
FIXTURES = Path(__file__).resolve().parent / "fixtures"
FULL = {"ex1.1": 2, "ex1.2": 4, "ex1.3": 3, "ex1.4": 3, "ex1.5": 2}
CELL_TIMEOUT = 20          # the looping cell costs this long; every other cell is far shorter


def slim(nb):
    """The setup, the imports and the graded cells: a quick, complete submission."""
    nb = nbformat.from_dict(nb)
    keep = []
    for i, cell in enumerate(nb.cells):
        meta = cell.metadata.get("nbgrader")
        if meta or (cell.cell_type == "code" and "from lrnn.check import check" in cell.source):
            keep.append(cell)
    nb.cells = keep
    return nb


def submission(replace=None, before_first_test=()):
    """A solved chapter-1 notebook with some solution cells replaced by ``replace`` (grade_id
    -> source) and extra code cells inserted before the first test cell."""
    nb = slim(nbformat.read(SOURCE, as_version=4))
    for cell in nb.cells:
        gid = cell.metadata.get("nbgrader", {}).get("grade_id")
        if replace and gid in replace:
            cell.source = replace[gid]
    first_test = next(i for i, c in enumerate(nb.cells)
                      if c.metadata.get("nbgrader", {}).get("grade"))
    for k, src in enumerate(before_first_test):
        nb.cells.insert(first_test + k, nbformat.v4.new_code_cell(src))
    return nb


WRONG_RADIUS = '''def spectral_radius(A):
    return float(np.linalg.norm(A, 2))'''
CRASHING_KERNEL = '''def kernel(A, B, C, L):
    return 1 / 0'''
LOOPING_CONVOLVE = '''def convolve(K, u):
    while True:
        pass'''
CHEATING_OPERATOR = '''def binary_operator(left, right):
    return lrnn.scan.binary_operator(left, right)'''
KILLING_RADIUS = '''def spectral_radius(A):
    import os
    os._exit(1)'''
FLOOD = '''for i in range(20000):
    print("flooding the output", i)
print("x" * 3_000_000)'''
DELETE_EVERYTHING = '''import os, shutil
for name in os.listdir("."):
    shutil.rmtree(name) if os.path.isdir(name) else os.remove(name)
print("deleted", len(os.listdir(".")))'''


@pytest.fixture(scope="module")
def graded(tmp_path_factory):
    base = tmp_path_factory.mktemp("grade")
    sub = base / "submissions"
    sub.mkdir()
    cases = {
        "full_01_linear_recurrence.ipynb": submission(before_first_test=[
            'assert open("notes.txt").read() == "beside the submission"']),
        "one_wrong_01_linear_recurrence.ipynb": submission({"ex1.5-solution": WRONG_RADIUS}),
        "crash_01_linear_recurrence.ipynb": submission(
            {"ex1.3-solution": CRASHING_KERNEL},
            before_first_test=['raise RuntimeError("a crash at top level")']),
        "loop_01_linear_recurrence.ipynb": submission({"ex1.4-solution": LOOPING_CONVOLVE}),
        "cheat_01_linear_recurrence.ipynb": submission({"ex1.1-solution": CHEATING_OPERATOR}),
        "chaos_01_linear_recurrence.ipynb": submission(
            {"ex1.5-solution": KILLING_RADIUS},
            before_first_test=[FLOOD, DELETE_EVERYTHING, "import sys\nsys.exit(3)"]),
    }
    for name, nb in cases.items():
        nbformat.write(nb, sub / name)
    (sub / "notes.txt").write_text("beside the submission", encoding="utf-8")
    for name in ("unparseable_01_linear_recurrence.ipynb", "not_a_notebook.ipynb"):
        shutil.copy(FIXTURES / f"{name}.txt", sub / name)     # .txt: no collector picks them up
    out = base / "gradebook.csv"
    feedback = base / "feedback"
    start = time.monotonic()
    rows = g.grade([sub], out, timeout=240, cell_timeout=CELL_TIMEOUT, workers=2,
                   solutions=SOLUTIONS, feedback_dir=feedback, log=lambda *a: None)
    elapsed = time.monotonic() - start
    by_name = {Path(r["submission"]).name: r for r in rows}
    return {"rows": by_name, "out": out, "feedback": feedback, "sub": sub, "base": base,
            "elapsed": elapsed, "csv": out.read_bytes()}


def scores(row):
    return {k: float(row[k]) for k in FULL}


def feedback_of(graded, name):
    key = str((graded["sub"] / name).resolve())
    return (graded["feedback"] / g.feedback_name(key)).read_text(encoding="utf-8")


def test_full_marks(graded):
    row = graded["rows"]["full_01_linear_recurrence.ipynb"]
    assert scores(row) == FULL and float(row["total"]) == 14 and row["status"] == "graded"
    assert row["ex1.6"] == "manual"
    text = feedback_of(graded, "full_01_linear_recurrence.ipynb")
    assert "raised" not in text                      # it could read the file beside it


def test_one_wrong_exercise_scores_exactly_the_rest(graded):
    row = graded["rows"]["one_wrong_01_linear_recurrence.ipynb"]
    assert scores(row) == dict(FULL, **{"ex1.5": 0})
    assert float(row["total"]) == 12 and float(row["max_total"]) == 14
    text = feedback_of(graded, "one_wrong_01_linear_recurrence.ipynb")
    assert "largest singular value" in text          # the check's hint reaches the student
    assert "| 1.5 · the spectral radius | 0 / 2 | failed |" in text


def test_crash_loses_only_its_exercise(graded):
    row = graded["rows"]["crash_01_linear_recurrence.ipynb"]
    assert scores(row) == dict(FULL, **{"ex1.3": 0})
    text = feedback_of(graded, "crash_01_linear_recurrence.ipynb")
    assert "ZeroDivisionError" in text and "RuntimeError: a crash at top level" in text


def test_infinite_loop_is_interrupted(graded):
    row = graded["rows"]["loop_01_linear_recurrence.ipynb"]
    assert scores(row) == dict(FULL, **{"ex1.4": 0})
    text = feedback_of(graded, "loop_01_linear_recurrence.ipynb")
    assert "ran longer than" in text and "infinite loop" in text


def test_calling_the_reference_is_caught_by_hidden_tests(graded):
    row = graded["rows"]["cheat_01_linear_recurrence.ipynb"]
    assert scores(row) == dict(FULL, **{"ex1.1": 0})
    text = feedback_of(graded, "cheat_01_linear_recurrence.ipynb")
    assert "must not call lrnn.scan.binary_operator" in text


def test_exit_kernel_death_flood_and_deleted_files(graded):
    row = graded["rows"]["chaos_01_linear_recurrence.ipynb"]
    assert scores(row) == dict(FULL, **{"ex1.5": 0})
    assert row["status"] == "kernel died"
    text = feedback_of(graded, "chaos_01_linear_recurrence.ipynb")
    assert "The kernel died" in text and "SystemExit" in text
    assert re.search(r"printed [\d,]{9,} bytes of output; the grader kept the first", text)
    assert len(text) < 50_000                       # the flood is not copied into feedback
    assert (graded["sub"] / "chaos_01_linear_recurrence.ipynb").exists()
    assert (graded["sub"] / "notes.txt").read_text(encoding="utf-8") == "beside the submission"


def test_unparseable_files(graded):
    row = graded["rows"]["unparseable_01_linear_recurrence.ipynb"]
    assert row["status"] == "cannot be parsed" and float(row["total"]) == 0
    assert row["assignment"] == "01_linear_recurrence" and scores(row) == dict.fromkeys(FULL, 0)
    assert "cannot be parsed" in feedback_of(graded, "unparseable_01_linear_recurrence.ipynb")
    other = graded["rows"]["not_a_notebook.ipynb"]
    assert other["status"] == "cannot be parsed" and float(other["total"]) == 0


def test_gradebook_layout(graded):
    with open(graded["out"], newline="", encoding="utf-8") as f:
        reader = csv.DictReader(f)
        header = reader.fieldnames
        rows = list(reader)
    assert header[:4] == ["submission", "sha256", "assignment", "status"]
    assert header[-2:] == ["total", "max_total"]
    assert header[4:-2] == [*FULL, "ex1.6"]
    assert len(rows) == 8 == len({r["submission"] for r in rows})
    assert not [p for p in graded["out"].parent.iterdir() if p.name.endswith(".tmp")]


def test_rerun_skips_graded_and_keeps_other_rows(graded):
    logs = []
    start = time.monotonic()
    g.grade([graded["sub"]], graded["out"], solutions=SOLUTIONS, feedback_dir=graded["feedback"],
            log=logs.append)
    assert time.monotonic() - start < 10
    assert len([m for m in logs if m.startswith("skip")]) == 8
    assert graded["out"].read_bytes() == graded["csv"]


def test_regrading_in_another_order_changes_nothing(graded, tmp_path):
    """--force on two submissions, in reverse order and one at a time (the first run was
    parallel): the same rows, and every other row untouched."""
    out = tmp_path / "gb.csv"
    shutil.copy(graded["out"], out)
    before = {r["submission"]: r for r in g.read_gradebook(out)}
    names = ["crash_01_linear_recurrence.ipynb", "one_wrong_01_linear_recurrence.ipynb"]
    g.grade([graded["sub"] / n for n in names], out, force=True, workers=1, timeout=240,
            cell_timeout=CELL_TIMEOUT, solutions=SOLUTIONS, feedback_dir=tmp_path / "fb",
            log=lambda *a: None)
    after = {r["submission"]: r for r in g.read_gradebook(out)}
    assert after == before


def test_gradebook_write_is_atomic(tmp_path, monkeypatch):
    out = tmp_path / "gb.csv"
    g.write_gradebook(out, [{"submission": "a", "total": 1, "max_total": 2, "ex1.1": 1}])
    before = out.read_bytes()

    def boom(*a, **k):
        raise OSError("disk full")
    monkeypatch.setattr(g.os, "fsync", boom)
    with pytest.raises(OSError):
        g.write_gradebook(out, [{"submission": "b", "total": 0, "max_total": 2}])
    assert out.read_bytes() == before
    assert [p.name for p in tmp_path.iterdir()] == ["gb.csv"]


def test_notebook_time_limit_kills_kernel():
    """A loop that ignores the interrupt: the whole notebook is stopped at its limit, the cells
    done so far keep their outcome, and no process outlives it."""
    nb = nbformat.v4.new_notebook(cells=[
        nbformat.v4.new_code_cell("x = 1"),
        nbformat.v4.new_code_cell("import signal\nsignal.signal(signal.SIGINT, signal.SIG_IGN)\n"
                                  "while True:\n    pass"),
        nbformat.v4.new_code_cell("y = 2")])
    start = time.monotonic()
    state = g.run_notebook(nb, timeout=10, cell_timeout=2, max_output=10_000)
    assert time.monotonic() - start < 40
    assert state["timed_out"] and state["cells"]["0"]["status"] == "ok"
    assert "2" not in state["cells"]
    time.sleep(0.5)
    assert state["kernel_pids"] and not any(alive(pid) for pid in state["kernel_pids"])


def alive(pid):
    """Running (a killed process whose parent is gone may stay a zombie until reaped)."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().split(")")[-1].split()[0] != "Z"
    except FileNotFoundError:
        return False
    except OSError:
        try:
            os.kill(pid, 0)
        except ProcessLookupError:
            return False
        return True
