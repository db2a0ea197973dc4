"""What students hand in (``tests/submissions``): the builders and the alternative answers,
checked for their structure without running a notebook. Whether each builder's notebook gets
the points it earned (every variant included) is graded once, by the sandboxed grader, in
``tests/test_submissions.py``; ``build.run_in_process`` runs a notebook's answers against the
official tests in this process, for an author trying a new variant."""
import re

import nbformat
import pytest

from lrnn.course.exercises import BEGIN_SOLUTION, END_SOLUTION, VALUE_STUB, cell_kind
from submissions import build

CHAPTERS = build.CHAPTERS
BANNED = re.compile(r"forbid\(([^)]*)\)", re.S)


def banned_targets(chapter):
    """Exercise grade_id -> the dotted names its hidden tests forbid."""
    out = {}
    for gid, source in build.official_tests(chapter).items():
        names = [n for m in BANNED.finditer(source) for n in re.findall(r'"([\w.]+)"', m[1])]
        if names:
            out[gid] = names
    return out


def answer_cells(nb):
    return [c for c in nb.cells if cell_kind(c) == "solution"]


def test_every_chapter_and_47_coded_exercises():
    assert CHAPTERS == (1, 2, 3, 4, 5, 6, 7, 8)
    assert sum(len(build.coded(ch)) for ch in CHAPTERS) == 47
    for ch in CHAPTERS:
        assert [ex for ex in build.exercises(ch) if ex.manual], f"chapter {ch}: no open question"


@pytest.mark.parametrize("chapter", CHAPTERS)
def test_solution_fills_every_answer(chapter):
    nb = build.solution(chapter)
    nbformat.validate(nb)
    given = build.exercise_notebook(chapter)
    assert len(nb.cells) == len(given.cells)
    for cell in answer_cells(nb):
        assert "NotImplementedError" not in cell.source, cell.source
        assert VALUE_STUB not in cell.source, cell.source
        assert BEGIN_SOLUTION not in cell.source and END_SOLUTION not in cell.source
    model = build.model_answers(chapter)
    assert {build.grade_id(c): c.source for c in answer_cells(nb)} == model
    for cell in nb.cells:
        if cell_kind(cell) == "manual":
            assert cell.source.startswith("My answer: ") and len(cell.source) > 40
    # everything but the answers is the notebook the student received
    for mine, theirs in zip(nb.cells, given.cells):
        if cell_kind(mine) not in ("solution", "manual"):
            assert mine == theirs


@pytest.mark.parametrize("chapter", CHAPTERS)
def test_blank_and_partial(chapter):
    assert build.blank(chapter) == build.exercise_notebook(chapter)
    nb, points = build.partial(chapter)
    todo = build.coded(chapter)
    half = todo[:len(todo) // 2]
    solved = {build.grade_id(c) for c in answer_cells(nb)
              if "NotImplementedError" not in c.source and VALUE_STUB not in c.source}
    assert solved == {gid for ex in half for gid in ex.answers}
    raw = build.solution_notebook(chapter)
    want = sum(c.metadata["nbgrader"]["points"] for c in raw.cells if cell_kind(c) == "test"
               and c.metadata["nbgrader"]["grade_id"] in {ex.grade_id for ex in half})
    assert points == want and 0 < points < build.total_points(chapter)
    assert build.expected_points(chapter, []) == 0
    assert build.expected_points(chapter, ["ex%s" % half[0].id]) == half[0].points
    with pytest.raises(ValueError, match="expected one of"):
        build.expected_points(chapter, ["ex9.9"])


@pytest.mark.parametrize("chapter", CHAPTERS)
def test_habits(chapter):
    done = build.solution(chapter)
    nb = build.with_habits(done, chapter)
    nbformat.validate(nb)
    old, new = build.PARAMETER[chapter]
    text = "\n".join(c.source for c in nb.cells)
    assert old not in text and new in text
    scratch, self_check = build.habits(chapter)
    assert nb.cells[-1].source == self_check
    for i, cell in enumerate(nb.cells):          # scratch right after its answer cell
        if build.grade_id(cell) in scratch:
            assert [c.source for c in nb.cells[i + 1:i + 1 + len(scratch[build.grade_id(cell)])]] \
                == scratch[build.grade_id(cell)]
    counts = [c.execution_count for c in nb.cells if c.cell_type == "code"]
    known = [c for c in counts if c is not None]
    assert known != sorted(known) and len(set(known)) == len(known)
    assert any(c.outputs for c in nb.cells if cell_kind(c) == "test")
    # the scratch cells call every library function the chapter's hidden tests ban
    calls = "\n".join(s for sources in scratch.values() for s in sources)
    calls = calls.replace("np.", "numpy.").replace("lru.", "lrnn.layers.lru.")
    for gid, names in banned_targets(chapter).items():
        for name in names:
            leaf = ".".join(name.split(".")[-2:])
            assert leaf in calls, \
                f"chapter {chapter}: no scratch cell calls {name} (banned in {gid})"
    assert build.chapter_of(nb) == chapter


def test_tracing_sees_a_banned_function_reached_through_an_alias():
    """The positive control of ``banned_entered``: np.poly reaches numpy.linalg.eigvals through
    numpy's own import of it; ``forbid`` traces what ran, so it fails the exercise too. (The
    answer is the model one, which passes the visible check, plus that side computation.)"""
    done = build.solution(1)
    for cell in done.cells:
        if build.grade_id(cell) == "ex1.5-solution":
            head, body = cell.source.split("\n", 1)
            cell.source = f"{head}\n    np.roots(np.poly(np.asarray(A, float)))\n{body}"
    run = build.run_in_process(done)
    assert run.results["ex1.5"].startswith("ForbiddenCall"), run.results["ex1.5"]
    assert ("ex1.5", "numpy.linalg.eigvals") in run.banned_entered


def test_a_scan_started_from_x_init_by_the_library_fails_2_3():
    """Exercise 2.3 asks where x_init enters the states: an answer that hands it to the
    library's scan (``initial=``) passes the visible check but not the hidden tests."""
    done = build.solution(2)
    for cell in done.cells:
        if build.grade_id(cell) == "ex2.3-solution":
            from_zero = cell.source.index("    from_zero")      # the model answer, up to its scan
            cell.source = cell.source[:from_zero] + (
                "    return np.asarray(lrnn.linear_scan(lam, Bu, initial=x_init))\n")
    run = build.run_in_process(done)
    assert run.results["ex2.3"].startswith("ForbiddenCall"), run.results["ex2.3"]
    assert ("ex2.3", "lrnn.scan._api._check_initial") in run.banned_entered
    assert all(run.results[g] == "pass" for g in run.results if g != "ex2.3"), run.results


def test_write_names_the_chapter(tmp_path):
    for chapter in (1, 8):
        nb = build.with_habits(build.solution(chapter))
        path = build.write(nb, tmp_path / "sub", "alice")
        assert path.name == f"alice_{build.stem(chapter)}.ipynb"
        assert nbformat.read(path, as_version=4) == nb
    assert sorted(p.name for p in (tmp_path / "sub").iterdir()) == [
        "alice_01_linear_recurrence.ipynb", "alice_08_capstone.ipynb"]
    with pytest.raises(ValueError, match="name"):
        build.write(build.blank(1), tmp_path, "../x")


# --------------------------------------------------------------------------------------------
# The alternative answers
# --------------------------------------------------------------------------------------------

def top_level_names(source):
    import ast
    return {node.name for node in ast.parse(source).body
            if isinstance(node, (ast.FunctionDef, ast.ClassDef))}


def normalised(source):
    return re.sub(r"\s+", " ", re.sub(r"#.*", "", source)).strip()


@pytest.mark.parametrize("chapter", CHAPTERS)
def test_variants_are_different_honest_answers(chapter):
    table = build.variants(chapter)
    model = build.model_answers(chapter)
    bans = banned_targets(chapter)
    answer_ids = {gid for ex in build.coded(chapter) for gid in ex.answers}
    assert set(table) == answer_ids
    for gid, options in table.items():
        assert len(options) >= 2, f"{gid}: {len(options)} variants"
        answers = [build.as_answer(v) for v in options]
        texts = [normalised(a) for _, a in answers] + [normalised(model[gid])]
        assert len(set(texts)) == len(texts), f"{gid}: a variant repeats another or the model"
        for helpers, answer in answers:
            # the answer defines what the exercise asks for, nothing is left as a stub
            assert top_level_names(model[gid]) <= top_level_names(answer), gid
            assert "NotImplementedError" not in answer
            # and never names a function the hidden tests ban (the grader's intent)
            text = "\n".join([*helpers, answer])
            for name in bans.get(gid.removesuffix("-solution"), []):
                assert ".".join(name.split(".")[-2:]) not in text, f"{gid} names {name}"
