"""Structural requirements checked on the student's source, where the student cannot reach.

A hidden test's ``with forbid("numpy.linalg.eig", ...)`` is decided here, in the grader, on
the syntax trees of the submitted code cells: every import, name and attribute chain is
resolved through the notebook's aliases (``import numpy as np``, ``from lrnn.scan import
binary_operator as op``, ``s = lrnn.scan``) to an object of ``lrnn``, NumPy, SciPy or JAX,
and compared by identity with the forbidden ones (so ``lrnn.scan.associative.binary_operator``
is ``lrnn.scan.binary_operator``). A forbidden function also forbids the library functions
that do the same job (``numpy.roots(numpy.poly(A))`` for eigenvalues). Dynamic lookups that
no reading of the source can follow (``eval``, ``exec``, ``__import__``, ``importlib``,
``getattr`` with a computed name, ``sys.modules``, ``globals()`` ...) fail the check too.
The kernel's own answers never prove a structural requirement.
"""
from __future__ import annotations

import ast
import importlib

ROOTS = ("lrnn", "numpy", "scipy", "jax")

#: A forbidden name forbids these too: the same job done by another library function.
EQUIVALENTS = {
    "numpy.linalg.eigvals": ("numpy.linalg.eig", "numpy.linalg.eigh", "numpy.linalg.eigvalsh",
                             "numpy.roots", "numpy.poly", "scipy.linalg.eig",
                             "scipy.linalg.eigvals", "scipy.linalg.eigh",
                             "scipy.linalg.eigvalsh", "scipy.linalg.schur",
                             "jax.numpy.linalg.eig", "jax.numpy.linalg.eigvals",
                             "jax.numpy.linalg.eigh", "jax.numpy.linalg.eigvalsh",
                             "jax.numpy.roots", "jax.numpy.poly", "numpy.polynomial"),
    "lrnn.scan.linear_scan": ("jax.lax.associative_scan",),
}
EQUIVALENTS["numpy.linalg.eig"] = EQUIVALENTS["numpy.linalg.eigvals"]
DYNAMIC = {"eval", "exec", "compile", "__import__", "globals", "locals", "vars",
           "__builtins__", "__dict__", "__getattribute__", "importlib", "modules",
           "ctypes", "setattr", "delattr", "__loader__", "__spec__", "builtins", "user_ns",
           "run_code", "run_cell", "ex", "ev", "push", "safe_execfile", "runpy", "pickle",
           "marshal", "types", "inspect"}
#: Magics that run no Python of the notebook's choosing (``%matplotlib inline``, ``%time``:
#: the timed statement is Python in the same cell and is read like the rest).
SAFE_MAGICS = {"matplotlib", "config", "precision", "pprint", "who", "whos", "xmode", "pwd",
               "ls", "env", "time", "timeit", "capture"}


def _dotted(node, aliases) -> str | None:
    """The dotted name an expression stands for (``np.linalg.eig`` -> numpy.linalg.eig)."""
    parts = []
    while True:
        if isinstance(node, ast.Attribute):
            parts.append(node.attr)
            node = node.value
        elif isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and \
                node.func.id == "getattr" and len(node.args) >= 2 and \
                isinstance(node.args[1], ast.Constant) and isinstance(node.args[1].value, str):
            parts.append(node.args[1].value)
            node = node.args[0]
        elif isinstance(node, ast.Name):
            base = aliases.get(node.id)
            if base is None:
                return None
            return ".".join([base] + parts[::-1])
        else:
            return None


def _installed(root: str) -> bool:
    """A module the grader finds outside the notebook's folder (stdlib or installed)."""
    import importlib.util
    import sys
    if root in sys.builtin_module_names:
        return True
    try:
        return importlib.util.find_spec(root) is not None
    except (ImportError, ValueError):
        return False


def _resolve(dotted: str):
    """The object a dotted name of lrnn/NumPy/SciPy/JAX names, or None."""
    if not dotted or dotted.split(".")[0] not in ROOTS:
        return None
    parts = dotted.split(".")
    obj, i = None, len(parts)
    while i > 0:
        try:
            obj = importlib.import_module(".".join(parts[:i]))
            break
        except Exception:  # noqa: BLE001 - not a module: go up one level
            i -= 1
    if obj is None:
        return None
    for attr in parts[i:]:
        try:
            obj = getattr(obj, attr)
        except Exception:  # noqa: BLE001
            return None
    return obj


class Structure:
    """What a notebook's code cells refer to: [(cell, dotted name)] and dynamic lookups."""

    def __init__(self, cells, trusted=()):
        """``cells``: [(index, source)] in order; the sources in ``trusted`` (the course's
        own cells, unchanged) give aliases but are not checked."""
        from .solutions import _python_ast
        self.references: list[tuple[int, str]] = []
        self.dynamic: list[tuple[int, str]] = []
        self.unparsed: list[int] = []
        aliases: dict[str, str] = {}
        for index, source in cells:
            tree = _python_ast(source)
            if tree is None:
                self.unparsed.append(index)
                continue
            if source.strip() in trusted:
                refs, dyn = self.references, self.dynamic
                self.references, self.dynamic = [], []
                self._scan(index, tree, aliases)
                self.references, self.dynamic = refs, dyn
            else:
                self._scan(index, tree, aliases)

    def _scan(self, index, tree, aliases):
        for node in ast.walk(tree):                  # imports and aliases first
            if isinstance(node, ast.Import):
                for a in node.names:
                    if a.asname:
                        aliases[a.asname] = a.name
                    else:
                        aliases[a.name.split(".")[0]] = a.name.split(".")[0]
                    self.references.append((index, a.name))
            elif isinstance(node, ast.ImportFrom) and node.module and not node.level:
                for a in node.names:
                    full = f"{node.module}.{a.name}"
                    if a.name == "*":
                        self.dynamic.append((index, f"from {node.module} import *"))
                        continue
                    aliases[a.asname or a.name] = full
                    self.references.append((index, full))
            elif isinstance(node, (ast.Assign, ast.AnnAssign, ast.NamedExpr)):
                value = node.value
                targets = node.targets if isinstance(node, ast.Assign) else [node.target]
                name = _dotted(value, aliases) if value is not None else None
                if name:
                    for t in targets:
                        if isinstance(t, ast.Name):
                            aliases[t.id] = name
        for node in ast.walk(tree):
            if isinstance(node, (ast.Attribute, ast.Name)) or (
                    isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and
                    node.func.id == "getattr"):
                name = _dotted(node, aliases)
                if name:
                    self.references.append((index, name))
            if isinstance(node, ast.Name) and node.id in DYNAMIC:
                self.dynamic.append((index, node.id))
            elif isinstance(node, ast.Attribute) and node.attr in DYNAMIC:
                self.dynamic.append((index, node.attr))
            elif isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and \
                    node.func.id == "getattr" and not (
                        len(node.args) >= 2 and isinstance(node.args[1], ast.Constant)):
                self.dynamic.append((index, "getattr with a computed name"))
            elif isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and \
                    node.func.attr in ("run_line_magic", "run_cell_magic"):
                magic = node.args[0].value if node.args and \
                    isinstance(node.args[0], ast.Constant) else None
                if magic not in SAFE_MAGICS:
                    self.dynamic.append((index, f"the magic %{magic}"))
            elif isinstance(node, (ast.Import, ast.ImportFrom)):
                mod = node.module if isinstance(node, ast.ImportFrom) else None
                if isinstance(node, ast.ImportFrom) and node.level:
                    self.dynamic.append((index, "a relative import"))
                    continue
                for a in node.names:
                    full = a.name if mod is None else mod
                    root = full.split(".")[0]
                    if root in DYNAMIC:
                        self.dynamic.append((index, full))
                    elif not _installed(root):
                        self.dynamic.append((index, f"import {root} (a module the grader "
                                                    "cannot read)"))

    def violation(self, targets) -> str | None:
        """Why the notebook breaks ``forbid(*targets)``, or None."""
        wanted = []
        for t in targets:
            wanted.append(t)
            wanted += EQUIVALENTS.get(_canonical(t), ())
        objects = []
        for t in wanted:
            obj = _resolve(t)
            objects.append((t, obj))
        for index, name in self.references:
            obj = _resolve(name)
            for t, target_obj in objects:
                hit = name == t or name.startswith(t + ".") or \
                    (obj is not None and target_obj is not None and obj is target_obj)
                if hit:
                    return (f"this exercise must not use {t} (cell {index} uses {name}): "
                            "write it yourself.")
        if self.dynamic:
            index, what = self.dynamic[0]
            return (f"cell {index} uses {what}: the grader checks on the source that this "
                    f"exercise does not call {', '.join(targets)}, and cannot follow dynamic "
                    "lookups; write the exercise without them.")
        if self.unparsed:
            return (f"cell {self.unparsed[0]} is not valid Python: the grader cannot check "
                    f"that this exercise does not call {', '.join(targets)}.")
        return None


def _canonical(target: str) -> str:
    obj = _resolve(target)
    if obj is None:
        return target
    for key in EQUIVALENTS:
        if _resolve(key) is obj:
            return key
    return target
