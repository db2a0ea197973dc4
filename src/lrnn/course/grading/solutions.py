"""The solution notebooks: their exercises, official tests, and the imports those tests use."""
from __future__ import annotations

import ast
import builtins
import threading
from pathlib import Path

import nbformat

from ..exercises import (NOTEBOOK_GLOB, BuildError, cell_kind, exercise_id, exercise_table,
                         nbgrader_meta, wrap_demo)
from .config import CHECK_CALL, GradeError

def default_solutions_dir() -> Path:
    here = Path("solutions")
    if here.is_dir():
        return here
    return Path(__file__).resolve().parents[4] / "solutions"   # src/lrnn/course/grading/solutions.py


# CPython 3.11 keeps the AST builder's recursion depth in interpreter-wide state, so two
# threads parsing at once (grading workers, the preload thread) can get a spurious
# "SystemError: AST constructor recursion depth mismatch" (python/cpython#106905).
_PARSE_LOCK = threading.Lock()
_PARSE_TRIES = 3


def _locked_parse(parse, *args):
    """``parse(*args)`` under the parser lock, retrying CPython 3.11's spurious "recursion depth
    mismatch": a thread outside this lock (a library parsing on import) can still race us."""
    for attempt in range(_PARSE_TRIES):
        try:
            with _PARSE_LOCK:
                return parse(*args)
        except SystemError as e:
            if "recursion depth mismatch" not in str(e) or attempt == _PARSE_TRIES - 1:
                raise


def _python_ast(source: str):
    """The cell as a Python syntax tree (IPython magics translated), or None where it is not
    Python the grader can read: a syntax error, or nesting so deep that building the tree runs
    out of stack or memory (the kernel cannot compile it either)."""
    try:
        from IPython.core.inputtransformer2 import TransformerManager
        source = TransformerManager().transform_cell(source)
    except Exception:  # noqa: BLE001 - no IPython: plain Python only
        pass
    try:
        return _locked_parse(ast.parse, source)
    except (SyntaxError, ValueError, RecursionError, MemoryError):
        return None


def _bound_at_top(tree) -> set[str]:
    """Names a cell binds at module level (def, class, assignment, import, for, with)."""
    names = set()

    def targets(node):
        for sub in ast.walk(node):
            if isinstance(sub, ast.Name):
                names.add(sub.id)

    for node in tree.body:
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            names.add(node.name)
        elif isinstance(node, (ast.Import, ast.ImportFrom)):
            for alias in node.names:
                names.add((alias.asname or alias.name).split(".")[0])
        elif isinstance(node, ast.Assign):
            for t in node.targets:
                targets(t)
        elif isinstance(node, (ast.AnnAssign, ast.AugAssign)):
            targets(node.target)
        elif isinstance(node, (ast.For, ast.AsyncFor)):
            targets(node.target)
        elif isinstance(node, (ast.With, ast.AsyncWith)):
            for item in node.items:
                if item.optional_vars is not None:
                    targets(item.optional_vars)
    return names


def free_names(tree) -> list[str]:
    """Names the code reads but never binds, in order of first use."""
    bound, loaded = set(), []
    for node in ast.walk(tree):
        if isinstance(node, ast.Name):
            if isinstance(node.ctx, ast.Load):
                if node.id not in loaded:
                    loaded.append(node.id)
            else:
                bound.add(node.id)
        elif isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            bound.add(node.name)
        elif isinstance(node, (ast.Import, ast.ImportFrom)):
            for alias in node.names:
                bound.add((alias.asname or alias.name).split(".")[0])
        elif isinstance(node, ast.arg):
            bound.add(node.arg)
        elif isinstance(node, ast.ExceptHandler) and node.name:
            bound.add(node.name)
    return [n for n in loaded if n not in bound]


#: The tag of a course demo cell the grader does not run (see ``skippable_cells``).
GRADER_SKIP = "grader-skip"
_SCOPES = (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef, ast.Lambda, ast.ListComp,
           ast.SetComp, ast.DictComp, ast.GeneratorExp)
_MUTATORS = {"update", "append", "extend", "insert", "pop", "clear", "setdefault", "remove",
             "add", "discard", "sort", "reverse", "fill", "put", "resize", "itemset",
             "setflags", "seed", "set_state"}


def _module_scope(tree):
    """The nodes of a cell that run in the notebook's namespace (not inside a def, class,
    lambda or comprehension)."""
    stack = list(tree.body)
    while stack:
        node = stack.pop()
        yield node
        if not isinstance(node, _SCOPES):
            stack.extend(ast.iter_child_nodes(node))


def _skip_problems(tree, bound_before: set) -> tuple[set, list]:
    """(the names the cell binds in the notebook's namespace, what breaks the rule): a skipped
    cell may change only names of its own, never an object it did not create."""
    bound, problems = set(), []
    for node in _module_scope(tree):
        if isinstance(node, ast.Name) and not isinstance(node.ctx, ast.Load):
            bound.add(node.id)
        elif isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            bound.add(node.name)
        elif isinstance(node, (ast.Import, ast.ImportFrom)):
            bound |= {(a.asname or a.name).split(".")[0] for a in node.names}
        elif isinstance(node, (ast.Global, ast.Nonlocal)):
            problems.append("declares global names")
    for node in _module_scope(tree):
        targets = node.targets if isinstance(node, ast.Assign) else \
            [node.target] if isinstance(node, (ast.AugAssign, ast.AnnAssign)) else \
            node.targets if isinstance(node, ast.Delete) else []
        calls = [node.func] if isinstance(node, ast.Call) and \
            isinstance(node.func, ast.Attribute) and node.func.attr in _MUTATORS else []
        for target in [t for t in targets if isinstance(t, (ast.Attribute, ast.Subscript))] + calls:
            base = target
            while isinstance(base, (ast.Attribute, ast.Subscript, ast.Call)):
                base = base.func if isinstance(base, ast.Call) else base.value
            name = base.id if isinstance(base, ast.Name) else "?"
            if name not in bound or name in bound_before:
                problems.append(f"changes {ast.unparse(target)}, an object it did not create")
    return bound, problems


def _delivered(source: str, tags, where: str) -> str:
    """The cell's text in the exercise notebook: a demo that calls the exercises is wrapped
    (the build parses it)."""
    return _locked_parse(wrap_demo, source, where) if "exercise-raises" in tags else source


def skippable_cells(nb, name: str = "notebook") -> dict[str, frozenset]:
    """{text, as the student receives it: the names it binds} of the course cells tagged
    ``grader-skip``:
    demos (a long training run, a timing) that the grader does not run, which is safe only if
    no grade depends on them. The rule, checked here for every such cell (a violation is a
    ``BuildError``, so that neither the build nor the grader accepts the notebook): it is an
    ordinary code cell; every name it binds is its own (no cell the grader runs after it, nor
    an official test, reads one); and it changes no object it did not create (no assignment
    to an attribute or item of one, no mutating method call on one, no ``global``). A cell
    that breaks the rule cannot be skipped: it has to run."""
    texts, skipped, bound_before = {}, [], set()
    for i, cell in enumerate(nb.cells):
        where = f"{name}, cell {i}"
        tags = cell.get("metadata", {}).get("tags", [])
        tree = _python_ast(cell.source) if cell.cell_type == "code" else None
        if GRADER_SKIP in tags:
            if cell.cell_type != "code" or cell_kind(cell) != "":
                raise BuildError(f"{where}: only an ordinary code cell can be {GRADER_SKIP}")
            if tree is None:
                raise BuildError(f"{where}: a {GRADER_SKIP} cell must be Python the grader "
                                 "can read")
            bound, problems = _skip_problems(tree, bound_before)
            if problems:
                raise BuildError(f"{where}: a {GRADER_SKIP} cell {problems[0]}")
            skipped.append((i, bound))
            texts[_delivered(cell.source, tags, where).strip()] = frozenset(bound)
            continue
        if tree is None:
            continue
        if skipped:
            read = set(free_names(tree))
            for j, bound in skipped:
                if bound & read:
                    raise BuildError(f"{name}, cell {j}: a {GRADER_SKIP} cell binds "
                                     f"{sorted(bound & read)}, which cell {i} reads")
        bound_before |= _bound_at_top(tree)
    return texts


def load_solutions(folder) -> dict[str, dict]:
    """Stem -> {"path", "title", "table", "imports", "student_names", "tests"} for every
    solution notebook. ``imports``: the top-level import statements of its ordinary code
    cells (they give the official tests ``np``, ``lrnn``, ``lru`` ...); ``student_names``:
    what its solution cells define (always taken from the student's kernel)."""
    out = {}
    for path in sorted(Path(folder).glob(NOTEBOOK_GLOB)):
        nb = nbformat.read(path, as_version=4)
        title = path.stem
        if nb.cells and nb.cells[0].cell_type == "markdown":
            first = nb.cells[0].source.strip().splitlines()[0] if nb.cells[0].source.strip() else ""
            title = first.lstrip("# ").strip() or title
        imports, student, course = [], set(), set()
        for cell in nb.cells:
            if cell.cell_type != "code":
                continue
            kind = cell_kind(cell)
            if kind == "":
                course.add(cell.source.strip())
            tree = _python_ast(cell.source)
            if tree is None:
                continue
            if kind == "solution":
                student |= _bound_at_top(tree)
            elif kind == "":
                imports += [n for n in tree.body if isinstance(n, (ast.Import, ast.ImportFrom))]
        table = exercise_table(nb, path.name)
        tests = {}
        for row in table:
            if row["kind"] == "test":
                tree = _python_ast(row["source"])
                if tree is None:
                    raise GradeError(f"{path}: the test cell {row['grade_id']} is not valid "
                                     "Python")
                forbidden, counts = structural_names(row["source"])
                tests[row["grade_id"]] = {
                    "code": compile(tree, f"<official tests of exercise {row['exercise']}>",
                                    "exec"),
                    "free": free_names(tree), "forbid": forbidden, "counts": counts}
        needed = {n for t in tests.values() for n in t["free"]}
        data_files = (nb.metadata.get("lrnn") or {}).get("data_files", [])
        try:
            skip = skippable_cells(nb, path.name)
        except BuildError as e:
            raise GradeError(str(e)) from None
        out[path.stem] = {"path": str(path), "title": title, "table": table,
                          "skip_cells": skip,
                          "data_files": [str(f) for f in data_files], "course_cells": course,
                          "imports": _imports_of(imports, needed),
                          "student_names": student, "tests": tests, "namespace": None}
    return out


def _imports_of(statements, needed: set):
    """Only the imports that bind a name the tests use (matplotlib, scipy.stats ... are
    left out: importing them would cost seconds for nothing)."""
    body = []
    for node in statements:
        if isinstance(node, ast.Import):
            keep = [a for a in node.names if (a.asname or a.name.split(".")[0]) in needed]
            if keep:
                body.append(ast.Import(names=keep))
        elif isinstance(node, ast.ImportFrom):
            keep = [a for a in node.names if (a.asname or a.name) in needed or a.name == "*"]
            if keep:
                body.append(ast.ImportFrom(module=node.module, names=keep, level=node.level))
    return ast.fix_missing_locations(ast.Module(body=body, type_ignores=[]))


_SETUP_LOCK = threading.Lock()


def setup_namespace(sol) -> dict:
    """The grader's own modules for the official tests (built once per assignment)."""
    with _SETUP_LOCK:
        if sol["namespace"] is None:
            ns = {"__builtins__": builtins, "__name__": "__lrnn_official_tests__"}
            exec(compile(sol["imports"], f"<imports of {sol['path']}>", "exec"), ns)
            sol["namespace"] = ns
        return sol["namespace"]


def notebook_exercises(nb) -> set[str]:
    """The exercise ids a notebook's cells name (grade ids and ``check("N.M", ...)`` calls)."""
    ids = set()
    if nb is not None:
        for cell in nb.cells:
            ex = exercise_id(nbgrader_meta(cell).get("grade_id"))
            if ex:
                ids.add(ex)
            if cell.get("cell_type") == "code":
                ids.update(CHECK_CALL.findall(cell.get("source", "")))
    return ids


def assignment_of_name(name: str, solutions: dict) -> str | None:
    """The chapter a file name names (the longest solution stem in it), or None."""
    for stem in sorted(solutions, key=len, reverse=True):
        if stem in name:
            return stem
    return None


def match_assignment(nb, name: str, solutions: dict) -> str | None:
    """The stem of the solution notebook whose exercises the cells name most (ties: the
    first), else the one the file name names."""
    ids = notebook_exercises(nb)
    best, best_n = None, 0
    for stem, sol in solutions.items():
        n = len(ids & {row["exercise"] for row in sol["table"]})
        if n > best_n:
            best, best_n = stem, n
    return best or assignment_of_name(name, solutions)


def structural_names(code: str) -> tuple[list[str], bool]:
    """(every string given to ``forbid(...)``, whether ``count_calls`` is used) in the code
    of an official test."""
    tree = _python_ast(code)
    targets, counts = [], False
    if tree is None:
        return targets, counts
    for node in ast.walk(tree):
        if not isinstance(node, ast.Call):
            continue
        func = node.func
        name = func.id if isinstance(func, ast.Name) else \
            func.attr if isinstance(func, ast.Attribute) else ""
        if name.lstrip("_") == "forbid":
            targets += [a.value for a in node.args
                        if isinstance(a, ast.Constant) and isinstance(a.value, str)]
        elif name.lstrip("_") == "count_calls":
            counts = True
    return targets, counts
