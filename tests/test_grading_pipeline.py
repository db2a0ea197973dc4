"""The grading pipeline as a class meets it: the Gradescope image built by the bundle's own
setup.sh, results.json as Gradescope reads it, the details the grader writes for the report,
hand grades kept across regrades, who a submission is credited to, and the Classroom and
nbgrader outputs. Few real gradings (chapter 1, a few seconds each); the rest are the
functions on rows and files."""
import csv
import io
import json
import os
import shutil
import stat
import subprocess
import sysconfig
import zipfile
from pathlib import Path

import nbformat
import pytest

from lrnn.course import grading as g
from lrnn.course.grading import classroom, gradescope, nbgrader_export, report
from lrnn.course.grading import sandbox as sb
from lrnn.course.grading.gradebook import details_path

ROOT = Path(__file__).resolve().parents[1]
SOLUTIONS = ROOT / "solutions"
STEM = "01_linear_recurrence"
FULL = {"1.1": 2, "1.2": 4, "1.3": 3, "1.4": 3, "1.5": 2, "1.7": 1}
WRONG_RADIUS = "def spectral_radius(A):\n    return float(np.linalg.norm(A, 2))"
TIMEOUT, CELL_TIMEOUT = 120, 20
QUIET = dict(log=lambda m: None)


def bwrap_or_skip():
    try:
        sb.choose("bwrap")
    except sb.SandboxError as e:
        if os.environ.get("LRNN_REQUIRE_SANDBOX") == "1":
            pytest.fail(f"the sandbox is required here (LRNN_REQUIRE_SANDBOX=1): {e}")
        pytest.skip(f"no bubblewrap here: {e}")


def partial_notebook(open_answer=None):
    nb = nbformat.read(SOLUTIONS / f"{STEM}.ipynb", as_version=4)
    for cell in nb.cells:
        gid = cell.metadata.get("nbgrader", {}).get("grade_id", "")
        if gid == "ex1.5-solution":
            cell.source = WRONG_RADIUS
        if open_answer is not None and cell.metadata.get("nbgrader", {}).get("solution") and \
                cell.cell_type == "markdown":
            cell.source = open_answer
    return nb


# ---------------------------------------------------------------------------------------
# Gradescope: the image, built by the bundle's own setup.sh
# ---------------------------------------------------------------------------------------

def image_command(opt, autograder, argv, env):
    """``argv`` in a simulated Gradescope image: this machine's system read-only, scratch
    folders at /opt and /autograder, a private /tmp, nothing else writable."""
    args = ["bwrap"]
    for entry in sorted(Path("/").iterdir()):
        if entry.name in ("proc", "dev", "tmp", "opt", "autograder", "sys", "run"):
            continue
        if entry.is_symlink():
            args += ["--symlink", os.readlink(entry), str(entry)]
        elif entry.is_dir():
            args += ["--ro-bind", str(entry), str(entry)]
    args += ["--dev", "/dev", "--proc", "/proc", "--tmpfs", "/tmp"]
    for folder in env.get("LRNN_SETUP_OFFLINE_SITE", "").split(os.pathsep):
        if folder.startswith("/tmp/"):       # the test's own packages (CI's venv lives there)
            args += ["--ro-bind", folder, folder]
    args += ["--bind", str(opt), "/opt",
             "--bind", str(autograder), "/autograder", "--chdir", "/autograder",
             "--unshare-pid", "--die-with-parent", "/usr/bin/env", "-i",
             *[f"{k}={v}" for k, v in env.items()], *argv]
    return args


@pytest.mark.slow
def test_setup_sh_builds_the_image_and_the_autograder_grades(tmp_path):
    """The bundle's setup.sh installs its wheel with pip (metadata and every requirement of
    the extra checked; no index: this environment's packages stand in for PyPI), then
    run_autograder grades the solution, the blank exercise and a partial answer."""
    bwrap_or_skip()
    bundle = gradescope.build_bundle(tmp_path / "autograder.zip", chapters=["01"],
                                     timeout=TIMEOUT, cell_timeout=CELL_TIMEOUT,
                                     visibility="after_due_date", **QUIET)
    with zipfile.ZipFile(bundle) as z:
        wheel = next(n for n in z.namelist() if n.endswith(".whl"))
        with zipfile.ZipFile(io.BytesIO(z.read(wheel))) as w:
            meta = w.read(next(n for n in w.namelist() if n.endswith("/METADATA"))).decode()
    assert "Requires-Dist: tomli>=1.1; python_version < \"3.11\" and extra == \"grading\"" \
        in meta
    assert not any(line.count(";") > 1 for line in meta.splitlines()
                   if line.startswith("Requires-Dist:"))
    opt = tmp_path / "opt"
    opt.mkdir()
    site = os.pathsep.join(sorted({sysconfig.get_path("purelib"),
                                   sysconfig.get_path("platlib")}))
    env = {"PATH": "/usr/local/bin:/usr/bin:/bin", "HOME": "/tmp", "JAX_PLATFORMS": "cpu",
           "LRNN_SETUP_OFFLINE_SITE": site}
    submissions = {"honest": nbformat.read(SOLUTIONS / f"{STEM}.ipynb", as_version=4),
                   "blank": nbformat.read(ROOT / "exercises" / f"{STEM}.ipynb", as_version=4),
                   "partial": partial_notebook()}
    first = None
    results = {}
    for name, nb in submissions.items():
        root = gradescope.unpack(bundle, tmp_path / f"ag-{name}")
        if first is None:
            r = subprocess.run(image_command(opt, root, ["bash", "/autograder/source/setup.sh"],
                                             env), capture_output=True, text=True, timeout=600)
            assert r.returncode == 0, (r.stdout[-2000:], r.stderr[-3000:])
            assert "Successfully installed lrnn" in r.stdout
            assert (opt / "lrnn-venv" / "bin" / "python").exists()
            first = root
        nbformat.write(nb, root / "submission" / f"{STEM}.ipynb")
        before = {p.name: p.read_bytes() for p in (root / "source" / "solutions").iterdir()}
        # the kernels' sandbox must see the packages standing in for the image's
        run_env = dict(env, LRNN_AUTOGRADER_SANDBOX_PATH=site)
        r = subprocess.run(image_command(opt, root, ["/autograder/run_autograder"], run_env),
                           capture_output=True, text=True, timeout=TIMEOUT + 120)
        assert r.returncode == 0, r.stderr[-3000:]
        data = json.loads((root / "results" / "results.json").read_text())
        results[name] = data
        if data["extra_data"]["sandbox"] == "bwrap":
            after = {p.name: p.read_bytes() for p in (root / "source" / "solutions").iterdir()}
            assert after == before
        # the installed wheel graded it, not this checkout
        assert str(ROOT) not in r.stdout + r.stderr
    assert results["honest"]["score"] == 15.0, results["honest"]["output"][:3000]
    assert results["blank"]["score"] == 0.0
    assert results["partial"]["score"] == 13.0
    scores = {t["number"]: t["score"] for t in results["partial"]["tests"] if t["max_score"]}
    assert scores == dict(FULL, **{"1.5": 0})
    for data in results.values():
        assert data["visibility"] == "after_due_date"
        assert all("visibility" not in t for t in data["tests"])


def fake_result(assignment, total, max_total, name):
    results = [{"exercise": f"{assignment[1]}.{k}", "grade_id": f"ex{assignment[1]}.{k}",
                "points": 1.0, "title": "t", "score": 1.0 if k <= total else 0.0,
                "result": "passed" if k <= total else "failed", "detail": ""}
               for k in range(1, int(max_total) + 1)]
    return {"row": {"submission": f"/s/{name}", "assignment": assignment, "total": total,
                    "max_total": max_total, "status": "graded", "sha256": ""},
            "results": results, "feedback": f"# Feedback on `{name}`\n"}


def test_results_json_scores_the_bundles_assignment_only():
    """A blank chapter 1 beside a solved chapter 2: the chapter-1 bundle scores 0 of its
    points and says the other notebook was not graded here."""
    graded = [fake_result("01_x", 0, 3, "01_x.ipynb"), fake_result("02_y", 4, 4, "02_y.ipynb")]
    data = gradescope.results_json(graded, assignment="01_x", visibility="hidden")
    assert data["score"] == 0.0
    assert sum(t["max_score"] for t in data["tests"]) == 3
    assert {t["number"] for t in data["tests"]} == {"1.1", "1.2", "1.3"}
    assert "`02_y.ipynb`" in data["output"] and data["extra_data"]["ignored"] == ["02_y.ipynb"]
    assert data["visibility"] == "hidden" and all("visibility" not in t for t in data["tests"])
    both = [fake_result("01_x", 2, 3, "a.ipynb"), fake_result("01_x", 3, 3, "b.ipynb")]
    data = gradescope.results_json(both, assignment="01_x")
    assert data["score"] == 3.0 and len(data["tests"]) == 3           # the best, once
    none = gradescope.results_json([fake_result("02_y", 4, 4, "02_y.ipynb")],
                                   assignment="01_x")
    assert none["score"] == 0.0 and none["tests"] == [] and "01_x" in none["output"]


def test_bundle_is_one_chapter_with_hidden_tests(tmp_path):
    with pytest.raises(gradescope.PlatformError, match="exactly one"):
        gradescope.build_bundle(tmp_path / "a.zip", chapters=["01", "02"], **QUIET)
    with pytest.raises(gradescope.PlatformError, match="exactly one"):
        gradescope.build_bundle(tmp_path / "a.zip", chapters=[], **QUIET)
    with pytest.raises(gradescope.PlatformError, match="hidden"):
        gradescope.build_bundle(tmp_path / "a.zip", chapters=["01"],
                                solutions=ROOT / "exercises", **QUIET)
    assert list(tmp_path.iterdir()) == []


def test_installed_package_asks_for_a_checkout_and_solutions(tmp_path, monkeypatch, capsys):
    """As from an installed wheel: no checkout above the package, none in the current
    folder. Clear errors, exit 2, no traceback, nothing written."""
    monkeypatch.setattr(gradescope, "repository_root", lambda: tmp_path / "site-packages")
    monkeypatch.chdir(tmp_path)
    with pytest.raises(gradescope.PlatformError, match="--solutions"):
        gradescope.default_solutions()
    out = tmp_path / "a.zip"
    assert gradescope.main(["--chapter", "01", "--out", str(out),
                            "--solutions", str(SOLUTIONS)]) == 2
    err = capsys.readouterr().err
    assert "--project" in err and "Traceback" not in err
    assert gradescope.main(["--chapter", "01", "--out", str(out), "--solutions",
                            str(tmp_path / "missing")]) == 2
    assert "--solutions" in capsys.readouterr().err
    assert classroom.main(["--out", str(tmp_path / ".github"), "--tests-repo", "prof/t"]) == 2
    assert "--solutions" in capsys.readouterr().err
    assert nbgrader_export.main(["--out", str(tmp_path / "src")]) == 2
    assert "--solutions" in capsys.readouterr().err
    assert sorted(p.name for p in tmp_path.iterdir()) == []


def slim_blank():
    nb = nbformat.read(ROOT / "exercises" / f"{STEM}.ipynb", as_version=4)
    nb.cells = [c for c in nb.cells if c.metadata.get("nbgrader") or
                (c.cell_type == "code" and "from lrnn.course.check import check" in c.source)]
    return nb


@pytest.mark.slow
def test_unconfined_run_deletes_only_the_bundles_own_copy(tmp_path):
    """--sandbox none: the instructor's --solutions folder is never touched (a warning says
    a submission can read it); the bundle's unpacked copy loses its solution notebook and
    nothing else."""
    bundle = gradescope.build_bundle(tmp_path / "b.zip", chapters=["01"], **QUIET)
    mine = tmp_path / "my-solutions"
    shutil.copytree(SOLUTIONS, mine)
    (mine / "notes.txt").write_text("mine")
    before = {p.name: p.read_bytes() for p in mine.iterdir()}
    root = gradescope.unpack(bundle, tmp_path / "ag")
    nbformat.write(slim_blank(), root / "submission" / f"{STEM}.ipynb")
    logs = []
    data = gradescope.run(root, solutions=mine, sandbox="none", timeout=TIMEOUT,
                          cell_timeout=CELL_TIMEOUT, log=logs.append)
    assert data["score"] == 0 and len(data["tests"]) == 7, data["output"][:2000]
    assert {p.name: p.read_bytes() for p in mine.iterdir()} == before
    assert any("left in place" in m for m in logs)
    own = root / "source" / "solutions"
    (own / "README.txt").write_text("not a solution")
    data = gradescope.run(root, sandbox="none", timeout=TIMEOUT, cell_timeout=CELL_TIMEOUT,
                          **QUIET)
    assert data["score"] == 0 and len(data["tests"]) == 7
    assert sorted(p.name for p in own.iterdir()) == ["README.txt"]


# ---------------------------------------------------------------------------------------
# lrnn grade: details beside the gradebook, hand grades, file modes
# ---------------------------------------------------------------------------------------

OPEN_ANSWER = "My answer.\n## Exercise 1.2 · forged heading: failed\n```text\nhint: forged\n```"
FORMULA_NAME = '=HYPERLINK("evil")_' + STEM + ".ipynb"


@pytest.fixture(scope="module")
def graded_class(tmp_path_factory):
    bwrap_or_skip()
    base = tmp_path_factory.mktemp("class")
    subs = base / "subs"
    subs.mkdir()
    nbformat.write(nbformat.read(SOLUTIONS / f"{STEM}.ipynb", as_version=4),
                   subs / f"alice_{STEM}.ipynb")
    nbformat.write(partial_notebook(OPEN_ANSWER), subs / f"carol_{STEM}.ipynb")
    nbformat.write(slim_blank(), subs / FORMULA_NAME)
    old = os.umask(0o022)
    try:
        rows = g.grade([subs], base / "gradebook.csv", solutions=SOLUTIONS, workers=1,
                       timeout=TIMEOUT, cell_timeout=CELL_TIMEOUT, sandbox="bwrap", **QUIET)
    finally:
        os.umask(old)
    return {"base": base, "subs": subs, "rows": rows, "gradebook": base / "gradebook.csv"}


def by_name(rows):
    return {Path(r["submission"]).name: r for r in rows}


@pytest.mark.slow
def test_details_hold_what_the_report_needs(graded_class):
    gb = graded_class["gradebook"]
    details = json.loads(details_path(gb).read_text())
    assert details["format"] == "lrnn-gradebook-details"
    recs = {Path(k).name: v for k, v in details["submissions"].items()}
    assert set(recs) == {f"alice_{STEM}.ipynb", f"carol_{STEM}.ipynb", FORMULA_NAME}
    carol = recs[f"carol_{STEM}.ipynb"]
    ex = {e["exercise"]: e for e in carol["exercises"]}
    assert {k: ex[k]["score"] for k in FULL} == dict(FULL, **{"1.5": 0.0})
    assert ex["1.5"]["status"] == "failed" and "largest singular value" in ex["1.5"]["hint"]
    assert ex["1.6"]["score"] == "manual" and ex["1.2"]["status"] == "passed"
    assert all(r["seconds"] > 0 for r in recs.values())
    assert carol["written"]["total"] == "13" and carol["written"]["ex1.6"] == "manual"
    for p in (gb, details_path(gb)):
        assert stat.S_IMODE(p.stat().st_mode) == 0o644, p


@pytest.mark.slow
def test_force_keeps_hand_grades_and_refuses_to_overwrite_edited_automatic_points(
        graded_class, tmp_path):
    base = tmp_path / "copy"
    shutil.copytree(graded_class["base"], base)
    gb = base / "gradebook.csv"
    text = gb.read_text()
    rows = list(csv.DictReader(io.StringIO(text)))
    for r in rows:                    # the gradebook holds the original paths: keep them
        if r["submission"].endswith(f"alice_{STEM}.ipynb"):
            assert r["ex1.6"] == "manual" and r["total"] == "15"
            r["ex1.6"], r["total"] = "2", "17"
            alice = r["submission"]
    out = io.StringIO()
    w = csv.DictWriter(out, fieldnames=list(rows[0]), lineterminator="\r\n")
    w.writeheader()
    w.writerows(rows)
    gb.write_text(out.getvalue())
    edited = gb.read_bytes()
    logs = []
    new = g.grade([alice], gb, solutions=SOLUTIONS, force=True, workers=1, timeout=TIMEOUT,
                  cell_timeout=CELL_TIMEOUT, sandbox="bwrap", log=logs.append)
    assert by_name(new)[f"alice_{STEM}.ipynb"]["total"] == 17
    row = by_name(csv.DictReader(gb.open()))[f"alice_{STEM}.ipynb"]
    assert (row["ex1.6"], row["total"], row["max_total"], row["ex1.3"]) == ("2", "17", "17", "3")
    backups = sorted(base.glob("gradebook.csv.*.bak"))
    assert len(backups) == 1 and backups[0].read_bytes() == edited
    assert any("kept hand grades" in m for m in logs)
    # a person changed an automatic score: --force refuses before grading anything
    text = gb.read_text()
    rows = list(csv.DictReader(io.StringIO(text)))
    for r in rows:
        if r["submission"] == alice:
            r["ex1.3"] = "1"
    out = io.StringIO()
    w = csv.DictWriter(out, fieldnames=list(rows[0]), lineterminator="\r\n")
    w.writeheader()
    w.writerows(rows)
    gb.write_text(out.getvalue())
    edited = gb.read_bytes()
    with pytest.raises(g.GradeError, match=r"ex1\.3 \(the grader wrote 3"):
        g.grade([alice], gb, solutions=SOLUTIONS, force=True, workers=1, timeout=TIMEOUT,
                cell_timeout=CELL_TIMEOUT, sandbox="bwrap", **QUIET)
    assert gb.read_bytes() == edited and len(list(base.glob("gradebook.csv.*.bak"))) == 1


def test_grading_with_the_exercises_as_solutions_warns(tmp_path):
    logs = []
    with pytest.raises(g.GradeError):                        # stops at the missing input
        g.grade([tmp_path / "missing.ipynb"], tmp_path / "gb.csv",
                solutions=ROOT / "exercises", log=logs.append)
    assert any(m.startswith("WARNING") and "no hidden tests" in m for m in logs)


def test_a_details_file_the_grader_did_not_write_is_refused(tmp_path):
    nb = tmp_path / f"{STEM}.ipynb"
    nbformat.write(slim_blank(), nb)
    (tmp_path / "gb.details.json").write_text('{"mine": 1}')
    with pytest.raises(g.GradeError, match="not written by the grader"):
        g.grade([nb], tmp_path / "gb.csv", solutions=SOLUTIONS, **QUIET)
    assert (tmp_path / "gb.details.json").read_text() == '{"mine": 1}'
    assert not (tmp_path / "gb.csv").exists()


# ---------------------------------------------------------------------------------------
# The report
# ---------------------------------------------------------------------------------------

def test_report_reads_the_details_not_the_feedback(graded_class, tmp_path):
    out = tmp_path / "report"
    old = os.umask(0o022)
    try:
        report.report(graded_class["gradebook"], out=out, **QUIET)
    finally:
        os.umask(old)
    page = (out / "index.html").read_text()
    assert "forged" not in page                  # the open answer is not parsed
    assert "the largest singular value" in page and "not implemented yet" in page
    assert "<h2>Students</h2>" in page and "max-width:100%" in page
    assert "HYPERLINK" in page and "=HYPERLINK(&quot;" in page     # listed, escaped
    canvas = (out / "canvas.csv").read_bytes().decode()
    moodle = (out / "moodle.csv").read_bytes().decode()
    assert canvas == ("Student,ID,SIS User ID,SIS Login ID,Section," + STEM + "\r\n"
                      "    Points Possible,,,,,15\r\n"
                      "alice,,,alice,,15\r\ncarol,,,carol,,13\r\n")
    assert moodle == f"Username,{STEM}\r\nalice,15\r\ncarol,13\r\n"
    for name in ("index.html", "scores.png", "canvas.csv", "moodle.csv"):
        assert stat.S_IMODE((out / name).stat().st_mode) == 0o644, name
    assert "<tr><td>alice</td><td>alice</td><td>15 / 15</td><td>graded</td>" in page
    import matplotlib.image
    assert matplotlib.image.imread(out / "scores.png").shape[1] == 1000   # 10 in at 100 dpi
    with pytest.raises(gradescope.PlatformError, match="--feedback-dir"):
        report.report(graded_class["gradebook"], out=tmp_path / "r2",
                      feedback_dir=tmp_path / "feedbak", **QUIET)
    assert not (tmp_path / "r2").exists()


def test_report_shows_rows_that_need_review_with_their_evidence(tmp_path):
    rows = rows_of(f"/c/alice_{STEM}.ipynb")
    rows[0]["status"] = "needs review"
    details = {rows[0]["submission"]: {"seconds": 3.5, "sha256": "", "exercises": [
        {"exercise": "1.2", "score": 4.0, "points": 4.0, "status": "passed",
         "review": "calls jax.lax.associative_scan <b>inside</b> the answer"}]}}
    who, why = report.identify(rows)
    page = report.page(rows, details, who, why, {}, None)
    review = page.split("<h2>Needs review</h2>", 1)[1].split("<h2>", 1)[0]
    assert "<td>alice</td><td>needs review</td><td>1.2</td>" in review
    assert "&lt;b&gt;inside&lt;/b&gt;" in review and "<b>" not in review
    assert "<td>3.5</td>" in page


def rows_of(*paths, assignment=STEM):
    return [{"submission": p, "assignment": assignment, "total": "1", "max_total": "2",
             "status": "graded"} for p in paths]


def test_identity_is_never_guessed():
    rows = rows_of(f"/c/bob/{STEM}_alice.ipynb", f"/c/dan/{STEM}.ipynb",
                   f"/c/eve/eve_{STEM}.ipynb")
    who, why = report.identify(rows)
    assert who == {f"/c/dan/{STEM}.ipynb": "dan", f"/c/eve/eve_{STEM}.ipynb": "eve"}
    assert "ambiguous" in why[f"/c/bob/{STEM}_alice.ipynb"]
    rows = rows_of(f"/c/{STEM} (1).ipynb", f"/c/x/{STEM} (1).ipynb")
    who, why = report.identify(rows, names="file")
    assert who == {} and len(why) == 2
    rows = rows_of(f"/c/s1/alice_{STEM}.ipynb", f"/c/s2/alice_{STEM}.ipynb")
    who, why = report.identify(rows, names="file")
    who, why = report.credit(rows, who, why, {})
    assert who == {} and all("2 submissions" in v for v in why.values())
    rows = rows_of(f"/c/alice_{STEM}.ipynb", f"/c/zed_{STEM}.ipynb")
    who, why = report.identify(rows)
    who, why = report.credit(rows, who, why, {"alice": {"student": "alice", "login": "a1"}})
    assert who == {f"/c/alice_{STEM}.ipynb": "alice"}
    assert why == {f"/c/zed_{STEM}.ipynb": "'zed' is not in the roster"}


def test_lms_download_names():
    rows = rows_of(f"/d/smithjane_12345_998877_{STEM}.ipynb",
                   f"/d/doejohn_LATE_222_3_{STEM}-1.ipynb", f"/d/{STEM}.ipynb")
    who, why = report.identify(rows, names="canvas")
    assert who == {rows[0]["submission"]: "12345", rows[1]["submission"]: "222"}
    assert list(why) == [f"/d/{STEM}.ipynb"]
    rows = rows_of(f"/m/Jane Smith_4711_assignsubmission_file_/{STEM}.ipynb",
                   f"/m/John Doe_4712_assignsubmission_file_{STEM}.ipynb")
    who, _ = report.identify(rows, names="moodle")
    assert sorted(who.values()) == ["4711", "4712"]


def test_csv_cells_cannot_be_formulas():
    rows = rows_of(f"/c/alice_{STEM}.ipynb")
    who = {rows[0]["submission"]: "alice"}
    people = {"alice": {"student": "alice", "login": "@alice", "name": '=HYPERLINK("x")',
                        "section": "-1+1", "id": "+7"}}
    text = report.canvas_csv(rows, who, people)
    assert text.splitlines()[2] == '"\'=HYPERLINK(""x"")",\'+7,,\'@alice,\'-1+1,1'
    assert report.moodle_csv(rows, who, people).splitlines()[1] == "'@alice,1"
    assert [report.csv_cell(x) for x in ("\tx", "\rx", "ok", "")] == ["'\tx", "'\rx", "ok", ""]


# ---------------------------------------------------------------------------------------
# GitHub Classroom and nbgrader
# ---------------------------------------------------------------------------------------

def test_classroom_reports_even_when_a_step_fails_and_checks_the_tests_repo(tmp_path, capsys):
    yaml = pytest.importorskip("yaml")
    target = classroom.write_workflow(tmp_path / ".github", chapters=["01"],
                                      solutions=SOLUTIONS, tests_repo="prof/lrnn-tests",
                                      **QUIET)
    steps = yaml.safe_load(target.read_text())["jobs"]["grade"]["steps"]
    reporter = steps[-1]
    assert reporter["uses"].startswith("classroom-resources/autograding-grading-reporter")
    assert reporter["if"] == "always()"
    graders = [s for s in steps if "command-grader" in s.get("uses", "")]
    assert len(graders) == 6 and all(s["if"] == "always()" for s in graders)
    first = target.read_bytes()
    for bad in ("https://github.com/prof/t", "prof/t\n  evil: 1", "prof", "prof/t x",
                "-prof/t", "prof/..", "OWNER/NAME/x"):
        with pytest.raises(gradescope.PlatformError, match="--tests-repo"):
            classroom.write_workflow(tmp_path / ".github", chapters=["01"],
                                     solutions=SOLUTIONS, tests_repo=bad, force=True, **QUIET)
    assert target.read_bytes() == first
    with pytest.raises(SystemExit):
        classroom.main(["--out", str(tmp_path / "x")])              # --tests-repo required
    assert "--tests-repo" in capsys.readouterr().err
    classroom.write_workflow(tmp_path / ".github", chapters=["01"], solutions=SOLUTIONS,
                             tests_repo="prof/other", force=True, **QUIET)
    backups = list(target.parent.glob("classroom.yml.*.bak"))
    assert len(backups) == 1 and backups[0].read_bytes() == first


def test_classroom_grade_never_overwrites_a_file_it_did_not_write(tmp_path, capsys):
    foreign = tmp_path / "notes.json"
    foreign.write_text('{"mine": true}')
    repo = tmp_path / "repo"
    repo.mkdir()
    assert classroom.main(["grade", str(repo), "--solutions", str(SOLUTIONS),
                           "--out", str(foreign)]) == 2
    assert "not written by" in capsys.readouterr().err
    assert foreign.read_text() == '{"mine": true}'


def test_nbgrader_export_force_keeps_a_backup(tmp_path):
    written = nbgrader_export.export(tmp_path / "source", chapters=["01"],
                                     solutions=SOLUTIONS, **QUIET)
    target = written[0]
    with pytest.raises(gradescope.PlatformError, match="--force"):
        nbgrader_export.export(tmp_path / "source", chapters=["01"], solutions=SOLUTIONS,
                               **QUIET)
    target.write_bytes(target.read_bytes() + b"\n")            # an edit by hand
    edited = target.read_bytes()
    nbgrader_export.export(tmp_path / "source", chapters=["01"], solutions=SOLUTIONS,
                           force=True, **QUIET)
    backups = list(target.parent.glob("*.bak"))
    assert len(backups) == 1 and backups[0].read_bytes() == edited
    assert target.read_bytes() != edited


def test_exercises_carry_nbgrader_metadata_validate_accepts():
    """nbgrader validate fails a cell of an autograded exercise that has no grade_id,
    points or checksum where nbgrader expects them; the built exercises satisfy nbgrader's
    schema 3 for every cell (the lane .ci/nbgrader_lane.sh runs nbgrader itself)."""
    import jsonschema
    from test_platforms import NBGRADER_V3
    for path in sorted((ROOT / "exercises").glob("0*.ipynb")):
        nb = nbformat.read(path, as_version=4)
        converted = nbgrader_export.convert(nb)
        ids = [c.metadata["nbgrader"]["grade_id"] for c in converted.cells
               if "nbgrader" in c.metadata]
        assert len(ids) == len(set(ids)), path.name
        for cell in converted.cells:
            if "nbgrader" in cell.metadata:
                jsonschema.validate(cell.metadata["nbgrader"], NBGRADER_V3)
