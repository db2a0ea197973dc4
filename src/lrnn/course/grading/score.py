"""Scoring one submission: read it, run it, score every exercise, write its feedback."""
from __future__ import annotations

import hashlib
import os
from pathlib import Path

import nbformat

from ..exercises import exercise_id
from .config import (DEFAULT_CELL_TIMEOUT, DEFAULT_MAX_OUTPUT, DEFAULT_TIMEOUT,
                     MAX_SUBMISSION_BYTES, SIBLING_FILE_LIMIT, SIBLING_TOTAL_LIMIT)
from .feedback import render as _feedback
from .steps import plan
from .run import run_submission
from .solutions import match_assignment

def _title(ex_id: str) -> str:
    from .. import check
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

