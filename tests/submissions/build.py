"""What students hand in, built from the notebook they receive (``exercises/NN_*.ipynb``).

Every builder starts from the distributed exercise notebook, never from the solution notebook:
a student's file keeps the exercise version's cells (stubs, demo wrappers, test cells without
the hidden tests, the ``lrnn_exercise`` stamp) and changes only what a student changes.

* :func:`solution` — every answer cell holds the model solution (markers removed), every
  hand-graded answer some text: full marks.
* :func:`variant` — every coded exercise answered by a different correct implementation
  (``variants/chNN.py``), helpers in cells of their own inserted before the answer cell.
* :func:`with_habits` — a completed notebook as a student hands it back after working in it:
  cells run out of order with stale outputs, a demo parameter changed, scratch cells that call
  exactly the library functions the hidden tests ban (outside the answers), and a self-check
  against the library at the end.
* :func:`blank` — as distributed: 0 points.
* :func:`partial` — the first half of the coded exercises solved: the points of those.
* :func:`expected_points` — points from the solutions' nbgrader metadata.
* :func:`write` — a file name the grader maps to the chapter.

Chapters are numbered 1..8 (the ``NN`` of the file names)."""
from __future__ import annotations

import contextlib
import copy
import dataclasses
import functools
import importlib
import io
import os
import random
import re
import tempfile
from pathlib import Path

import nbformat

from lrnn.course.exercises import (BEGIN_SOLUTION, END_SOLUTION, NOTEBOOK_GLOB,
                                   canonical_grade_id, cell_kind, exercise_id, nbgrader_meta)

ROOT = Path(__file__).resolve().parents[2]
SOLUTIONS = ROOT / "solutions"
EXERCISES = ROOT / "exercises"
HERE = Path(__file__).resolve().parent

# --------------------------------------------------------------------------------------------
# Reading the notebooks
# --------------------------------------------------------------------------------------------


@functools.lru_cache(maxsize=None)
def stems() -> dict[int, str]:
    """Chapter number -> notebook stem, e.g. ``{1: "01_linear_recurrence", ...}``."""
    return {int(p.name[:2]): p.stem for p in sorted(SOLUTIONS.glob(NOTEBOOK_GLOB))}


CHAPTERS = tuple(sorted(stems()))


def stem(chapter: int) -> str:
    try:
        return stems()[int(chapter)]
    except KeyError:
        raise ValueError(f"chapter: got {chapter!r}, expected one of {sorted(stems())}") from None


@functools.lru_cache(maxsize=None)
def _read(path: Path):
    return nbformat.read(path, as_version=4)


def exercise_notebook(chapter: int):
    """A fresh copy of ``exercises/NN_*.ipynb``, as students receive it."""
    return copy.deepcopy(_read(EXERCISES / f"{stem(chapter)}.ipynb"))


def solution_notebook(chapter: int):
    """A fresh copy of ``solutions/NN_*.ipynb``."""
    return copy.deepcopy(_read(SOLUTIONS / f"{stem(chapter)}.ipynb"))


def grade_id(cell) -> str | None:
    """The cell's grade_id in the solutions' form (``ex1.2-solution``): the exercise
    notebooks carry nbgrader's form (``ex1_2-solution``)."""
    gid = nbgrader_meta(cell).get("grade_id")
    return canonical_grade_id(gid) if isinstance(gid, str) else None


@dataclasses.dataclass(frozen=True)
class Exercise:
    """One graded exercise of a chapter, from the solution notebook's nbgrader metadata.

    ``grade_id``: the test (or hand-graded answer) cell's id, ``"ex1.2"``; ``id``: ``"1.2"``;
    ``answers``: the grade_ids of its code answer cells (``("ex1.2-solution",)``; empty for a
    hand-graded one); ``manual``: graded by hand."""
    grade_id: str
    id: str
    points: float
    manual: bool
    answers: tuple[str, ...]


@functools.lru_cache(maxsize=None)
def _exercises(chapter: int) -> tuple[Exercise, ...]:
    nb = _read(SOLUTIONS / f"{stem(chapter)}.ipynb")
    answers: dict[str, list[str]] = {}
    graded = []
    for cell in nb.cells:
        kind, gid = cell_kind(cell), grade_id(cell)
        if kind == "solution":
            answers.setdefault(exercise_id(gid), []).append(gid)
        elif kind in ("test", "manual"):
            graded.append((gid, float(nbgrader_meta(cell).get("points", 0)), kind == "manual"))
    out = tuple(Exercise(gid, exercise_id(gid), points, manual,
                         tuple(answers.get(exercise_id(gid), ())))
                for gid, points, manual in graded)
    for ex in out:
        if not ex.manual and not ex.answers:
            raise ValueError(f"chapter {chapter}: exercise {ex.id} has a test cell but no "
                             "answer cell")
    return out


def exercises(chapter: int) -> list[Exercise]:
    """Every graded exercise of the chapter, in notebook order."""
    return list(_exercises(int(chapter)))


def coded(chapter: int) -> list[Exercise]:
    """The autograded exercises of the chapter, in notebook order."""
    return [ex for ex in exercises(chapter) if not ex.manual]


def _normalise_id(chapter: int, value: str) -> str:
    """``"1.2"``, ``"ex1.2"`` or ``"ex1.2-solution"`` -> ``"ex1.2"``."""
    ex = exercise_id(value) or (value if re.fullmatch(r"\d+\.\d+", str(value)) else None)
    known = {e.id: e.grade_id for e in exercises(chapter)}
    if ex not in known:
        raise ValueError(f"exercise: got {value!r}, expected one of chapter {chapter}'s "
                         f"{sorted(known.values())}")
    return known[ex]


def expected_points(chapter: int, solved_grade_ids) -> float:
    """The automatic points of the coded exercises in ``solved_grade_ids`` (any of ``"1.2"``,
    ``"ex1.2"``, ``"ex1.2-solution"``), from the solution notebook's nbgrader ``points``.
    Hand-graded exercises score 0 automatic points."""
    solved = {_normalise_id(chapter, g) for g in solved_grade_ids}
    return float(sum(ex.points for ex in coded(chapter) if ex.grade_id in solved))


def total_points(chapter: int) -> float:
    """The automatic points of the whole chapter."""
    return expected_points(chapter, [ex.grade_id for ex in coded(chapter)])


# --------------------------------------------------------------------------------------------
# Answers
# --------------------------------------------------------------------------------------------


def strip_markers(source: str) -> str:
    """The solution's source with the ``### BEGIN SOLUTION`` / ``### END SOLUTION`` lines
    removed and everything between them kept (what the build replaces by the stub)."""
    return "\n".join(line for line in source.split("\n")
                     if line.strip() not in (BEGIN_SOLUTION, END_SOLUTION))


def model_answers(chapter: int) -> dict[str, str]:
    """Answer grade_id (``"ex1.2-solution"``) -> the model solution's source, markers removed."""
    return {grade_id(c): strip_markers(c.source) for c in solution_notebook(chapter).cells
            if cell_kind(c) == "solution"}


def manual_answers(chapter: int) -> dict[str, str]:
    """Hand-graded grade_id -> a student's text: the first sentences of the model answer, in
    the student's words' place (no rubric)."""
    out = {}
    for c in solution_notebook(chapter).cells:
        if cell_kind(c) != "manual":
            continue
        text = strip_markers(c.source).split("**Rubric")[0]
        text = text.replace("**Model answer.**", "").strip()
        sentences = re.split(r"(?<=[.!?])\s+", text)
        out[grade_id(c)] = "My answer: " + " ".join(sentences[:3])
    return out


def as_answer(value) -> tuple[list[str], str]:
    """A variant's answer as (helper cell sources, answer source)."""
    if isinstance(value, str):
        return [], value
    if isinstance(value, dict) and set(value) <= {"helpers", "answer"} and "answer" in value:
        helpers = value.get("helpers") or []
        return ([helpers] if isinstance(helpers, str) else list(helpers)), value["answer"]
    raise TypeError(f"an answer is a source string or a dict with 'helpers' and 'answer', "
                    f"got {value!r}")


def _code_cell(source: str):
    return nbformat.v4.new_code_cell(source)


def fill(nb, answers: dict, *, manual: dict | None = None):
    """A copy of the exercise notebook ``nb`` with answer cells replaced: ``answers`` maps an
    answer grade_id (``"ex1.2-solution"``) to a source, or to ``{"helpers": [...], "answer":
    ...}`` whose helper sources become code cells inserted just before the answer cell;
    ``manual`` maps a hand-graded grade_id (``"ex1.6"``) to its text. Unknown ids raise."""
    nb = copy.deepcopy(nb)
    manual = manual or {}
    seen, cells = set(), []
    for cell in nb.cells:
        gid = grade_id(cell)
        kind = cell_kind(cell)
        if kind == "solution" and gid in answers:
            helpers, source = as_answer(answers[gid])
            cells.extend(_code_cell(h) for h in helpers)
            cell.source = source
            seen.add(gid)
        elif kind == "manual" and gid in manual:
            cell.source = manual[gid]
            seen.add(gid)
        cells.append(cell)
    missing = (set(answers) | set(manual)) - seen
    if missing:
        raise ValueError(f"no answer cell with grade_id {sorted(missing)} in this notebook")
    nb.cells = cells
    return nb


def chapter_of(nb) -> int:
    """The chapter of a notebook built here (from the build's stamp in its metadata)."""
    mark = nb.metadata.get("lrnn_exercise", {})
    name = Path(str(mark.get("solution", ""))).name
    for chapter, s in stems().items():
        if name == f"{s}.ipynb":
            return chapter
    raise ValueError("the notebook carries no lrnn_exercise stamp naming its chapter")


# --------------------------------------------------------------------------------------------
# The builders
# --------------------------------------------------------------------------------------------


def solution(chapter: int):
    """The exercise notebook completed with the model solution: every code answer cell holds
    the solution's source (markers removed), every hand-graded answer some text."""
    return fill(exercise_notebook(chapter), model_answers(chapter),
                manual=manual_answers(chapter))


def blank(chapter: int):
    """The exercise notebook as distributed: every answer raises NotImplementedError (0 points)."""
    return exercise_notebook(chapter)


def partial(chapter: int):
    """``(nb, points)``: the first half (rounded down, at least one) of the coded exercises
    solved with the model solution, the others as distributed, no hand-graded answer;
    ``points`` is what the solved ones are worth (nbgrader metadata)."""
    todo = coded(chapter)
    solved = todo[:max(1, len(todo) // 2)]
    model = model_answers(chapter)
    answers = {gid: model[gid] for ex in solved for gid in ex.answers}
    nb = fill(exercise_notebook(chapter), answers)
    return nb, expected_points(chapter, [ex.grade_id for ex in solved])


def variants(chapter: int) -> dict:
    """``{answer grade_id: [variant 1, variant 2, ...]}`` from ``variants/chNN.py``; each
    variant is a source string or ``{"helpers": [...], "answer": ...}``."""
    module = importlib.import_module(f"{__package__}.variants.ch{int(chapter):02d}"
                                     if __package__ else f"variants.ch{int(chapter):02d}")
    return module.VARIANTS


def variant(chapter: int, k: int):
    """The exercise notebook with every coded exercise answered by its ``k``-th alternative
    implementation (k = 1, 2, ...) from ``variants/chNN.py``, and the hand-graded answers
    filled in."""
    table = variants(chapter)
    answers = {}
    for ex in coded(chapter):
        for gid in ex.answers:
            options = table.get(gid)
            if not options or not 1 <= k <= len(options):
                raise ValueError(f"chapter {chapter}: no variant {k} of {gid} "
                                 f"({len(options or [])} written)")
            answers[gid] = options[k - 1]
    return fill(exercise_notebook(chapter), answers, manual=manual_answers(chapter))


# --------------------------------------------------------------------------------------------
# Habits
# --------------------------------------------------------------------------------------------

# One changed parameter per chapter, in a course cell (not an answer, not a test): (old, new).
# Each keeps the cell at most as expensive as the original.
PARAMETER = {
    1: ("steps = 80\n", "steps = 120\n"),
    2: ("lam = lam[:2000]", "lam = lam[:1500]"),
    3: ("np.geomspace(1, 20_000, 40)", "np.geomspace(1, 5_000, 30)"),
    4: ("jax.random.normal(jax.random.PRNGKey(9), (64, L_norm, K))",
        "jax.random.normal(jax.random.PRNGKey(10), (32, L_norm, K))"),
    5: ("n_h, steps = 64, 60", "n_h, steps = 64, 40"),
    6: ("for L in (1000, 4096, 65536):", "for L in (1000, 4096, 16384):"),
    7: ('pick("training steps", cpu=300, gpu=1500)', 'pick("training steps", cpu=100, gpu=500)'),
    8: ('pick("training steps", cpu=50, gpu=300)', 'pick("training steps", cpu=30, gpu=300)'),
}


def habits(chapter: int):
    """The chapter's habit sources: ``(scratch, self_check)`` where ``scratch`` maps an answer
    grade_id to a list of cell sources inserted right after that answer cell, and
    ``self_check`` is the source of the cell appended at the end (from ``variants/chNN.py``)."""
    module = importlib.import_module(f"{__package__}.variants.ch{int(chapter):02d}"
                                     if __package__ else f"variants.ch{int(chapter):02d}")
    return module.SCRATCH, module.SELF_CHECK


def _stale_outputs(cell, rng: random.Random):
    """Outputs a cell could show from an earlier run of the notebook."""
    if cell_kind(cell) == "test":
        ex = exercise_id(grade_id(cell))
        text = (f"… Exercise {ex}: not implemented yet — replace the "
                "`raise NotImplementedError(...)` line with your code.\n")
        return [nbformat.v4.new_output("stream", name="stdout", text=text)]
    if "lrnn.course.exercises.demo()" in cell.source:
        return [nbformat.v4.new_output(
            "error", ename="NameError", evalue="name 'x_ours' is not defined",
            traceback=["\x1b[0;31mNameError\x1b[0m: name 'x_ours' is not defined"])]
    choice = rng.random()
    if choice < 0.3:
        return [nbformat.v4.new_output("stream", name="stdout", text="old run: 0.123\n")]
    if choice < 0.45:
        return [nbformat.v4.new_output("execute_result", data={"text/plain": "42"},
                                       execution_count=rng.randint(1, 99))]
    return list(cell.get("outputs", []))


def with_habits(nb, chapter: int | None = None, *, seed: int = 0):
    """A copy of the completed notebook ``nb`` with an honest student's habits:

    * a demo parameter changed in a course cell (:data:`PARAMETER`);
    * scratch cells right after some answer cells that call the library functions the hidden
      tests ban (outside the answers: allowed);
    * a self-check cell at the end comparing the answers with the library;
    * execution counts shuffled (and some missing) and stale outputs left in cells, as after
      running cells out of order.
    """
    chapter = chapter_of(nb) if chapter is None else int(chapter)
    nb = copy.deepcopy(nb)
    rng = random.Random(f"{seed}-{chapter}")
    old, new = PARAMETER[chapter]
    hits = [c for c in nb.cells if c.cell_type == "code" and not cell_kind(c) and old in c.source]
    if len(hits) != 1:
        raise ValueError(f"chapter {chapter}: the changed parameter {old!r} is in {len(hits)} "
                         "course cells, expected 1")
    hits[0].source = hits[0].source.replace(old, new)
    scratch, self_check = habits(chapter)
    cells, placed = [], set()
    for cell in nb.cells:
        cells.append(cell)
        gid = grade_id(cell)
        if cell_kind(cell) == "solution" and gid in scratch:
            cells.extend(_code_cell(s) for s in scratch[gid])
            placed.add(gid)
    if set(scratch) - placed:
        raise ValueError(f"chapter {chapter}: no answer cell for scratch "
                         f"{sorted(set(scratch) - placed)}")
    cells.append(_code_cell(self_check))
    code = [c for c in cells if c.cell_type == "code"]
    counts = list(range(1, len(code) + 1 + rng.randint(3, 20)))
    rng.shuffle(counts)
    for cell, count in zip(code, counts):
        cell.outputs = _stale_outputs(cell, rng)
        cell.execution_count = None if rng.random() < 0.15 else count
    nb.cells = cells
    return nb


# --------------------------------------------------------------------------------------------
# Running a submission in this process (no grader, no kernel)
# --------------------------------------------------------------------------------------------


@dataclasses.dataclass
class InProcess:
    """What :func:`run_in_process` found: ``results`` maps each coded exercise's grade_id to
    ``"pass"`` or the exception its official tests raised; ``points`` the sum of the passed
    exercises' points; ``output`` what the cells printed; ``errors`` the exceptions raised by
    answer cells and cells the student added (a stub raising NotImplementedError at top level
    included); ``banned_entered`` the ``(grade_id, banned name)`` of every banned function whose
    code ran inside a ``forbid`` block, reached through any alias (what a grader that traces
    calls by code object would see)."""
    results: dict
    points: float
    output: str
    errors: list
    banned_entered: list = dataclasses.field(default_factory=list)

    def failed(self) -> dict:
        return {k: v for k, v in self.results.items() if v != "pass"}


def official_tests(chapter: int) -> dict[str, str]:
    """Test grade_id (``"ex1.2"``) -> the solution's test cell source (visible check and
    hidden tests)."""
    return {grade_id(c): c.source for c in solution_notebook(chapter).cells
            if cell_kind(c) == "test"}


def course_sources(chapter: int) -> set[str]:
    """The sources of the exercise notebook's own ordinary code cells (setup, imports, demos),
    with and without the chapter's changed parameter: any other ordinary cell in a submission
    is one the student added."""
    sources = {c.source for c in exercise_notebook(chapter).cells
               if c.cell_type == "code" and not cell_kind(c)}
    old, new = PARAMETER[chapter]
    return sources | {s.replace(old, new) for s in sources}


@contextlib.contextmanager
def _tracing_bans(entered: list, current: list):
    """While active, every ``forbid`` block also records (in ``entered``) each banned
    function whose code object starts running, however it was reached (``forbid`` itself only
    replaces the module attributes)."""
    import inspect
    import sys
    from lrnn.course.check import _core

    enter, leave = _core.forbid.__enter__, _core.forbid.__exit__

    def code_of(name):
        module, attr = name.rsplit(".", 1)
        obj = inspect.unwrap(getattr(importlib.import_module(module), attr))
        return getattr(obj, "__code__", None)

    def traced_enter(self):
        codes = {code_of(t): t for t in self.targets}      # before forbid replaces them
        codes.pop(None, None)

        result = enter(self)
        inner = sys.getprofile()         # forbid's and count_calls' own trace: kept running

        def profile(frame, event, arg):
            if inner is not None:
                inner(frame, event, arg)
            if event == "call" and frame.f_code in codes:
                entered.append((current[0], codes[frame.f_code]))
        self._lrnn_inner_profile = inner
        sys.setprofile(profile)
        return result

    def traced_exit(self, *exc):
        sys.setprofile(getattr(self, "_lrnn_inner_profile", None))
        return leave(self, *exc)

    _core.forbid.__enter__, _core.forbid.__exit__ = traced_enter, traced_exit
    try:
        yield
    finally:
        _core.forbid.__enter__, _core.forbid.__exit__ = enter, leave
        sys.setprofile(None)


def run_in_process(nb, chapter: int | None = None, *, student_cells: bool = True) -> InProcess:
    """Run a submission's answers in a fresh namespace of this process, the way the official
    tests see them, without executing the course's demo cells: the chapter's imports cell,
    then in notebook order every answer cell and every cell the student added
    (``student_cells``), and at each test cell the solution's official test cell (visible
    check and hidden tests) under ``lrnn.course.check.grading_mode()``, where ``forbid``
    patches the banned functions and ``count_calls`` counts in this namespace."""
    from lrnn.course.check import grading_mode
    chapter = chapter_of(nb) if chapter is None else int(chapter)
    course, tests = course_sources(chapter), official_tests(chapter)
    points = {ex.grade_id: ex.points for ex in coded(chapter)}
    ns: dict = {"__name__": "__main__"}
    results, errors, out = {}, [], io.StringIO()
    entered: list = []
    current = [None]
    with contextlib.redirect_stdout(out), _tracing_bans(entered, current):
        exec("import lrnn", ns)
        for i, cell in enumerate(nb.cells):
            if cell.cell_type != "code":
                continue
            kind, gid = cell_kind(cell), grade_id(cell)
            if kind == "test":
                current[0] = gid
                try:
                    with grading_mode():
                        exec(compile(tests[gid], f"<official tests {gid}>", "exec"), ns)
                    results[gid] = "pass"
                except Exception as err:  # noqa: BLE001 - reported per exercise
                    results[gid] = f"{type(err).__name__}: {err}"
                continue
            is_imports = "from lrnn.course.check import check" in cell.source
            if kind == "solution" or is_imports or (student_cells and cell.source not in course):
                try:
                    exec(compile(cell.source, f"<cell {i}>", "exec"), ns)
                except Exception as err:  # noqa: BLE001 - a cell error, as a kernel shows it
                    errors.append(f"cell {i}: {type(err).__name__}: {err}")
    for gid in points:
        results.setdefault(gid, "test cell missing")
    return InProcess(results, float(sum(points[g] for g, r in results.items() if r == "pass")),
                     out.getvalue(), errors, entered)


# --------------------------------------------------------------------------------------------
# Writing
# --------------------------------------------------------------------------------------------


def file_name(chapter: int, name: str) -> str:
    """``<name>_<NN_stem>.ipynb``: the grader maps a file to the solution stem its name holds."""
    if not re.fullmatch(r"[A-Za-z0-9][A-Za-z0-9_.-]*", name):
        raise ValueError(f"name: got {name!r}, expected letters, digits, '_', '-', '.'")
    return f"{name}_{stem(chapter)}.ipynb"


def write(nb, folder, name: str, chapter: int | None = None) -> Path:
    """Write ``nb`` (validated) to ``folder/<name>_<NN_stem>.ipynb`` and return the path; the
    chapter is read from the notebook's stamp unless given. Written to a temporary file in
    ``folder`` first, then renamed into place."""
    chapter = chapter_of(nb) if chapter is None else int(chapter)
    folder = Path(folder)
    folder.mkdir(parents=True, exist_ok=True)
    nbformat.validate(nb)
    path = folder / file_name(chapter, name)
    fd, tmp = tempfile.mkstemp(dir=folder, prefix=".tmp-", suffix=".ipynb")
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as f:
            nbformat.write(nb, f)
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
    return path


__all__ = ["CHAPTERS", "Exercise", "exercises", "coded", "expected_points", "total_points",
           "solution",
           "variant", "variants", "with_habits", "blank", "partial", "write", "file_name",
           "as_answer", "fill", "model_answers", "manual_answers", "strip_markers", "stems", "stem",
           "chapter_of", "exercise_notebook", "solution_notebook", "PARAMETER", "habits",
           "run_in_process", "InProcess", "official_tests", "course_sources"]
