"""The autograder: run submissions, score every exercise, write a gradebook and feedback.

    python -m lrnn.grade SUBMISSION.ipynb... | FOLDER --out gradebook.csv
        [--force] [--timeout S] [--cell-timeout S] [--feedback-dir DIR] [--workers 2]
        [--solutions DIR] [--max-output BYTES]

For every submission:

1. it is parsed (an unparseable file scores zero, "cannot be parsed") and matched to its
   solution notebook by the ``grade_id`` of its cells (or, failing that, by file name);
2. every autograded test cell is replaced by the solution's cell with the same ``grade_id``
   (visible ``check`` plus hidden tests); a missing one is appended at the end;
3. the notebook runs in a fresh kernel through ``nbclient`` in a separate process, in a
   temporary directory (a copy of the notebook and of the plain files beside it, so that
   deleting files harms nothing), with ``LRNN_GRADING=1`` (a failing ``check`` raises
   there), errors allowed (a crash in one cell does not stop the others), a per-cell time
   limit (the cell is interrupted) and a per-notebook limit (the process and its kernel are
   killed), the output kept per cell capped; if the kernel dies (``os._exit``, a crash) it is
   restarted and the notebook re-run without the cells that killed it;
4. an exercise scores its points when its test cell ran without an exception. Hand-graded
   answers are reported as ``manual`` (0 automatic points).

The gradebook has one row per submission (keyed by its absolute path, with its sha256) and
one column per exercise plus the total; it is rewritten atomically after each submission,
and a rerun skips submissions already graded with the same content unless ``--force``.
A Markdown feedback file per submission says what failed and why.
"""
from __future__ import annotations

import argparse
import concurrent.futures
import copy
import csv
import hashlib
import io
import json
import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

import nbformat

from .exercises import NOTEBOOK_GLOB, cell_kind, exercise_id, exercise_table, nbgrader_meta

GRADING_ENV = "LRNN_GRADING"
FIXED_COLUMNS = ["submission", "sha256", "assignment", "status"]
TAIL_COLUMNS = ["total", "max_total"]
DEFAULT_TIMEOUT = 600
DEFAULT_CELL_TIMEOUT = 120
DEFAULT_MAX_OUTPUT = 200_000
CHECK_CALL = re.compile(r"check\(\s*['\"](\d+\.\d+)['\"]")


# ---------------------------------------------------------------------------------------
# Solutions
# ---------------------------------------------------------------------------------------

def default_solutions_dir() -> Path:
    here = Path("solutions")
    if here.is_dir():
        return here
    return Path(__file__).resolve().parents[3] / "solutions"      # src/lrnn/course/grade.py


def load_solutions(folder) -> dict[str, dict]:
    """Stem -> {"path", "title", "table": [graded cells]} for every solution notebook."""
    out = {}
    for path in sorted(Path(folder).glob(NOTEBOOK_GLOB)):
        nb = nbformat.read(path, as_version=4)
        title = path.stem
        if nb.cells and nb.cells[0].cell_type == "markdown":
            first = nb.cells[0].source.strip().splitlines()[0] if nb.cells[0].source.strip() else ""
            title = first.lstrip("# ").strip() or title
        out[path.stem] = {"path": str(path), "title": title,
                          "table": exercise_table(nb, path.name)}
    return out


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
# Preparing the notebook to run
# ---------------------------------------------------------------------------------------

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


def prepare(nb, table: list[dict]):
    """(notebook to run, {grade_id: cell index}, {grade_id: student's answer text})."""
    wanted = {row["grade_id"]: row for row in table}
    nb = copy.deepcopy(nb)
    cells, where, answers = [], {}, {}
    for cell in nb.cells:
        if cell.get("cell_type") == "code":
            cell.outputs = []
            cell.execution_count = None
        gid = _test_cell_for(cell, wanted)
        if gid and gid not in where:
            cell = nbformat.v4.new_code_cell(_graded_source(wanted[gid]),
                                             metadata={"nbgrader": {"grade": True,
                                                                    "grade_id": gid}})
            where[gid] = len(cells)
        mgid = nbgrader_meta(cell).get("grade_id")
        if mgid in wanted and wanted[mgid]["kind"] == "manual" and mgid not in answers:
            answers[mgid] = cell.get("source", "")
        cells.append(cell)
    for gid, row in wanted.items():
        if row["kind"] == "test" and gid not in where:
            where[gid] = len(cells)
            cells.append(nbformat.v4.new_code_cell(_graded_source(row), metadata={
                "nbgrader": {"grade": True, "grade_id": gid}}))
    nb.cells = cells
    return nb, where, answers


def _graded_source(row) -> str:
    # The student's namespace may have rebound `check`; the grader's cell uses the real one.
    return "from lrnn.check import check\n" + row["source"]


# ---------------------------------------------------------------------------------------
# The worker: runs one notebook in a kernel, records each cell's outcome as it goes
# ---------------------------------------------------------------------------------------

def _write_json(path, data):
    tmp = f"{path}.tmp"
    with open(tmp, "w", encoding="utf-8") as f:
        json.dump(data, f)
    os.replace(tmp, path)


def _worker(job_path: str) -> int:
    from nbclient import NotebookClient
    from nbclient.exceptions import DeadKernelError

    job = json.loads(Path(job_path).read_text(encoding="utf-8"))
    nb = nbformat.read(job["notebook"], as_version=4)
    os.environ[GRADING_ENV] = "1"
    os.environ.setdefault("MPLBACKEND", "Agg")
    state = {"cells": {}, "kernel_pids": [], "restarts": 0, "done": False}
    progress = job["progress"]
    max_output = int(job["max_output"])
    cell_timeout = float(job["cell_timeout"])

    class Client(NotebookClient):
        def __init__(self, *a, **k):
            super().__init__(*a, **k)
            self.replies = {}
            self.sizes = {}

        async def _check_raise_for_error(self, cell, cell_index, exec_reply):
            if exec_reply is not None:
                self.replies[cell_index] = exec_reply["content"]
            return await super()._check_raise_for_error(cell, cell_index, exec_reply)

        def output(self, outs, msg, display_id, cell_index):
            size = len(json.dumps(msg.get("content", {}), default=str))
            used = self.sizes.get(cell_index, 0)
            self.sizes[cell_index] = used + size
            if used + size > max_output:
                if used <= max_output:
                    outs.append(nbformat.v4.new_output(
                        "stream", name="stderr",
                        text=f"[output truncated by the grader after {max_output} bytes]\n"))
                return None
            return super().output(outs, msg, display_id, cell_index)

    killers: set[int] = set()
    while True:
        client = Client(nb, timeout=cell_timeout, kernel_name="python3", allow_errors=True,
                        interrupt_on_timeout=True, startup_timeout=120,
                        error_on_timeout={"ename": "CellTimeoutError",
                                          "evalue": f"the cell ran longer than {cell_timeout:g} s",
                                          "traceback": []},
                        resources={"metadata": {"path": job["workdir"]}})
        died = None
        try:
            with client.setup_kernel():
                pid = getattr(getattr(client.km, "provisioner", None), "pid", None)
                if pid:
                    state["kernel_pids"].append(pid)
                    _write_json(progress, state)
                for index, cell in enumerate(nb.cells):
                    if cell.cell_type != "code" or index in killers:
                        continue
                    try:
                        client.execute_cell(cell, index)
                    except DeadKernelError:
                        died = index
                        break
                    reply = client.replies.get(index, {})
                    if reply.get("status") == "error":
                        ename = reply.get("ename", "Error")
                        outcome = {"status": "timeout" if ename == "CellTimeoutError"
                                   else "error", "ename": ename,
                                   "evalue": str(reply.get("evalue", ""))[:4000]}
                    else:
                        outcome = {"status": "ok"}
                    outcome["output_bytes"] = client.sizes.get(index, 0)
                    outcome["truncated"] = client.sizes.get(index, 0) > max_output
                    state["cells"][str(index)] = outcome
                    _write_json(progress, state)
        except DeadKernelError:
            died = died if died is not None else -1
        except Exception as e:     # a kernel that cannot start, a broken client: record it
            state["fatal"] = f"{type(e).__name__}: {e}"[:2000]
            _write_json(progress, state)
            break
        if died is None:
            break
        if died >= 0:
            killers.add(died)
            state["cells"][str(died)] = {"status": "died", "ename": "DeadKernelError",
                                         "evalue": "the kernel died while running this cell"}
        state["restarts"] += 1
        _write_json(progress, state)
        if died < 0 or state["restarts"] > 3:
            break
        # Re-run from the top without the cells that killed the kernel.
        nb = nbformat.read(job["notebook"], as_version=4)
    state["done"] = True
    _write_json(progress, state)
    return 0


def _kill_tree(proc, state_pids):
    for pid in [proc.pid, *state_pids]:
        try:
            os.killpg(pid, signal.SIGKILL)
        except (ProcessLookupError, PermissionError, OSError):
            pass
    try:
        proc.kill()
    except OSError:
        pass


SIBLING_FILE_LIMIT = 20 * 2 ** 20
SIBLING_TOTAL_LIMIT = 100 * 2 ** 20


def copy_siblings(folder, workdir):
    """Copy the plain files beside a submission (data it may read) into its working
    directory: not other notebooks, not subfolders, nothing over 20 MiB, at most 100 MiB."""
    total = 0
    for p in sorted(Path(folder).iterdir()):
        try:
            if not p.is_file() or p.is_symlink() or p.suffix == ".ipynb" or \
                    p.name.startswith("."):
                continue
            size = p.stat().st_size
            if size > SIBLING_FILE_LIMIT or total + size > SIBLING_TOTAL_LIMIT:
                continue
            shutil.copy(p, workdir / p.name)
            total += size
        except OSError:
            continue


def run_notebook(nb, *, timeout: float, cell_timeout: float, max_output: int,
                 folder=None) -> dict:
    """Run ``nb`` in a fresh kernel in a separate process, in a temporary working directory
    (holding a copy of the notebook and of the files of ``folder``); return the progress
    record plus ``timed_out`` (the notebook limit was hit)."""
    with tempfile.TemporaryDirectory(prefix="lrnn-grade-") as tmp:
        workdir = Path(tmp) / "work"
        workdir.mkdir()
        if folder is not None:
            copy_siblings(folder, workdir)
        notebook = Path(tmp) / "submission.ipynb"
        nbformat.write(nb, notebook)
        shutil.copy(notebook, workdir / "submission.ipynb")
        progress = Path(tmp) / "progress.json"
        job = Path(tmp) / "job.json"
        job.write_text(json.dumps({"notebook": str(notebook), "workdir": str(workdir),
                                   "progress": str(progress), "max_output": max_output,
                                   "cell_timeout": min(cell_timeout, timeout)}),
                       encoding="utf-8")
        env = dict(os.environ)
        env[GRADING_ENV] = "1"
        proc = subprocess.Popen([sys.executable, "-m", "lrnn.course.grade", "--_worker", str(job)],
                                cwd=workdir, env=env, stdout=subprocess.DEVNULL,
                                stderr=subprocess.PIPE, start_new_session=True)
        timed_out = False
        try:
            _, err = proc.communicate(timeout=timeout)
        except subprocess.TimeoutExpired:
            timed_out = True
            pids = []
            if progress.exists():
                try:
                    pids = json.loads(progress.read_text(encoding="utf-8"))["kernel_pids"]
                except (ValueError, KeyError):
                    pids = []
            _kill_tree(proc, pids)
            _, err = proc.communicate()
        state = {"cells": {}, "kernel_pids": [], "restarts": 0, "done": False}
        if progress.exists():
            try:
                state = json.loads(progress.read_text(encoding="utf-8"))
            except ValueError:
                pass
        # Kernels are in their own sessions: make sure none outlives its notebook.
        for pid in state.get("kernel_pids", []):
            try:
                os.killpg(pid, signal.SIGKILL)
            except (ProcessLookupError, PermissionError, OSError):
                pass
        state["timed_out"] = timed_out
        state["worker_rc"] = proc.returncode
        if not state.get("done") and not timed_out:
            tail = (err or b"").decode("utf-8", "replace")[-1500:]
            state.setdefault("fatal", f"the grading process stopped (exit {proc.returncode}): "
                                      f"{tail}")
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


def grade_submission(path, solutions: dict, *, timeout=DEFAULT_TIMEOUT,
                     cell_timeout=DEFAULT_CELL_TIMEOUT, max_output=DEFAULT_MAX_OUTPUT) -> dict:
    """Grade one notebook. Returns {"row": {...}, "feedback": markdown, "exercises": [...]}."""
    path = Path(path)
    key = str(path.resolve())
    row = {"submission": key, "sha256": sha256(path) if path.is_file() else ""}
    nb, parse_error = None, None
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
        nb, parse_error = None, f"{type(e).__name__}: {str(e)[:300]}"
    stem = match_assignment(nb, path.name, solutions)
    results = []
    if stem is None:
        row.update({"assignment": "", "status": "unknown assignment" if parse_error is None
                    else "cannot be parsed", "total": 0, "max_total": 0})
        reason = (f"the file cannot be parsed as a notebook ({parse_error})" if parse_error
                  else "no exercise of any solution notebook found in it")
        return {"row": row, "results": [], "feedback": _feedback(path, None, [], reason, [])}
    sol = solutions[stem]
    row["assignment"] = stem
    notes = []
    if parse_error is not None:
        status = "cannot be parsed"
        run = None
        notes.append(f"The file cannot be parsed as a notebook ({parse_error}): every exercise "
                     "scores zero.")
    else:
        prepared, where, answers = prepare(nb, sol["table"])
        run = run_notebook(prepared, timeout=timeout, cell_timeout=cell_timeout,
                           max_output=max_output, folder=path.parent)
        status = "graded"
        if run.get("timed_out"):
            status = "notebook time limit"
            notes.append(f"The notebook ran longer than the limit of {timeout:g} s and was "
                         "stopped; exercises not reached score zero.")
        if run.get("fatal"):
            status = "grader error" if status == "graded" else status
            notes.append(f"The notebook could not be run to the end: {run['fatal']}")
        died = [int(i) for i, c in run["cells"].items() if c["status"] == "died"]
        if died:
            status = "kernel died" if status == "graded" else status
            notes.append("The kernel died (sys.exit/os._exit, a crash, or out of memory) in "
                         f"cell(s) {', '.join(map(str, sorted(died)))}; the notebook was re-run "
                         "without them.")
        graded = set(where.values())
        for i, c in sorted(run["cells"].items(), key=lambda kv: int(kv[0])):
            if int(i) not in graded and c["status"] == "error":
                notes.append(f"Cell {i} raised {c.get('ename')}: {c.get('evalue', '')[:300]}")
            if int(i) not in graded and c["status"] == "timeout":
                notes.append(f"Cell {i} ran longer than {cell_timeout:g} s and was interrupted.")
            if c.get("truncated"):
                notes.append(f"Cell {i} printed {c['output_bytes']:,} bytes of output; the grader "
                             f"kept the first {max_output:,}.")
    for r in sol["table"]:
        ex = {"exercise": r["exercise"], "grade_id": r["grade_id"], "points": r["points"],
              "title": _title(r["exercise"])}
        if r["kind"] == "manual":
            ex.update(score="manual", result="graded by hand",
                      detail=(answers.get(r["grade_id"], "").strip()[:2000]
                              if run is not None else ""))
        elif run is None:
            ex.update(score=0.0, result="not run", detail="the file cannot be parsed")
        else:
            c = run["cells"].get(str(where[r["grade_id"]]))
            if c is None:
                reason = ("not reached: the notebook time limit was hit first"
                          if run.get("timed_out") else "not run")
                ex.update(score=0.0, result="not run", detail=reason)
            elif c["status"] == "ok":
                ex.update(score=r["points"], result="passed", detail="")
            elif c["status"] == "timeout":
                ex.update(score=0.0, result="time limit",
                          detail=f"the test cell ran longer than {cell_timeout:g} s and was "
                                 "interrupted (an infinite loop?)")
            elif c["status"] == "died":
                ex.update(score=0.0, result="kernel died",
                          detail="the kernel died while this exercise was tested")
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
            "feedback": _feedback(path, sol, results, None, notes)}


def _fmt(x) -> str:
    if isinstance(x, str):
        return x
    return f"{x:g}"


def _feedback(path, sol, results, reason, notes) -> str:
    out = io.StringIO()
    out.write(f"# Feedback on `{Path(path).name}`\n\n")
    if sol is None:
        out.write(f"**Score: 0.** This submission could not be graded: {reason}.\n")
        return out.getvalue()
    auto = [e for e in results if e["score"] != "manual"]
    manual = [e for e in results if e["score"] == "manual"]
    got = sum(e["score"] for e in auto)
    total = sum(e["points"] for e in auto)
    out.write(f"Assignment: **{sol['title']}** (`{sol['path']}`)\n\n")
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


def feedback_name(key: str) -> str:
    stem = re.sub(r"[^A-Za-z0-9_.-]+", "_", Path(key).stem)[:80]
    return f"{stem}-{hashlib.sha1(key.encode()).hexdigest()[:8]}.md"


def collect(paths) -> list[Path]:
    found = []
    for p in paths:
        p = Path(p)
        if p.is_dir():
            found += sorted(q for q in p.rglob("*.ipynb")
                            if ".ipynb_checkpoints" not in q.parts)
        else:
            found.append(p)
    unique = {}
    for p in found:
        unique.setdefault(str(p.resolve()), p)
    return list(unique.values())


def grade(paths, out, *, force=False, timeout=DEFAULT_TIMEOUT, cell_timeout=DEFAULT_CELL_TIMEOUT,
          feedback_dir=None, workers=2, solutions=None, max_output=DEFAULT_MAX_OUTPUT,
          log=print) -> list[dict]:
    """Grade ``paths`` (files or folders) into the gradebook ``out``; return its rows."""
    sols = load_solutions(solutions or default_solutions_dir())
    if not sols:
        raise SystemExit(f"no solution notebooks found in {solutions or default_solutions_dir()}")
    out = Path(out)
    feedback_dir = Path(feedback_dir) if feedback_dir else out.parent / "feedback"
    feedback_dir.mkdir(parents=True, exist_ok=True)
    rows = {r["submission"]: r for r in read_gradebook(out)}
    todo = []
    for p in collect(paths):
        key = str(p.resolve())
        if not force and key in rows and p.is_file() and rows[key].get("sha256") == sha256(p):
            log(f"skip (already graded): {p}")
            continue
        todo.append(p)
    lock = threading.Lock()

    def one(p):
        start = time.monotonic()
        try:
            res = grade_submission(p, sols, timeout=timeout, cell_timeout=cell_timeout,
                                   max_output=max_output)
        except Exception as e:  # noqa: BLE001 - one broken submission must not stop the rest
            key = str(Path(p).resolve())
            res = {"row": {"submission": key, "sha256": "", "assignment": "",
                           "status": f"grader error: {type(e).__name__}: {e}"[:300],
                           "total": 0, "max_total": 0},
                   "feedback": f"# Feedback on `{Path(p).name}`\n\nThe grader failed on this "
                               f"submission ({type(e).__name__}: {e}); ask your instructor.\n"}
        key = res["row"]["submission"]
        with lock:
            (feedback_dir / feedback_name(key)).write_text(res["feedback"], encoding="utf-8")
            rows[key] = res["row"]
            write_gradebook(out, list(rows.values()))
        log(f"{res['row']['status']}: {p} — {_fmt(res['row']['total'])} / "
            f"{_fmt(res['row']['max_total'])} ({time.monotonic() - start:.1f} s)")

    if workers <= 1 or len(todo) <= 1:
        for p in todo:
            one(p)
    else:
        with concurrent.futures.ThreadPoolExecutor(max_workers=workers) as pool:
            list(pool.map(one, todo))
    if not todo:
        write_gradebook(out, list(rows.values()))
    return sorted(rows.values(), key=lambda r: r["submission"])


def main(argv=None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    if len(argv) == 2 and argv[0] == "--_worker":
        return _worker(argv[1])
    parser = argparse.ArgumentParser(prog="python -m lrnn.grade",
                                     description="Autograde exercise notebooks.")
    parser.add_argument("paths", nargs="+", help="submission notebooks or folders of them")
    parser.add_argument("--out", required=True, help="gradebook CSV (created or updated)")
    parser.add_argument("--force", action="store_true", help="regrade graded submissions")
    parser.add_argument("--timeout", type=float, default=DEFAULT_TIMEOUT,
                        help=f"seconds per notebook (default {DEFAULT_TIMEOUT})")
    parser.add_argument("--cell-timeout", type=float, default=DEFAULT_CELL_TIMEOUT,
                        help=f"seconds per cell before it is interrupted "
                             f"(default {DEFAULT_CELL_TIMEOUT})")
    parser.add_argument("--feedback-dir", default=None,
                        help="folder for the Markdown feedback (default: feedback/ beside --out)")
    parser.add_argument("--workers", type=int, default=2, help="notebooks run in parallel")
    parser.add_argument("--solutions", default=None,
                        help="folder of solution notebooks (default: ./solutions)")
    parser.add_argument("--max-output", type=int, default=DEFAULT_MAX_OUTPUT,
                        help="bytes of output kept per cell")
    args = parser.parse_args(argv)
    grade(args.paths, args.out, force=args.force, timeout=args.timeout,
          cell_timeout=args.cell_timeout, feedback_dir=args.feedback_dir, workers=args.workers,
          solutions=args.solutions, max_output=args.max_output)
    return 0


if __name__ == "__main__":
    sys.exit(main())
