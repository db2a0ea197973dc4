"""Step 3, grading: ``lrnn grade`` on the solution notebooks, which must get full marks."""
from __future__ import annotations

import csv
import os
import re
import subprocess
import sys
import time
from pathlib import Path

from .results import FAIL, PASS, Result


def _subprocess_env():
    env = dict(os.environ)
    src = str(Path(__file__).resolve().parents[3])        # src/: so a source checkout grades itself
    env["PYTHONPATH"] = os.pathsep.join([src, *filter(None, [env.get("PYTHONPATH")])])
    return env


def grade_solutions(repo: Path, notebooks: list[Path], workdir: Path, *, timeout: float) -> list[Result]:
    """``python -m lrnn grade NOTEBOOKS --out gradebook.csv``: every solution must get full
    marks."""
    out = workdir / "gradebook.csv"
    cmd = [sys.executable, "-m", "lrnn", "grade", *map(str, notebooks), "--out", str(out),
           "--feedback-dir", str(workdir / "feedback"), "--solutions", str(repo / "solutions"),
           "--workers", "1" if len(notebooks) == 1 else "2"]
    start = time.perf_counter()
    try:
        proc = subprocess.run(cmd, cwd=repo, capture_output=True, text=True, timeout=timeout,
                              env=_subprocess_env())
    except subprocess.TimeoutExpired:
        return [Result("grading", "python -m lrnn grade", FAIL, f"did not finish in {timeout:.0f} s",
                       time.perf_counter() - start)]
    seconds = time.perf_counter() - start
    if proc.returncode != 0 or not out.exists():
        tail = (proc.stderr or proc.stdout).strip().splitlines()[-3:]
        return [Result("grading", "python -m lrnn grade", FAIL,
                       f"exit code {proc.returncode}: {' | '.join(tail)[:400]}", seconds)]
    with open(out, newline="", encoding="utf-8") as f:
        rows = {str(Path(r.get("submission", "")).resolve()): r for r in csv.DictReader(f)}
    from ..grading.config import GradeError
    from ..grading.gradebook import details_path, read_details
    try:
        details = read_details(details_path(out))
    except GradeError:          # the reason is extra: the verdict stands without it
        details = {}
    results = []
    for nb in notebooks:
        row = rows.get(str(nb.resolve()))
        name = f"{nb.parent.name}/{nb.name}"
        if row is None:
            results.append(Result("grading", name, FAIL, "not in the gradebook", seconds))
            continue
        try:
            total, best = float(row["total"]), float(row["max_total"])
        except (KeyError, ValueError):
            results.append(Result("grading", name, FAIL, f"unreadable gradebook row: {row}", seconds))
            continue
        ok = best > 0 and total == best
        missed = [k for k, v in row.items() if re.fullmatch(r"ex\d+\.\d+", k) and v not in ("", None)
                  and _is_zero(v)]
        detail = f"{total:g} / {best:g} points, status {row.get('status', '?')!r}"
        if missed:
            detail += f"; no points for {', '.join(missed)}"
        why = None if row.get("status") == "graded" else _why_not_run(details, nb)
        if why:
            detail += f"; {why}"
        results.append(Result("grading", name, PASS if ok else FAIL, detail, seconds / len(notebooks),
                              {"total": total, "max_total": best, "status": row.get("status")}))
    return results


def _why_not_run(details: dict, nb: Path) -> str | None:
    """Why the grader could not run a notebook to the end (a kernel that could not start, say),
    from the ``fatal`` field of its record in the gradebook's details file, so that the
    doctor's report names it."""
    from ..grading.score import display_key
    fatal = (details.get(display_key(nb)) or {}).get("fatal")
    return f"not run to the end: {str(fatal).strip()[:300]}" if fatal else None


def _is_zero(v):
    try:
        return float(v) == 0.0
    except ValueError:
        return False
