"""Generate the student notebooks ``exercises/`` from the single source ``solutions/``.

    lrnn exercises build            # (re)write exercises/NN_*.ipynb
    lrnn exercises build --check    # exit 1, with a diff summary, if exercises/ is stale
    lrnn exercises build --force    # also replace edited notebooks, keeping a backup of each

The build replaces only notebooks it generated and nobody edited since: each generated notebook
carries ``metadata.lrnn_exercise`` with the SHA-256 of its own text. A notebook with student
edits (a new cell, an answer, outputs), or one the build did not write (a chapter of ``book/``),
stops the build before anything is written, unless ``--force`` is given: then each such notebook
is first copied to ``<name>.backup-<UTC time>`` beside it.

What the build does to each ``solutions/NN_*.ipynb`` (see ``solutions/AUTHORING.md``):

* code between ``### BEGIN SOLUTION`` and ``### END SOLUTION`` becomes comment lines
  ``# Read: <reference>.`` and ``raise NotImplementedError("Exercise 3.2: <title>")`` at the
  marker's indentation (title and reference from the checker registered in ``lrnn.course.check``;
  every line within 100 characters); markdown
  solution regions become ``YOUR ANSWER HERE`` (nbgrader's markers and behaviour);
* ``### BEGIN HIDDEN TESTS`` … ``### END HIDDEN TESTS`` is removed from the test cells;
* outputs of solution cells, test cells and cells tagged ``exercise-raises`` or
  ``exercise-clear-output`` are cleared (and their ``nbval-check-output`` tag removed);
* a cell tagged ``exercise-raises`` (a demo that calls the student's functions) is wrapped in
  ``with lrnn.course.exercises.demo():``, so that "Run all" goes on to the end: while an exercise is
  unfinished the cell prints one line (``unfinished: exercise 1.2 …``) instead of raising;
* every cell whose solution region is at top level is tagged ``raises-exception`` and
  ``remove-output`` (the website shows the stub but no traceback; avoid such cells: they stop
  "Run all"), except a prediction's (an exercise of ``kind="value"``): each name its answer
  assigns becomes ``name = ...  # YOUR PREDICTION``; cells tagged ``solutions-only`` are
  dropped;
* the Colab badge path ``solutions/`` becomes ``exercises/`` (on any branch);
* the notebook is written as stable JSON (sorted keys, indent 1, UTF-8, final newline), with
  the ``lrnn_exercise`` stamp (see above), atomically.
"""
from __future__ import annotations

import argparse
import ast
import copy
import datetime
import difflib
import hashlib
import json
import re
import shutil
import sys
from pathlib import Path

import nbformat

BEGIN_SOLUTION = "### BEGIN SOLUTION"
END_SOLUTION = "### END SOLUTION"
BEGIN_HIDDEN = "### BEGIN HIDDEN TESTS"
END_HIDDEN = "### END HIDDEN TESTS"
ANSWER_PLACEHOLDER = "YOUR ANSWER HERE"
NOTEBOOK_GLOB = "[0-9][0-9]_*.ipynb"
GRADE_ID = re.compile(r"^ex(\d+[._]\d+)(?:-.*)?$")
# nbgrader's schema allows only letters, digits, "_" and "-" in a grade_id: the exercises
# students get carry "ex3_2" where the solutions carry "ex3.2" (the grader reads both).
NBGRADER_GRADE_ID = re.compile(r"^ex(\d+)[._](\d+)(-.*)?$")
#: A link to a solution notebook on any branch (the Colab badge): pointed at the exercise.
_BLOB_SOLUTIONS = re.compile(r"(/blob/[^/\s)]+/)solutions/")


class BuildError(Exception):
    pass


def exercise_id(grade_id: str | None) -> str | None:
    m = GRADE_ID.match(grade_id or "")
    return m.group(1).replace("_", ".") if m else None


def canonical_grade_id(grade_id):
    """``ex3_2-solution`` (nbgrader's form) -> ``ex3.2-solution`` (the solutions' form);
    any other value unchanged."""
    m = NBGRADER_GRADE_ID.match(grade_id) if isinstance(grade_id, str) else None
    return f"ex{m[1]}.{m[2]}{m[3] or ''}" if m else grade_id


def nbgrader_grade_id(grade_id: str) -> str:
    """``ex3.2-solution`` -> ``ex3_2-solution``: valid under nbgrader's schema."""
    m = NBGRADER_GRADE_ID.match(grade_id or "")
    return f"ex{m[1]}_{m[2]}{m[3] or ''}" if m else grade_id


def nbgrader_meta(cell) -> dict:
    return cell.get("metadata", {}).get("nbgrader", {}) or {}


def cell_kind(cell) -> str:
    """"solution" (student code or answer), "test" (autograded), "manual" (hand-graded
    answer), or "" (an ordinary cell)."""
    meta = nbgrader_meta(cell)
    if meta.get("grade") and meta.get("solution"):
        return "manual"
    if meta.get("grade"):
        return "test"
    if meta.get("solution"):
        return "solution"
    return ""


def _split_region(lines, begin, end, where):
    """Yield ("text", line) and ("region", (indent, lines)) items; raise on bad nesting."""
    out, inside, indent, region = [], False, "", []
    for line in lines:
        stripped = line.strip()
        if stripped == begin:
            if inside:
                raise BuildError(f"{where}: nested {begin!r}")
            inside, indent, region = True, line[: len(line) - len(line.lstrip())], []
        elif stripped == end:
            if not inside:
                raise BuildError(f"{where}: {end!r} without {begin!r}")
            out.append(("region", (indent, region)))
            inside = False
        elif inside:
            region.append(line)
        else:
            out.append(("text", line))
    if inside:
        raise BuildError(f"{where}: {begin!r} without {end!r}")
    return out


STUB_WIDTH = 100          # code lines of the generated notebooks fit the website's code boxes


def _stub_message(ex_id: str | None) -> str:
    from . import check
    if ex_id is None:
        return "Exercise: write your code here"
    try:
        ex = check.get(ex_id)
    except KeyError:
        return f"Exercise {ex_id}: write your code here"
    return f"Exercise {ex.id}: {ex.title}"


def _read_lines(ex_id: str | None, indent: str) -> list[str]:
    """``# Read: <reference>.`` as comment lines within STUB_WIDTH (none without a checker)."""
    import textwrap
    from . import check
    try:
        reference = check.get(ex_id).reference if ex_id else None
    except KeyError:
        reference = None
    if not reference:
        return []
    width = STUB_WIDTH - len(indent) - 2
    return [f"{indent}# {part}" for part in textwrap.wrap(f"Read: {reference}.", width)]


def _stub_lines(ex_id: str | None, indent: str) -> list[str]:
    """The stub that replaces a code solution region: what to read, as comment lines, then
    ``raise NotImplementedError("Exercise N.k: title")``, every line within STUB_WIDTH."""
    return _read_lines(ex_id, indent) + [
        indent + "raise NotImplementedError("
        + json.dumps(_stub_message(ex_id), ensure_ascii=False) + ")"]


#: What a prediction's stub assigns, and the comment that marks it unanswered.
VALUE_STUB = "...  # YOUR PREDICTION"


def _is_value_exercise(ex_id: str | None) -> bool:
    from . import check
    try:
        return ex_id is not None and check.get(ex_id).kind == "value"
    except KeyError:
        return False


def _value_stub_lines(ex_id: str, region: list[str], where: str) -> list[str]:
    """The stub of a prediction (an exercise of ``kind="value"``): what to read, then every
    name the model answer assigns set to ``...``, so that "Run all" goes on; the check says
    "no prediction yet" until the student writes a number there."""
    try:
        body = ast.parse("\n".join(region)).body
    except SyntaxError as e:
        raise BuildError(f"{where}: the answer of prediction {ex_id} does not parse: {e}") from None
    names = [t.id for node in body if isinstance(node, (ast.Assign, ast.AnnAssign))
             for t in (node.targets if isinstance(node, ast.Assign) else [node.target])
             if isinstance(t, ast.Name)]
    if not names:
        raise BuildError(f"{where}: the answer of prediction {ex_id} assigns no name "
                         "(write it as `name = value`)")
    return _read_lines(ex_id, "") + [f"{name} = {VALUE_STUB}" for name in dict.fromkeys(names)]


def strip_solution(source: str, *, markdown: bool, ex_id: str | None, where: str):
    """Return (new source, has_region, has_top_level_region). A prediction's region at top
    level becomes assignments of ``...`` (no exception: not counted as top level)."""
    items = _split_region(source.split("\n"), BEGIN_SOLUTION, END_SOLUTION, where)
    lines, found, top_level = [], False, False
    for kind, value in items:
        if kind == "text":
            lines.append(value)
            continue
        found = True
        indent, region = value
        if markdown:
            lines.append(indent + ANSWER_PLACEHOLDER)
        elif indent == "" and _is_value_exercise(ex_id):
            lines.extend(_value_stub_lines(ex_id, region, where))
        else:
            top_level = top_level or indent == ""
            lines.extend(_stub_lines(ex_id, indent))
    return "\n".join(lines), found, top_level


DEMO_LINE = ("with lrnn.course.exercises.demo():  # until the exercises above are done, this cell "
             "prints a note")


def wrap_demo(source: str, where: str) -> str:
    """The source of a demo cell, indented under ``with lrnn.course.exercises.demo():``.

    Raises BuildError for what the wrapper would change: a multi-line string (its lines would
    be indented), an IPython magic or shell line, or a last statement that is an expression other
    than a call, such as a variable (inside a ``with`` block its value is no longer displayed:
    end with ``print``, ``display`` or ``plt.show()``)."""
    if _has_multiline_string(source):
        raise BuildError(f"{where}: a demo cell (exercise-raises) cannot hold a multi-line string")
    lines = source.split("\n")
    if any(line.lstrip().startswith(("%", "!")) for line in lines):
        raise BuildError(f"{where}: a demo cell (exercise-raises) cannot hold IPython magics")
    try:
        body = ast.parse(source).body
    except SyntaxError as e:
        raise BuildError(f"{where}: demo cell does not parse: {e}") from None
    if body and isinstance(body[-1], ast.Expr) and not isinstance(body[-1].value, ast.Call):
        raise BuildError(f"{where}: a demo cell (exercise-raises) must not end with a bare "
                         "expression (its value would not be shown): use print(...), "
                         "display(...) or plt.show()")
    indented = [("    " + line) if line.strip() else "" for line in lines]
    while indented and not indented[-1]:
        indented.pop()
    return "\n".join([DEMO_LINE, *indented])


def _has_multiline_string(source: str) -> bool:
    import io
    import tokenize
    try:
        tokens = list(tokenize.generate_tokens(io.StringIO(source).readline))
    except (tokenize.TokenError, IndentationError):
        return False                             # ast.parse reports it below
    return any(t.type == tokenize.STRING and t.start[0] != t.end[0] for t in tokens)


_UNFINISHED: list[str] = []
_EXERCISE_IN_MESSAGE = re.compile(r"Exercise (\d+\.\d+)")


class demo:
    """Context manager around the demo cells of an exercise notebook (the build adds it).

    A demo cell calls the functions the student writes. While one of them still raises the
    ``NotImplementedError`` of its stub, the cell prints one line instead of stopping "Run all"::

        unfinished: exercise 1.2 (a parallel scan …): this cell runs once it is done.

    A ``NameError`` is treated the same way once an exercise has been reported unfinished (the
    cell then uses a result that an earlier, unfinished demo did not produce). Any other error
    is the student's to see, and is raised as usual. Open figures of an interrupted cell are
    closed, so that no half-drawn plot appears."""

    def __enter__(self):
        return self

    def __exit__(self, etype, value, tb):
        if etype is None:
            return False
        if issubclass(etype, NotImplementedError):
            found = _EXERCISE_IN_MESSAGE.search(str(value))
            ex_id = found.group(1) if found else "above"
            if ex_id not in _UNFINISHED:
                _UNFINISHED.append(ex_id)
            print(f"unfinished: exercise {ex_id}{_title(ex_id)}: this cell runs once it is done.")
        elif issubclass(etype, NameError) and _UNFINISHED:
            print(f"skipped: this cell needs the result of a cell above, which waits for "
                  f"exercise {', '.join(_UNFINISHED)}.")
        else:
            return False
        _close_figures()
        return True


def _title(ex_id: str) -> str:
    from . import check
    try:
        return f" ({check.get(ex_id).title})"
    except KeyError:
        return ""


def _close_figures() -> None:
    plt = sys.modules.get("matplotlib.pyplot")
    if plt is not None:
        plt.close("all")


def strip_hidden(source: str, where: str) -> str:
    items = _split_region(source.split("\n"), BEGIN_HIDDEN, END_HIDDEN, where)
    lines = [v for k, v in items if k == "text"]
    while lines and not lines[-1].strip():
        lines.pop()
    return "\n".join(lines)


def _clear(cell):
    if cell.cell_type == "code":
        cell.outputs = []
        cell.execution_count = None
    tags = [t for t in cell.metadata.get("tags", []) if t != "nbval-check-output"]
    _set_tags(cell, tags)


def _set_tags(cell, tags):
    if tags:
        cell.metadata["tags"] = tags
    else:
        cell.metadata.pop("tags", None)


def exercise_table(nb, name: str = "notebook") -> list[dict]:
    """The graded cells of a solution notebook, in order: dicts with ``grade_id``,
    ``exercise``, ``kind`` ("test"/"manual"), ``points`` and ``source`` (full, with hidden
    tests). Raises BuildError on duplicate grade ids."""
    seen, table = set(), []
    for i, cell in enumerate(nb.cells):
        meta = nbgrader_meta(cell)
        gid = meta.get("grade_id")
        if not meta:
            continue
        where = f"{name}, cell {i}"
        if not gid:
            raise BuildError(f"{where}: nbgrader metadata without a grade_id")
        if canonical_grade_id(gid) in seen:
            raise BuildError(f"{where}: duplicate grade_id {gid!r}")
        seen.add(canonical_grade_id(gid))
        kind = cell_kind(cell)
        if kind in ("test", "manual"):
            ex_id = exercise_id(gid)
            if ex_id is None or canonical_grade_id(gid) != f"ex{ex_id}":
                raise BuildError(f"{where}: graded cell grade_id {gid!r} must be 'exN.k'")
            table.append({"grade_id": canonical_grade_id(gid), "exercise": ex_id, "kind": kind,
                          "points": float(meta.get("points", 0)), "source": cell.source,
                          "cell_type": cell.cell_type})
    return table


def build_notebook(nb, name: str = "notebook"):
    """The exercise version of the solution notebook ``nb`` (a new object)."""
    from . import check
    nb = copy.deepcopy(nb)
    exercise_table(nb, name)                     # validates grade ids
    cells = []
    for i, cell in enumerate(nb.cells):
        where = f"{name}, cell {i}"
        tags = list(cell.metadata.get("tags", []))
        if "solutions-only" in tags:
            continue
        meta = nbgrader_meta(cell)
        kind = cell_kind(cell)
        ex_id = exercise_id(meta.get("grade_id"))
        clear = False
        if cell.cell_type == "markdown":
            cell.source = _BLOB_SOLUTIONS.sub(r"\1exercises/", cell.source)
        if kind in ("solution", "manual") or BEGIN_SOLUTION in cell.source:
            if kind == "":
                raise BuildError(f"{where}: solution markers in a cell without nbgrader "
                                 "solution metadata")
            source, found, top = strip_solution(cell.source, markdown=cell.cell_type ==
                                                "markdown", ex_id=ex_id, where=where)
            if not found and cell.cell_type == "code":
                raise BuildError(f"{where}: solution cell without {BEGIN_SOLUTION!r}")
            if not found:                        # a manual answer cell: the whole answer
                source = ANSWER_PLACEHOLDER
            cell.source = source
            clear = True
            if top:
                tags.append("raises-exception")
        if kind == "test":
            if cell.cell_type != "code":
                raise BuildError(f"{where}: autograded test cell must be a code cell")
            try:
                ex = check.get(ex_id)
            except KeyError:
                raise BuildError(f"{where}: no checker registered for exercise {ex_id!r} "
                                 "(lrnn.course.check.chNN)") from None
            points = float(meta.get("points", 0))
            if points != float(ex.points):
                raise BuildError(f"{where}: exercise {ex_id} has points={meta.get('points')} "
                                 f"in the notebook but points={ex.points} in its checker")
            if not re.search(rf"check\(\s*['\"]{re.escape(ex_id)}['\"]", cell.source):
                raise BuildError(f"{where}: test cell of exercise {ex_id} has no visible "
                                 f"check(\"{ex_id}\", ...) call")
            cell.source = strip_hidden(cell.source, where)
            clear = True
        elif BEGIN_HIDDEN in cell.source:
            raise BuildError(f"{where}: hidden tests outside an autograded test cell")
        if "exercise-raises" in tags:
            tags = [t for t in tags if t != "exercise-raises"]
            cell.source = wrap_demo(cell.source, where)
            clear = True
        if "exercise-clear-output" in tags:
            tags = [t for t in tags if t != "exercise-clear-output"]
            clear = True
        if "raises-exception" in tags:
            tags.append("remove-output")     # the website shows the stub, not its traceback
        tags = list(dict.fromkeys(tags))
        _set_tags(cell, tags)
        if clear:
            _clear(cell)
        cell.metadata.pop("execution", None)
        cells.append(cell)
    for cell in cells:                           # ids nbgrader validate accepts
        meta = cell.metadata.get("nbgrader")
        if meta and "grade_id" in meta:
            meta["grade_id"] = nbgrader_grade_id(meta["grade_id"])
    nb.cells = cells
    return nb


def render(nb) -> str:
    text = nbformat.writes(nb, version=4)
    return text if text.endswith("\n") else text + "\n"


#: The notebook metadata key that marks a notebook written by the build.
STAMP = "lrnn_exercise"
GENERATOR = "lrnn exercises build"


def _digest(nb) -> str:
    """SHA-256 of ``nb`` rendered with an empty ``sha256`` in its stamp."""
    nb = copy.deepcopy(nb)
    nb.metadata[STAMP]["sha256"] = ""
    return hashlib.sha256(render(nb).encode("utf-8")).hexdigest()


def stamp(nb, name: str) -> str:
    """``nb`` rendered with the stamp that lets a later build recognise it as unedited."""
    nb = copy.deepcopy(nb)
    nb.metadata[STAMP] = {"generated_by": GENERATOR, "solution": f"solutions/{name}",
                          "sha256": ""}
    nb.metadata[STAMP]["sha256"] = _digest(nb)
    return render(nb)


def restamp(nb, name: str) -> str:
    """``nb``, an exercise notebook that :func:`unedited_output` recognised and that a generator
    of the course then changed (``scripts/sync_headers.py`` rewrites the Colab badge and the
    setup cell of every notebook), rendered with a fresh stamp, so that the build still
    recognises it as its own (it regenerates the same text from the synced solution)."""
    return stamp(nb, name)


def unedited_output(path) -> tuple[bool, str]:
    """``(True, "")`` if ``path`` is a notebook this build wrote and nobody changed since;
    else ``(False, why)``."""
    try:
        nb = nbformat.reads(Path(path).read_text(encoding="utf-8"), as_version=4)
    except Exception as err:                       # any unreadable file is not ours to replace
        return False, f"not a readable notebook ({type(err).__name__})"
    mark = nb.metadata.get(STAMP)
    if not isinstance(mark, dict) or mark.get("generated_by") != GENERATOR \
            or not isinstance(mark.get("sha256"), str):
        return False, "not generated by `lrnn exercises build` (no lrnn_exercise stamp)"
    if _digest(nb) != mark["sha256"]:
        return False, "edited since the build wrote it (student work, outputs or new cells)"
    return True, ""


def generate(solutions: Path) -> dict[str, str]:
    """File name -> rendered exercise notebook, for every ``solutions/NN_*.ipynb``."""
    out = {}
    for path in sorted(Path(solutions).glob(NOTEBOOK_GLOB)):
        nb = nbformat.read(path, as_version=4)
        out[path.name] = stamp(build_notebook(nb, path.name), path.name)
    return out


def _diff_summary(name: str, old: str, new: str, max_lines: int = 30) -> str:
    diff = list(difflib.unified_diff(old.splitlines(), new.splitlines(),
                                     f"exercises/{name} (on disk)",
                                     f"exercises/{name} (generated)", lineterm="", n=1))
    more = len(diff) - max_lines
    text = "\n".join(diff[:max_lines])
    return text + (f"\n… {more} more diff lines" if more > 0 else "")


# Cell constructors for scripts that write solution notebooks (nbgrader schema 3 metadata).

def _nbgrader(grade_id, *, grade, solution, locked, points=None):
    meta = {"grade": grade, "solution": solution, "locked": locked, "grade_id": grade_id,
            "schema_version": 3}
    if points is not None:
        meta["points"] = points
    return {"nbgrader": meta}


def solution_cell(source: str, grade_id: str, *, tags=()):
    """The student's code cell (``grade_id`` like ``"ex3.2-solution"``)."""
    cell = nbformat.v4.new_code_cell(source, metadata=_nbgrader(grade_id, grade=False,
                                                                solution=True, locked=False))
    if tags:
        cell.metadata["tags"] = list(tags)
    return cell


def test_cell(source: str, grade_id: str, points, *, tags=()):
    """The autograded cell: visible ``check(...)`` then hidden tests (``grade_id`` "ex3.2")."""
    cell = nbformat.v4.new_code_cell(source, metadata=_nbgrader(grade_id, grade=True,
                                                                solution=False, locked=True,
                                                                points=points))
    if tags:
        cell.metadata["tags"] = list(tags)
    return cell


def manual_cell(answer_and_rubric: str, grade_id: str, points):
    """A hand-graded markdown answer cell; the source is wrapped in solution markers."""
    source = f"{BEGIN_SOLUTION}\n{answer_and_rubric.strip()}\n{END_SOLUTION}"
    return nbformat.v4.new_markdown_cell(source, metadata=_nbgrader(
        grade_id, grade=True, solution=True, locked=False, points=points))


def build(solutions="solutions", exercises="exercises", *, check: bool = False,
          force: bool = False, out=None) -> int:
    """Write (or with ``check=True`` compare) ``exercises/``; return the exit status.

    Every notebook to be replaced is checked first: one with edits, or one the build did not
    generate, stops the build (exit 2, nothing written) unless ``force``, which keeps a copy
    ``<name>.backup-<UTC time>`` of each before replacing it.

    Long because it checks every notebook it would replace before it writes any of them, so a
    refused build leaves nothing half written."""
    out = sys.stdout if out is None else out
    for name, value in (("check", check), ("force", force)):
        if not isinstance(value, bool):
            print(f"error: `{name}`: got {value!r}, expected True or False", file=out)
            return 2
    solutions, exercises = Path(solutions), Path(exercises)
    if not solutions.is_dir():
        print(f"error: no solutions folder at {solutions}", file=out)
        return 2
    if exercises.exists() and not exercises.is_dir():
        print(f"error: {exercises} is not a folder", file=out)
        return 2
    if not check:
        from .. import _io
        try:
            _io.check_folder(exercises, what="--exercises", create=True)
        except ValueError as err:
            print(f"error: {err}", file=out)
            return 2
    if exercises.resolve() == solutions.resolve():
        print(f"error: --exercises and --solutions are the same folder ({solutions}): the "
              "build would overwrite the solutions with the exercises", file=out)
        return 2
    try:
        wanted = generate(solutions)
    except BuildError as e:
        print(f"error: {e}", file=out)
        return 2
    if not wanted:
        print(f"error: no solution notebooks ({NOTEBOOK_GLOB}) in {solutions}: nothing to "
              "build, and nothing in the exercises folder is touched", file=out)
        return 2
    existing = {p.name for p in exercises.glob(NOTEBOOK_GLOB)} if exercises.is_dir() else set()
    stale = sorted(existing - set(wanted))
    if check:
        problems = []
        for name, text in wanted.items():
            path = exercises / name
            if not path.exists():
                problems.append(f"missing: exercises/{name}")
            elif path.read_text(encoding="utf-8") != text:
                problems.append(f"differs: exercises/{name}\n"
                                + _diff_summary(name, path.read_text(encoding="utf-8"), text))
        problems += [f"not generated from solutions/ (stale): exercises/{n}" for n in stale]
        if problems:
            print("exercises/ is out of date with solutions/ — run "
                  "`lrnn exercises build`:", file=out)
            for p in problems:
                print("  " + p.replace("\n", "\n    "), file=out)
            return 1
        print(f"exercises/ is up to date ({len(wanted)} notebooks).", file=out)
        return 0
    from .. import _io
    changed, refused = [], []
    for name, text in wanted.items():
        path = exercises / name
        if path.is_symlink() or (path.exists() and not path.is_file()):
            refused.append((name, "not a regular file"))
        elif not path.exists():
            changed.append(name)
        elif path.read_bytes() != text.encode("utf-8"):
            ours, why = unedited_output(path)
            changed.append(name)
            if not ours:
                refused.append((name, why))
    hard = [(n, why) for n, why in refused if why == "not a regular file"]
    if hard or (refused and not force):
        print(f"error: the build would replace {len(refused)} notebook(s) in {exercises} that "
              "it must not overwrite; nothing was written:", file=out)
        for name, why in refused:
            print(f"  {exercises / name}: {why}", file=out)
        if not hard:
            print("Save the work elsewhere, or pass --force to replace them (each is first "
                  "copied to <name>.backup-<time>).", file=out)
        return 2
    exercises.mkdir(parents=True, exist_ok=True)
    when = datetime.datetime.now(datetime.timezone.utc).strftime("%Y%m%dT%H%M%SZ")
    for name, _ in refused:
        backup, k = exercises / f"{name}.backup-{when}", 1
        while backup.exists():                    # never overwrite an earlier backup
            backup, k = exercises / f"{name}.backup-{when}-{k}", k + 1
        shutil.copy2(exercises / name, backup)
        print(f"kept a backup of exercises/{name} in {backup}", file=out)
    for name in changed:
        _io.atomic_write_text(exercises / name, wanted[name])
        print(f"wrote exercises/{name}", file=out)
    print(f"{len(wanted)} exercise notebooks up to date.", file=out)
    if stale:
        # Never delete: a notebook without a solution may be someone's work, or the
        # solution may be missing by mistake (a wrong --solutions folder).
        print(f"error: {len(stale)} notebook(s) in {exercises} have no solution in "
              f"{solutions}, and were left as they are:", file=out)
        for name in stale:
            print(f"  {exercises / name}", file=out)
        print("If a solution was renamed or removed on purpose, delete these by hand; if not, "
              "check --solutions.", file=out)
        return 1
    return 0


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(prog="lrnn exercises",
                                     description="Generate exercises/ from solutions/.")
    sub = parser.add_subparsers(dest="command", required=True)
    b = sub.add_parser("build", help="write exercises/ (or --check it)")
    b.add_argument("--check", action="store_true",
                   help="do not write; exit 1 with a diff summary if exercises/ is stale")
    b.add_argument("--solutions", default="solutions", help="source folder (default: solutions)")
    from .. import _io
    _io.output_argument(b, "--exercises", default="exercises", folder=True,
                        command="lrnn exercises build", help="output folder (default: exercises)")
    b.add_argument("--force", action="store_true",
                   help="also replace notebooks with edits or not generated by the build, "
                        "keeping a backup <name>.backup-<time> of each")
    args = parser.parse_args(argv)
    if args.check and args.force:
        parser.error("--check writes nothing: --force does not apply to it")
    return build(args.solutions, args.exercises, check=args.check, force=args.force)


if __name__ == "__main__":
    sys.exit(main())
