"""Teaching standards of the course: exercise notebooks run to the end with unfinished
exercises reported, not raised; no solution is printed in its chapter or copies the library;
code fits its box; every question of the book has an answer."""
from pathlib import Path

import nbformat
import pytest

from lrnn.course import exercises as ex

from _rules import assert_every

ROOT = Path(__file__).resolve().parents[1]
SOLUTION_FILES = sorted((ROOT / "solutions").glob(ex.NOTEBOOK_GLOB))


def read(path):
    return nbformat.read(path, as_version=4)


# --------------------------------------------------------------------------------------
# "Run all" on an exercise notebook runs to the end
# --------------------------------------------------------------------------------------

@pytest.fixture
def clean_demo_state():
    ex._UNFINISHED.clear()
    yield
    ex._UNFINISHED.clear()


def test_wrap_demo_indents_under_the_context_manager():
    src = "x = f(1)\n\nfor i in range(2):\n    print(x + i)"
    out = ex.wrap_demo(src, "t")
    assert out.splitlines()[0] == ex.DEMO_LINE
    assert out.splitlines()[1:] == ["    x = f(1)", "", "    for i in range(2):",
                                    "        print(x + i)"]
    compile(out, "<wrapped>", "exec")


@pytest.mark.parametrize("src, message", [
    ('s = """a\nb"""\nprint(s)', "multi-line string"),
    ("%time f(1)", "magics"),
    ("y = f(1)\ny", "bare expression"),
])
def test_wrap_demo_refuses_what_it_would_change(src, message):
    with pytest.raises(ex.BuildError, match=message):
        ex.wrap_demo(src, "t")


def test_demo_reports_an_unfinished_exercise_and_goes_on(capsys, clean_demo_state):
    with ex.demo():
        raise NotImplementedError("Exercise 1.2: a parallel scan — read eq. (1.3)")
    with ex.demo():                              # a later cell needs a result of the first one
        undefined_name_from_an_unfinished_cell  # noqa: B018, F821
    lines = capsys.readouterr().out.splitlines()
    assert lines[0].startswith("unfinished: exercise 1.2 (")
    assert lines[1].startswith("skipped:") and "1.2" in lines[1]


def test_demo_raises_real_errors(clean_demo_state):
    with pytest.raises(ZeroDivisionError):
        with ex.demo():
            1 / 0
    with pytest.raises(NameError):               # no unfinished exercise: a real NameError
        with ex.demo():
            undefined_name  # noqa: B018, F821


def test_demo_closes_half_drawn_figures(clean_demo_state, capsys):
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    with ex.demo():
        plt.figure()
        raise NotImplementedError("Exercise 4.2: …")
    assert plt.get_fignums() == []


def check_exercise_notebook_is_built_from_its_solution(path):
    """The committed exercise notebook is what ``lrnn exercises build`` makes of its solution:
    every demo cell that would raise on an unfinished exercise is wrapped, and no cell is
    tagged ``raises-exception``. That it then runs to the end is checked where it is executed:
    by the grader, in tests/test_submissions.py."""
    sol = read(path)
    built = ex.build_notebook(sol, path.name)
    demos = [c for c in sol.cells if "exercise-raises" in c.metadata.get("tags", [])]
    wrapped = [c for c in built.cells if c.source.startswith(ex.DEMO_LINE)]
    assert len(wrapped) == len(demos)
    for cell in built.cells:
        assert "raises-exception" not in cell.metadata.get("tags", []), cell.source[:80]
    committed = read(ROOT / "exercises" / path.name)
    assert [c.source for c in committed.cells] == [c.source for c in built.cells]


def test_exercise_notebooks_are_built_from_their_solutions():
    assert_every(SOLUTION_FILES, check_exercise_notebook_is_built_from_its_solution,
                 name=lambda p: p.name)


# --------------------------------------------------------------------------------------
# Exercises ask for the idea, not for a copy of the chapter
# --------------------------------------------------------------------------------------

import ast  # noqa: E402
import builtins  # noqa: E402
import difflib  # noqa: E402
import functools  # noqa: E402
import io  # noqa: E402
import keyword  # noqa: E402
import re  # noqa: E402
import textwrap  # noqa: E402
import tokenize  # noqa: E402

from lrnn.course.check import exercises as registered  # noqa: E402

#: Above this similarity of normalised token sequences, a solution counts as a copy. At commit
#: 649d3fa it flags exercises 1.3 (0.91), 1.5, 5.1, 5.3 and 5.4 (0.61–0.68) against their
#: chapters; no solution of this version scores above 0.58.
COPY_THRESHOLD = 0.6
#: Bodies shorter than this (in tokens) are not judged: a one- or two-line formula matches some
#: window of any chapter by chance (scores up to 0.65 for unrelated code).
MIN_TOKENS = 30
_KEPT = set(dir(builtins)) | {"np", "jax", "lax", "math", "lrnn", "plt", "scipy"}

#: Exercise 1.3 as it was at commit 649d3fa: the chapter's `kernel`, re-typed.
OLD_EXERCISE_1_3 = '''
K, power = [], np.eye(A.shape[0], dtype=A.dtype)
for _ in range(L):
    K.append(C @ power @ B)
    power = A @ power
return np.stack(K)
'''


def normalised_tokens(source: str) -> list[str]:
    """Python tokens with layout, comments and names taken out: every name that is not a
    keyword, a builtin, a module alias or an attribute becomes ``ID``; ``jnp`` counts as
    ``np``; numbers become ``NUM`` and strings ``STR``. Two pieces of code that differ only in
    their variable names, spacing and comments give the same list."""
    out, previous = [], None
    try:
        tokens = list(tokenize.generate_tokens(io.StringIO(source).readline))
    except (tokenize.TokenError, IndentationError, SyntaxError):
        return out
    for tok in tokens:
        if tok.type in (tokenize.COMMENT, tokenize.NL, tokenize.NEWLINE, tokenize.INDENT,
                        tokenize.DEDENT, tokenize.ENDMARKER):
            continue
        text = tok.string
        if text == "jnp":
            out.append("np")
        elif tok.type == tokenize.NAME and not keyword.iskeyword(text) and text not in _KEPT \
                and previous != ".":
            out.append("ID")
        elif tok.type == tokenize.NUMBER:
            out.append("NUM")
        elif tok.type == tokenize.STRING:
            out.append("STR")
        else:
            out.append(text)
        previous = text
    return out


def chapter_units(nb) -> list[list[str]]:
    """Token lists of the chapter's code: the body of every function it defines, and windows
    of the code of every cell."""
    units = []
    for cell in nb.cells:
        if cell.cell_type != "code":
            continue
        source = "\n".join(line for line in cell.source.split("\n")
                           if not line.lstrip().startswith(("%", "!")))
        units.append(normalised_tokens(source))
        try:
            tree = ast.parse(source)
        except SyntaxError:
            continue
        for node in ast.walk(tree):
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                segment = ast.get_source_segment(source, node).split("\n", 1)
                if len(segment) == 2:
                    units.append(normalised_tokens(textwrap.dedent(segment[1])))
    return units


def _best_window_ratio(tokens, unit, at_least: float) -> float:
    """The largest difflib ratio between ``tokens`` and ``unit`` (or a same-length window of
    a long ``unit``), counting only ratios of at least ``at_least`` (the cheap upper bounds
    skip the rest)."""
    n, best = len(tokens), 0.0
    windows = [unit] if len(unit) <= 2 * n else \
        [unit[i:i + n] for i in range(0, len(unit) - n + 1, max(1, n // 4))]
    for window in windows:
        floor = max(best, at_least)
        matcher = difflib.SequenceMatcher(None, tokens, window, autojunk=False)
        if matcher.real_quick_ratio() >= floor and matcher.quick_ratio() >= floor:
            best = max(best, matcher.ratio())
    return best


def copy_score(solution: str, units) -> float:
    """How nearly ``solution`` appears in the chapter: the largest difflib ratio between its
    normalised tokens and a chapter function body or a same-length window of a cell."""
    tokens = normalised_tokens(textwrap.dedent(solution).strip("\n"))
    best = 0.0
    for unit in units:
        best = max(best, _best_window_ratio(tokens, unit, best))
    return best


def solution_bodies(nb):
    for cell in nb.cells:
        if cell.cell_type != "code":
            continue
        gid = cell.metadata.get("nbgrader", {}).get("grade_id")
        for kind, value in ex._split_region(cell.source.split("\n"), ex.BEGIN_SOLUTION,
                                            ex.END_SOLUTION, gid or "cell"):
            if kind == "region":
                yield gid, "\n".join(value[1])


def test_the_copy_detector_catches_the_old_exercise_1_3():
    units = chapter_units(read(ROOT / "book" / "01_linear_recurrence.ipynb"))
    assert copy_score(OLD_EXERCISE_1_3, units) > COPY_THRESHOLD
    renamed = OLD_EXERCISE_1_3.replace("power", "A_to_the_k").replace("K", "kernel_list")
    assert copy_score(renamed, units) > COPY_THRESHOLD          # renaming does not hide it
    assert normalised_tokens("x = jnp.eye(3)  # c") == normalised_tokens("y   =  np.eye(4)")


#: Each solution notebook with every book notebook of its chapter (chapter 7 has two parts).
PAIRS = [(p, chapter) for p in SOLUTION_FILES
         for chapter in sorted((ROOT / "book").glob(p.name[:3] + "*.ipynb"))]


def check_no_solution_is_printed_in_its_chapter(pair):
    solution, chapter = pair
    units = chapter_units(read(chapter))
    copies = []
    for gid, body in solution_bodies(read(solution)):
        if len(normalised_tokens(textwrap.dedent(body))) < MIN_TOKENS:
            continue
        score = copy_score(body, units)
        if score > COPY_THRESHOLD:
            copies.append(f"{gid}: {score:.2f}")
    assert not copies, f"solutions printed nearly verbatim in {chapter.name}: {copies}"


@pytest.mark.slow
def test_no_solution_is_printed_in_its_chapter():
    assert {chapter.name for _, chapter in PAIRS} >= {"07_experiments.ipynb", "07_memory.ipynb"}
    assert_every(PAIRS, check_no_solution_is_printed_in_its_chapter,
                 name=lambda p: f"{p[0].name} in {p[1].name}")


#: Above this similarity to a function of the installed library, a solution counts as a
#: transcription of it: the library would be the exercise's answer key.
LIBRARY_THRESHOLD = 0.8


def _body_source(source: str, node) -> str:
    """The body of a function without its docstring, dedented."""
    body = node.body
    if body and isinstance(body[0], ast.Expr) and isinstance(body[0].value, ast.Constant) \
            and isinstance(body[0].value.value, str):
        body = body[1:]
    return textwrap.dedent("\n".join(ast.get_source_segment(source, b, padded=True)
                                     for b in body))


@functools.lru_cache(maxsize=1)
def library_units() -> tuple:
    """``(module:function, normalised tokens of its body)`` for every function in src/lrnn,
    exercise checkers and their references included: a student has all of it installed."""
    units = []
    for path in sorted((ROOT / "src" / "lrnn").rglob("*.py")):
        source = path.read_text(encoding="utf-8")
        for node in ast.walk(ast.parse(source)):
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                tokens = normalised_tokens(_body_source(source, node))
                if tokens:
                    name = f"{path.relative_to(ROOT / 'src').with_suffix('')}.{node.name}"
                    units.append((name.replace("/", "."), tokens))
    return tuple(units)


def library_matches(solution: str, threshold: float = LIBRARY_THRESHOLD) -> list:
    """``(score, library function)`` for each library function whose body the solution
    matches at ``threshold`` or more (the measure of ``copy_score``)."""
    tokens = normalised_tokens(textwrap.dedent(solution).strip("\n"))
    found = []
    for name, unit in library_units():
        best = _best_window_ratio(tokens, unit, threshold)
        if best >= threshold:
            found.append((round(best, 2), name))
    return sorted(found, reverse=True)


@pytest.mark.slow
def test_the_library_detector_catches_a_transcribed_library_function():
    import inspect
    from lrnn.layers import lru
    source = textwrap.dedent(inspect.getsource(lru.apply))
    body = _body_source(source, ast.parse(source).body[0])
    assert library_matches(body)[0][1] == "lrnn.layers.lru.apply"
    renamed = re.sub(r"\bparams\b", "p", body).replace("u", "inputs")
    assert any(name == "lrnn.layers.lru.apply" for _, name in library_matches(renamed))
    assert not library_matches(OLD_EXERCISE_1_3)        # unrelated code does not match


def check_no_solution_transcribes_the_library(solution):
    """Every exercise's solution stays under 0.8 token similarity to every library function,
    the one that computes the same thing included (the check modules' references too)."""
    copies = []
    for gid, body in solution_bodies(read(solution)):
        if len(normalised_tokens(textwrap.dedent(body))) < MIN_TOKENS:
            continue
        copies += [f"{gid} ~ {name}: {score:.2f}" for score, name in library_matches(body)]
    assert not copies, f"solutions that transcribe a library function: {copies}"


@pytest.mark.slow
def test_no_solution_transcribes_the_library():
    assert_every(SOLUTION_FILES, check_no_solution_transcribes_the_library, name=lambda p: p.name)


_EQUATION = re.compile(r"\beqs?\.|\bEq\.|Lemma|Theorem|Prop\.|Proposition|Algorithm|§|App\.|"
                       r"Table|Fig\.|=")


def check_stubs_point_to_equations_not_to_the_library(ex_id):
    reference = registered()[ex_id].reference
    assert "lrnn." not in reference and "numpy." not in reference, reference
    assert _EQUATION.search(reference), f"exercise {ex_id}: no equation in {reference!r}"


def test_stubs_point_to_equations_not_to_the_library():
    assert_every(sorted(registered(), key=lambda k: tuple(map(int, k.split(".")))),
                 check_stubs_point_to_equations_not_to_the_library)


def test_every_chapter_has_graded_exercises():
    chapters = {int(p.name[:2]) for p in SOLUTION_FILES}
    assert chapters == set(range(1, 9))
    auto = [r for p in SOLUTION_FILES for r in ex.exercise_table(read(p)) if r["kind"] == "test"]
    assert len(auto) >= 24


# --------------------------------------------------------------------------------------
# Hand-graded answers: the rubric rewards what the chapters teach
# --------------------------------------------------------------------------------------

def _manual_answer(path, grade_id):
    cell = next(c for c in read(path).cells
                if c.metadata.get("nbgrader", {}).get("grade_id") == grade_id)
    answer, rubric = cell.source.split("**Rubric", 1)
    return answer, rubric


def test_rubric_4_5_gives_full_points_to_neither_unless_the_first_state_is_scaled():
    """Chapter 4 shows that the RotRNN without a scaled first state rises like the LRU, so
    "neither, unless the first state is scaled" is the right answer to Exercise 4.5's last
    question: the model answer says it and the rubric gives it the point in full."""
    answer, rubric = _manual_answer(ROOT / "solutions" / "04_normalisation.ipynb", "ex4.5")
    answer, rubric = " ".join(answer.split()), " ".join(rubric.split())
    assert "neither, unless the first state is scaled" in answer.lower()
    assert re.search(r'"neither, unless the first state is scaled" earns this point in full',
                     rubric)
    assert "without the condition on the first state, earns no point" in rubric


def test_model_answer_3_5_does_not_call_the_scan_exactly_orthogonal():
    answer, rubric = _manual_answer(ROOT / "solutions" / "03_rotations.ipynb", "ex3.5")
    answer = " ".join(answer.split())
    assert "stays exactly orthogonal" not in answer
    assert "drifts by about `kε`" in answer and "P D(kθ) Pᵀ" in answer


# --------------------------------------------------------------------------------------
# Notebooks of chapters 0–5 and of every solution: code fits its box on the site
# --------------------------------------------------------------------------------------

OWNED = sorted((ROOT / "book").glob("0[0-5]_*.ipynb")) + SOLUTION_FILES


GENERATED = sorted((ROOT / "exercises").glob(ex.NOTEBOOK_GLOB))


def check_code_lines_fit_their_box(path):
    """At most 100 characters per code line, in the generated exercise notebooks too (stubs and
    demo cells indented by the build); the shared setup cell, synced across every notebook by
    scripts/sync_headers.py, is left out."""
    long = [(i, len(line)) for i, cell in enumerate(read(path).cells)
            if cell.cell_type == "code" and not cell.source.startswith("# Setup: in Colab")
            for line in cell.source.split("\n") if len(line) > 100]
    assert not long, f"code lines over 100 characters (cell, length): {long}"


def test_code_lines_fit_their_box():
    assert_every(OWNED + GENERATED, check_code_lines_fit_their_box,
                 name=lambda p: f"{p.parent.name}/{p.name}")


def test_the_lru_paper_is_cited_with_its_own_numbering():
    """The LRU paper numbers its results within sections: Theorem 3.1, Lemma 3.2,
    Proposition 3.3 (the text export in shared/papers drops the section prefix)."""
    for path in OWNED + sorted((ROOT / "src" / "lrnn" / "course" / "check").glob("ch0*.py")):
        text = path.read_text(encoding="utf-8")
        for wrong in ("LRU Lemma 2", "LRU Theorem 1", "LRU Prop. 3)", "LRU Prop. 3 ",
                      "LRU Proposition 3 ", "LRU Proposition 3,", "Lemma 2 in the arXiv"):
            assert wrong not in text, f"{path.name}: {wrong!r}"


# --------------------------------------------------------------------------------------
# Every problem and Think! prompt of the book has an answer a self-learner can open
# --------------------------------------------------------------------------------------

import re  # noqa: E402

BOOK_FILES = sorted((ROOT / "book").glob("[0-9][0-9]_*.ipynb"))
PROMPT = re.compile(r"\*\*Think!\*\*|\*Think:\*|^## (Problems|Two warm-up problems)", re.M)


def is_answer(cell):
    src = cell.source if isinstance(cell.source, str) else "".join(cell.source)
    return (cell.cell_type == "markdown" and src.startswith("```{admonition} Answer")
            and ":class: dropdown" in src.splitlines()[1] and src.rstrip().endswith("```")
            and len(src) > 120)


def prompts_without_answers(nb):
    """Cells that ask a question and are not followed by its own answer: no collapsed answer
    right after, two questions sharing one answer, or a new section started between the
    question and its answer (the answer would then sit under the next section's heading)."""
    cells = nb.cells
    out = []
    for i, c in enumerate(cells):
        if c.cell_type != "markdown":
            continue
        prompts = list(PROMPT.finditer(c.source))
        if not prompts:
            continue
        after = c.source[prompts[-1].end():]
        if not (i + 1 < len(cells) and is_answer(cells[i + 1])) or len(prompts) > 1 \
                or re.search(r"^#{1,6} ", after, re.M):
            out.append(i)
    return out


def check_every_problem_and_think_prompt_is_followed_by_an_answer(path):
    nb = read(path)
    assert not prompts_without_answers(nb), (
        f"{path.name}: cells {prompts_without_answers(nb)} ask a question (Think! or Problems) "
        "and are not followed by a collapsed answer cell of its own (```{admonition} Answer / "
        ":class: dropdown, right after the question: one question per cell, and the next "
        "section's heading after the answer)")


def test_every_problem_and_think_prompt_is_followed_by_an_answer():
    assert_every(BOOK_FILES, check_every_problem_and_think_prompt_is_followed_by_an_answer)


def test_the_answer_check_can_fail():
    nb = nbformat.v4.new_notebook()
    nb.cells = [nbformat.v4.new_markdown_cell("**Think!** Why?"),
                nbformat.v4.new_markdown_cell("Because.")]
    assert prompts_without_answers(nb) == [0]
    nb.cells[1] = nbformat.v4.new_markdown_cell(
        "```{admonition} Answer\n:class: dropdown\n\n" + "A specific answer. " * 8 + "\n```")
    assert prompts_without_answers(nb) == []
    nb.cells[0].source = "**Think!** Why?\n\n## 6.4 The next section\n\nIts text."
    assert prompts_without_answers(nb) == [0]         # the answer would sit under 6.4
    nb.cells[0].source = "**Think!** Why?\n\n*Think:* And how?"
    assert prompts_without_answers(nb) == [0]         # two questions, one answer
