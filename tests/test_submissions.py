"""What students hand in, graded as the instructor grades it (tests/submissions/README.md).

For every chapter, notebooks built from the distributed exercise notebook: the model solution
in every answer cell; two other correct implementations of every exercise, each with an honest
student's habits (cells run out of order with stale outputs, a changed demo parameter, scratch
cells that call the very library functions the hidden tests ban, a self-check against the
library after the answers; two seeds of them); the blank notebook; and half of it done. They
are graded as ``lrnn grade`` does, sandboxed, and each must get exactly the points it earned:
full marks, full marks, full marks, 0, and the points of the half that was done, with no row
put up for review.

The model solutions are graded in a run of their own, with float32 matrix products rounded to
TF32 as an A100, L4 or H100 runs them by default (``LRNN_EMULATE_TF32=1`` in the kernels, and
the emulation in the grader's process): the same full marks as on this CPU is the "same
verdict everywhere" of the precision policy (tests/test_precision.py tests the emulation and
the policy themselves). The other entry points (the Gradescope bundle, Classroom, the nbgrader
export) grade through the same function; their own tests grade chapter 1 with them.
"""
from __future__ import annotations

import os
import time
from pathlib import Path

import pytest

from lrnn.course import grading as g
from lrnn.course import precision
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


#: The cases graded with TF32 emulated (the rest as on this CPU).
EMULATED = ("solution",)


def cases(chapter: int) -> dict[str, tuple[object, float]]:
    """name -> (notebook, the automatic points it earned)."""
    full = build.total_points(chapter)
    half, half_points = build.partial(chapter)
    return {
        "solution": (build.solution(chapter), full),
        "variant1habits": (build.with_habits(build.variant(chapter, 1), chapter), full),
        "variant2habits": (build.with_habits(build.variant(chapter, 2), chapter, seed=1), full),
        "blank": (build.blank(chapter), 0.0),
        "partial": (half, half_points),
    }


def _grade(folder, base, logs):
    start = time.monotonic()
    rows = g.grade([folder], base / f"gradebook-{folder.name}.csv", feedback_dir=base / "feedback",
                   sandbox=sandbox(), timeout=TIMEOUT, cell_timeout=CELL_TIMEOUT, workers=2,
                   solutions=ROOT / "solutions", log=logs.append)
    logs.append(f"{len(rows)} submissions of {folder.name} graded in "
                f"{time.monotonic() - start:.0f} s")
    return rows


@pytest.fixture(scope="module")
def graded(tmp_path_factory):
    base = tmp_path_factory.mktemp("submissions")
    expected = {}
    for chapter in CHAPTERS:
        for name, (nb, points) in cases(chapter).items():
            folder = base / ("tf32" if name in EMULATED else "cpu")
            path = build.write(nb, folder, name, chapter)
            expected[path.name] = (chapter, name, points)
    logs: list[str] = []
    with pytest.MonkeyPatch.context() as m:
        m.setenv(precision.EMULATE_ENV, "1")              # passed on to the kernels
        with precision.tf32_emulated():                   # and in the grader's process
            rows = _grade(base / "tf32", base, logs)
    assert not precision.emulating()
    rows += _grade(base / "cpu", base, logs)
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
