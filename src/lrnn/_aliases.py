"""Old module names that saved code, notebooks and ``python -m`` commands still use.

``import lrnn.lru`` gives the very module object ``lrnn.layers.lru`` (one copy, so a patch
through either name is seen through both), ``lrnn.check.ch02`` is ``lrnn.course.check.ch02``,
and ``python -m lrnn.train`` runs ``lrnn.training.train``.
"""
from __future__ import annotations

import importlib
import importlib.abc
import importlib.machinery
import importlib.util
import sys

OLD_NAMES = {
    "lrnn.lru": "lrnn.layers.lru",
    "lrnn.rotrnn": "lrnn.layers.rotrnn",
    "lrnn.ornn": "lrnn.layers.ornn",
    "lrnn.scan_pallas": "lrnn.scan.pallas",
    "lrnn.data": "lrnn.training.data",
    "lrnn.train": "lrnn.training.train",
    "lrnn.experiments": "lrnn.training.experiments",
    "lrnn.bench": "lrnn.training.bench",
    "lrnn.setup": "lrnn.course.setup",
    "lrnn.widgets": "lrnn.course.widgets",
    "lrnn.check": "lrnn.course.check",
    "lrnn.exercises": "lrnn.course.exercises",
    "lrnn.grade": "lrnn.course.grading",
    "lrnn.doctor": "lrnn.course.doctor",
}


def new_name(fullname: str) -> str | None:
    """The current name of ``fullname`` (a submodule of an old package included), or None."""
    for old, new in OLD_NAMES.items():
        if fullname == old or fullname.startswith(old + "."):
            return new + fullname[len(old):]
    return None


class _AliasLoader(importlib.abc.Loader):
    def __init__(self, target: str):
        self.target = target
        self._spec = None

    def create_module(self, spec):
        module = importlib.import_module(self.target)
        self._spec = module.__spec__
        return module

    def exec_module(self, module):
        module.__spec__ = self._spec      # the import machinery set the alias's spec; undo it

    def get_code(self, fullname):
        """For ``python -m OLD.NAME``: run the module under its current name as ``__main__``."""
        source = (f"import runpy\nrunpy.run_module({self.target!r}, run_name='__main__', "
                  "alter_sys=True)\n")
        return compile(source, f"<{fullname}: now {self.target}>", "exec")


class _AliasFinder(importlib.abc.MetaPathFinder):
    def find_spec(self, fullname, path=None, target=None):
        new = new_name(fullname)
        if new is None:
            return None
        is_package = importlib.util.find_spec(new).submodule_search_locations is not None
        return importlib.machinery.ModuleSpec(fullname, _AliasLoader(new), is_package=is_package)


def install() -> None:
    if not any(isinstance(f, _AliasFinder) for f in sys.meta_path):
        sys.meta_path.insert(0, _AliasFinder())
