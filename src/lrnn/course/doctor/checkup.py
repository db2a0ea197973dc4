"""The whole check: every step in order, one line per result, the JSON and Markdown reports."""
from __future__ import annotations

import dataclasses
import datetime as _dt
import json
import re
import shutil
import tempfile
import time
from pathlib import Path

from ... import _io
from .budgets import BUDGETS, notebook_paths
from .environment import environment_results, find_repo
from .gpu import gpu_results
from .library import library_checks, run_check
from .notebooks import notebook_results
from .results import FAIL, INFO, MISS, PASS, SKIP, WARN, Result
from .solutions import grade_solutions


QUICK_SOLUTION = "solutions/01_linear_recurrence.ipynb"
QUICK_NOTEBOOK = "book/00_welcome.ipynb"


def device_slug(env: dict) -> str:
    if env["platform"] != "gpu":
        return env["platform"]
    return re.sub(r"[^a-z0-9]+", "-", env["device_kind"].lower()).strip("-")


#: The parts of the check that ``--skip`` can leave out, in the order they run.
PARTS = ("library", "grading", "notebooks", "gpu")


def skipped_parts(skip, repo: Path | None) -> list[str]:
    """The parts of :data:`PARTS` that will not be checked: those in ``skip``, and grading and
    notebooks when there is no checkout of the course repository."""
    unknown = sorted(set(skip) - set(PARTS))
    if unknown:
        raise ValueError(f"skip: got {unknown}, expected parts among {list(PARTS)}")
    return [p for p in PARTS if p in skip or (repo is None and p in ("grading", "notebooks"))]


def run_doctor(*, quick: bool = False, repo: Path | None = None, out_dir: Path | None = None,
               strict: bool = False, skip=(), cell_timeout: float = 600, bench_args=None,
               log=print) -> dict:
    """Run every step (see the package docstring), print one line per result, write the JSON
    and Markdown reports; return the report dict. ``report["ok"]``: nothing FAILed and some
    part was checked; ``report["skipped"]``: the parts left out, which the verdict names.

    ``out_dir`` and the two report files are checked before any step runs (see
    :func:`check_out_dir`), so a bad ``--out-dir`` costs nothing."""
    repo = repo or find_repo()
    if out_dir is None and repo is not None and not quick:
        out_dir = repo / "book" / "data"          # the default of a full run, checked now too
    skipped = skipped_parts(skip, repo)
    report_dir = check_out_dir(out_dir, quick=quick)
    started = time.perf_counter()
    date = _dt.datetime.now(_dt.timezone.utc).isoformat(timespec="seconds")
    results: list[Result] = []

    def add(new):
        for r in new:
            results.append(r)
            log(format_line(r))

    log(f"lrnn doctor ({'quick' if quick else 'full'}): the course on this machine\n")
    env_results, env = environment_results(repo)
    add(env_results)
    if "library" not in skipped:
        for name, fn, tol in library_checks():
            add([run_check(name, fn, tol)])
    budget = BUDGETS["gpu" if env["platform"] == "gpu" else "cpu"]
    workdir = Path(tempfile.mkdtemp(prefix="lrnn-doctor-"))
    try:
        if repo is None:
            add([Result(s, "course notebooks", SKIP, "no checkout of the course repository here: "
                        "clone it and run the doctor inside it, or pass --repo")
                 for s in ("grading", "notebooks") if s not in skip])
        slow = _course_steps(add, repo, workdir, budget, quick=quick, skipped=skipped,
                             cell_timeout=cell_timeout)
        if "gpu" not in skipped:
            if quick and env["platform"] == "gpu":
                add([Result("gpu benchmark", "scan benchmark and targets", SKIP, "not in --quick")])
            else:
                add(gpu_results(repo, workdir, strict=strict, bench_args=bench_args))
    finally:
        bench_json = workdir / "bench_scan_gpu.json"
        bench = json.loads(bench_json.read_text()) if bench_json.exists() else None
        shutil.rmtree(workdir, ignore_errors=True)
    report = _report(results, env, budget, quick=quick, strict=strict, date=date,
                     seconds=time.perf_counter() - started, slow=slow, bench=bench,
                     skipped=skipped)
    _write_reports(report, report_dir, env, quick=quick)
    log("")
    log(summary_line(report))
    log(f"reports: {report['files'][0]} and .md")
    return report


def _course_steps(add, repo, workdir, budget, *, quick, skipped, cell_timeout) -> list[dict]:
    """Steps 3 and 4 (grading, notebooks) unless skipped; the executed cells' times, slowest
    first."""
    slow = []
    if repo is None:
        return slow
    if "grading" not in skipped:
        sols = [repo / QUICK_SOLUTION] if quick else notebook_paths(dirs=("solutions",), repo=repo)
        add(grade_solutions(repo, sols, workdir, timeout=(600 if quick else 600 * max(1, len(sols)))))
    if "notebooks" not in skipped:
        nbs = [repo / QUICK_NOTEBOOK] if quick else notebook_paths(repo=repo)
        for nb in nbs:                                   # one line as each one ends
            new, times = notebook_results(repo, [nb], budget, cell_timeout=cell_timeout)
            add(new)
            slow += times
    return sorted(slow, key=lambda r: -r["seconds"])


def _report(results, env, budget, *, quick, strict, date, seconds, slow, bench, skipped) -> dict:
    counts = {s: sum(r.status == s for r in results) for s in (PASS, FAIL, MISS, WARN, SKIP, INFO)}
    return {
        "doctor": "python -m lrnn doctor" + (" --quick" if quick else "") + (" --strict" if strict else ""),
        "mode": "quick" if quick else "full",
        "date": date,
        "seconds": round(seconds, 1),
        "commit": env.get("git_commit"),
        "commit_dirty": env.get("git_dirty"),
        "device": {"platform": env["platform"], "kind": env["device_kind"],
                   "compute_capability": env["compute_capability"], "jax": env["jax"]},
        "budget": dataclasses.asdict(budget),
        "environment": env,
        "results": [dataclasses.asdict(r) for r in results],
        "slowest_cells": slow[:20],
        "bench_scan": bench,
        "counts": counts,
        "skipped": list(skipped),
        "ok": counts[FAIL] == 0 and len(skipped) < len(PARTS),
    }


def _write_reports(report, report_dir, env, *, quick) -> None:
    out_dir = Path(report_dir) if report_dir is not None else \
        Path(tempfile.mkdtemp(prefix="lrnn-doctor-report-"))
    out_dir.mkdir(parents=True, exist_ok=True)
    stem = f"doctor{'-quick' if quick else ''}_{device_slug(env)}"
    report["files"] = [str(out_dir / f"{stem}.json"), str(out_dir / f"{stem}.md")]
    _io.atomic_write_text(out_dir / f"{stem}.json", json.dumps(report, indent=1, default=str) + "\n")
    _io.atomic_write_text(out_dir / f"{stem}.md", markdown_report(report))


def check_out_dir(out_dir, *, quick: bool):
    """Before any step: ``out_dir`` (``None``: the default, not checked) is a folder or can be
    made in an existing one, and the reports there, if they exist, are earlier doctor reports."""
    if out_dir is None:
        return None
    import jax
    d = jax.devices()[0]
    slug = device_slug({"platform": d.platform, "device_kind": d.device_kind})
    stem = f"doctor{'-quick' if quick else ''}_{slug}"
    folder = _io.check_folder(out_dir, what="--out-dir", create=True)
    _io.check_destination(folder / f"{stem}.json", suffixes=(".json",), what="--out-dir",
                          owned_by=_io.json_has_keys("doctor", "results", "counts"),
                          command="lrnn doctor (a report)")
    _io.check_destination(folder / f"{stem}.md", suffixes=(".md",), what="--out-dir",
                          owned_by=_io.first_line_startswith("# lrnn doctor:"),
                          command="lrnn doctor (a report)")
    return folder


def format_line(r: Result) -> str:
    return f"{r.status:4s}  {r.section:13s} {r.name}: {r.detail}"


def summary_line(report: dict) -> str:
    c = report["counts"]
    skipped = report.get("skipped", [])
    if len(skipped) == len(PARTS):
        verdict = f"nothing checked: skipped {', '.join(skipped)}"
    elif not report["ok"]:
        verdict = "the course does NOT work here as it should"
    elif skipped:
        verdict = f"partly checked: skipped {', '.join(skipped)}; what was checked works here"
    else:
        verdict = "the course works here"
    if skipped and c[FAIL] and len(skipped) < len(PARTS):
        verdict += f" (partly checked: skipped {', '.join(skipped)})"
    extra = "".join(f", {c[s]} {label}" for s, label in ((MISS, "speed targets missed"),
                                                        (WARN, "warnings"), (SKIP, "skipped")) if c[s])
    return (f"{c[PASS]} passed, {c[FAIL]} failed{extra} in {report['seconds']:.0f} s on "
            f"{report['device']['kind']} (JAX {report['device']['jax']}): {verdict}.")


def markdown_report(report: dict) -> str:
    env = report["environment"]
    commit = report["commit"] or "unknown"
    if report.get("commit_dirty"):
        commit += " (uncommitted changes)"
    lines = [f"# lrnn doctor: {report['device']['kind']} ({report['mode']})", "",
             f"`{report['doctor']}` on {report['date']}, commit `{commit}`, "
             f"JAX {env['jax']} (jaxlib {env['jaxlib']}), Python {env['python']}, "
             f"backend {env['backend']}"
             + (f", compute capability {env['compute_capability']}" if env["compute_capability"] else "")
             + f". Budget: {report['budget']['notebook_s']:.0f} s per notebook, "
               f"{report['budget']['cell_s']:.0f} s per cell ({report['budget']['where']}).", "",
             f"**{summary_line(report)}**", "",
             "| status | section | check | result | seconds |", "|---|---|---|---|---|"]
    for r in report["results"]:
        sec = "" if r["seconds"] is None else f"{r['seconds']:.1f}"
        detail = str(r["detail"]).replace("|", "\\|").replace("\n", " ")
        lines.append(f"| {r['status']} | {r['section']} | {r['name']} | {detail} | {sec} |")
    if report["slowest_cells"]:
        lines += ["", "## Slowest cells", "", "| seconds | notebook | cell | nbval | source |",
                  "|---|---|---|---|---|"]
        for c in report["slowest_cells"][:15]:
            src = c["source"].replace("|", "\\|").replace("`", "'")
            lines.append(f"| {c['seconds']:.1f} | {c['notebook']} | {c['cell']} | Cell {c['nbval_cell']} "
                         f"| `{src}` |")
    md = next((r["data"].get("markdown") for r in report["results"]
               if r["name"] == "python -m lrnn bench targets"), None)
    if md:
        lines += ["", "## Scan benchmark targets (`python -m lrnn bench targets`)", "", md.strip()]
    return "\n".join(lines) + "\n"
