"""Grading a batch: run submissions, score every exercise, write a gradebook and feedback.

    lrnn grade SUBMISSION.ipynb... | FOLDER --out gradebook.csv
        [--force] [--timeout S] [--cell-timeout S] [--feedback-dir DIR] [--workers 2]
        [--solutions DIR] [--max-output BYTES] [--sandbox auto|bwrap|none]
        [--memory-limit MB] [--max-processes N] [--sandbox-path DIR]

For every submission:

1. it is read (a symbolic link, a file over 50 MiB or an unparseable file scores zero) and
   matched to its solution notebook by the ``grade_id`` of its cells (or by file name);
2. its code cells run, in order, in a fresh kernel of their own: a small fixed program
   (:mod:`lrnn.course.grading.harness`) started in a sandbox (:mod:`lrnn.course.grading.sandbox`: bubblewrap
   on Linux) that sees the Python environment and the ``lrnn`` package read-only, a private
   ``/tmp`` with a copy of the plain files beside the submission, and nothing else of the
   machine: not the solutions, the other submissions, the gradebook or the feedback. The
   student's test cells are not run there;
3. at the place of each autograded test cell (or at the end, for one the student deleted),
   the grader runs the *solution's* test code (the visible ``check`` and the hidden tests) in
   its own process, with its own untouched NumPy and ``lrnn``, under full float32 matrix
   products (:func:`lrnn.course.precision.exact_matmuls`). Every name of a notebook
   function in that code is a proxy (:mod:`lrnn.course.grading.remote`): calling it sends the
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

Beside the gradebook, ``<name>.details.json`` records per submission what the report needs as
data (per exercise: points, score, status, the check's hint, review evidence; the time the
submission took; ``fatal``, why the notebook could not be run to the end, if it could not) and
the row as the grader wrote it. A number a person entered where the
grader wrote ``manual`` (an open question) is a hand grade: a regrade keeps it and adds it to
the total. A change a person made to an automatic score makes ``--force`` refuse, naming the
cells, before it grades anything. Before a regrade replaces rows, the gradebook and the
details are copied to ``<name>.<UTC time>.bak``.
"""
from __future__ import annotations

import concurrent.futures
import math
import os
import threading
import time
from pathlib import Path

from ..exercises import NOTEBOOK_GLOB
from .config import (DEFAULT_CELL_TIMEOUT, DEFAULT_MAX_OUTPUT, DEFAULT_TIMEOUT,
                     NO_SANDBOX_WARNING, GradeError)
from .feedback import fmt as _fmt
from ..._io import DestinationError, backup_copy
from .gradebook import (FEEDBACK_NAME, GradebookLock, _clean_stale_temporaries, check_destination,
                        details_path, details_record, feedback_name, read_details,
                        read_gradebook, write_details, write_gradebook)
from .score import display_key, grade_submission, sha256
from .solutions import default_solutions_dir, load_solutions, setup_namespace

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
    from .. import check, precision  # noqa: F401
    from . import remote, wire  # noqa: F401
    check.load_all()
    for sol in sols.values():
        setup_namespace(sol)
    if references:
        for name in ("lrnn.scan", "lrnn.orthogonal", "lrnn.layers.lru", "lrnn.layers.rotrnn",
                     "lrnn.layers.ornn", "lrnn.layers.lstm", "lrnn.layers.gru",
                     "lrnn.model", "scipy.linalg"):
            try:
                importlib.import_module(name)
            except ImportError:
                pass


HIDDEN_BEGIN = "### BEGIN HIDDEN TESTS"


def without_hidden_tests(sols: dict) -> list[str]:
    """The loaded solution notebooks whose tests hold no hidden test: an ``exercises/``
    folder given as the solutions (only the visible checks would run: over-grading)."""
    return sorted(stem for stem, sol in sols.items()
                  if any(r["kind"] == "test" for r in sol["table"]) and
                  not any(r["kind"] == "test" and HIDDEN_BEGIN in r.get("source", "")
                          for r in sol["table"]))


def _is_number(value) -> bool:
    try:
        return math.isfinite(float(value))
    except (TypeError, ValueError):
        return False


def edited_automatic_cells(row: dict, record: dict | None) -> list[str]:
    """The cells of a gradebook row that a person changed where the grader had written an
    automatic score (or the total beyond the hand grades): known from the details file,
    which records the row as the grader wrote it."""
    if not record or not isinstance(record.get("written"), dict):
        return []
    written = record["written"]
    edited, hand = [], 0.0
    for col, value in row.items():
        if not col.startswith("ex") or col not in written:
            continue
        was = written[col]
        if was == "manual":
            if _is_number(value):
                hand += float(value)
        elif str(value) != str(was):
            edited.append(f"{col} (the grader wrote {was}, the gradebook holds {value!r})")
    if _is_number(row.get("total")) and _is_number(written.get("total")) and \
            abs(float(row["total"]) - float(written["total"]) - hand) > 1e-9 and not edited:
        edited.append(f"total (the grader wrote {written['total']}, plus {_fmt(hand)} hand "
                      f"points, the gradebook holds {row['total']!r})")
    return edited


def keep_hand_grades(old: dict | None, res: dict) -> dict[str, float]:
    """Put the hand grades of ``old`` (a number entered where the grader wrote ``manual``)
    into the new row of ``res``, adding them to its total and maximum; return them."""
    if not old:
        return {}
    row, kept = res["row"], {}
    for e in res.get("results", []):
        col = f"ex{e['exercise']}"
        if e["score"] == "manual" and _is_number(old.get(col)):
            kept[col] = float(old[col])
            row[col] = kept[col]
            row["total"] = float(row["total"]) + kept[col]
            row["max_total"] = float(row["max_total"]) + float(e["points"])
    return kept


def _check_positive(name, value, *, integer=False, minimum=None):
    ok = isinstance(value, (int, float)) and not isinstance(value, bool) and \
        math.isfinite(value)
    if ok and minimum is not None:
        ok = value >= minimum
    elif ok:
        ok = value > 0
    if not ok or (integer and int(value) != value):
        want = f">= {minimum}" if minimum is not None else "> 0"
        want = "a finite number " + want
        raise GradeError(f"`{name}`: got {value!r}, expected {want}")


def grade(paths, out, *, force=False, timeout=DEFAULT_TIMEOUT, cell_timeout=DEFAULT_CELL_TIMEOUT,
          feedback_dir=None, workers=2, solutions=None, max_output=DEFAULT_MAX_OUTPUT,
          sandbox="auto", memory_limit_mb=None, max_processes=None, sandbox_paths=(),
          assignment=None, log=print) -> list[dict]:
    """Grade ``paths`` (files or folders) into the gradebook ``out``; return its rows.

    ``sandbox``: "auto" (bubblewrap if it works here, else none with a warning), "bwrap" or
    "none", or a :class:`lrnn.course.grading.sandbox.Sandbox`. Raises :class:`GradeError` on a bad
    argument, before grading anything.

    Long because its order is the guarantee: every argument and destination is checked before
    anything is written, and the gradebook lock is held from reading the old rows to writing the
    last one, each submission's row, details and feedback written together under it."""
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
    if assignment is not None and assignment not in sols:
        raise GradeError(f"--assignment: got {assignment!r}, expected one of "
                         f"{', '.join(sorted(sols))}")
    for extra in sandbox_paths:
        if not Path(extra).is_dir():
            raise GradeError(f"--sandbox-path {extra}: no such folder")
    missing = without_hidden_tests(sols)
    if missing:
        log(f"WARNING: the solutions in {display_key(sol_dir)} hold no hidden tests "
            f"({', '.join(missing)}): is it the exercises/ folder? Only the visible checks "
            "will run, so answers that pass them but are wrong score full marks.")
    todo_paths = collect(paths)
    out = Path(out)
    check_destination(out)
    details = details_path(out)
    if details.is_dir() or (os.path.lexists(details) and (details.is_symlink() or
                                                          not details.is_file())):
        raise GradeError(f"{details} is not a regular file; it is left untouched: move it "
                         "away or choose another --out")
    read_details(details)                                   # refuses a file it did not write
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
    with GradebookLock(out) as lock:
        _clean_stale_temporaries(out)
        private = {out, lock.path}
        if feedback_dir.is_dir():
            private |= {p for p in feedback_dir.iterdir()
                        if FEEDBACK_NAME.search(p.name)}
            private |= {feedback_dir / feedback_name(display_key(p)) for p in todo_paths}
        rows = {r["submission"]: r for r in read_gradebook(out)}
        records = read_details(details)
        todo = []
        for p in todo_paths:
            key = display_key(p)
            old = rows.get(key)
            if not force and old and old.get("status") == "graded" and p.is_file() and \
                    not p.is_symlink() and old.get("sha256") == sha256(p):
                log(f"skip (already graded): {key}")
                continue
            todo.append(p)
        edited = {display_key(p): edited_automatic_cells(rows[display_key(p)],
                                                         records.get(display_key(p)))
                  for p in todo if display_key(p) in rows}
        edited = {k: v for k, v in edited.items() if v}
        if edited:
            raise GradeError(
                "these grades were entered by hand where the grader had written automatic "
                "points; regrading would replace them, so nothing was graded: " +
                "; ".join(f"{k}: {', '.join(v)}" for k, v in sorted(edited.items())) +
                ". Put hand points in an open question's column (those are kept), or undo "
                "the edit, then grade again.")
        if any(display_key(p) in rows for p in todo):
            try:
                for f in (out, details):
                    if f.is_file():
                        log(f"backup: {backup_copy(f, what='--out')}")
            except (OSError, DestinationError) as e:
                raise GradeError(f"--out {out}: no backup could be written before "
                                 f"regrading ({e}); nothing was graded") from None
        lock = threading.Lock()

        def one(p):
            start = time.monotonic()
            key = display_key(p)
            try:
                res = grade_submission(p, sols, sandbox=box, timeout=timeout,
                                       cell_timeout=cell_timeout, max_output=max_output,
                                       private=private, assignment=assignment)
            except Exception as e:  # noqa: BLE001 - one broken submission must not stop the rest
                res = {"row": {"submission": key, "sha256": "", "assignment": "",
                               "sandbox": box.kind,
                               "status": f"grader error: {type(e).__name__}: {e}"[:300],
                               "total": 0, "max_total": 0},
                       "results": [],
                       "feedback": f"# Feedback on `{Path(key).name}`\n\nThe grader failed on "
                                   f"this submission ({type(e).__name__}); ask your "
                                   "instructor.\n"}
            seconds = time.monotonic() - start
            with lock:
                record = details_record(res, seconds)          # the row as the grader wrote it
                kept = keep_hand_grades(rows.get(key), res)
                if kept:
                    record["hand_grades"] = kept
                    log(f"kept hand grades of {key}: " +
                        ", ".join(f"{c} = {_fmt(v)}" for c, v in kept.items()))
                try:
                    (feedback_dir / feedback_name(key)).write_text(res["feedback"],
                                                                   encoding="utf-8")
                except OSError as e:
                    res["row"]["status"] = f"grader error: the feedback file could not be " \
                                           f"written ({e.strerror or e})"[:300]
                    record["status"] = res["row"]["status"]
                rows[key] = res["row"]
                records[key] = record
                write_gradebook(out, list(rows.values()))
                write_details(details, records)
            try:
                log(f"{res['row']['status']}: {key} — {_fmt(res['row']['total'])} / "
                    f"{_fmt(res['row']['max_total'])} ({seconds:.1f} s)")
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
            write_details(details, records)
    return sorted(rows.values(), key=lambda r: r["submission"])

