"""What students hand in, graded as the instructor grades it (tests/submissions/README.md).

For every chapter, notebooks built from the distributed exercise notebook: the model solution
in every answer cell; the same with an honest student's habits (cells run out of order with
stale outputs, a changed demo parameter, scratch cells that call the very library functions
the hidden tests ban, a self-check against the library after the answers); two other correct
implementations of every exercise (one with the habits too); the blank notebook; and half of
it done. All of them are graded in one sandboxed run, as ``lrnn grade`` does, and each must
get exactly the points it earned: full marks, full marks, full marks, 0, and the points of the
half that was done, with no row put up for review. The other entry points (the Gradescope
bundle, Classroom, the nbgrader export) grade through the same function; their own tests
grade chapter 1 with them.
"""
from __future__ import annotations

import os
import time
from pathlib import Path

import pytest

from lrnn.course import grading as g
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
        "solution": (build.solution(chapter), full),
        "habits": (build.with_habits(build.solution(chapter), chapter), full),
        "variant1": (build.variant(chapter, 1), full),
        "variant2habits": (build.with_habits(build.variant(chapter, 2), chapter, seed=1), full),
        "blank": (build.blank(chapter), 0.0),
        "partial": (half, half_points),
    }


@pytest.fixture(scope="module")
def graded(tmp_path_factory):
    base = tmp_path_factory.mktemp("submissions")
    folder = base / "in"
    expected = {}
    for chapter in CHAPTERS:
        for name, (nb, points) in cases(chapter).items():
            path = build.write(nb, folder, name, chapter)
            expected[path.name] = (chapter, name, points)
    logs: list[str] = []
    start = time.monotonic()
    rows = g.grade([folder], base / "gradebook.csv", feedback_dir=base / "feedback",
                   sandbox=sandbox(), timeout=TIMEOUT, cell_timeout=CELL_TIMEOUT, workers=2,
                   solutions=ROOT / "solutions", log=logs.append)
    print(f"{len(rows)} submissions graded in {time.monotonic() - start:.0f} s")
    for line in logs:
        print(line)
    by_name = {Path(r["submission"]).name: r for r in rows}
    return {"rows": by_name, "expected": expected, "feedback": base / "feedback"}


#: What the feedback says when a cell raised, ran over its time or stopped the notebook.
TROUBLE = ("raised:", "could not be run to the end", "ran longer than", "kernel died")


@pytest.mark.parametrize("chapter", CHAPTERS)
def test_each_submission_gets_exactly_the_points_it_earned(graded, chapter):
    """The points, and in every case (the blank exercise notebook as distributed included:
    this is where exercises/ is executed) every code cell ran without raising."""
    wrong = []
    for file, (ch, name, points) in graded["expected"].items():
        if ch != chapter:
            continue
        row = graded["rows"][file]
        got = (float(row["total"]), row["status"])
        text = (graded["feedback"] / g.feedback_name(row["submission"])).read_text(
            encoding="utf-8")
        if got != (points, "graded") or any(t in text for t in TROUBLE):
            wrong.append((name, got, points, text[:3000]))
    assert not wrong, wrong
