"""The autograder (lrnn grade) on bad submissions: one wrong exercise, a crash, an infinite
loop, megabytes of output, sys.exit/os._exit, deleted files, unparseable files; gradebook
atomicity, resuming, retrying, independence of the grading order; time limits; bad
arguments; the plain-data wire between the grader and a kernel.

The submissions are made from solutions/01_linear_recurrence.ipynb, cut down to its imports
and graded cells so that every run takes a few seconds. Attacks on the grader are in
tests/test_attacks.py."""
import csv
import os
import re
import shutil
import time
from pathlib import Path

import nbformat
import numpy as np
import pytest

import lrnn.layers.lru

from lrnn.course import grading as g
from lrnn.course.grading import sandbox as sb
from lrnn.course.grading import wire

pytestmark = pytest.mark.notebook

ROOT = Path(__file__).resolve().parents[1]
SOLUTIONS = ROOT / "solutions"
SOURCE = SOLUTIONS / "01_linear_recurrence.ipynb"
FIXTURES = Path(__file__).resolve().parent / "fixtures"
FULL = {"ex1.1": 2, "ex1.2": 4, "ex1.3": 3, "ex1.4": 3, "ex1.5": 2, "ex1.7": 1}
CELL_TIMEOUT = 10          # the looping cell costs this long; every other cell is far shorter


def slim(nb):
    """The setup, the imports and the graded cells: a quick, complete submission."""
    nb = nbformat.from_dict(nb)
    keep = []
    for cell in nb.cells:
        meta = cell.metadata.get("nbgrader")
        if meta or (cell.cell_type == "code" and "from lrnn.course.check import check" in cell.source):
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
CRASHING_KERNEL = '''def chunked_scan(a, b, T):
    return 1 / 0'''
LOOPING_STACK = '''def stack_layers(K1, D1, K2, D2):
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
            'import os\nassert os.listdir(".") == [], os.listdir(".")',
            "%matplotlib inline\nimport matplotlib.pyplot as plt\nplt.plot([1, 2])\nplt.show()",
            "from IPython.display import display\ndisplay(3)\n!echo shell commands work"]),
        "one_wrong_01_linear_recurrence.ipynb": submission({"ex1.5-solution": WRONG_RADIUS}),
        "crash_01_linear_recurrence.ipynb": submission(
            {"ex1.3-solution": CRASHING_KERNEL},
            before_first_test=['raise RuntimeError("a crash at top level")']),
        "loop_01_linear_recurrence.ipynb": submission({"ex1.4-solution": LOOPING_STACK}),
        "cheat_01_linear_recurrence.ipynb": submission({"ex1.1-solution": CHEATING_OPERATOR}),
        "review_01_linear_recurrence.ipynb": submission(before_first_test=[
            "import sys\n_here = sys._getframe(0).f_code.co_name"]),
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
    logs = []
    start = time.monotonic()
    rows = g.grade([sub], out, timeout=240, cell_timeout=CELL_TIMEOUT, workers=2,
                   solutions=SOLUTIONS, feedback_dir=feedback, log=logs.append)
    elapsed = time.monotonic() - start
    by_name = {Path(r["submission"]).name: r for r in rows}
    return {"rows": by_name, "out": out, "feedback": feedback, "sub": sub, "base": base,
            "elapsed": elapsed, "csv": out.read_bytes(), "logs": logs}


def scores(row):
    return {k: float(row[k]) for k in FULL}


def feedback_of(graded, name):
    key = g.display_key(graded["sub"] / name)
    return (graded["feedback"] / g.feedback_name(key)).read_text(encoding="utf-8")


def hidden_lines():
    """Every line of the hidden tests of chapter 1 (none may reach a student's feedback)."""
    nb = nbformat.read(SOURCE, as_version=4)
    lines = []
    for cell in nb.cells:
        if "### BEGIN HIDDEN TESTS" in cell.source:
            hidden = cell.source.split("### BEGIN HIDDEN TESTS")[1].split("### END HIDDEN")[0]
            lines += [ln.strip() for ln in hidden.splitlines() if len(ln.strip()) > 12]
    assert len(lines) > 10
    return lines


def test_full_marks(graded):
    row = graded["rows"]["full_01_linear_recurrence.ipynb"]
    assert scores(row) == FULL and float(row["total"]) == 15 and row["status"] == "graded"
    assert row["ex1.6"] == "manual"
    text = feedback_of(graded, "full_01_linear_recurrence.ipynb")
    assert "raised" not in text        # nothing from the submissions folder; magics work


def test_one_wrong_exercise_scores_exactly_the_rest(graded):
    row = graded["rows"]["one_wrong_01_linear_recurrence.ipynb"]
    assert scores(row) == dict(FULL, **{"ex1.5": 0})
    assert float(row["total"]) == 13 and float(row["max_total"]) == 15
    text = feedback_of(graded, "one_wrong_01_linear_recurrence.ipynb")
    assert "largest singular value" in text          # the check's hint reaches the student
    assert "| 1.5 · the spectral radius from the growth of A^k | 0 / 2 | failed |" in text
    assert "received:" in text and "on the input" in text
    assert "expected:" not in text and "expected " not in text.split("## Exercise 1.5")[1]
    for line in hidden_lines():                      # no hidden-test text in feedback
        assert line not in text


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
    """forbid(...) in the hidden test is decided by what the answer ran during the test; the
    feedback says what ran and accuses no one."""
    row = graded["rows"]["cheat_01_linear_recurrence.ipynb"]
    assert scores(row) == dict(FULL, **{"ex1.1": 0})
    text = feedback_of(graded, "cheat_01_linear_recurrence.ipynb")
    assert "binary_operator called lrnn.scan.binary_operator" in text
    assert "write it yourself" not in text


def test_what_could_fool_the_trace_keeps_its_points_and_goes_to_a_person(graded):
    """A student cell that reads frames could fool the trace of a banned call: the row keeps
    every point the tests gave, its status is "needs review", and the feedback shows the
    evidence without accusing (exercises without a ban or a count are not involved)."""
    row = graded["rows"]["review_01_linear_recurrence.ipynb"]
    assert scores(row) == FULL and row["status"] == "needs review"
    text = feedback_of(graded, "review_01_linear_recurrence.ipynb")
    section = text.split("## For your instructor to look at")[1]
    assert "uses sys._getframe" in section and "Nothing here says that anything is wrong" in text
    assert [line for line in section.splitlines() if line.startswith("- Exercise")] == [
        "- Exercise 1.1:", "- Exercise 1.2:", "- Exercise 1.3:", "- Exercise 1.5:"]
    assert graded["rows"]["full_01_linear_recurrence.ipynb"]["status"] == "graded"


def test_exit_kernel_death_flood_and_deleted_files(graded):
    row = graded["rows"]["chaos_01_linear_recurrence.ipynb"]
    assert scores(row) == dict(FULL, **{"ex1.5": 0})
    assert row["status"] == "kernel died"
    text = feedback_of(graded, "chaos_01_linear_recurrence.ipynb")
    assert "The kernel died" in text and "SystemExit" in text
    assert re.search(r"Cell \d+ printed more than the [\d,]+ bytes a cell may print", text)
    assert not re.search(r"printed [\d,]+ bytes", text)      # sizes are not a channel
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
    assert header[:5] == ["submission", "sha256", "assignment", "status", "sandbox"]
    assert header[-2:] == ["total", "max_total"]
    assert header[5:-2] == ["ex1.1", "ex1.2", "ex1.3", "ex1.4", "ex1.5", "ex1.6", "ex1.7"]
    assert len(rows) == 9 == len({r["submission"] for r in rows})
    expected = "bwrap" if sb.choose("auto").kind == "bwrap" else "none"
    assert {r["sandbox"] for r in rows} == {expected}
    assert not [p for p in graded["out"].parent.iterdir() if p.name.endswith(".tmp")]


@pytest.mark.slow
def test_rerun_skips_graded_retries_the_rest_and_keeps_other_rows(graded, tmp_path):
    """Graded rows with the same content are skipped; a row of any other status (here a
    parse failure, and a row marked "kernel died" by hand) is retried without --force."""
    out = tmp_path / "gb.csv"
    shutil.copy(graded["out"], out)
    rows = g.read_gradebook(out)
    full_key = g.display_key(graded["sub"] / "full_01_linear_recurrence.ipynb")
    for r in rows:
        if r["submission"] == full_key:
            r["status"], r["total"] = "kernel died", "0"
    g.write_gradebook(out, rows)
    logs = []
    g.grade([graded["sub"]], out, solutions=SOLUTIONS, feedback_dir=tmp_path / "fb",
            cell_timeout=CELL_TIMEOUT, log=logs.append)
    skipped = [m for m in logs if m.startswith("skip")]
    assert len(skipped) == 4                          # not: chaos, the two unparseable, full
    assert not any("full_01" in m or "chaos_01" in m for m in skipped)
    after = {r["submission"]: r for r in g.read_gradebook(out)}
    before = {r["submission"]: r for r in g.read_gradebook(graded["out"])}
    assert after == before                            # the retried rows came out the same


@pytest.mark.slow
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
    for name in names:                                # and byte-identical feedback
        key = g.display_key(graded["sub"] / name)
        assert (tmp_path / "fb" / g.feedback_name(key)).read_bytes() == \
            (graded["feedback"] / g.feedback_name(key)).read_bytes()


def test_gradebook_write_is_atomic(tmp_path, monkeypatch):
    out = tmp_path / "gb.csv"
    g.write_gradebook(out, [{"submission": "a", "total": 1, "max_total": 2, "ex1.1": 1}])
    before = out.read_bytes()

    def boom(*a, **k):
        raise OSError("disk full")
    monkeypatch.setattr(os, "fsync", boom)
    with pytest.raises(OSError):
        g.write_gradebook(out, [{"submission": "b", "total": 0, "max_total": 2}])
    assert out.read_bytes() == before
    assert [p.name for p in tmp_path.iterdir()] == ["gb.csv"]


# --------------------------------------------------------------------------------------
# Bad arguments: clear errors, a non-zero exit, nothing written
# --------------------------------------------------------------------------------------

def test_bad_arguments_are_clear_errors(tmp_path, capsys):
    empty = tmp_path / "empty"
    empty.mkdir()
    nb = tmp_path / "x_01_linear_recurrence.ipynb"
    nbformat.write(submission(), nb)
    out = tmp_path / "gb.csv"
    cases = [
        ([str(tmp_path / "missing.ipynb")], "does not exist"),
        ([str(empty)], "without any .ipynb"),
        ([str(nb), "--timeout", "0"], "--timeout"),
        ([str(nb), "--timeout", "-5"], "--timeout"),
        ([str(nb), "--cell-timeout", "0"], "--cell-timeout"),
        ([str(nb), "--workers", "0"], "--workers"),
        ([str(nb), "--solutions", str(empty)], "no solution notebooks"),
        ([str(nb), "--solutions", str(tmp_path / "nowhere")], "no solutions folder"),
    ]
    for args, message in cases:
        assert g.main([*args, "--out", str(out)]) == 2, args
        err = capsys.readouterr().err
        assert message in err and err.startswith("error:"), (args, err)
    assert sorted(p.name for p in tmp_path.iterdir()) == [
        "empty", "x_01_linear_recurrence.ipynb"]       # no gradebook, no feedback folder
    with pytest.raises(g.GradeError, match="does not exist"):
        g.grade([tmp_path / "missing.ipynb"], out, solutions=SOLUTIONS)


# --------------------------------------------------------------------------------------
# Time limits, kernel loss, bad file names, write errors, no sandbox
# --------------------------------------------------------------------------------------

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


def run_cells(sources, *, timeout, cell_timeout, kind="auto"):
    steps = [g.Step("code", i, source=s) for i, s in enumerate(sources)]
    box = sb.choose(kind)
    started = []
    real_start = box.start

    def start():
        kp = real_start()
        started.append(kp.pid)
        return kp
    box.start = start
    state = g.run_submission(steps, None, box, files={}, timeout=timeout,
                             cell_timeout=cell_timeout, max_output=10_000)
    return state, started


IGNORE_INTERRUPTS = "import signal\nsignal.signal(signal.SIGINT, signal.SIG_IGN)\nwhile True:\n    pass"


@pytest.mark.slow
def test_cell_that_ignores_interrupts_is_killed_and_the_rest_runs():
    """A loop that ignores the interrupt: the kernel (the whole sandbox) is killed at the cell
    limit plus a grace period, restarted, and the notebook re-run without that cell."""
    start = time.monotonic()
    state, pids = run_cells(["x = 1", IGNORE_INTERRUPTS, "assert x == 1"], timeout=60,
                            cell_timeout=2)
    assert time.monotonic() - start < 40
    out = state["outcomes"]
    assert out[0]["status"] == "ok" and out[1]["status"] == "timeout" and \
        out[2]["status"] == "ok"
    assert state["restarts"] == 1 and not state["timed_out"]
    time.sleep(0.5)
    assert len(pids) == 2 and not any(alive(pid) for pid in pids)


@pytest.mark.slow
def test_notebook_time_limit_stops_everything():
    """Cells that each stay under the cell limit, but not under the notebook's: stopped at the
    notebook limit; done cells keep their outcome; no process outlives it."""
    start = time.monotonic()
    state, pids = run_cells(["x = 1", "import time\ntime.sleep(3)", "time.sleep(3)",
                             "time.sleep(3)", "y = 2"], timeout=8, cell_timeout=5)
    elapsed = time.monotonic() - start
    assert elapsed < 8 + 7                       # the limit, plus the grace to kill
    assert state["timed_out"] and state["outcomes"][0]["status"] == "ok"
    assert 4 not in state["outcomes"]
    time.sleep(0.5)
    assert pids and not any(alive(pid) for pid in pids)


@pytest.mark.slow
def test_bad_file_name_write_error_and_no_sandbox(tmp_path):
    """A file name that is not valid UTF-8 gets its own row; a feedback file that cannot be
    written costs only its row; `--sandbox none` warns and says so in the gradebook."""
    sub = tmp_path / "subs"
    sub.mkdir()
    nb = submission({"ex1.5-solution": WRONG_RADIUS})
    bad = os.fsdecode(b"bad\xff_01_linear_recurrence.ipynb")
    nbformat.write(nb, sub / bad)
    nbformat.write(nb, sub / "blocked_01_linear_recurrence.ipynb")
    out, fb = tmp_path / "gb.csv", tmp_path / "fb"
    fb.mkdir()
    blocked = g.feedback_name(g.display_key(sub / "blocked_01_linear_recurrence.ipynb"))
    (fb / blocked).mkdir()                       # writing this feedback file fails
    logs = []
    rows = g.grade([sub], out, solutions=SOLUTIONS, feedback_dir=fb, sandbox="none",
                   cell_timeout=CELL_TIMEOUT, workers=2, log=logs.append)
    assert any(m.startswith("WARNING: grading WITHOUT a sandbox") for m in logs)
    by_name = {Path(r["submission"]).name: r for r in rows}
    assert set(by_name) == {"bad\\xff_01_linear_recurrence.ipynb",
                            "blocked_01_linear_recurrence.ipynb"}
    good = by_name["bad\\xff_01_linear_recurrence.ipynb"]
    assert good["status"] == "graded" and float(good["total"]) == 13
    assert good["sandbox"] == "none"
    assert by_name["blocked_01_linear_recurrence.ipynb"]["status"].startswith(
        "grader error: the feedback file could not be written")
    assert out.read_text(encoding="utf-8").count("\n") == 3
    logs.clear()                                 # the error row is retried, the other skipped
    g.grade([sub], out, solutions=SOLUTIONS, feedback_dir=fb, sandbox="none",
            cell_timeout=CELL_TIMEOUT, log=logs.append)
    assert [m for m in logs if m.startswith("skip")] == \
        [f"skip (already graded): {good['submission']}"]


# --------------------------------------------------------------------------------------
# The wire and the plan (no kernel)
# --------------------------------------------------------------------------------------

def test_wire_round_trip_keeps_types():
    import jax
    import jax.numpy as jnp
    value = {"a": np.arange(6, dtype=np.float32).reshape(2, 3), "b": (1, 2.5, 3 + 4j, None),
             "c": [True, "text", np.float64(0.5), np.int32(-3), np.complex64(1j)],
             "d": jnp.ones((2, 2), jnp.complex64), "key": jax.random.PRNGKey(3),
             "typed": jax.random.key(4), 7: np.zeros((0, 3), np.int64), "e": np.bool_(True)}
    back = wire.decode(wire.encode(value))
    assert set(back) == set(value)
    assert back["a"].dtype == np.float32 and np.array_equal(back["a"], value["a"])
    assert back["b"] == value["b"] and isinstance(back["b"], tuple)
    assert back["c"] == value["c"] and type(back["c"][2]) is np.float64 and \
        type(back["c"][3]) is np.int32 and type(back["c"][4]) is np.complex64
    assert isinstance(back["d"], jax.Array) and back["d"].dtype == jnp.complex64
    assert isinstance(back["key"], jax.Array) and np.array_equal(back["key"], value["key"])
    assert jnp.issubdtype(back["typed"].dtype, jax.dtypes.prng_key)
    assert np.array_equal(jax.random.key_data(back["typed"]), jax.random.key_data(value["typed"]))
    assert back[7].shape == (0, 3) and type(back["e"]) is np.bool_
    assert type(wire.decode(wire.encode(np.float32(2.0)))) is np.float32
    assert isinstance(wire.decode(wire.encode(jnp.float32(2.0))), jax.Array)


@pytest.mark.parametrize("value", [object(), np.array([object()]), lambda: 1,
                                   np.array(["text"]), {object(): 1}, 10 ** 2000])
def test_wire_rejects_what_is_not_plain_data(value):
    with pytest.raises(wire.Unsendable):
        wire.encode(value)


@pytest.mark.parametrize("frame", [
    {"t": "nd", "dtype": "|O", "shape": [1], "b64": ""},
    {"t": "nd", "dtype": "<f4", "shape": [3], "b64": "AAAA"},          # size mismatch
    {"t": "nd", "dtype": "<f4", "shape": [-1], "b64": ""},
    {"t": "nd", "dtype": "float32", "shape": [], "b64": "AAAAAA=="},   # not a dtype.str
    {"t": "ref", "name": "x"},                                           # no refs here
    {"t": "pickle", "v": "gASV"},
    {"t": "key", "impl": "os.system", "data": {}},
    {"t": "dict", "k": [[1]], "v": [1]},
])
def test_wire_rejects_bad_frames(frame):
    with pytest.raises(wire.WireError):
        wire.decode(frame)


def test_wire_sends_a_model_config_to_a_kernel_only():
    from lrnn import model
    cfg = model.ModelConfig(layer="lru", d_input=2, d_output=3, depth=2, d_model=8, d_state=6,
                            pool="none", scan_method="sequential")
    frame = wire.encode({"cfg": cfg})
    back = wire.decode(frame, resolve=lambda name: None)          # as the kernel decodes
    assert back["cfg"] == cfg and type(back["cfg"]) is model.ModelConfig
    with pytest.raises(wire.WireError, match="model configuration"):
        wire.decode(frame)                                          # as the grader decodes
    bad = {"t": "model_config", "v": wire.encode({"layer": "lru", "d_model": -4})}
    with pytest.raises(wire.WireError, match="invalid model configuration"):
        wire.decode(bad, resolve=lambda name: None)
    with pytest.raises(wire.WireError, match="named fields"):
        wire.decode({"t": "model_config", "v": [1, 2]}, resolve=lambda name: None)


def test_frame_reader_limits():
    reader = wire.FrameReader(100)
    data = wire.pack({"a": 1})
    assert reader.feed(data[:3]) == [] and reader.feed(data[3:] + data) == [{"a": 1}] * 2
    with pytest.raises(wire.WireError, match="limit"):
        wire.FrameReader(10).feed(wire.pack({"a": "x" * 50}))
    with pytest.raises(wire.WireError, match="unreadable"):
        wire.FrameReader(100).feed(len(b"{no").to_bytes(4, "big") + b"{no")


def test_free_names_and_plan():
    import ast
    code = ("from lrnn.course.check import forbid as _f\n_x = f(np.ones(3))\n"
            "assert all(np.allclose(a, b) for a, b in zip(_x, g(_x)))\n"
            "with _f('m.h'):\n    h(1)\n")
    assert sorted(g.free_names(ast.parse(code))) == ["all", "f", "g", "h", "np", "zip"]
    sols = g.load_solutions(SOLUTIONS)
    sol = sols["01_linear_recurrence"]
    assert {"binary_operator", "parallel_scan", "chunked_scan", "stack_layers",
            "spectral_radius"} <= sol["student_names"]
    nb = submission()
    del nb.cells[next(i for i, c in enumerate(nb.cells)          # a deleted test cell goes
                      if c.metadata.get("nbgrader", {}).get("grade_id") == "ex1.5")]  # to the end
    steps, where, _ = g.plan(nb, sol["table"])
    assert [s.kind for s in steps].count("test") == 6
    assert steps[-1].kind == "test" and steps[-1].cell is None
    assert not any("check(" in s.source for s in steps if s.kind == "code")


# --------------------------------------------------------------------------------------
# Bad inputs to the exercise build lose nothing
# --------------------------------------------------------------------------------------

def _snapshot(folder):
    return {p.name: p.read_bytes() for p in sorted(Path(folder).iterdir())}


@pytest.mark.slow
def test_exercises_build_never_deletes_or_overwrites_on_bad_input(tmp_path):
    """`python -m lrnn exercises build` with an empty or missing solutions folder, the same
    folder twice, or an exercises path that is a file: a clear error, a non-zero exit, and
    every file as it was. With a solution missing, the other notebooks are rebuilt but the
    orphan is kept (exit 1)."""
    import subprocess
    import sys
    exe = tmp_path / "exercises"
    shutil.copytree(ROOT / "exercises", exe)
    (exe / "notes.txt").write_text("mine", encoding="utf-8")
    before = _snapshot(exe)
    empty = tmp_path / "empty"
    empty.mkdir()
    a_file = tmp_path / "a_file.ipynb"
    a_file.write_text("keep me", encoding="utf-8")
    sol_copy = tmp_path / "solutions"
    shutil.copytree(SOLUTIONS, sol_copy)
    sol_before = _snapshot(sol_copy)

    def build(*args):
        return subprocess.run([sys.executable, "-m", "lrnn.course.exercises", "build", *args],
                              capture_output=True, text=True, cwd=tmp_path)
    for args, message in [
        (["--solutions", str(empty), "--exercises", str(exe)], "no solution notebooks"),
        (["--solutions", str(tmp_path / "nowhere"), "--exercises", str(exe)],
         "no solutions folder"),
        (["--solutions", str(sol_copy), "--exercises", str(sol_copy)], "same folder"),
        (["--solutions", str(sol_copy), "--exercises", str(a_file)], "expected a folder"),
    ]:
        proc = build(*args)
        said = proc.stdout + proc.stderr               # a refusal as the line is parsed: stderr
        assert proc.returncode == 2 and message in said, (args, said)
        assert _snapshot(exe) == before and _snapshot(sol_copy) == sol_before
        assert a_file.read_text(encoding="utf-8") == "keep me"
    partial = tmp_path / "partial"
    partial.mkdir()
    shutil.copy(SOLUTIONS / "01_linear_recurrence.ipynb", partial)
    proc = build("--solutions", str(partial), "--exercises", str(exe))
    assert proc.returncode == 1 and "have no solution" in proc.stdout
    assert _snapshot(exe) == before                 # 01 was already up to date; none deleted
    assert not [p for p in exe.iterdir() if p.name.endswith(".tmp")]


# --------------------------------------------------------------------------------------
# The grader itself killed: nothing survives it, nothing is left behind
# --------------------------------------------------------------------------------------

def _processes_of(uids):
    found = []
    for status in Path("/proc").glob("[0-9]*/status"):
        try:
            for line in status.read_text().splitlines():
                if line.startswith("Uid:"):
                    if int(line.split()[1]) in uids:
                        found.append(int(status.parent.name))
                    break
        except (OSError, ValueError):
            continue
    return found


@pytest.mark.slow
def test_killed_grader_leaves_no_process_and_no_temporary_file(tmp_path):
    """SIGKILL to the grader while a sandboxed notebook sleeps: the sandbox dies with it, the
    gradebook is as before, no temporary file is left, and the lock is free again."""
    import signal
    import subprocess
    import sys
    if os.geteuid() != 0 or sb.choose("auto").kind != "bwrap":
        pytest.skip("needs root and bubblewrap: sandbox processes are found by their user id")
    sub = tmp_path / "subs"
    sub.mkdir()
    nbformat.write(submission(before_first_test=["import time\ntime.sleep(120)"]),
                   sub / "slow_01_linear_recurrence.ipynb")
    out = tmp_path / "gb.csv"
    g.write_gradebook(out, [{"submission": "other", "total": 1, "max_total": 2}])
    before = out.read_bytes()
    proc = subprocess.Popen([sys.executable, "-m", "lrnn.course.grading", str(sub), "--out", str(out),
                             "--sandbox", "bwrap"], stdout=subprocess.DEVNULL,
                            stderr=subprocess.DEVNULL)
    uids = set(sb.grader_uids(proc.pid))
    deadline = time.monotonic() + 60
    while not _processes_of(uids) and time.monotonic() < deadline:
        time.sleep(0.2)
    assert _processes_of(uids), "the sandbox never started"
    time.sleep(1)
    proc.send_signal(signal.SIGKILL)
    proc.wait(timeout=10)
    deadline = time.monotonic() + 10
    while _processes_of(uids) and time.monotonic() < deadline:
        time.sleep(0.2)
    assert _processes_of(uids) == []
    assert out.read_bytes() == before
    assert sorted(p.name for p in tmp_path.iterdir()) == ["feedback", "gb.csv", "gb.csv.lock",
                                                          "subs"]
    assert list((tmp_path / "feedback").iterdir()) == []
    assert not list(Path("/tmp").glob(f"lrnn-kernel-{proc.pid}-*"))
    with g.GradebookLock(out):                  # the dead grader's lock is free
        pass
    left = [d for _, parent in sb._cgroup_parents()
            for d in Path(parent).glob(f"lrnn-kernel-{proc.pid}-*")]
    sb.clean_stale_cgroups()                     # what the next grader does first
    assert not [d for d in left if d.exists()]


def test_stale_working_folders_of_killed_graders_are_removed(tmp_path, monkeypatch):
    """Without a sandbox, kernels work in folders of the grader's /tmp; a grader that was
    killed leaves its folders, which the next one removes (never those of a live grader)."""
    monkeypatch.setattr(sb.tempfile, "gettempdir", lambda: str(tmp_path))
    dead = subprocess_pid_that_exited()
    stale = tmp_path / f"lrnn-kernel-{dead}-abc"
    live = tmp_path / f"lrnn-kernel-{os.getppid()}-abc"
    for d in (stale, live):
        (d / "home").mkdir(parents=True)
    sb.clean_stale_workdirs()
    assert not stale.exists() and live.exists()


def subprocess_pid_that_exited():
    import subprocess
    import sys
    p = subprocess.Popen([sys.executable, "-c", "pass"])
    p.wait()
    return p.pid


@pytest.mark.slow
def test_nothing_beside_the_submissions_is_shown_to_kernels(tmp_path):
    """Only the submission enters its kernel's folder: not a data file beside it, nor (with
    --out and --feedback-dir in the submissions folder) the gradebook, its lock or anyone's
    feedback."""
    sub = tmp_path / "subs"
    sub.mkdir()
    (sub / "data.csv").write_text("1,2\n", encoding="utf-8")
    peek = ("import os\nseen = sorted(os.listdir('.'))\n"
            "assert seen == [], seen")
    nbformat.write(submission(before_first_test=[peek]), sub / "a_01_linear_recurrence.ipynb")
    nbformat.write(submission(), sub / "b_01_linear_recurrence.ipynb")
    for force in (False, True):                  # the second run finds the first's files
        rows = g.grade([sub], sub / "gradebook.csv", feedback_dir=sub, force=force,
                       solutions=SOLUTIONS, cell_timeout=CELL_TIMEOUT, log=lambda *a: None)
    assert {float(r["total"]) for r in rows} == {15}
    text = (sub / g.feedback_name(g.display_key(sub / "a_01_linear_recurrence.ipynb"))
            ).read_text(encoding="utf-8")
    assert "raised" not in text


# The official tests' forbid/count_calls are the grader's own

class FakeSession:
    def __init__(self):
        self.events = []

    def push_forbid(self, targets):
        self.events.append(("forbid", tuple(targets)))

    def pop_forbid(self):
        self.events.append(("unforbid",))

    def push_counter(self, counter):
        self.events.append(("count", counter.name))
        counter.n += 3                         # as if the kernel had counted three calls

    def pop_counter(self, counter):
        self.events.append(("uncount", counter.name))


def test_forbid_and_count_calls_go_to_the_session_under_the_grader():
    from lrnn.course.grading.context import grader_context, test_builtins
    session = FakeSession()
    ns = {"__builtins__": test_builtins()}
    exec("from lrnn.course.check import count_calls, forbid", ns)
    forbid, count_calls = ns["forbid"], ns["count_calls"]
    with grader_context(session):
        with forbid("lrnn.layers.lru.forward_blowup"), count_calls("anything") as calls:
            lrnn.layers.lru.forward_blowup(0.5, 0.5)      # not patched here: the kernel's business
    assert calls.n == 3
    assert session.events == [("forbid", ("lrnn.layers.lru.forward_blowup",)),
                              ("count", "anything"), ("uncount", "anything"), ("unforbid",)]


# Arguments checked before any work; names and keys one to one

def test_out_must_be_a_gradebook_the_grader_wrote(tmp_path):
    sub = tmp_path / "subs"
    sub.mkdir()
    alice = sub / "alice_01_linear_recurrence.ipynb"
    alice.write_text('{"cells": [], "metadata": {}, "nbformat": 4, "nbformat_minor": 5}')
    notes = tmp_path / "notes.csv"
    notes.write_text("my notes\n")
    for out in (alice, notes):
        before = out.read_bytes()
        assert g.main([str(sub), "--out", str(out), "--sandbox", "none"]) == 2
        assert out.read_bytes() == before
    with pytest.raises(g.GradeError, match="not a gradebook written by the grader"):
        g.grade([sub], notes, solutions=SOLUTIONS, sandbox="none")
    with pytest.raises(g.GradeError, match="expected a .csv"):
        g.grade([sub], tmp_path / "gb.txt", solutions=SOLUTIONS, sandbox="none")


def test_infinite_timeout_and_missing_sandbox_path_are_refused(tmp_path):
    nb = tmp_path / "a_01_linear_recurrence.ipynb"
    nbformat.write(submission(), nb)
    out = tmp_path / "gb.csv"
    for extra in (["--timeout", "inf"], ["--cell-timeout", "nan"],
                  ["--sandbox-path", str(tmp_path / "nowhere")]):
        assert g.main([str(nb), "--out", str(out), "--sandbox", "none", *extra]) == 2, extra
    assert not out.exists()


def test_keys_and_feedback_names_are_one_to_one(tmp_path):
    raw = os.fsdecode(b"a\xffb.ipynb")
    keys = {g.display_key(tmp_path / n) for n in (raw, "a\\xffb.ipynb", "a\\\\xffb.ipynb")}
    assert len(keys) == 3
    names = {g.feedback_name(k) for k in keys | {"x/a b.ipynb", "x/a_b.ipynb"}}
    assert len(names) == 5 and all(re.search(r"-[0-9a-f]{64}\.md$", n) for n in names)


@pytest.mark.slow
@pytest.mark.parametrize("source", ["a" + ".b" * 200_000, "x = " + "-" * 100_000 + "1"])
def test_nesting_too_deep_to_parse_is_skipped_not_a_grader_error(source):
    """A student cell whose syntax tree exhausts the stack or memory (RecursionError,
    MemoryError in ``ast.parse``) cannot run either: the review scan skips it and never
    raises into the grader."""
    from lrnn.course.grading.review import flags
    assert flags([(0, "import numpy as np"), (1, source)]) == []


def test_hidden_tests_importing_the_old_checker_name_get_the_graders_forbid():
    """``from lrnn.check import forbid`` in a hidden test (the checker's old name) must get
    the grader's ``forbid``, which travels to the kernel, not the notebook one."""
    from lrnn.course.grading import context
    session = FakeSession()
    ns = {"__builtins__": context.test_builtins()}
    exec("from lrnn.check import forbid", ns)
    assert ns["forbid"] is context.forbid
    with context.grader_context(session):
        with ns["forbid"]("lrnn.scan.binary_operator"):
            pass
    assert session.events == [("forbid", ("lrnn.scan.binary_operator",)), ("unforbid",)]


@pytest.mark.slow
def test_parsing_in_threads_never_raises_cpythons_depth_mismatch():
    """CPython 3.11 shares the AST builder's depth counter between threads (cpython#106905):
    without the grader's parse lock, two workers parsing while the garbage collector runs
    finalisers get a spurious SystemError (seen in CI as a "grader error" row)."""
    import sys
    import threading
    from lrnn.course.grading.solutions import _python_ast
    source = "\n".join(f"x{i} = [(a, b) for a in range({i}) if f(g(h(a + {i} * 2)))]"
                       for i in range(300))
    errors = []

    class Finaliser:
        def __del__(self):
            sum(range(50))                  # Python code in the collector: a thread switch

    def parse(n):
        for _ in range(n):
            try:
                assert _python_ast(source) is not None
            except BaseException as e:  # noqa: BLE001 - reported below
                errors.append(repr(e))

    def churn(n):
        for _ in range(n):
            a, b = Finaliser(), Finaliser()
            a.other, b.other = b, a

    interval = sys.getswitchinterval()
    sys.setswitchinterval(1e-6)
    try:
        threads = [threading.Thread(target=parse, args=(40,)) for _ in range(2)]
        threads.append(threading.Thread(target=churn, args=(30_000,)))
        for t in threads:
            t.start()
        for t in threads:
            t.join()
    finally:
        sys.setswitchinterval(interval)
    assert errors == []


def test_a_depth_mismatch_from_outside_the_lock_is_retried(monkeypatch):
    """A library thread parsing outside the grader's lock can still race it: the spurious
    error is retried, and raised (a grader error, retried by the next run) if it persists."""
    import ast
    from lrnn.course.grading import solutions
    real, calls = ast.parse, []

    def flaky(source, *args, **kwargs):
        calls.append(source)
        if len(calls) < fails:
            raise SystemError("AST constructor recursion depth mismatch (before=36, after=28)")
        return real(source, *args, **kwargs)

    monkeypatch.setattr(solutions.ast, "parse", flaky)
    fails = solutions._PARSE_TRIES
    assert isinstance(solutions._python_ast("x = 1"), ast.Module)
    calls.clear()
    fails = solutions._PARSE_TRIES + 1
    with pytest.raises(SystemError, match="depth mismatch"):
        solutions._python_ast("x = 1")
    assert len(calls) == solutions._PARSE_TRIES


@pytest.mark.parametrize("kind", ["auto", "none"])
def test_kernels_import_what_the_grader_imports_from_its_pythonpath(tmp_path, monkeypatch, kind):
    """Packages installed with ``pip install --target`` and named in ``PYTHONPATH`` (a GPU
    machine without network, say) are importable in the kernel too; a ``PYTHONPATH`` folder
    that holds a hidden one is not shown."""
    site = tmp_path / "site"
    (site / "extra_pkg").mkdir(parents=True)
    (site / "extra_pkg" / "__init__.py").write_text("ANSWER = 42\n", encoding="utf-8")
    course = tmp_path / "course"
    (course / "solutions").mkdir(parents=True)
    monkeypatch.setenv("PYTHONPATH", os.pathsep.join(
        [str(site), str(course), os.environ.get("PYTHONPATH", "")]))
    lay = sb.layout(hidden=[course / "solutions"])
    assert site.resolve() in lay.binds and str(site.resolve()) in lay.pythonpath.split(os.pathsep)
    assert course.resolve() not in lay.binds
    state, _ = run_cells(["import extra_pkg\nassert extra_pkg.ANSWER == 42"], timeout=60,
                         cell_timeout=30, kind=kind)
    assert state["outcomes"][0]["status"] == "ok", state["outcomes"][0]
