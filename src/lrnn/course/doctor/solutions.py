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
        why = None if row.get("status") == "graded" else _why_not_run(workdir / "feedback", nb)
        if why:
            detail += f"; {why}"
        results.append(Result("grading", name, PASS if ok else FAIL, detail, seconds / len(notebooks),
                              {"total": total, "max_total": best, "status": row.get("status")}))
    return results


def _why_not_run(feedback_dir: Path, nb: Path) -> str | None:
    """The reason the student's feedback gives for a notebook not run to the end (a kernel that
    could not start, say), so that the doctor's report names it."""
    from ..grading.gradebook import feedback_name
    from ..grading.score import display_key
    try:
        text = (feedback_dir / feedback_name(display_key(nb))).read_text(encoding="utf-8")
    except OSError:
        return None
    lines = text.splitlines()
    for i, line in enumerate(lines):
        if "could not be run to the end" in line:
            reason = next((x.strip() for x in lines[i + 1:] if x.strip() and
                           not x.strip().startswith("```")), "")
            return f"not run to the end: {reason[:300]}" if reason else None
    return None


def _is_zero(v):
    try:
        return float(v) == 0.0
    except ValueError:
        return False
