"""Grading on Gradescope, GitHub Classroom and from a gradebook (lrnn.course.grading.gradescope,
.classroom, .report): the same verdicts as ``lrnn grade``.

One set of chapter-1 notebooks (the solution, the blank exercise, a partial answer and two
attacks from tests/attacks/, cut down to their graded cells so that each grades in seconds)
is graded three ways: by ``lrnn grade`` into a gradebook, by a Gradescope bundle built from
this checkout and run in a simulated ``/autograder`` (its own virtual environment holding only
the bundle's wheel, no network), and by the Classroom entry point. Scores must be identical;
results.json is checked against a JSON Schema of Gradescope's specification."""
import json
import os
import shutil
import subprocess
import sys
import time
import venv
import zipfile
from pathlib import Path

import jsonschema
import nbformat
import pytest

from lrnn.course import grading as g
from lrnn.course.grading import classroom, gradescope
from lrnn.course.grading import sandbox as sb

pytestmark = [pytest.mark.notebook, pytest.mark.slow]

ROOT = Path(__file__).resolve().parents[1]
SOLUTIONS = ROOT / "solutions"
ATTACKS = Path(__file__).resolve().parent / "attacks"
STEM = "01_linear_recurrence"
CELL_TIMEOUT = 20
TIMEOUT = 120
FULL = {"1.1": 2, "1.2": 4, "1.3": 3, "1.4": 3, "1.5": 2, "1.7": 1}
WRONG_RADIUS = "def spectral_radius(A):\n    return float(np.linalg.norm(A, 2))"

# Gradescope's results.json (gradescope-autograders.readthedocs.io, "Autograder
# Specifications"), strict: a field not in the specification is an error.
VISIBILITY = {"enum": ["hidden", "after_due_date", "after_published", "visible"]}
FORMAT = {"enum": ["text", "html", "simple_format", "md", "ansi"]}
RESULTS_SCHEMA = {
    "type": "object",
    "additionalProperties": False,
    "required": ["score", "tests"],
    "properties": {
        "score": {"type": "number"},
        "execution_time": {"type": "number", "minimum": 0},
        "output": {"type": "string"},
        "output_format": FORMAT,
        "test_output_format": FORMAT,
        "test_name_format": FORMAT,
        "visibility": VISIBILITY,
        "stdout_visibility": VISIBILITY,
        "extra_data": {"type": "object"},
        "leaderboard": {"type": "array"},
        "tests": {"type": "array", "items": {
            "type": "object",
            "additionalProperties": False,
            "required": ["name", "score", "max_score", "output"],
            "properties": {
                "score": {"type": "number"},
                "max_score": {"type": "number", "minimum": 0},
                "status": {"enum": ["passed", "failed"]},
                "name": {"type": "string", "minLength": 1},
                "name_format": FORMAT,
                "number": {"type": "string"},
                "output": {"type": "string"},
                "output_format": FORMAT,
                "tags": {"type": "array", "items": {"type": "string"}},
                "visibility": VISIBILITY,
                "extra_data": {"type": "object"}}}},
    },
}


def slim(path):
    nb = nbformat.read(path, as_version=4)
    nb.cells = [c for c in nb.cells if c.metadata.get("nbgrader") or
                (c.cell_type == "code" and "from lrnn.course.check import check" in c.source)]
    return nb


def with_attack(nb, name):
    text = (ATTACKS / f"{name}.py").read_text(encoding="utf-8")
    cells = [p.strip("\n") for p in text.split("\n# %%\n")[1:]]
    nb = nbformat.from_dict(nb)
    first = next(i for i, c in enumerate(nb.cells) if c.metadata.get("nbgrader", {}).get("grade"))
    for k, src in enumerate(cells):
        nb.cells.insert(first + k, nbformat.v4.new_code_cell(src))
    return nb


def notebooks():
    solved = slim(SOLUTIONS / f"{STEM}.ipynb")
    blank = slim(ROOT / "exercises" / f"{STEM}.ipynb")
    partial = nbformat.from_dict(solved)
    for cell in partial.cells:
        if cell.metadata.get("nbgrader", {}).get("grade_id") == "ex1.5-solution":
            cell.source = WRONG_RADIUS
    return {"solved": solved, "blank": blank, "partial": partial,
            "patch_numpy": with_attack(blank, "patch_numpy_and_check"),
            "forge_replies": with_attack(blank, "forge_replies")}


def sandbox_or_skip():
    try:
        sb.choose("bwrap")
    except sb.SandboxError as e:
        if os.environ.get("LRNN_REQUIRE_SANDBOX") == "1":
            pytest.fail(f"the sandbox is required here (LRNN_REQUIRE_SANDBOX=1): {e}")
        pytest.skip(f"no bubblewrap sandbox here: {e}")


def wheel_venv(folder, wheel):
    """A virtual environment that sees this one's packages but imports lrnn from ``wheel``."""
    venv.EnvBuilder(system_site_packages=True, with_pip=False).create(folder)
    py = Path(folder) / "bin" / "python"
    purelib = subprocess.run([py, "-c", "import sysconfig; print(sysconfig.get_path('purelib'))"],
                             capture_output=True, text=True, check=True).stdout.strip()
    with zipfile.ZipFile(wheel) as z:
        z.extractall(purelib)
    # This environment's packages (jax, numpy, ...) come after the wheel's lrnn; PYTHONPATH
    # is cleared below, so the checkout's src/ is not seen.
    import sysconfig
    ours = {sysconfig.get_path("purelib"), sysconfig.get_path("platlib")}
    (Path(purelib) / "zz_outer_environment.pth").write_text("\n".join(sorted(ours)) + "\n")
    return py, sorted(ours)


@pytest.fixture(scope="module")
def three_ways(tmp_path_factory):
    sandbox_or_skip()
    base = tmp_path_factory.mktemp("platforms")
    nbs = notebooks()
    subs = base / "submissions"
    subs.mkdir()
    for name, nb in nbs.items():
        nbformat.write(nb, subs / f"{name}_{STEM}.ipynb")
    times = {}

    start = time.monotonic()
    rows = g.grade([subs], base / "gradebook.csv", solutions=SOLUTIONS, workers=1,
                   timeout=TIMEOUT, cell_timeout=CELL_TIMEOUT, sandbox="bwrap", log=print)
    times["lrnn grade"] = time.monotonic() - start
    local = {Path(r["submission"]).name.split(f"_{STEM}")[0]: r for r in rows}

    start = time.monotonic()
    bundle = gradescope.build_bundle(base / "autograder.zip", chapters=["01"],
                                     timeout=TIMEOUT, cell_timeout=CELL_TIMEOUT,
                                     sandbox="bwrap", log=print)
    times["bundle build"] = time.monotonic() - start
    names = zipfile.ZipFile(bundle).namelist()
    wheel = base / next(n for n in names if n.endswith(".whl"))
    wheel.write_bytes(zipfile.ZipFile(bundle).read(wheel.name))
    start = time.monotonic()
    py, outer = wheel_venv(base / "venv", wheel)
    times["venv"] = time.monotonic() - start
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    where = subprocess.run([py, "-c", "import lrnn; print(lrnn.__file__)"], env=env,
                           capture_output=True, text=True, check=True).stdout.strip()
    gs = {}
    start = time.monotonic()
    for name in nbs:
        root = gradescope.unpack(bundle, base / f"autograder-{name}")
        shutil.copy(subs / f"{name}_{STEM}.ipynb", root / "submission" / f"{STEM}.ipynb")
        r = subprocess.run([str(root / "run_autograder")], cwd=root, capture_output=True,
                           text=True, timeout=TIMEOUT + 120,
                           env=dict(env, LRNN_AUTOGRADER_ROOT=str(root),
                                    LRNN_AUTOGRADER_PYTHON=str(py), JAX_PLATFORMS="cpu",
                                    LRNN_AUTOGRADER_SANDBOX_PATH=os.pathsep.join(outer)))
        assert r.returncode == 0, r.stderr[-3000:]
        gs[name] = {"results": json.loads((root / "results" / "results.json").read_text()),
                    "root": root, "stdout": r.stdout}
    times["gradescope"] = time.monotonic() - start

    start = time.monotonic()
    repo = base / "student-repo"
    repo.mkdir()
    for name in nbs:
        (repo / name).mkdir()
        shutil.copy(subs / f"{name}_{STEM}.ipynb", repo / name / f"{STEM}.ipynb")
    out = base / "classroom-results.json"
    r = subprocess.run([sys.executable, "-m", "lrnn.course.grading.classroom", "grade", str(repo),
                        "--solutions", str(SOLUTIONS), "--out", str(out), "--sandbox", "bwrap",
                        "--timeout", str(TIMEOUT), "--cell-timeout", str(CELL_TIMEOUT)],
                       capture_output=True, text=True, timeout=20 * TIMEOUT,
                       env=dict(os.environ, JAX_PLATFORMS="cpu"))
    assert r.returncode == 0, r.stderr[-3000:]
    cr = json.loads(out.read_text())
    times["classroom"] = time.monotonic() - start
    print("seconds:", {k: round(v, 1) for k, v in times.items()})
    return {"local": local, "gradescope": gs, "classroom": cr, "base": base,
            "bundle": bundle, "wheel_lrnn": where, "times": times, "out": out,
            "gradebook": base / "gradebook.csv", "feedback": base / "feedback"}


def test_bundle_layout_and_wheel(three_ways):
    names = set(zipfile.ZipFile(three_ways["bundle"]).namelist())
    assert {"setup.sh", "run_autograder", "constraints.txt", gradescope.MANIFEST,
            f"solutions/{STEM}.ipynb"} <= names
    assert not any(n.startswith("solutions/") and STEM not in n for n in names)
    info = zipfile.ZipFile(three_ways["bundle"]).getinfo("run_autograder")
    assert (info.external_attr >> 16) & 0o111
    setup = zipfile.ZipFile(three_ways["bundle"]).read("setup.sh").decode()
    assert gradescope.GRADING_REQUIREMENT.split("[")[1] in setup and "bubblewrap" in setup
    subprocess.run(["bash", "-n", "-c", setup], check=True)
    # the simulated /autograder imported lrnn from the bundle's wheel, not from this checkout
    assert "/venv/" in three_ways["wheel_lrnn"] and str(ROOT) not in three_ways["wheel_lrnn"]


def test_results_json_follows_the_specification(three_ways):
    for name, run in three_ways["gradescope"].items():
        data = run["results"]
        jsonschema.validate(data, RESULTS_SCHEMA)
        assert data["score"] == sum(t["score"] for t in data["tests"]), name
        manual = [t for t in data["tests"] if "manual" in t.get("tags", [])]
        assert len(manual) == 1 and manual[0]["max_score"] == 0 and "1.6" in manual[0]["number"]
    solved = three_ways["gradescope"]["solved"]["results"]
    blank = three_ways["gradescope"]["blank"]["results"]
    assert solved["score"] == sum(FULL.values()) == 15 and blank["score"] == 0
    assert {t["number"]: t["score"] for t in solved["tests"] if t["max_score"]} == FULL


def per_exercise_local(row):
    return {ex: float(row[f"ex{ex}"]) for ex in FULL}


def test_same_scores_everywhere(three_ways):
    local = three_ways["local"]
    cr = {Path(nb["notebook"]).parts[0]: nb for nb in three_ways["classroom"]["notebooks"]}
    assert set(local) == set(three_ways["gradescope"]) == set(cr)
    for name, row in local.items():
        want = per_exercise_local(row)
        gs = {t["number"]: t["score"] for t in three_ways["gradescope"][name]["results"]["tests"]
              if t["max_score"]}
        cl = {ex: classroom.exercise_points(
            {"notebooks": [cr[name]]}, ex) for ex in FULL}
        assert gs == want == cl, name
        assert three_ways["gradescope"][name]["results"]["score"] == float(row["total"]) == \
            cr[name]["total"], name
    assert float(local["solved"]["total"]) == 15 and float(local["blank"]["total"]) == 0
    assert per_exercise_local(local["partial"]) == dict(FULL, **{"1.5": 0})
    assert float(local["patch_numpy"]["total"]) == float(local["forge_replies"]["total"]) == 0
    print("seconds:", {k: round(v, 1) for k, v in three_ways["times"].items()})


def test_same_feedback_text_and_no_hidden_tests(three_ways):
    """Each test's output is the student's feedback section from ``lrnn grade``; no line of
    a hidden test reaches results.json (the solutions folder is hidden from the kernels)."""
    sols = g.load_solutions(SOLUTIONS)
    hidden = gradescope.hidden_lines({STEM: sols[STEM]})
    assert len(hidden) > 10
    for name, run in three_ways["gradescope"].items():
        key = g.display_key(three_ways["base"] / "submissions" / f"{name}_{STEM}.ipynb")
        local = (three_ways["feedback"] / g.feedback_name(key)).read_text(encoding="utf-8")
        _, sections = gradescope.feedback_sections(local)
        text = json.dumps(run["results"], ensure_ascii=False)
        for t in run["results"]["tests"]:
            # forge_replies writes garbage into the kernel's pipe: where the kernel is lost
            # (and so the text) varies from run to run; the score does not
            if t["number"] in sections and name != "forge_replies":
                assert t["output"] == sections[t["number"]], (name, t["number"])
        for line in hidden:
            assert line not in text and line not in run["stdout"], (name, line)


def test_points_command_exits_by_verdict(three_ways):
    out = three_ways["out"]
    for ex, code in (("1.1", 0), ("1.5", 0), ("9.9", 1)):
        r = subprocess.run([sys.executable, "-m", "lrnn.course.grading.classroom", "points", ex,
                            "--results", str(out)], capture_output=True, text=True)
        assert r.returncode == code, (ex, r.stdout, r.stderr)


def test_classroom_workflow(tmp_path):
    yaml = pytest.importorskip("yaml")
    target = classroom.write_workflow(tmp_path / ".github", chapters=["01"],
                                      solutions=SOLUTIONS, tests_repo="prof/lrnn-tests")
    doc = yaml.safe_load(target.read_text())
    steps = doc["jobs"]["grade"]["steps"]
    graders = [s for s in steps if s.get("uses", "").startswith(
        "classroom-resources/autograding-command-grader")]
    assert {s["with"]["test-name"]: s["with"]["max-score"] for s in graders} == \
        {f"Exercise {k}": v for k, v in FULL.items()}
    reporter = steps[-1]
    assert reporter["uses"].startswith("classroom-resources/autograding-grading-reporter")
    assert reporter["with"]["runners"].split(",") == [s["id"] for s in graders]
    for s in graders:
        assert reporter["env"][f"{s['id'].upper()}_RESULTS"] == \
            f"${{{{steps.{s['id']}.outputs.result}}}}"
    checkout = [s for s in steps if s.get("with", {}).get("repository")]
    assert checkout[0]["with"]["repository"] == "prof/lrnn-tests"
    assert "secrets.LRNN_TESTS_TOKEN" in checkout[0]["with"]["token"]
    with pytest.raises(gradescope.PlatformError, match="--force"):
        classroom.write_workflow(tmp_path / ".github", chapters=["01"], solutions=SOLUTIONS,
                                 tests_repo="prof/lrnn-tests")
    other = tmp_path / "other" / "workflows" / "classroom.yml"
    other.parent.mkdir(parents=True)
    other.write_text("name: mine\n")
    with pytest.raises(gradescope.PlatformError, match="not written by"):
        classroom.write_workflow(tmp_path / "other", force=True, solutions=SOLUTIONS,
                                 tests_repo="prof/lrnn-tests")
    assert other.read_text() == "name: mine\n"


def test_bundle_refuses_bad_arguments_and_foreign_files(tmp_path):
    foreign = tmp_path / "autograder.zip"
    foreign.write_bytes(b"not mine")
    with pytest.raises(gradescope.PlatformError, match="not an lrnn autograder"):
        gradescope.build_bundle(foreign, chapters=["01"], force=True, log=lambda m: None)
    assert foreign.read_bytes() == b"not mine"
    with pytest.raises(gradescope.PlatformError, match="--chapter"):
        gradescope.build_bundle(tmp_path / "a.zip", chapters=["42"], log=lambda m: None)
    with pytest.raises(gradescope.PlatformError, match=r"\.zip"):
        gradescope.build_bundle(tmp_path / "a.tar", chapters=["01"], log=lambda m: None)
    with pytest.raises(gradescope.PlatformError, match="timeout"):
        gradescope.build_bundle(tmp_path / "a.zip", timeout=-1, log=lambda m: None)
    assert not (tmp_path / "a.zip").exists()


def test_empty_submission_still_writes_results(tmp_path):
    bundle = gradescope.build_bundle(tmp_path / "b.zip", chapters=["01"], log=lambda m: None)
    root = gradescope.unpack(bundle, tmp_path / "ag")
    data = gradescope.run(root, sandbox="none", log=lambda m: None)
    jsonschema.validate(data, RESULTS_SCHEMA)
    assert data["score"] == 0 and "no `.ipynb`" in data["output"]
    assert json.loads((root / "results" / "results.json").read_text()) == data


def test_report_and_exports_from_the_real_gradebook(three_ways, tmp_path):
    import csv
    import matplotlib.image
    from lrnn.course.grading import report
    out = report.report(three_ways["gradebook"], out=tmp_path / "report", log=print)
    png = matplotlib.image.imread(out / "scores.png")
    assert png.shape[0] > 200 and png.shape[1] > 400
    assert (png[..., :3].std(axis=(0, 1)) > 0.05).any()          # not blank
    page = (out / "index.html").read_text()
    assert "scores.png" in page and "Most frequent mistakes" in page
    # the partial answer's mistake is the hint of its check; the blank's: not implemented
    assert "the largest singular value" in page and "not implemented yet" in page
    assert "<h2>Slowest submissions</h2>" in page and "No grading times" not in page
    for line in gradescope.hidden_lines(g.load_solutions(SOLUTIONS)):
        assert line not in page
    canvas = list(csv.reader((out / "canvas.csv").open()))
    assert canvas[0][:5] == ["Student", "ID", "SIS User ID", "SIS Login ID", "Section"]
    assert canvas[0][5:] == [STEM] and canvas[1][0].strip() == "Points Possible"
    assert canvas[1][5] == "15"
    got = {r[3]: r[5] for r in canvas[2:]}
    assert got == {"solved": "15", "blank": "0", "partial": "13", "patch_numpy": "0",
                   "forge_replies": "0"}
    moodle = list(csv.reader((out / "moodle.csv").open()))
    assert moodle[0] == ["Username", STEM] and dict(moodle[1:]) == got
    with pytest.raises(gradescope.PlatformError, match="--force"):
        report.report(three_ways["gradebook"], out=tmp_path / "report", log=print)
    mine = tmp_path / "mine"
    mine.mkdir()
    (mine / "notes.txt").write_text("keep")
    with pytest.raises(gradescope.PlatformError, match="did not write"):
        report.report(three_ways["gradebook"], out=mine, force=True, log=print)
    assert sorted(p.name for p in mine.iterdir()) == ["notes.txt"]


# nbgrader's cell metadata, schema version 3 (nbgrader docs, "nbgrader metadata"), written
# out here so that CI checks it without nbgrader installed.
NBGRADER_V3 = {
    "type": "object",
    "additionalProperties": False,
    "required": ["schema_version", "grade", "solution", "locked"],
    "properties": {
        "schema_version": {"const": 3},
        "grade": {"type": "boolean"},
        "solution": {"type": "boolean"},
        "locked": {"type": "boolean"},
        "task": {"type": "boolean"},
        "grade_id": {"type": "string", "pattern": r"^[a-zA-Z0-9_\-]*$"},
        "points": {"type": "number", "minimum": 0},
        "cell_type": {"enum": ["code", "markdown"]},
    },
    "allOf": [
        {"if": {"properties": {"grade": {"const": True}}},
         "then": {"required": ["grade_id", "points"]}},
        {"if": {"properties": {"solution": {"const": True}}}, "then": {"required": ["grade_id"]}},
    ],
}


def test_solutions_metadata_against_nbgrader_schema():
    """The only difference from nbgrader's schema: the dot in grade_id; the export fixes it."""
    from lrnn.course.grading import nbgrader_export
    for path in sorted(SOLUTIONS.glob("0*.ipynb")):
        nb = nbformat.read(path, as_version=4)
        for cell, converted in zip(nb.cells, nbgrader_export.convert(nb).cells):
            meta = cell.metadata.get("nbgrader")
            if meta is None:
                continue
            jsonschema.validate(converted.metadata["nbgrader"], NBGRADER_V3)
            errors = list(jsonschema.Draft202012Validator(NBGRADER_V3).iter_errors(meta))
            assert all(e.validator == "pattern" and list(e.path) == ["grade_id"]
                       for e in errors), (path.name, meta, errors)


def nbgrader_command():
    local = ROOT / ".venv-nbgrader" / "bin" / "nbgrader"
    found = os.environ.get("LRNN_NBGRADER") or (str(local) if local.exists() else None) or \
        shutil.which("nbgrader")
    if not found:
        pytest.skip("nbgrader is not installed (LRNN_NBGRADER, .venv-nbgrader/ or PATH)")
    return found


def test_nbgrader_generate_assignment_accepts_a_chapter(tmp_path):
    from lrnn.course.grading import nbgrader_export
    exe = nbgrader_command()
    course = tmp_path / "course"
    nbgrader_export.export(course / "source", chapters=["01"], log=print)
    (course / "nbgrader_config.py").write_text(
        f"c = get_config()\nc.CourseDirectory.root = {str(course)!r}\n")
    env = dict(os.environ, PATH=f"{Path(exe).parent}{os.pathsep}{os.environ['PATH']}")
    r = subprocess.run([exe, "generate_assignment", STEM, "--force"], cwd=course, env=env,
                       capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stderr[-3000:]
    released = course / "release" / STEM / f"{STEM}.ipynb"
    text = released.read_text()
    assert "BEGIN HIDDEN TESTS" not in text and "BEGIN SOLUTION" not in text
    for line in gradescope.hidden_lines(g.load_solutions(SOLUTIONS)):
        assert line not in text


def test_lrnn_grade_grades_nbgrader_exported_notebooks(tmp_path):
    """The export's ids (ex1_1) are not the grader's: it finds the tests by check() calls."""
    sandbox_or_skip()
    from lrnn.course.grading import nbgrader_export
    sub = tmp_path / "sub"
    sub.mkdir()
    nbformat.write(nbgrader_export.convert(slim(SOLUTIONS / f"{STEM}.ipynb")),
                   sub / f"{STEM}.ipynb")
    nbformat.write(nbgrader_export.convert(slim(ROOT / "exercises" / f"{STEM}.ipynb")),
                   sub / f"blank_{STEM}.ipynb")
    rows = g.grade([sub], tmp_path / "gb.csv", solutions=SOLUTIONS, workers=1, timeout=TIMEOUT,
                   cell_timeout=CELL_TIMEOUT, sandbox="bwrap", log=print)
    totals = {Path(r["submission"]).name: float(r["total"]) for r in rows}
    assert totals == {f"{STEM}.ipynb": 15, f"blank_{STEM}.ipynb": 0}


def test_unconfined_run_deletes_the_solutions_before_student_code(tmp_path):
    """--sandbox none in the container: the tests are loaded, the bundle's copy of them
    deleted, then the notebook runs; a notebook that looks for them finds nothing, and still
    scores by verdict."""
    bundle = gradescope.build_bundle(tmp_path / "b.zip", chapters=["01"], log=lambda m: None)
    root = gradescope.unpack(bundle, tmp_path / "ag")
    nb = slim(SOLUTIONS / f"{STEM}.ipynb")
    probe = nbformat.v4.new_code_cell(
        f"import os\nassert not os.path.exists("
        f"{str(root / 'source' / 'solutions' / f'{STEM}.ipynb')!r})")
    nb.cells.insert(1, probe)
    nbformat.write(nb, root / "submission" / f"{STEM}.ipynb")
    data = gradescope.run(root, sandbox="none", timeout=TIMEOUT, cell_timeout=CELL_TIMEOUT,
                          log=lambda m: None)
    jsonschema.validate(data, RESULTS_SCHEMA)
    assert data["score"] == 15 and data["extra_data"]["sandbox"] == "none"
    assert "raised" not in data["output"]                # the probe cell's assert held
    assert not (root / "source" / "solutions" / f"{STEM}.ipynb").exists()


def test_commands_exit_2_with_a_clear_error(tmp_path, capsys):
    from lrnn.course.grading import nbgrader_export, report
    assert gradescope.main(["--chapter", "42", "--out", str(tmp_path / "a.zip")]) == 2
    assert "--chapter" in capsys.readouterr().err
    assert report.main([str(tmp_path / "missing.csv")]) == 2
    assert "is not a file" in capsys.readouterr().err
    (tmp_path / ".github").write_text("a file")
    with pytest.raises(SystemExit) as refused:           # refused as the line is parsed
        classroom.main(["--out", str(tmp_path / ".github"), "--tests-repo", "prof/t"])
    assert refused.value.code == 2
    assert "--out" in (err := capsys.readouterr().err) and "existing file" in err
    assert nbgrader_export.main(["--chapter", "x", "--out", str(tmp_path / "src")]) == 2
    assert not (tmp_path / "a.zip").exists() and not (tmp_path / "src").exists()
