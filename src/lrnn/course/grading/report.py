"""The instructor's view of a gradebook: a page, and the CSV files Canvas and Moodle import.

    lrnn grade report gradebook.csv [--feedback-dir DIR] [--out report/] [--force]

Reads the gradebook ``lrnn grade`` wrote and the feedback files beside it
(``feedback/<stem>-<hash>.md``, found by ``feedback_name``) and writes, into ``--out``
(default ``report/`` beside the gradebook; a new or empty folder, or one this command wrote):

* ``index.html``: per assignment, the score distribution per exercise and of the totals
  (``scores.png``), the mistakes students made most often per exercise (the hint the check
  printed, else what failed: "not implemented yet", "NameError ...", "time limit" ...), the
  submissions that did not grade cleanly, and the slowest submissions when the gradebook has
  a ``seconds`` column (today's gradebook has none: the page says so);
* ``canvas.csv``: Canvas's gradebook import layout (``Student, ID, SIS User ID, SIS Login ID,
  Section``, a ``Points Possible`` row, one column per assignment);
* ``moodle.csv``: Moodle's "Import grades from CSV" layout (an identifier column, one column
  per assignment; matched to users on import).

Students are identified by their submission: the file name without the assignment's stem
(``alice_01_linear_recurrence.ipynb`` -> ``alice``), else the folder holding it
(``alice/01_linear_recurrence.ipynb`` -> ``alice``). ``--roster roster.csv`` (columns
``student,login[,name,section]``) maps them to the logins the platforms know.
Several submissions of one assignment by one student: the best counts.
"""
from __future__ import annotations

import argparse
import csv
import html
import io
import os
import re
import sys
import tempfile
from collections import Counter, defaultdict
from pathlib import Path

from .gradescope import PlatformError, _grader, feedback_sections

MARKER = ".lrnn-report"
EX = re.compile(r"ex(\d+\.\d+)$")


def exercise_columns(rows) -> list[str]:
    cols = {k for r in rows for k in r if EX.match(k)}
    return sorted(cols, key=lambda c: tuple(int(x) for x in c[2:].split(".")))


def student_of(row) -> str:
    path = Path(row["submission"])
    stem = path.stem
    name = stem.replace(row.get("assignment") or "\0", "").strip("_-. ")
    return name or path.parent.name or stem


def mistake(section: str) -> str:
    """What a failed exercise's feedback section names: its hint, else its first message."""
    body = section.split("```text", 1)[1].rsplit("```", 1)[0] if "```text" in section \
        else section
    for line in body.splitlines():
        if line.strip().startswith("hint:"):
            return line.strip()[5:].strip()
    head = section.splitlines()[0].rsplit(":", 1)[-1].strip()     # failed, time limit ...
    first = next((ln.strip() for ln in body.splitlines() if ln.strip()), head)
    first = re.sub(r"^[✗…] Exercise \S+ \([^)]*\):\s*", "", first)
    first = re.sub(r"\s*\(read: .*$", "", first)
    first = first.split(" — ")[0]
    return first[:200] or head


def read(gradebook, feedback_dir=None):
    g, _ = _grader()
    gradebook = Path(gradebook)
    if not gradebook.is_file():
        raise PlatformError(f"gradebook: {gradebook} is not a file")
    rows = g.read_gradebook(gradebook)
    if not rows or "submission" not in rows[0]:
        raise PlatformError(f"gradebook: {gradebook} has no rows written by `lrnn grade`")
    fb = Path(feedback_dir) if feedback_dir else gradebook.parent / "feedback"
    mistakes = defaultdict(Counter)            # (assignment, exercise) -> Counter
    found = 0
    for r in rows:
        path = fb / g.feedback_name(r["submission"])
        if not path.is_file():
            continue
        found += 1
        _, sections = feedback_sections(path.read_text(encoding="utf-8", errors="replace"))
        for ex, text in sections.items():
            if text.splitlines()[0].endswith("graded by hand"):
                continue
            mistakes[(r.get("assignment", ""), ex)][mistake(text)] += 1
    return rows, mistakes, found


def _float(x):
    try:
        return float(x)
    except (TypeError, ValueError):
        return None


def figure(rows, path: Path):
    """Per assignment: stacked bars per exercise (full marks / zero / manual) and a
    histogram of the totals."""
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    import matplotlib.ticker
    by = defaultdict(list)
    for r in rows:
        by[r.get("assignment") or "(unknown)"].append(r)
    n = len(by)
    fig, axes = plt.subplots(n, 2, figsize=(11, 3.2 * n), squeeze=False)
    for (assignment, rs), (a1, a2) in zip(sorted(by.items()), axes):
        cols = [c for c in exercise_columns(rs) if any(r.get(c) not in ("", None) for r in rs)]
        full = [sum(1 for r in rs if (_float(r.get(c)) or 0) > 0) for c in cols]
        zero = [sum(1 for r in rs if _float(r.get(c)) == 0) for c in cols]
        manual = [sum(1 for r in rs if r.get(c) == "manual") for c in cols]
        labels = [c[2:] for c in cols]
        a1.bar(labels, full, color="tab:green", label="full marks")
        a1.bar(labels, zero, bottom=full, color="tab:red", label="0 points")
        a1.bar(labels, manual, bottom=[f + z for f, z in zip(full, zero)], color="tab:gray",
               label="graded by hand")
        a1.yaxis.set_major_locator(matplotlib.ticker.MaxNLocator(integer=True))
        a2.yaxis.set_major_locator(matplotlib.ticker.MaxNLocator(integer=True))
        a1.set_xlabel("exercise")
        a1.set_ylabel("submissions")
        a1.set_title(f"{assignment}: points per exercise")
        a1.legend(fontsize=8)
        totals = [_float(r.get("total")) or 0 for r in rs]
        top = max((_float(r.get("max_total")) or 0 for r in rs), default=0) or 1
        a2.hist(totals, bins=min(20, int(top) + 1), range=(0, top), color="tab:blue")
        a2.set_xlabel(f"automatic points (of {top:g})")
        a2.set_ylabel("submissions")
        a2.set_title(f"{assignment}: totals ({len(rs)} submissions)")
    fig.tight_layout()
    tmp = path.with_name(f".{path.name}.tmp.png")
    fig.savefig(tmp, dpi=100)
    plt.close(fig)
    os.replace(tmp, path)


def _titles():
    g, _ = _grader()
    return g._title


def page(rows, mistakes, found, feedback_dir) -> str:
    title = _titles()
    e = html.escape
    out = io.StringIO()
    out.write("<!doctype html>\n<!-- lrnn grade report -->\n<html><head><meta charset='utf-8'>"
              "<title>Gradebook report</title><style>body{font-family:sans-serif;max-width:"
              "60em;margin:auto}td,th{padding:2px 8px;text-align:left}</style></head><body>\n")
    out.write(f"<h1>Gradebook report</h1>\n<p>{len(rows)} submissions; feedback read for "
              f"{found} of them from <code>{e(str(feedback_dir))}</code>.</p>\n")
    out.write("<figure><img src='scores.png' alt='score distributions'><figcaption>Points per "
              "exercise (submissions with full marks, 0 points, or waiting for hand grading) "
              "and the distribution of automatic totals, per assignment.</figcaption>"
              "</figure>\n")
    out.write("<h2>Most frequent mistakes</h2>\n")
    for (assignment, ex), counter in sorted(mistakes.items(),
                                             key=lambda kv: tuple(int(x) for x in
                                                                  kv[0][1].split("."))):
        out.write(f"<h3>Exercise {e(ex)} · {e(title(ex))} ({e(assignment)})</h3>\n<table>"
                  "<tr><th>submissions</th><th>what the feedback says</th></tr>\n")
        for text, n in counter.most_common(5):
            out.write(f"<tr><td>{n}</td><td>{e(text)}</td></tr>\n")
        out.write("</table>\n")
    bad = [r for r in rows if r.get("status") != "graded"]
    out.write("<h2>Submissions that did not grade cleanly</h2>\n")
    if bad:
        out.write("<table><tr><th>submission</th><th>status</th><th>total</th></tr>\n")
        for r in bad:
            out.write(f"<tr><td>{e(student_of(r))}</td><td>{e(r.get('status', ''))}</td>"
                      f"<td>{e(r.get('total', ''))}</td></tr>\n")
        out.write("</table>\n")
    else:
        out.write("<p>None: every submission has status <code>graded</code>.</p>\n")
    out.write("<h2>Slowest submissions</h2>\n")
    if rows and "seconds" in rows[0]:
        slow = sorted(rows, key=lambda r: -(_float(r.get("seconds")) or 0))[:10]
        out.write("<table><tr><th>submission</th><th>seconds</th><th>status</th></tr>\n")
        for r in slow:
            out.write(f"<tr><td>{e(student_of(r))}</td><td>{e(r['seconds'])}</td>"
                      f"<td>{e(r.get('status', ''))}</td></tr>\n")
        out.write("</table>\n")
    else:
        out.write("<p>Not recorded: this gradebook has no <code>seconds</code> column (the "
                  "grader prints each notebook's time to its log only).</p>\n")
    out.write("</body></html>\n")
    return out.getvalue()


def roster(path) -> dict:
    if not path:
        return {}
    with open(path, newline="", encoding="utf-8") as f:
        rows = list(csv.DictReader(f))
    if not rows or "student" not in rows[0] or "login" not in rows[0]:
        raise PlatformError(f"--roster {path}: expected the columns student,login[,name,section]")
    return {r["student"]: r for r in rows}


def best_scores(rows) -> tuple[dict, dict]:
    """({student: {assignment: best total}}, {assignment: max_total})."""
    best, possible = defaultdict(dict), {}
    for r in rows:
        a = r.get("assignment")
        if not a:
            continue
        s = student_of(r)
        total = _float(r.get("total")) or 0.0
        best[s][a] = max(best[s].get(a, 0.0), total)
        possible[a] = max(possible.get(a, 0.0), _float(r.get("max_total")) or 0.0)
    return best, possible


def canvas_csv(rows, people=None) -> str:
    best, possible = best_scores(rows)
    people = people or {}
    assignments = sorted(possible)
    out = io.StringIO()
    w = csv.writer(out)
    w.writerow(["Student", "ID", "SIS User ID", "SIS Login ID", "Section", *assignments])
    w.writerow(["    Points Possible", "", "", "", "", *[f"{possible[a]:g}" for a in assignments]])
    for s in sorted(best):
        p = people.get(s, {})
        w.writerow([p.get("name", s), "", "", p.get("login", s), p.get("section", ""),
                    *[f"{best[s][a]:g}" if a in best[s] else "" for a in assignments]])
    return out.getvalue()


def moodle_csv(rows, people=None) -> str:
    best, possible = best_scores(rows)
    people = people or {}
    assignments = sorted(possible)
    out = io.StringIO()
    w = csv.writer(out)
    w.writerow(["Username", *assignments])
    for s in sorted(best):
        w.writerow([people.get(s, {}).get("login", s),
                    *[f"{best[s][a]:g}" if a in best[s] else "" for a in assignments]])
    return out.getvalue()


def _prepare(out: Path, force: bool):
    if out.exists() and not out.is_dir():
        raise PlatformError(f"--out {out} is a file; give a folder")
    if out.is_dir() and any(out.iterdir()) and not (out / MARKER).exists():
        raise PlatformError(f"--out {out} holds files this command did not write; give a new "
                            "or empty folder")
    if (out / MARKER).exists() and not force:
        raise PlatformError(f"--out {out} holds a report; pass --force to replace it")
    out.mkdir(parents=True, exist_ok=True)
    (out / MARKER).write_text("written by `lrnn grade report`\n", encoding="utf-8")


def _write(path: Path, text: str):
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    with os.fdopen(fd, "w", encoding="utf-8", newline="") as f:
        f.write(text)
    os.replace(tmp, path)


def report(gradebook, *, out=None, feedback_dir=None, roster_path=None, force=False,
           log=print) -> Path:
    gradebook = Path(gradebook)
    rows, mistakes, found = read(gradebook, feedback_dir)
    people = roster(roster_path)
    out = Path(out) if out else gradebook.parent / "report"
    _prepare(out, force)
    figure(rows, out / "scores.png")
    _write(out / "index.html", page(rows, mistakes, found,
                                    feedback_dir or gradebook.parent / "feedback"))
    _write(out / "canvas.csv", canvas_csv(rows, people))
    _write(out / "moodle.csv", moodle_csv(rows, people))
    log(f"wrote {out}/index.html (+ scores.png, canvas.csv, moodle.csv)")
    return out


def main(argv=None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    p = argparse.ArgumentParser(prog="lrnn grade report",
                                description="A report page and Canvas/Moodle CSV files from "
                                            "a gradebook.")
    p.add_argument("gradebook")
    p.add_argument("--feedback-dir", default=None, help="default: feedback/ beside it")
    p.add_argument("--out", default=None, help="folder (default: report/ beside it)")
    p.add_argument("--roster", default=None, help="CSV: student,login[,name,section]")
    p.add_argument("--force", action="store_true")
    a = p.parse_args(argv)
    try:
        report(a.gradebook, out=a.out, feedback_dir=a.feedback_dir, roster_path=a.roster,
               force=a.force)
    except PlatformError as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main())
