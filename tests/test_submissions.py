"""What students hand in, graded as the instructor grades it (tests/submissions/README.md),
through each entry point: ``lrnn grade``, the Gradescope autograder and GitHub Classroom.

For every chapter, notebooks built from the distributed exercise notebook: two correct
implementations of every exercise other than the model solution, each with an honest student's
habits (cells run out of order with stale outputs, a changed demo parameter, scratch cells that
call the very library functions the hidden tests ban, a self-check against the library after
the answers; two seeds of them); the blank notebook; and half of it done. Each must get exactly
the points it earned: full marks, full marks, 0, and the points of the half that was done, with
no row put up for review, and no cell that raised. (The model solution in every answer cell:
see ``lrnn grade`` below.)

Every entry point grades every chapter, each notebook once (a notebook takes the same path
through the grader whichever entry point hands it over; what differs is how the entry point
finds the submissions, the assignment and the points it reports):

* ``lrnn grade`` (``grading.grade``, two kernels at a time, the sandbox of
  ``LRNN_REQUIRE_SANDBOX``): the half-done notebooks. The exercise notebooks completed with the
  model solution are graded by ``lrnn grade`` in CI's Colab lane (``.ci/colab_lane.sh``), in
  Colab's package set, with float32 matrix products rounded to TF32 as an A100, L4 or H100 runs
  them by default (``LRNN_EMULATE_TF32=1``: in the kernels and in the grader's process; the
  "same verdict everywhere" of the precision policy, whose emulation tests/test_precision.py
  tests);
* the Gradescope autograder (``gradescope.run`` on an ``/autograder`` folder per submission,
  its manifest naming the chapter, as a bundle of that chapter has it): the first alternative
  with habits, and the blank notebook; its ``results.json`` must hold the same points;
* GitHub Classroom (``classroom.grade_repository`` on one student repository holding every
  chapter's notebook): the second alternative with habits, and chapter 1's blank notebook
  beside it (two notebooks of one assignment in a repository: the points reported are the
  better one's). The other blanks take the same path through the grader, so Gradescope's
  grading of them is enough.

The nbgrader export of every chapter is released, and graded completed and blank, by nbgrader
itself in CI's nbgrader lane; the bundle's install and wheel are tested in tests/test_platforms.py.
"""
from __future__ import annotations

import concurrent.futures
import json
import os
import shutil
import time
from pathlib import Path

import pytest

from lrnn.course import grading as g
from lrnn.course.grading import classroom, gradescope
from lrnn.course.grading import sandbox as sb
from submissions import build

pytestmark = [pytest.mark.notebook, pytest.mark.slow]

ROOT = Path(__file__).resolve().parents[1]
CHAPTERS = list(range(1, 9))
TIMEOUT = 420
CELL_TIMEOUT = 90


def sandbox():
    try:
        return sb.choose("bwrap")
    except sb.SandboxError as e:
        if os.environ.get("LRNN_REQUIRE_SANDBOX") == "1":
            pytest.fail(f"the sandbox is required here (LRNN_REQUIRE_SANDBOX=1): {e}")
        return sb.choose("none")


def cases(chapter: int) -> dict[str, tuple[object, float]]:
    """name -> (notebook, the automatic points it earned)."""
    full = build.total_points(chapter)
    half, half_points = build.partial(chapter)
    return {
        "variant1habits": (build.with_habits(build.variant(chapter, 1), chapter), full),
        "variant2habits": (build.with_habits(build.variant(chapter, 2), chapter, seed=1), full),
        "blank": (build.blank(chapter), 0.0),
        "partial": (half, half_points),
    }


#: Which entry points grade which case.
ENTRY_POINTS = {"partial": ("lrnn grade",),
                "variant1habits": ("gradescope",), "variant2habits": ("classroom",),
                "blank": ("gradescope", "classroom")}
#: The chapters whose blank notebook Classroom grades too (see the module's docstring).
CLASSROOM_BLANKS = (1,)


def entry_points(name: str, chapter: int) -> tuple[str, ...]:
    return tuple(e for e in ENTRY_POINTS[name]
                 if not (name == "blank" and e == "classroom" and chapter not in CLASSROOM_BLANKS))


def _lrnn_grade(folder, base, sandbox_kind):
    """{file name: (total, status, feedback)} of ``lrnn grade`` on ``folder``."""
    rows = g.grade([folder], base / f"gradebook-{folder.name}.csv",
                   feedback_dir=base / f"feedback-{folder.name}", sandbox=sandbox_kind,
                   timeout=TIMEOUT, cell_timeout=CELL_TIMEOUT, workers=2,
                   solutions=ROOT / "solutions", log=lambda *a: None)
    return {Path(r["submission"]).name: (float(r["total"]), r["status"], (
        base / f"feedback-{folder.name}" / g.feedback_name(r["submission"])).read_text(
            encoding="utf-8")) for r in rows}


def _gradescope(paths, base, sandbox_kind):
    """{file name: (score, status, output)} of the Gradescope autograder, one /autograder
    folder per submission, its manifest naming the submission's chapter."""
    out = {}
    for path, chapter in paths:
        root = base / "gradescope" / path.stem
        (root / "submission").mkdir(parents=True)
        (root / "source").mkdir()
        (root / "source" / gradescope.MANIFEST).write_text(
            json.dumps({"chapters": [f"{build.stem(chapter)}.ipynb"]}), encoding="utf-8")
        shutil.copy(path, root / "submission" / path.name)
        data = gradescope.run(root, solutions=ROOT / "solutions", sandbox=sandbox_kind,
                              timeout=TIMEOUT, cell_timeout=CELL_TIMEOUT, scrub=False,
                              log=lambda *a: None)
        saved = json.loads((root / "results" / "results.json").read_text(encoding="utf-8"))
        assert saved == data
        (notebook,) = data["extra_data"]["notebooks"]
        assert sum(t["score"] for t in data["tests"]) == data["score"] == notebook["total"]
        out[path.name] = (float(data["score"]), notebook["status"], data["output"])
    return out


def _classroom(paths, base, sandbox_kind):
    """{file name: (total, status, feedback)} of GitHub Classroom's grading of one student
    repository that holds all of ``paths``."""
    repo = base / "classroom-repo"
    repo.mkdir()
    for path, _ in paths:
        shutil.copy(path, repo / path.name)
    results = classroom.grade_repository(repo, ROOT / "solutions", sandbox=sandbox_kind,
                                         timeout=TIMEOUT, cell_timeout=CELL_TIMEOUT,
                                         log=lambda *a: None)
    for nb in results["notebooks"]:        # what the workflow's steps report to Classroom
        reported = sum(classroom.exercise_points(results, ex)
                       for ex, e in nb["exercises"].items() if e["score"] != "manual")
        assert reported == max(other["total"] for other in results["notebooks"]
                               if other["assignment"] == nb["assignment"]), nb["notebook"]
    return {Path(nb["notebook"]).name: (nb["total"], nb["status"], nb["feedback"])
            for nb in results["notebooks"]}


@pytest.fixture(scope="module")
def graded(tmp_path_factory):
    base = tmp_path_factory.mktemp("submissions")
    kind = sandbox().kind
    files = {entry: [] for names in ENTRY_POINTS.values() for entry in names}
    expected = {}
    for chapter in CHAPTERS:
        for name, (nb, points) in cases(chapter).items():
            path = build.write(nb, base / name, name, chapter)
            for entry in entry_points(name, chapter):
                files[entry].append((path, chapter))
                expected[(entry, path.name)] = (chapter, name, points)
    timing = {}
    got = {}
    gradescope._grader()                                  # loaded once, before the threads

    def timed(entry, job):
        t = time.monotonic()
        result = {(entry, k): v for k, v in job().items()}
        timing[entry] = time.monotonic() - t
        return result
    jobs = {"lrnn grade": lambda: _lrnn_grade(base / "partial", base, kind),
            "gradescope": lambda: _gradescope(files["gradescope"], base, kind),
            "classroom": lambda: _classroom(files["classroom"], base, kind)}
    with concurrent.futures.ThreadPoolExecutor(len(jobs)) as pool:
        for future in [pool.submit(timed, entry, job) for entry, job in jobs.items()]:
            got.update(future.result())
    print("graded in", ", ".join(f"{e}: {s:.0f} s" for e, s in timing.items()))
    return {"got": got, "expected": expected}


#: What the feedback says when a cell raised, ran over its time or stopped the notebook.
TROUBLE = ("raised:", "could not be run to the end", "ran longer than", "kernel died")


@pytest.mark.parametrize("chapter", CHAPTERS)
def test_each_submission_gets_exactly_the_points_it_earned(graded, chapter):
    """The points on every entry point, and in every case (the blank exercise notebook as
    distributed included: this is where exercises/ is executed) every code cell ran without
    raising."""
    wrong = []
    for (entry, file), (ch, name, points) in graded["expected"].items():
        if ch != chapter:
            continue
        total, status, text = graded["got"][(entry, file)]
        if (total, status) != (points, "graded") or any(t in text for t in TROUBLE):
            wrong.append((entry, name, (total, status), points, text[:3000]))
    assert not wrong, wrong
    entries = {e for (e, _), (ch, _, _) in graded["expected"].items() if ch == chapter}
    assert entries == {"lrnn grade", "gradescope", "classroom"}
