"""The autograder: run submissions, score every exercise, write a gradebook and feedback.

    python -m lrnn.grade SUBMISSION.ipynb... | FOLDER --out gradebook.csv
        [--force] [--timeout S] [--cell-timeout S] [--feedback-dir DIR] [--workers 2]
        [--solutions DIR] [--max-output BYTES] [--sandbox auto|bwrap|none]
        [--memory-limit MB] [--max-processes N] [--sandbox-path DIR]

For every submission:

1. it is read (a symbolic link, a file over 50 MiB or an unparseable file scores zero) and
   matched to its solution notebook by the ``grade_id`` of its cells (or by file name);
2. its code cells run, in order, in a fresh kernel of their own: a small fixed program
   (:mod:`lrnn.course.harness`) started in a sandbox (:mod:`lrnn.course.sandbox`: bubblewrap
   on Linux) that sees the Python environment and the ``lrnn`` package read-only, a private
   ``/tmp`` with a copy of the plain files beside the submission, and nothing else of the
   machine: not the solutions, the other submissions, the gradebook or the feedback. The
   student's test cells are not run there;
3. at the place of each autograded test cell (or at the end, for one the student deleted),
   the grader runs the *solution's* test code (the visible ``check`` and the hidden tests) in
   its own process, with its own untouched NumPy and ``lrnn``, under full float32 matrix
   products (:func:`lrnn.course.precision.exact_matmuls`). Every name of a notebook
   function in that code is a proxy (:mod:`lrnn.course.remote`): calling it sends the
   arguments, as plain data, to the kernel, which runs the student's function (under the same
   precision policy, with the test's ``forbid``/``count_calls`` blocks in force) and sends the
   result back as plain data. All comparisons and assertions happen in the grader;
4. an exercise scores its points when its test code ran without an exception. Hand-graded
   answers are reported as ``manual`` (0 automatic points).

Time limits: per cell or test (``--cell-timeout``: interrupted, then killed), per notebook
(``--timeout``: the sandbox and everything in it are killed; what was not reached scores
zero). A kernel that dies is restarted and the notebook re-run without the cell that killed
it. The gradebook has one row per submission (keyed by its path, with its sha256); it is
rewritten atomically after each submission, under a lock; a rerun skips the submissions
already "graded" with the same content unless ``--force``, and retries every other status.
"""
from __future__ import annotations

import argparse
import ast
import builtins
import concurrent.futures
import csv
import hashlib
import io
import os
import re
import sys
import tempfile
import threading
import time
from dataclasses import dataclass
from pathlib import Path

import nbformat

from .exercises import NOTEBOOK_GLOB, cell_kind, exercise_id, exercise_table, nbgrader_meta

GRADING_ENV = "LRNN_GRADING"
FIXED_COLUMNS = ["submission", "sha256", "assignment", "status", "sandbox"]
TAIL_COLUMNS = ["total", "max_total"]
DEFAULT_TIMEOUT = 600
DEFAULT_CELL_TIMEOUT = 120
DEFAULT_MAX_OUTPUT = 200_000
MAX_RESTARTS = 3
MAX_SUBMISSION_BYTES = 50 * 2 ** 20
SIBLING_FILE_LIMIT = 20 * 2 ** 20
SIBLING_TOTAL_LIMIT = 100 * 2 ** 20
CHECK_CALL = re.compile(r"check\(\s*['\"](\d+\.\d+)['\"]")
NO_SANDBOX_WARNING = ("WARNING: grading WITHOUT a sandbox ({why}). A submission can read the "
                      "solutions and hidden tests, and change other students' files, grades "
                      "and feedback. Use it only for trusted notebooks; to sandbox, "
                      "install bubblewrap (Debian/Ubuntu: `sudo apt-get install bubblewrap`).")


class GradeError(ValueError):
    """A bad argument (missing path, empty folder, non-positive time limit, ...)."""


# ---------------------------------------------------------------------------------------
# Solutions
# ---------------------------------------------------------------------------------------

def default_solutions_dir() -> Path:
    here = Path("solutions")
    if here.is_dir():
        return here
    return Path(__file__).resolve().parents[3] / "solutions"      # src/lrnn/course/grade.py


def _python_ast(source: str):
    """The cell as a Python syntax tree (IPython magics translated), or None."""
    try:
        from IPython.core.inputtransformer2 import TransformerManager
        source = TransformerManager().transform_cell(source)
    except Exception:  # noqa: BLE001 - no IPython: plain Python only
        pass
    try:
        return ast.parse(source)
    except (SyntaxError, ValueError):
        return None


def _bound_at_top(tree) -> set[str]:
    """Names a cell binds at module level (def, class, assignment, import, for, with)."""
    names = set()

    def targets(node):
        for sub in ast.walk(node):
            if isinstance(sub, ast.Name):
                names.add(sub.id)

    for node in tree.body:
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            names.add(node.name)
        elif isinstance(node, (ast.Import, ast.ImportFrom)):
            for alias in node.names:
                names.add((alias.asname or alias.name).split(".")[0])
        elif isinstance(node, ast.Assign):
            for t in node.targets:
                targets(t)
        elif isinstance(node, (ast.AnnAssign, ast.AugAssign)):
            targets(node.target)
        elif isinstance(node, (ast.For, ast.AsyncFor)):
            targets(node.target)
        elif isinstance(node, (ast.With, ast.AsyncWith)):
            for item in node.items:
                if item.optional_vars is not None:
                    targets(item.optional_vars)
    return names


def free_names(tree) -> list[str]:
    """Names the code reads but never binds, in order of first use."""
    bound, loaded = set(), []
    for node in ast.walk(tree):
        if isinstance(node, ast.Name):
            if isinstance(node.ctx, ast.Load):
                if node.id not in loaded:
                    loaded.append(node.id)
            else:
                bound.add(node.id)
        elif isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            bound.add(node.name)
        elif isinstance(node, (ast.Import, ast.ImportFrom)):
            for alias in node.names:
                bound.add((alias.asname or alias.name).split(".")[0])
        elif isinstance(node, ast.arg):
            bound.add(node.arg)
        elif isinstance(node, ast.ExceptHandler) and node.name:
            bound.add(node.name)
    return [n for n in loaded if n not in bound]


def load_solutions(folder) -> dict[str, dict]:
    """Stem -> {"path", "title", "table", "imports", "student_names", "tests"} for every
    solution notebook. ``imports``: the top-level import statements of its ordinary code
    cells (they give the official tests ``np``, ``lrnn``, ``lru`` ...); ``student_names``:
    what its solution cells define (always taken from the student's kernel)."""
    out = {}
    for path in sorted(Path(folder).glob(NOTEBOOK_GLOB)):
        nb = nbformat.read(path, as_version=4)
        title = path.stem
        if nb.cells and nb.cells[0].cell_type == "markdown":
            first = nb.cells[0].source.strip().splitlines()[0] if nb.cells[0].source.strip() else ""
            title = first.lstrip("# ").strip() or title
        imports, student = [], set()
        for cell in nb.cells:
            if cell.cell_type != "code":
                continue
            kind = cell_kind(cell)
            tree = _python_ast(cell.source)
            if tree is None:
                continue
            if kind == "solution":
                student |= _bound_at_top(tree)
            elif kind == "":
                imports += [n for n in tree.body if isinstance(n, (ast.Import, ast.ImportFrom))]
        table = exercise_table(nb, path.name)
        tests = {}
        for row in table:
            if row["kind"] == "test":
                tree = _python_ast(row["source"])
                if tree is None:
                    raise GradeError(f"{path}: the test cell {row['grade_id']} is not valid "
                                     "Python")
                tests[row["grade_id"]] = {
                    "code": compile(tree, f"<official tests of exercise {row['exercise']}>",
                                    "exec"),
                    "free": free_names(tree)}
        needed = {n for t in tests.values() for n in t["free"]}
        out[path.stem] = {"path": str(path), "title": title, "table": table,
                          "imports": _imports_of(imports, needed),
                          "student_names": student, "tests": tests, "namespace": None}
    return out


def _imports_of(statements, needed: set):
    """Only the imports that bind a name the tests use (matplotlib, scipy.stats ... are
    left out: importing them would cost seconds for nothing)."""
    body = []
    for node in statements:
        if isinstance(node, ast.Import):
            keep = [a for a in node.names if (a.asname or a.name.split(".")[0]) in needed]
            if keep:
                body.append(ast.Import(names=keep))
        elif isinstance(node, ast.ImportFrom):
            keep = [a for a in node.names if (a.asname or a.name) in needed or a.name == "*"]
            if keep:
                body.append(ast.ImportFrom(module=node.module, names=keep, level=node.level))
    return ast.fix_missing_locations(ast.Module(body=body, type_ignores=[]))


_SETUP_LOCK = threading.Lock()


def _setup_namespace(sol) -> dict:
    """The grader's own modules for the official tests (built once per assignment)."""
    with _SETUP_LOCK:
        if sol["namespace"] is None:
            ns = {"__builtins__": builtins, "__name__": "__lrnn_official_tests__"}
            exec(compile(sol["imports"], f"<imports of {sol['path']}>", "exec"), ns)
            sol["namespace"] = ns
        return sol["namespace"]


def match_assignment(nb, name: str, solutions: dict) -> str | None:
    """The stem of the solution notebook this submission answers."""
    ids = set()
    if nb is not None:
        for cell in nb.cells:
            ex = exercise_id(nbgrader_meta(cell).get("grade_id"))
            if ex:
                ids.add(ex)
            if cell.get("cell_type") == "code":
                ids.update(CHECK_CALL.findall(cell.get("source", "")))
    best, best_n = None, 0
    for stem, sol in solutions.items():
        n = len(ids & {row["exercise"] for row in sol["table"]})
        if n > best_n:
            best, best_n = stem, n
    if best:
        return best
    for stem in sorted(solutions, key=len, reverse=True):
        if stem in name:
            return stem
    return None


# ---------------------------------------------------------------------------------------
# The plan: the student's code cells, and the official tests at their places
# ---------------------------------------------------------------------------------------

@dataclass
class Step:
    kind: str              # "code" (the student's cell, run in the kernel) or "test"
    cell: int | None       # index in the student's notebook (None: an appended test)
    source: str = ""       # code cells
    grade_id: str = ""     # tests


def _test_cell_for(cell, wanted: dict) -> str | None:
    """The grade_id of the solution test cell this submission cell stands for, if any."""
    gid = nbgrader_meta(cell).get("grade_id")
    if gid in wanted and wanted[gid]["kind"] == "test":
        return gid
    if cell.get("cell_type") == "code" and not gid:
        ids = CHECK_CALL.findall(cell.get("source", ""))
        if len(set(ids)) == 1 and f"ex{ids[0]}" in wanted and \
                wanted[f"ex{ids[0]}"]["kind"] == "test":
            return f"ex{ids[0]}"
    return None


def plan(nb, table: list[dict]):
    """(steps, {grade_id: step index}, {grade_id: the student's answer text})."""
    wanted = {row["grade_id"]: row for row in table}
    steps, where, answers = [], {}, {}
    for index, cell in enumerate(nb.cells):
        gid = _test_cell_for(cell, wanted)
        if gid:                                    # never run in the kernel
            if gid not in where:
                where[gid] = len(steps)
                steps.append(Step("test", index, grade_id=gid))
            continue
        mgid = nbgrader_meta(cell).get("grade_id")
        if mgid in wanted and wanted[mgid]["kind"] == "manual" and mgid not in answers:
            answers[mgid] = cell.get("source", "")
        if cell.get("cell_type") == "code":
            steps.append(Step("code", index, source=cell.get("source", "")))
    for gid, row in wanted.items():
        if row["kind"] == "test" and gid not in where:
            where[gid] = len(steps)
            steps.append(Step("test", None, grade_id=gid))
    return steps, where, answers


# ---------------------------------------------------------------------------------------
# Running a submission
# ---------------------------------------------------------------------------------------

def _quiet_print(*args, **kwargs):
    return None


def run_official_test(kernel, sol, grade_id: str, limit: float) -> dict:
    """Run the solution's test code for ``grade_id`` in this process against the notebook in
    ``kernel``. Returns the outcome; raises ``KernelLost`` if the kernel is lost."""
    from . import precision
    from .check import _core, check
    from .remote import Proxy, Session, Unavailable
    test = sol["tests"][grade_id]
    ns = dict(_setup_namespace(sol))
    ns["check"] = check
    ns["print"] = _quiet_print
    session = Session(kernel, limit)
    wanted = [n for n in test["free"]
              if n in sol["student_names"] or (n not in ns and not hasattr(builtins, n))]
    for name, info in session.names(wanted).items():
        if name not in wanted or not isinstance(info, dict):
            continue
        kind = info.get("kind")
        if kind == "function":
            ns[name] = Proxy(name, session)
        elif kind == "value":
            from . import wire
            try:
                ns[name] = wire.decode(info.get("value"))
            except wire.WireError as e:
                ns[name] = Unavailable(name, f"unreadable ({e})")
        elif kind == "unsendable":
            ns[name] = Unavailable(name, str(info.get("detail", "not plain data"))[:300])
        else:
            ns.pop(name, None)                  # missing: a NameError, as in the notebook
    try:
        with _core.grader_context(session), precision.exact_matmuls():
            exec(test["code"], ns)
    except _core.GraderAbort:
        raise
    except BaseException as e:  # noqa: BLE001 - every failure of the test is the outcome
        try:
            text = str(e)
        except Exception:  # noqa: BLE001
            text = ""
        return {"status": "error", "ename": type(e).__name__, "evalue": text[:4000]}
    return {"status": "ok"}


def run_submission(steps, sol, sandbox, *, files: dict, timeout: float, cell_timeout: float,
                   max_output: int) -> dict:
    """Run the steps; returns {"outcomes": {step: outcome}, "timed_out", "restarts",
    "fatal", "kernel_s"}. Every wait is bounded by ``timeout`` (plus a few seconds of grace
    to kill the sandbox)."""
    from .remote import CallTimeout, Kernel, KernelLost
    start = time.monotonic()
    deadline = start + timeout
    outcomes: dict[int, dict] = {}
    killers: set[int] = set()
    state = {"timed_out": False, "restarts": 0, "fatal": None}
    while True:
        try:
            kernel = Kernel(sandbox, files=files, deadline=deadline)
        except KernelLost as e:
            if time.monotonic() >= deadline:
                state["timed_out"] = True
            else:
                state["fatal"] = f"the kernel could not start ({e})"[:2000]
                state["fatal_kind"] = "grader error"
            break
        lost_at = None
        try:
            for pos, step in enumerate(steps):
                if pos in killers or (step.kind == "test" and pos in outcomes):
                    continue
                now = time.monotonic()
                if now >= deadline:
                    state["timed_out"] = True
                    break
                limit = min(now + cell_timeout, deadline)
                try:
                    if step.kind == "code":
                        out = kernel.run_cell(step.source, limit)
                        size = out.get("output_bytes", 0)
                        out = {"status": out.get("status", "error"),
                               "ename": str(out.get("ename", ""))[:100],
                               "evalue": str(out.get("evalue", ""))[:4000],
                               "output_bytes": size if isinstance(size, int) else 0}
                        out["truncated"] = out["output_bytes"] > max_output
                    else:
                        try:
                            out = run_official_test(kernel, sol, step.grade_id, limit)
                        except CallTimeout:
                            out = {"status": "timeout", "ename": "CallTimeout", "evalue": ""}
                except KernelLost as e:
                    if time.monotonic() >= deadline - 0.05 and limit >= deadline - 0.05:
                        state["timed_out"] = True
                        break
                    out = {"status": "timeout" if e.reason == "timeout" else "died",
                           "ename": "KernelLost", "evalue": e.detail[:2000]}
                    outcomes.setdefault(pos, out)
                    killers.add(pos)
                    lost_at = pos
                    break
                if out["status"] == "timeout" and limit >= deadline - 0.05 and \
                        time.monotonic() >= deadline - 0.05:
                    state["timed_out"] = True          # the notebook's limit, not the cell's
                    break
                outcomes.setdefault(pos, out)
        finally:
            kernel.kill()
        if state["timed_out"] or lost_at is None:
            break
        state["restarts"] += 1
        if state["restarts"] > MAX_RESTARTS:
            state["fatal"] = (f"the kernel was lost {state['restarts']} times; the cells not "
                              "run by then score zero")
            state["fatal_kind"] = "kernel died"
            break
    state["outcomes"] = outcomes
    state["kernel_s"] = time.monotonic() - start
    return state


# ---------------------------------------------------------------------------------------
# Scoring one submission
# ---------------------------------------------------------------------------------------

def _title(ex_id: str) -> str:
    from . import check
    try:
        return check.get(ex_id).title
    except KeyError:
        return "open question"


def sha256(path) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for chunk in iter(lambda: f.read(1 << 20), b""):
            h.update(chunk)
    return h.hexdigest()


def display_key(path) -> str:
    """The submission's absolute path as text that any file can hold (a name that is not
    valid UTF-8 keeps its bytes as backslash escapes)."""
    text = os.path.abspath(os.fspath(path))
    return text.encode("utf-8", "surrogateescape").decode("utf-8", "backslashreplace")


def sibling_files(folder, private=()) -> dict[str, bytes]:
    """The plain files beside a submission (data it may read): not notebooks, links, hidden
    files, subfolders or ``private`` files (the gradebook, its lock, feedback written beside
    the submissions); nothing over 20 MiB, at most 100 MiB in all."""
    private = {os.path.abspath(p) for p in private}
    out, total = {}, 0
    try:
        entries = sorted(Path(folder).iterdir())
    except OSError:
        return out
    for p in entries:
        try:
            if p.is_symlink() or not p.is_file() or p.suffix == ".ipynb" or \
                    p.name.startswith(".") or os.path.abspath(p) in private:
                continue
            p.name.encode("utf-8")
            size = p.stat().st_size
            if size > SIBLING_FILE_LIMIT or total + size > SIBLING_TOTAL_LIMIT:
                continue
            out[p.name] = p.read_bytes()
            total += size
        except (OSError, UnicodeEncodeError):
            continue
    return out


def _read_submission(path: Path):
    """(notebook or None, reason it cannot be graded or None, sha256)."""
    if path.is_symlink():
        return None, "it is a symbolic link (submit the notebook file itself)", ""
    try:
        size = path.stat().st_size
    except OSError as e:
        return None, f"it cannot be read ({e.strerror})", ""
    if size > MAX_SUBMISSION_BYTES:
        return None, f"it is larger than {MAX_SUBMISSION_BYTES // 2 ** 20} MiB", sha256(path)
    digest = sha256(path)
    try:
        with open(path, encoding="utf-8") as f:
            nb = nbformat.read(f, as_version=4)
        if not isinstance(nb.get("cells"), list):
            raise ValueError("no list of cells")
        for cell in nb.cells:
            if cell.get("cell_type") not in ("code", "markdown", "raw") or \
                    not isinstance(cell.get("source", ""), str):
                raise ValueError("malformed cell")
    except Exception as e:  # noqa: BLE001 - any parse failure is a zero, with the reason
        return None, f"it cannot be parsed as a notebook ({type(e).__name__}: {str(e)[:300]})", \
            digest
    return nb, None, digest


def grade_submission(path, solutions: dict, *, sandbox, timeout=DEFAULT_TIMEOUT,
                     cell_timeout=DEFAULT_CELL_TIMEOUT, max_output=DEFAULT_MAX_OUTPUT,
                     private=()) -> dict:
    """Grade one notebook. Returns {"row": {...}, "feedback": markdown, "results": [...]}."""
    path = Path(path)
    key = display_key(path)
    nb, problem, digest = _read_submission(path)
    row = {"submission": key, "sha256": digest, "sandbox": sandbox.kind}
    stem = match_assignment(nb, path.name, solutions)
    if stem is None:
        row.update({"assignment": "", "status": "unknown assignment" if problem is None
                    else "cannot be parsed", "total": 0, "max_total": 0})
        reason = problem or "no exercise of any solution notebook found in it"
        return {"row": row, "results": [], "feedback": _feedback(key, None, [], reason, [])}
    sol = solutions[stem]
    row["assignment"] = stem
    notes, run, where, answers = [], None, {}, {}
    if problem is not None:
        status = "cannot be parsed"
        notes.append(f"The file cannot be graded: {problem}. Every exercise scores zero.")
    else:
        steps, where, answers = plan(nb, sol["table"])
        run = run_submission(steps, sol, sandbox, files=sibling_files(path.parent, private),
                             timeout=timeout, cell_timeout=cell_timeout, max_output=max_output)
        status = "graded"
        if run["timed_out"]:
            status = "notebook time limit"
            notes.append(f"The notebook ran longer than the limit of {timeout:g} s and was "
                         "stopped; exercises not reached score zero.")
        if run["fatal"]:
            status = run.get("fatal_kind", "grader error") if status == "graded" else status
            notes.append(f"The notebook could not be run to the end: {run['fatal']}")
        outcomes = run["outcomes"]
        died = sorted(steps[i].cell for i, c in outcomes.items()
                      if c["status"] == "died" and steps[i].kind == "code")
        if died:
            notes.append("The kernel died (sys.exit/os._exit, a crash, or out of memory) in "
                         f"cell(s) {', '.join(map(str, died))}; the notebook was re-run "
                         "without them.")
        killed = sorted(steps[i].cell for i, c in outcomes.items()
                        if c["status"] == "timeout" and c.get("ename") == "KernelLost" and
                        steps[i].kind == "code")
        if killed:
            notes.append(f"Cell(s) {', '.join(map(str, killed))} did not stop when interrupted "
                         "at the time limit: the kernel was killed and the notebook re-run "
                         "without them.")
        if any(c.get("ename") == "KernelLost" for c in outcomes.values()):
            status = "kernel died" if status == "graded" else status
        died_tests = [exercise_id(steps[i].grade_id) for i, c in sorted(outcomes.items())
                      if c.get("ename") == "KernelLost" and steps[i].kind == "test"]
        if died_tests:
            notes.append("The kernel died or stopped answering while exercise(s) "
                         f"{', '.join(died_tests)} were tested (sys.exit/os._exit, a crash, "
                         "out of memory, or a call that never returned); the notebook was "
                         "re-run for the exercises after it.")
        for i, c in sorted(outcomes.items()):
            step = steps[i]
            if step.kind != "code":
                continue
            if c["status"] == "error":
                notes.append(f"Cell {step.cell} raised {c.get('ename')}: "
                             f"{c.get('evalue', '')[:300]}")
            elif c["status"] == "timeout":
                notes.append(f"Cell {step.cell} ran longer than {cell_timeout:g} s and was "
                             "interrupted.")
            if c.get("truncated"):
                notes.append(f"Cell {step.cell} printed {c['output_bytes']:,} bytes of output "
                             f"(more than the {max_output:,} bytes a cell may print).")
    results = []
    for r in sol["table"]:
        ex = {"exercise": r["exercise"], "grade_id": r["grade_id"], "points": r["points"],
              "title": _title(r["exercise"])}
        if r["kind"] == "manual":
            ex.update(score="manual", result="graded by hand",
                      detail=(answers.get(r["grade_id"], "").strip()[:2000]
                              if run is not None else ""))
        elif run is None:
            ex.update(score=0.0, result="not run", detail="the file cannot be graded")
        else:
            c = run["outcomes"].get(where[r["grade_id"]])
            if c is None:
                reason = ("not reached: the notebook time limit was hit first"
                          if run["timed_out"] else "not run")
                ex.update(score=0.0, result="not run", detail=reason)
            elif c["status"] == "ok":
                ex.update(score=r["points"], result="passed", detail="")
            elif c["status"] == "timeout":
                ex.update(score=0.0, result="time limit",
                          detail=f"the test ran longer than {cell_timeout:g} s and was "
                                 "stopped (an infinite loop?)")
            elif c["status"] == "died":
                ex.update(score=0.0, result="kernel died",
                          detail="the kernel died while this exercise was tested "
                                 "(sys.exit/os._exit, a crash, or out of memory)")
                status = "kernel died" if status == "graded" else status
            else:
                detail = c.get("evalue", "")
                if c.get("ename") != "ExerciseFailed":      # check() already says what failed
                    detail = f"{c.get('ename')}: {detail}"
                ex.update(score=0.0, result="failed", detail=detail)
        results.append(ex)
    auto = [e for e in results if e["score"] != "manual"]
    row["status"] = status
    for e in results:
        row[f"ex{e['exercise']}"] = e["score"]
    row["total"] = sum(e["score"] for e in auto)
    row["max_total"] = sum(e["points"] for e in auto)
    return {"row": row, "results": results,
            "feedback": _feedback(key, sol, results, None, notes)}


def _fmt(x) -> str:
    if isinstance(x, str):
        return x
    return f"{x:g}"


def _feedback(key, sol, results, reason, notes) -> str:
    out = io.StringIO()
    out.write(f"# Feedback on `{Path(key).name}`\n\n")
    if sol is None:
        out.write(f"**Score: 0.** This submission could not be graded: {reason}.\n")
        return out.getvalue()
    auto = [e for e in results if e["score"] != "manual"]
    manual = [e for e in results if e["score"] == "manual"]
    got = sum(e["score"] for e in auto)
    total = sum(e["points"] for e in auto)
    out.write(f"Assignment: **{sol['title']}** (`{Path(sol['path']).name}`)\n\n")
    out.write(f"**Automatic score: {_fmt(got)} / {_fmt(total)} points**")
    if manual:
        out.write(f", plus {_fmt(sum(e['points'] for e in manual))} points graded by hand")
    out.write(".\n\n")
    for note in notes:
        out.write(f"- {note}\n")
    if notes:
        out.write("\n")
    out.write("| Exercise | Points | Result |\n|---|---|---|\n")
    for e in results:
        score = "–" if e["score"] == "manual" else _fmt(e["score"])
        out.write(f"| {e['exercise']} · {e['title']} | {score} / {_fmt(e['points'])} | "
                  f"{e['result']} |\n")
    for e in results:
        if e["result"] == "passed":
            continue
        out.write(f"\n## Exercise {e['exercise']} · {e['title']}: {e['result']}\n\n")
        if e["score"] == "manual":
            out.write("Graded by hand (open question). Your answer:\n\n")
            text = e["detail"] or "(no answer found)"
            out.write("> " + text.replace("\n", "\n> ") + "\n")
        else:
            detail = e["detail"].replace("```", "'''")
            out.write(f"```text\n{detail[:6000]}\n```\n")
    return out.getvalue()


# ---------------------------------------------------------------------------------------
# Gradebook
# ---------------------------------------------------------------------------------------

def _ex_key(col: str):
    return tuple(int(p) for p in col[2:].split(".") if p.isdigit())


def read_gradebook(path) -> list[dict]:
    path = Path(path)
    if not path.exists():
        return []
    with open(path, newline="", encoding="utf-8") as f:
        return list(csv.DictReader(f))


def write_gradebook(path, rows: list[dict]):
    """Write ``rows`` atomically (temporary file in the same folder, then ``os.replace``)."""
    path = Path(path)
    ex_cols = sorted({k for r in rows for k in r if re.fullmatch(r"ex\d+\.\d+", k)},
                     key=_ex_key)
    columns = FIXED_COLUMNS + ex_cols + TAIL_COLUMNS
    rows = sorted(rows, key=lambda r: r["submission"])
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    try:
        with os.fdopen(fd, "w", newline="", encoding="utf-8") as f:
            w = csv.DictWriter(f, fieldnames=columns, extrasaction="ignore")
            w.writeheader()
            for r in rows:
                w.writerow({k: _fmt(v) if isinstance(v, (int, float)) else v
                            for k, v in r.items()})
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
    except BaseException:
        if os.path.exists(tmp):
            os.unlink(tmp)
        raise


def _clean_stale_temporaries(out: Path):
    """Temporary gradebooks left by a grader that was killed while writing."""
    for p in out.parent.glob(f".{out.name}.*.tmp"):
        try:
            p.unlink()
        except OSError:
            pass


class _GradebookLock:
    """An exclusive lock on ``<gradebook>.lock``: two graders never write one gradebook."""

    def __init__(self, out: Path):
        self.path = out.parent / f"{out.name}.lock"
        self.fd = None

    def __enter__(self):
        try:
            import fcntl
        except ImportError:
            return self
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self.fd = os.open(self.path, os.O_RDWR | os.O_CREAT, 0o644)
        try:
            fcntl.flock(self.fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError:
            os.close(self.fd)
            self.fd = None
            raise GradeError(f"another grader is writing {self.path.parent / self.path.stem}; "
                             "wait for it to finish") from None
        return self

    def __exit__(self, *exc):
        if self.fd is not None:
            os.close(self.fd)
            self.fd = None
        return False


def feedback_name(key: str) -> str:
    stem = re.sub(r"[^A-Za-z0-9_.-]+", "_", Path(key).stem)[:80]
    return f"{stem}-{hashlib.sha1(key.encode('utf-8', 'backslashreplace')).hexdigest()[:8]}.md"


def collect(paths) -> list[Path]:
    """The notebooks to grade. A missing path or a folder without notebooks is an error."""
    found = []
    if not paths:
        raise GradeError("no submissions given")
    for p in paths:
        p = Path(p)
        if p.is_dir():
            inside = []
            for root, dirs, files in os.walk(p):          # symbolic links to folders: not
                dirs[:] = sorted(d for d in dirs if d != ".ipynb_checkpoints")    # followed
                inside += [Path(root) / f for f in sorted(files) if f.endswith(".ipynb")]
            if not inside:
                raise GradeError(f"{display_key(p)} is a folder without any .ipynb notebook")
            found += inside
        elif p.exists() or p.is_symlink():
            found.append(p)
        else:
            raise GradeError(f"{display_key(p)} does not exist")
    unique = {}
    for p in found:
        unique.setdefault(display_key(p), p)
    return list(unique.values())


def _preload(sols, *, references: bool):
    """Import what the official tests use: the checkers, each assignment's imports and, with
    ``references`` (no sandbox: a submission could change files on disk before the grader
    reads them), every reference module. Runs in a thread beside the first kernels."""
    import importlib
    from . import check, precision, remote, wire  # noqa: F401
    check.load_all()
    for sol in sols.values():
        _setup_namespace(sol)
    if references:
        for name in ("lrnn.scan", "lrnn.orthogonal", "lrnn.layers.lru", "lrnn.layers.rotrnn",
                     "lrnn.layers.ornn", "lrnn.layers.lstm", "lrnn.layers.gru",
                     "lrnn.rotlstm", "lrnn.model", "scipy.linalg"):
            try:
                importlib.import_module(name)
            except ImportError:
                pass


def _check_positive(name, value, *, integer=False, minimum=None):
    ok = isinstance(value, (int, float)) and not isinstance(value, bool) and value == value
    if ok and minimum is not None:
        ok = value >= minimum
    elif ok:
        ok = value > 0
    if not ok or (integer and int(value) != value):
        want = f">= {minimum}" if minimum is not None else "> 0"
        raise GradeError(f"`{name}`: got {value!r}, expected a number {want}")


def grade(paths, out, *, force=False, timeout=DEFAULT_TIMEOUT, cell_timeout=DEFAULT_CELL_TIMEOUT,
          feedback_dir=None, workers=2, solutions=None, max_output=DEFAULT_MAX_OUTPUT,
          sandbox="auto", memory_limit_mb=None, max_processes=None, sandbox_paths=(),
          log=print) -> list[dict]:
    """Grade ``paths`` (files or folders) into the gradebook ``out``; return its rows.

    ``sandbox``: "auto" (bubblewrap if it works here, else none with a warning), "bwrap" or
    "none", or a :class:`lrnn.course.sandbox.Sandbox`. Raises :class:`GradeError` on a bad
    argument, before grading anything."""
    from . import sandbox as sb
    _check_positive("--timeout", timeout)
    _check_positive("--cell-timeout", cell_timeout)
    _check_positive("--workers", workers, integer=True, minimum=1)
    _check_positive("--max-output", max_output, integer=True, minimum=0)
    if memory_limit_mb is not None:
        _check_positive("--memory-limit", memory_limit_mb, integer=True, minimum=256)
    if max_processes is not None:
        _check_positive("--max-processes", max_processes, integer=True, minimum=16)
    sol_dir = Path(solutions or default_solutions_dir())
    if not sol_dir.is_dir():
        raise GradeError(f"no solutions folder at {display_key(sol_dir)}")
    sols = load_solutions(sol_dir)
    if not sols:
        raise GradeError(f"no solution notebooks ({NOTEBOOK_GLOB}) in {display_key(sol_dir)}")
    todo_paths = collect(paths)
    out = Path(out)
    if out.is_dir():
        raise GradeError(f"--out {display_key(out)} is a folder; give a .csv file name")
    feedback_dir = Path(feedback_dir) if feedback_dir else out.parent / "feedback"
    if feedback_dir.exists() and not feedback_dir.is_dir():
        raise GradeError(f"--feedback-dir {display_key(feedback_dir)} is not a folder")
    hidden = {sol_dir.resolve(), out.parent.resolve(), feedback_dir.resolve()}
    hidden |= {p.parent.resolve() for p in todo_paths}
    if isinstance(sandbox, sb.Sandbox):
        box = sandbox
    else:
        limits = {}
        if memory_limit_mb is not None:
            limits["memory_mb"] = int(memory_limit_mb)
        if max_processes is not None:
            limits["processes"] = int(max_processes)
        try:
            box = sb.choose(sandbox, hidden=tuple(sorted(hidden)),
                            extra=tuple(sandbox_paths), **limits)
        except sb.SandboxError as e:
            raise GradeError(str(e)) from None
    if box.kind == "none":
        log(NO_SANDBOX_WARNING.format(why=box.note or "--sandbox none"))
        sb.clean_stale_workdirs()
    if box.cgroups:
        sb.clean_stale_cgroups()
    preload = threading.Thread(target=_preload, args=(sols,),
                               kwargs={"references": box.kind == "none"}, daemon=True)
    preload.start()
    if box.kind == "none":
        preload.join()
    feedback_dir.mkdir(parents=True, exist_ok=True)
    with _GradebookLock(out) as lock:
        _clean_stale_temporaries(out)
        private = {out, lock.path}
        if feedback_dir.is_dir():
            private |= {p for p in feedback_dir.iterdir()
                        if re.search(r"-[0-9a-f]{8}\.md$", p.name)}     # feedback_name()
            private |= {feedback_dir / feedback_name(display_key(p)) for p in todo_paths}
        rows = {r["submission"]: r for r in read_gradebook(out)}
        todo = []
        for p in todo_paths:
            key = display_key(p)
            old = rows.get(key)
            if not force and old and old.get("status") == "graded" and p.is_file() and \
                    not p.is_symlink() and old.get("sha256") == sha256(p):
                log(f"skip (already graded): {key}")
                continue
            todo.append(p)
        lock = threading.Lock()

        def one(p):
            start = time.monotonic()
            key = display_key(p)
            try:
                res = grade_submission(p, sols, sandbox=box, timeout=timeout,
                                       cell_timeout=cell_timeout, max_output=max_output,
                                       private=private)
            except Exception as e:  # noqa: BLE001 - one broken submission must not stop the rest
                res = {"row": {"submission": key, "sha256": "", "assignment": "",
                               "sandbox": box.kind,
                               "status": f"grader error: {type(e).__name__}: {e}"[:300],
                               "total": 0, "max_total": 0},
                       "feedback": f"# Feedback on `{Path(key).name}`\n\nThe grader failed on "
                                   f"this submission ({type(e).__name__}); ask your "
                                   "instructor.\n"}
            with lock:
                try:
                    (feedback_dir / feedback_name(key)).write_text(res["feedback"],
                                                                   encoding="utf-8")
                except OSError as e:
                    res["row"]["status"] = f"grader error: the feedback file could not be " \
                                           f"written ({e.strerror or e})"[:300]
                rows[key] = res["row"]
                write_gradebook(out, list(rows.values()))
            try:
                log(f"{res['row']['status']}: {key} — {_fmt(res['row']['total'])} / "
                    f"{_fmt(res['row']['max_total'])} ({time.monotonic() - start:.1f} s)")
            except Exception:  # noqa: BLE001 - a console that cannot print the name
                pass

        if workers <= 1 or len(todo) <= 1:
            for p in todo:
                one(p)
        else:
            # Largest first: the longest notebooks do not all end up last on one worker.
            def size(p):
                try:
                    return p.stat().st_size
                except OSError:
                    return 0
            todo.sort(key=lambda p: -size(p))
            with concurrent.futures.ThreadPoolExecutor(max_workers=int(workers)) as pool:
                list(pool.map(one, todo))
        if not todo:
            write_gradebook(out, list(rows.values()))
    return sorted(rows.values(), key=lambda r: r["submission"])


def main(argv=None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    os.environ.setdefault("XLA_PYTHON_CLIENT_PREALLOCATE", "false")   # share a GPU with kernels
    parser = argparse.ArgumentParser(prog="python -m lrnn.grade",
                                     description="Autograde exercise notebooks, each in a "
                                                 "sandbox of its own.")
    parser.add_argument("paths", nargs="+", help="submission notebooks or folders of them")
    parser.add_argument("--out", required=True, help="gradebook CSV (created or updated)")
    parser.add_argument("--force", action="store_true", help="regrade graded submissions")
    parser.add_argument("--timeout", type=float, default=DEFAULT_TIMEOUT,
                        help=f"seconds per notebook (default {DEFAULT_TIMEOUT})")
    parser.add_argument("--cell-timeout", type=float, default=DEFAULT_CELL_TIMEOUT,
                        help=f"seconds per cell or test before it is interrupted "
                             f"(default {DEFAULT_CELL_TIMEOUT})")
    parser.add_argument("--feedback-dir", default=None,
                        help="folder for the Markdown feedback (default: feedback/ beside --out)")
    parser.add_argument("--workers", type=int, default=2, help="notebooks run in parallel")
    parser.add_argument("--solutions", default=None,
                        help="folder of solution notebooks (default: ./solutions)")
    parser.add_argument("--max-output", type=int, default=DEFAULT_MAX_OUTPUT,
                        help="bytes a cell may print before the feedback notes it")
    parser.add_argument("--sandbox", choices=["auto", "bwrap", "none"], default="auto",
                        help="auto (default): bubblewrap if it works here, else none with a "
                             "warning; bwrap: fail if it does not; none: no isolation")
    parser.add_argument("--memory-limit", type=int, default=None, metavar="MB",
                        help="address space per kernel process, MiB (default 8192; not "
                             "applied on a GPU)")
    parser.add_argument("--max-processes", type=int, default=None, metavar="N",
                        help="processes and threads per sandbox (default 1024)")
    parser.add_argument("--sandbox-path", action="append", default=[], metavar="DIR",
                        help="an extra folder the kernel may read (e.g. packages installed "
                             "outside the Python environment); repeatable")
    args = parser.parse_args(argv)
    try:
        grade(args.paths, args.out, force=args.force, timeout=args.timeout,
              cell_timeout=args.cell_timeout, feedback_dir=args.feedback_dir,
              workers=args.workers, solutions=args.solutions, max_output=args.max_output,
              sandbox=args.sandbox, memory_limit_mb=args.memory_limit,
              max_processes=args.max_processes, sandbox_paths=args.sandbox_path,
              log=lambda m: print(m, file=sys.stderr if m.startswith("WARNING") else sys.stdout,
                                  flush=True))
    except GradeError as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main())
