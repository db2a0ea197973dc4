"""Scoring one submission: read it, run it, score every exercise, write its feedback."""
from __future__ import annotations

import errno
import hashlib
import os
from pathlib import Path

from ..exercises import exercise_id
from .config import (DATA_FILE_LIMIT, DEFAULT_CELL_TIMEOUT, DEFAULT_MAX_OUTPUT,
                     DEFAULT_TIMEOUT, MAX_SUBMISSION_BYTES)
from .parse import PARSE_SECONDS, open_regular, parse, sha256_of
from .feedback import render as _feedback
from .steps import plan
from .run import run_submission
from .solutions import assignment_of_name, match_assignment, notebook_exercises

def _title(ex_id: str) -> str:
    from .. import check
    try:
        return check.get(ex_id).title
    except KeyError:
        return "open question"


def sha256(path) -> str:
    """The file's sha256 ("" for anything but a readable regular file within the limit)."""
    return sha256_of(path, MAX_SUBMISSION_BYTES)


def display_key(path) -> str:
    """The submission's absolute path as text that any file can hold, one to one: a byte
    that is not valid UTF-8 becomes ``\\xNN`` and a literal backslash ``\\\\``, so a raw
    ``\\xff`` byte and the four characters ``\\xff`` never share a key."""
    text = os.fsdecode(os.path.abspath(os.fspath(path)))
    out = []
    for ch in text:
        if "\udc80" <= ch <= "\udcff":
            out.append(f"\\x{ord(ch) - 0xdc00:02x}")
        elif ch == "\\":
            out.append("\\\\")
        else:
            out.append(ch)
    return "".join(out)


def course_files(sol) -> dict[str, bytes]:
    """The data files the assignment's kernel gets: only those on the course's own list
    (the solution notebook's ``lrnn.data_files``, read from the solutions folder), never
    anything from the submissions folder."""
    out = {}
    folder = Path(sol["path"]).parent
    for name in sol.get("data_files", ()):
        out[Path(name).name] = open_regular(folder / name, DATA_FILE_LIMIT)
    return out


def _read_submission(path: Path, seconds: float = PARSE_SECONDS):
    """(notebook or None, reason it cannot be graded or None, sha256, metadata problems)."""
    try:
        data = open_regular(path, MAX_SUBMISSION_BYTES)
    except OSError as e:
        if e.errno == errno.ELOOP:
            return None, "it is a symbolic link (submit the notebook file itself)", "", []
        return None, f"it cannot be read ({e.strerror})", "", []
    except ValueError as e:
        return None, str(e), "", []
    digest = hashlib.sha256(data).hexdigest()
    try:
        nb, problems = parse(data, seconds=seconds)
    except Exception as e:  # noqa: BLE001 - any parse failure is a zero, with the reason
        return None, f"it cannot be parsed as a notebook ({str(e)[:300]})", digest, []
    return nb, None, digest, problems


#: What the feedback says of cells that misbehaved after the first official test: which cell,
#: how many bytes or which error would let a notebook send back what it saw of the hidden
#: inputs, so only that something happened is said.
AFTER_TEST_NOTE = ("After the first official test, one or more cells raised an error, ran "
                   "past the time limit, printed more than the limit or stopped the kernel. "
                   "Which ones is not shown once the hidden tests have run: run your notebook "
                   "from the top to see them.")


def _cell_notes(steps, outcomes, cell_timeout, max_output) -> list:
    """Notes on the student's cells: itemised before the first official test ran, one
    coarse note after it."""
    notes, after = [], False
    first_test = min((i for i in outcomes if steps[i].kind == "test"), default=None)
    for i, c in sorted(outcomes.items()):
        step = steps[i]
        if step.kind != "code":
            continue
        bad = c["status"] in ("error", "timeout", "died") or c.get("truncated")
        if first_test is not None and i > first_test:
            after = after or bad
            continue
        if c["status"] == "died" or (c["status"] == "timeout" and
                                     c.get("ename") == "KernelLost"):
            why = ("did not stop when interrupted at the time limit: the kernel was killed"
                   if c["status"] == "timeout" else
                   "stopped the kernel (sys.exit/os._exit, a crash, or out of memory)")
            notes.append((f"Cell {step.cell} {why}; the notebook was re-run without it.", None))
        elif c["status"] == "error":
            notes.append((f"Cell {step.cell} raised:",
                          f"{c.get('ename')}: {c.get('evalue', '')[:300]}"))
        elif c["status"] == "timeout":
            notes.append((f"Cell {step.cell} ran longer than {cell_timeout:g} s and was "
                          "interrupted.", None))
        if c.get("truncated"):
            notes.append((f"Cell {step.cell} printed more than the {max_output:,} bytes a "
                          "cell may print.", None))
    if after:
        notes.append((AFTER_TEST_NOTE, None))
    return notes


def grade_submission(path, solutions: dict, *, sandbox, timeout=DEFAULT_TIMEOUT,
                     cell_timeout=DEFAULT_CELL_TIMEOUT, max_output=DEFAULT_MAX_OUTPUT,
                     private=(), assignment=None) -> dict:
    """Grade one notebook. Returns {"row": {...}, "feedback": markdown, "results": [...]}.
    The assignment is ``assignment``, else the chapter the file name names; only a file
    whose name names none is matched by its cells' grade ids.

    Long because it is the whole verdict on one notebook: the status and every exercise's score
    are decided from the same run (time-outs, a lost kernel, a fatal reason, review flags), and
    each rule can only lower the status another rule set."""
    path = Path(path)
    key = display_key(path)
    nb, problem, digest, meta_problems = _read_submission(path, timeout)
    row = {"submission": key, "sha256": digest, "sandbox": sandbox.kind}
    stem = assignment or assignment_of_name(path.name, solutions)
    found = match_assignment(nb, "", solutions)
    if stem is None:
        stem = found
    if stem is None:
        row.update({"assignment": "", "status": "unknown assignment" if problem is None
                    else "cannot be parsed", "total": 0, "max_total": 0})
        reason = problem or "no exercise of any solution notebook found in it"
        return {"row": row, "results": [], "feedback": _feedback(key, None, [], reason, [])}
    sol = solutions[stem]
    row["assignment"] = stem
    notes, run, where, answers = [], None, {}, {}
    notes += [(p, None) for p in meta_problems]
    ids = notebook_exercises(nb)
    mismatch = (problem is None and found is not None and found != stem and
                not ids & {r["exercise"] for r in sol["table"]})
    if mismatch:
        status = "wrong assignment"
        notes.append((f"This file is graded as {stem}, but its cells are those of {found}: "
                      "submit the notebook of this assignment under its own name. Every "
                      "exercise scores zero.", None))
    elif problem is not None:
        status = "cannot be parsed"
        notes.append((f"The file cannot be graded: {problem}. Every exercise scores zero.",
                      None))
    else:
        steps, where, answers = plan(nb, sol["table"], sol.get("skip_cells"))
        skipped = [step.cell for step in steps if step.kind == "skip"]
        if skipped:
            notes.append((f"{'Cells' if len(skipped) > 1 else 'Cell'} "
                          f"{', '.join(map(str, skipped))}: a demonstration of the course "
                          "that no grade depends on, not run by the grader (an edited copy "
                          "is run).", None))
        run = run_submission(steps, sol, sandbox, files=course_files(sol),
                             timeout=timeout, cell_timeout=cell_timeout, max_output=max_output)
        status = "graded"
        if run["timed_out"]:
            status = "notebook time limit"
            notes.append((f"The notebook ran longer than the limit of {timeout:g} s and was "
                          "stopped; exercises not reached score zero.", None))
        if run["fatal"]:
            status = run.get("fatal_kind", "grader error") if status == "graded" else status
            notes.append(("The notebook could not be run to the end:", run["fatal"]))
        outcomes = run["outcomes"]
        if any(c.get("ename") == "KernelLost" for c in outcomes.values()):
            status = "kernel died" if status == "graded" else status
        died_tests = [exercise_id(steps[i].grade_id) for i, c in sorted(outcomes.items())
                      if c.get("ename") == "KernelLost" and steps[i].kind == "test"]
        if died_tests:
            notes.append(("The kernel died or stopped answering while exercise(s) "
                          f"{', '.join(died_tests)} were tested (sys.exit/os._exit, a crash, "
                          "out of memory, or a call that never returned); the notebook was "
                          "re-run for the exercises after it.", None))
        notes += _cell_notes(steps, outcomes, cell_timeout, max_output)
    results = []
    for r in sol["table"]:
        ex = {"exercise": r["exercise"], "grade_id": r["grade_id"], "points": r["points"],
              "title": _title(r["exercise"])}
        if r["kind"] == "manual":
            ex.update(score="manual", result="graded by hand",
                      detail=(answers.get(r["grade_id"], "").strip()[:2000]
                              if run is not None else ""))
        elif run is None:
            ex.update(score=0.0, result="not run",
                      detail="wrong assignment" if mismatch else "the file cannot be graded")
        else:
            c = run["outcomes"].get(where[r["grade_id"]])
            if c is None:
                reason = ("not reached: the notebook time limit was hit first"
                          if run["timed_out"] else "not run")
                ex.update(score=0.0, result="not run", detail=reason)
            elif c["status"] == "ok":
                ex.update(score=r["points"], result="passed", detail="")
                if r["grade_id"] in run.get("structural", ()):
                    evidence = list(c.get("review") or ()) + [
                        f"cell {cell} uses {what}" for cell, what in run.get("flags", ())]
                    if evidence:
                        ex["review"] = "; ".join(evidence)[:1000]
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
    if status == "graded" and any(e.get("review") for e in results):
        status = "needs review"
    row["status"] = status
    for e in results:
        row[f"ex{e['exercise']}"] = e["score"]
    row["max_total"] = sum(e["points"] for e in auto)
    row["total"] = min(sum(e["score"] for e in auto), row["max_total"])
    fatal = run.get("fatal") if run is not None else None
    return {"row": row, "results": results, "fatal": str(fatal)[:2000] if fatal else None,
            "feedback": _feedback(key, sol, results, None, notes)}

