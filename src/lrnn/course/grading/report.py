"""The instructor's view of a gradebook: a page, and the CSV files Canvas and Moodle import.

    lrnn grade report gradebook.csv [--out report/] [--roster roster.csv]
        [--names auto|file|folder|canvas|moodle] [--feedback-dir DIR] [--force]

Reads the gradebook ``lrnn grade`` wrote and the details it wrote beside it
(``gradebook.details.json``: per submission and exercise the points, status, hint, review
evidence and the time it took; the feedback Markdown is for students and is never parsed) and
writes, into ``--out`` (default ``report/`` beside the gradebook; a new or empty folder, or one
this command wrote):

* ``index.html``: one row per student (their totals per assignment, status and grading time),
  per assignment the score distribution per exercise and of the totals (``scores.png``), the
  mistakes students made most often per exercise (the hint the check printed, else what
  failed), the submissions that need a person's review (with the evidence), those that did
  not grade cleanly, the slowest, and the submissions that could not be credited to a student;
* ``canvas.csv``: Canvas's gradebook import layout (``Student, ID, SIS User ID, SIS Login ID,
  Section``, a ``Points Possible`` row, one column per assignment);
* ``moodle.csv``: Moodle's "Import grades from CSV" layout (an identifier column, one column
  per assignment; matched to users on import).

Who a submission belongs to (``--names``):

* ``canvas``: Canvas's download names, ``<name>_[LATE_]<user id>_<submission id>_<file>``:
  the student is the Canvas user id;
* ``moodle``: Moodle's download names, ``<full name>_<participant id>_assignsubmission_file_``
  (the file's prefix or its folder): the student is the participant id;
* ``folder``: one folder per student (``alice/01_linear_recurrence.ipynb``);
* ``file``: ``<student>_<assignment>.ipynb`` or ``<assignment>_<student>.ipynb`` in one folder;
* ``auto`` (default): ``folder`` for submissions in sub-folders of the common folder, else
  ``file``; where the folder and the file name both name someone and differ, the submission is
  ambiguous.

``--roster roster.csv`` (columns ``student,login[,name,section,id]``; ``student`` is what the
names above give) maps students to the logins the platforms know. A submission is never
credited on a guess: an unrecognised or ambiguous name, a student missing from the roster, or
two submissions of one assignment by one student are listed on the page (and printed) and
left out of the CSV files, for the instructor to resolve.
"""
from __future__ import annotations

import argparse
import csv
import html
import io
import os
import re
import sys
from collections import Counter, defaultdict
from pathlib import Path

from ..._io import DestinationError, atomic_write_text, check_folder, output_argument
from .gradescope import PlatformError, _grader

MARKER = ".lrnn-report"
EX = re.compile(r"ex(\d+\.\d+)$")
NAMES = ("auto", "file", "folder", "canvas", "moodle")
STUDENT = re.compile(r"[A-Za-z0-9][A-Za-z0-9._@-]*")
COPY_SUFFIX = re.compile(r"\s*\(\d+\)$")                  # "name (1)": a browser's copy
CANVAS = re.compile(r"^(?P<name>[^_]+)_(?:LATE_)?(?P<id>\d+)_(?P<sub>\d+)_(?P<file>.+)$")
MOODLE = re.compile(r"^(?P<name>.+?)_(?P<id>\d+)_assignsubmission_[a-z]+_(?P<file>.*)$")
FORMULA_START = ("=", "+", "-", "@", "\t", "\r")


def csv_cell(value) -> str:
    """A cell a spreadsheet shows as text: one that starts with ``= + - @``, a tab or a
    carriage return gets a leading ``'`` (OWASP's advice against CSV injection)."""
    text = "" if value is None else str(value)
    return "'" + text if text.startswith(FORMULA_START) else text


def exercise_columns(rows) -> list[str]:
    cols = {k for r in rows for k in r if EX.match(k)}
    return sorted(cols, key=lambda c: tuple(int(x) for x in c[2:].split(".")))


def _stem_student(stem: str, assignment: str) -> str | None:
    """The student a file name ``<student>_<assignment>`` / ``<assignment>_<student>`` names
    ("" when it is the assignment's name alone, None when it is neither)."""
    if not assignment:
        return None
    if stem == assignment:
        return ""
    if stem.startswith(assignment + "_"):
        name = stem[len(assignment) + 1:]
    elif stem.endswith("_" + assignment):
        name = stem[:-len(assignment) - 1]
    else:
        return None
    return name if STUDENT.fullmatch(name) else None


def identify(rows, *, names="auto") -> tuple[dict, dict]:
    """({submission key: student}, {submission key: why it cannot be credited})."""
    if names not in NAMES:
        raise PlatformError(f"--names: got {names!r}, expected one of {', '.join(NAMES)}")
    keys = [r["submission"] for r in rows]
    parents = {str(Path(k).parent) for k in keys}
    common = os.path.commonpath(list(parents)) if parents else ""
    who, why = {}, {}
    for r in rows:
        key, a = r["submission"], r.get("assignment") or ""
        path = Path(key)
        if names in ("canvas", "moodle"):
            rx = CANVAS if names == "canvas" else MOODLE
            m = rx.match(path.name) or rx.match(path.parent.name + "_")
            if m is None:
                why[key] = f"the name does not follow {names.title()}'s download convention"
            else:
                who[key] = m["id"]
            continue
        in_folder = str(path.parent) != common
        folder = path.parent.name if in_folder else None
        from_file = _stem_student(COPY_SUFFIX.sub("", path.stem), a)
        if names == "folder" or (names == "auto" and in_folder):
            if not folder or not STUDENT.fullmatch(folder):
                why[key] = "it is not in a folder named after a student"
            elif names == "auto" and from_file and from_file != folder:
                why[key] = (f"ambiguous: its folder names {folder!r} and its file name "
                            f"{from_file!r}")
            else:
                who[key] = folder
        elif from_file:
            who[key] = from_file
        else:
            why[key] = ("its file name does not name a student as <student>_<assignment>"
                        if a else "it matches no assignment")
    return who, why


def credit(rows, who: dict, why: dict, people: dict) -> tuple[dict, dict]:
    """(the rows credited: {key: student}, refused: {key: reason}) after the roster and the
    one-submission-per-assignment rule."""
    why = dict(why)
    who = dict(who)
    if people:
        for key, s in list(who.items()):
            if s not in people:
                why[key] = f"{s!r} is not in the roster"
                del who[key]
    by = defaultdict(list)
    for r in rows:
        if r["submission"] in who:
            by[(who[r["submission"]], r.get("assignment") or "")].append(r["submission"])
    for (s, a), ks in by.items():
        if len(ks) > 1:
            for k in ks:
                why[k] = (f"{len(ks)} submissions of {a or 'an unknown assignment'} are "
                          f"credited to {s!r}: " + ", ".join(Path(x).name for x in ks))
                del who[k]
    return who, why


def read(gradebook, feedback_dir=None):
    """(rows, {submission key: details record}, feedback folder or None)."""
    g, _ = _grader()
    from .gradebook import details_path, read_details
    gradebook = Path(gradebook)
    if not gradebook.is_file():
        raise PlatformError(f"gradebook: {gradebook} is not a file")
    rows = g.read_gradebook(gradebook)
    if not rows or "submission" not in rows[0]:
        raise PlatformError(f"gradebook: {gradebook} has no rows written by `lrnn grade`")
    details = read_details(details_path(gradebook))
    if feedback_dir is not None:
        if not Path(feedback_dir).is_dir():
            raise PlatformError(f"--feedback-dir: got {str(feedback_dir)!r}, expected the "
                                "folder `lrnn grade` wrote the feedback into")
        fb = Path(feedback_dir)
    else:
        fb = gradebook.parent / "feedback"
        fb = fb if fb.is_dir() else None
    return rows, details, fb


def mistakes_of(rows, details) -> dict:
    """{(assignment, exercise): Counter(mistake)} from the details records."""
    out = defaultdict(Counter)
    for r in rows:
        rec = details.get(r["submission"])
        if not rec or rec.get("sha256") != r.get("sha256"):
            continue
        for e in rec.get("exercises", []):
            if e.get("score") == "manual" or e.get("status") == "passed":
                continue
            out[(rec.get("assignment", ""), e["exercise"])][
                e.get("hint") or e.get("mistake") or e.get("status", "")] += 1
    return out


def _float(x):
    try:
        return float(x)
    except (TypeError, ValueError):
        return None


def figure(rows, path: Path):
    """Per assignment: stacked bars per exercise (full marks / zero / manual) and a
    histogram of the totals; 10 inches wide at 100 dpi (the page scales it to its width)."""
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    import matplotlib.ticker
    by = defaultdict(list)
    for r in rows:
        by[r.get("assignment") or "(unknown)"].append(r)
    n = len(by)
    fig, axes = plt.subplots(n, 2, figsize=(10, 3.2 * n), squeeze=False)
    for (assignment, rs), (a1, a2) in zip(sorted(by.items()), axes):
        cols = [c for c in exercise_columns(rs) if any(r.get(c) not in ("", None) for r in rs)]
        full = [sum(1 for r in rs if (_float(r.get(c)) or 0) > 0) for c in cols]
        zero = [sum(1 for r in rs if _float(r.get(c)) == 0) for c in cols]
        manual = [sum(1 for r in rs if r.get(c) == "manual") for c in cols]
        labels = [c[2:] for c in cols]
        a1.bar(labels, full, color="tab:green", label="points")
        a1.bar(labels, zero, bottom=full, color="tab:red", label="0 points")
        a1.bar(labels, manual, bottom=[f + z for f, z in zip(full, zero)], color="tab:gray",
               label="graded by hand")
        a1.yaxis.set_major_locator(matplotlib.ticker.MaxNLocator(integer=True))
        a2.yaxis.set_major_locator(matplotlib.ticker.MaxNLocator(integer=True))
        a1.tick_params(axis="x", labelrotation=45 if len(labels) > 8 else 0)
        a1.set_xlabel("exercise")
        a1.set_ylabel("submissions")
        a1.set_title(f"{assignment}: points per exercise", fontsize=10)
        a1.legend(fontsize=8)
        totals = [_float(r.get("total")) or 0 for r in rs]
        top = max((_float(r.get("max_total")) or 0 for r in rs), default=0) or 1
        a2.hist(totals, bins=min(20, int(top) + 1), range=(0, top), color="tab:blue")
        a2.set_xlabel(f"points (of {top:g})")
        a2.set_ylabel("submissions")
        a2.set_title(f"{assignment}: totals ({len(rs)} submissions)", fontsize=10)
    fig.tight_layout()
    buf = io.BytesIO()
    fig.savefig(buf, dpi=100, format="png")
    plt.close(fig)
    from ..._io import atomic_write_bytes
    atomic_write_bytes(path, buf.getvalue())


def _titles():
    g, _ = _grader()
    return g._title


def _ex_order(ex: str):
    return tuple(int(x) for x in ex.split(".") if x.isdigit())


STYLE = ("body{font-family:sans-serif;max-width:72em;margin:auto;padding:0 1em}"
         "td,th{padding:2px 8px;text-align:left;vertical-align:top}"
         "table{border-collapse:collapse}tr:nth-child(even){background:#f4f4f4}"
         "img{max-width:100%;height:auto}pre{white-space:pre-wrap;max-width:60em}")


def page(rows, details, who, why, people, feedback_dir) -> str:
    """The report's HTML page, written in page order, section after section.

    Long because it is that one page: every section reads the same rows, details and credits,
    and pieces would only pass the page being written and those tables around."""
    title = _titles()
    e = html.escape
    out = io.StringIO()
    n_details = sum(1 for r in rows if r["submission"] in details)
    out.write("<!doctype html>\n<!-- lrnn grade report -->\n<html><head><meta charset='utf-8'>"
              f"<title>Gradebook report</title><style>{STYLE}</style></head><body>\n")
    out.write(f"<h1>Gradebook report</h1>\n<p>{len(rows)} submissions, {len(who)} credited "
              f"to {len(set(who.values()))} students; per-exercise details recorded for "
              f"{n_details} of them.</p>\n")
    if n_details < len(rows):
        out.write(f"<p>{len(rows) - n_details} submissions have no details (graded by an "
                  "earlier version of the grader): <code>lrnn grade --force</code> regrades "
                  "them.</p>\n")
    out.write("<figure><img src='scores.png' alt='score distributions'><figcaption>Points per "
              "exercise (submissions with points, 0 points, or waiting for hand grading) "
              "and the distribution of totals, per assignment.</figcaption></figure>\n")

    # students
    assignments = sorted({r.get("assignment") for r in rows if r.get("assignment")})
    by_student = defaultdict(dict)
    for r in rows:
        if r["submission"] in who:
            by_student[who[r["submission"]]][r.get("assignment") or ""] = r
    out.write("<h2>Students</h2>\n<table><tr><th>student</th><th>login</th>" +
              "".join(f"<th>{e(a)}</th>" for a in assignments) +
              "<th>status</th><th>grading time (s)</th><th>feedback</th></tr>\n")
    for s in sorted(by_student):
        rs = by_student[s]
        login = people.get(s, {}).get("login", s) if people else s
        cells = []
        for a in assignments:
            r = rs.get(a)
            cells.append(f"<td>{e(r['total'])} / {e(r['max_total'])}</td>" if r else "<td></td>")
        statuses = sorted({r.get("status", "") for r in rs.values()})
        secs = [details.get(r["submission"], {}).get("seconds") for r in rs.values()]
        secs = ", ".join(f"{x:.1f}" for x in secs if isinstance(x, (int, float))) or "–"
        links = []
        if feedback_dir is not None:
            g, _ = _grader()
            for r in rs.values():
                f = feedback_dir / g.feedback_name(r["submission"])
                if f.is_file():
                    links.append(f"<a href='{e(f.resolve().as_uri())}'>"
                                 f"{e(r.get('assignment') or '?')}</a>")
        out.write(f"<tr><td>{e(s)}</td><td>{e(login)}</td>{''.join(cells)}"
                  f"<td>{e(', '.join(statuses))}</td><td>{e(secs)}</td>"
                  f"<td>{' '.join(links)}</td></tr>\n")
    out.write("</table>\n")

    out.write("<h2>Not credited to anyone</h2>\n")
    if why:
        out.write("<p>These submissions are left out of <code>canvas.csv</code> and "
                  "<code>moodle.csv</code> until you resolve them (rename the file, fix the "
                  "roster, or remove the extra submission).</p>\n<table><tr><th>submission"
                  "</th><th>why</th></tr>\n")
        for k in sorted(why):
            out.write(f"<tr><td><code>{e(k)}</code></td><td>{e(why[k])}</td></tr>\n")
        out.write("</table>\n")
    else:
        out.write("<p>None: every submission is credited to one student.</p>\n")

    review = [r for r in rows if "review" in str(r.get("status", "")) or
              any(x.get("review") for x in details.get(r["submission"], {}).get("exercises", []))]
    out.write("<h2>Needs review</h2>\n")
    if review:
        out.write("<table><tr><th>submission</th><th>status</th><th>exercise</th>"
                  "<th>evidence</th></tr>\n")
        for r in review:
            items = [x for x in details.get(r["submission"], {}).get("exercises", [])
                     if x.get("review")] or [{"exercise": "", "review": ""}]
            for x in items:
                out.write(f"<tr><td>{e(who.get(r['submission'], r['submission']))}</td>"
                          f"<td>{e(r.get('status', ''))}</td><td>{e(x['exercise'])}</td>"
                          f"<td><pre>{e(x['review'])}</pre></td></tr>\n")
        out.write("</table>\n")
    else:
        out.write("<p>None.</p>\n")

    out.write("<h2>Most frequent mistakes</h2>\n")
    mistakes = mistakes_of(rows, details)
    if not mistakes:
        out.write("<p>None recorded.</p>\n")
    for (assignment, ex), counter in sorted(mistakes.items(),
                                             key=lambda kv: (kv[0][0], _ex_order(kv[0][1]))):
        out.write(f"<h3>Exercise {e(ex)} · {e(title(ex))} ({e(assignment)})</h3>\n<table>"
                  "<tr><th>submissions</th><th>what the check says</th></tr>\n")
        for text, n in counter.most_common(5):
            out.write(f"<tr><td>{n}</td><td>{e(text)}</td></tr>\n")
        out.write("</table>\n")

    bad = [r for r in rows if r.get("status") != "graded"]
    out.write("<h2>Submissions that did not grade cleanly</h2>\n")
    if bad:
        out.write("<table><tr><th>submission</th><th>status</th><th>total</th></tr>\n")
        for r in bad:
            out.write(f"<tr><td>{e(who.get(r['submission'], r['submission']))}</td>"
                      f"<td>{e(r.get('status', ''))}</td><td>{e(r.get('total', ''))}</td></tr>\n")
        out.write("</table>\n")
    else:
        out.write("<p>None: every submission has status <code>graded</code>.</p>\n")

    out.write("<h2>Slowest submissions</h2>\n")
    timed = [(details[r["submission"]]["seconds"], r) for r in rows
             if isinstance(details.get(r["submission"], {}).get("seconds"), (int, float))]
    if timed:
        out.write("<table><tr><th>submission</th><th>seconds</th><th>status</th></tr>\n")
        for secs, r in sorted(timed, key=lambda t: -t[0])[:10]:
            out.write(f"<tr><td>{e(who.get(r['submission'], r['submission']))}</td>"
                      f"<td>{secs:.1f}</td><td>{e(r.get('status', ''))}</td></tr>\n")
        out.write("</table>\n")
    else:
        out.write("<p>No grading times recorded.</p>\n")
    out.write("</body></html>\n")
    return out.getvalue()


def roster(path) -> dict:
    if not path:
        return {}
    path = Path(path)
    if not path.is_file():
        raise PlatformError(f"--roster: got {str(path)!r}, expected a CSV file "
                            "(student,login[,name,section,id])")
    with open(path, newline="", encoding="utf-8-sig") as f:
        rows = list(csv.DictReader(f))
    if not rows or "student" not in rows[0] or "login" not in rows[0]:
        raise PlatformError(f"--roster {path}: expected the columns "
                            "student,login[,name,section,id]")
    people, twice = {}, []
    for r in rows:
        s = (r.get("student") or "").strip()
        if s in people:
            twice.append(s)
        people[s] = r
    if twice:
        raise PlatformError(f"--roster {path}: the students {', '.join(sorted(set(twice)))} "
                            "appear more than once")
    return people


def best_scores(rows, who) -> tuple[dict, dict]:
    """({student: {assignment: total}}, {assignment: max_total}) of the credited rows."""
    best, possible = defaultdict(dict), {}
    for r in rows:
        a = r.get("assignment")
        if not a:
            continue
        possible[a] = max(possible.get(a, 0.0), _float(r.get("max_total")) or 0.0)
        if r["submission"] in who:
            best[who[r["submission"]]][a] = _float(r.get("total")) or 0.0
    return best, possible


def canvas_csv(rows, who, people=None) -> str:
    best, possible = best_scores(rows, who)
    people = people or {}
    assignments = sorted(possible)
    out = io.StringIO()
    w = csv.writer(out)
    w.writerow(["Student", "ID", "SIS User ID", "SIS Login ID", "Section", *assignments])
    w.writerow(["    Points Possible", "", "", "", "", *[f"{possible[a]:g}" for a in assignments]])
    for s in sorted(best):
        p = people.get(s, {})
        w.writerow([csv_cell(x) for x in
                    (p.get("name", s), p.get("id", ""), "", p.get("login", s),
                     p.get("section", ""),
                     *[f"{best[s][a]:g}" if a in best[s] else "" for a in assignments])])
    return out.getvalue()


def moodle_csv(rows, who, people=None) -> str:
    best, possible = best_scores(rows, who)
    people = people or {}
    assignments = sorted(possible)
    out = io.StringIO()
    w = csv.writer(out)
    w.writerow(["Username", *assignments])
    for s in sorted(best):
        w.writerow([csv_cell(x) for x in
                    (people.get(s, {}).get("login", s),
                     *[f"{best[s][a]:g}" if a in best[s] else "" for a in assignments])])
    return out.getvalue()


OUTPUTS = ("index.html", "scores.png", "canvas.csv", "moodle.csv")


def _prepare(out: Path, force: bool):
    """Check ``out`` before any work: a new or empty folder, or one this command wrote
    (``--force`` to replace that)."""
    try:
        check_folder(out, what="--out", create=True)
    except DestinationError as e:
        raise PlatformError(str(e)) from None
    if out.is_dir():
        theirs = [p.name for p in out.iterdir() if p.name != MARKER and
                  not (p.name in OUTPUTS and (out / MARKER).is_file())]
        if theirs:
            raise PlatformError(f"--out {out} holds files this command did not write "
                                f"({', '.join(sorted(theirs)[:5])}); give a new or empty "
                                "folder")
        if (out / MARKER).exists() and not force:
            raise PlatformError(f"--out {out} holds a report; pass --force to replace it")


def report(gradebook, *, out=None, feedback_dir=None, roster_path=None, names="auto",
           force=False, log=print) -> Path:
    gradebook = Path(gradebook)
    rows, details, fb = read(gradebook, feedback_dir)
    people = roster(roster_path)
    who, why = identify(rows, names=names)
    who, why = credit(rows, who, why, people)
    out = Path(out) if out else gradebook.parent / "report"
    _prepare(out, force)
    out.mkdir(parents=True, exist_ok=True)
    atomic_write_text(out / MARKER, "written by `lrnn grade report`\n")
    figure(rows, out / "scores.png")
    atomic_write_text(out / "index.html", page(rows, details, who, why, people, fb))
    atomic_write_text(out / "canvas.csv", canvas_csv(rows, who, people), newline="")
    atomic_write_text(out / "moodle.csv", moodle_csv(rows, who, people), newline="")
    for k in sorted(why):
        log(f"WARNING: not credited: {k}: {why[k]}")
    log(f"wrote {out}/index.html (+ scores.png, canvas.csv, moodle.csv): "
        f"{len(set(who.values()))} students" + (f", {len(why)} submissions not credited "
                                                 "(listed on the page)" if why else ""))
    return out


def main(argv=None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    p = argparse.ArgumentParser(prog="lrnn grade report",
                                description="A report page and Canvas/Moodle CSV files from "
                                            "a gradebook.")
    p.add_argument("gradebook")
    p.add_argument("--feedback-dir", default=None,
                   help="the feedback folder, linked from the page (default: feedback/ "
                        "beside the gradebook, when there is one)")
    output_argument(p, "--out", default=None, folder=True, command="lrnn grade report",
                    help="folder (default: report/ beside it)")
    p.add_argument("--roster", default=None, help="CSV: student,login[,name,section,id]")
    p.add_argument("--names", choices=NAMES, default="auto",
                   help="how submissions name their student (see the module's help)")
    p.add_argument("--force", action="store_true")
    a = p.parse_args(argv)
    try:
        report(a.gradebook, out=a.out, feedback_dir=a.feedback_dir, roster_path=a.roster,
               names=a.names, force=a.force,
               log=lambda m: print(m, file=sys.stderr if m.startswith("WARNING") else
                                   sys.stdout))
    except (PlatformError, ValueError) as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main())
