"""Old module names that saved code, notebooks and ``python -m`` commands still use: the one
alias mechanism of the package, and every use of an old name says so.

``import lrnn.lru`` gives the very module object ``lrnn.layers.lru`` (one copy, so a patch
through either name is seen through both) with a ``DeprecationWarning``, ``lrnn.lru`` does the
same through ``lrnn.__getattr__``, ``lrnn.check.ch02`` is ``lrnn.course.check.ch02``, and
``python -m lrnn.train`` runs ``lrnn train`` after a one-line notice on stderr.
``lrnn.rotlstm``, the old home of both gated cells, is a module of its own made of names of
``lrnn.layers.lstm`` and ``lrnn.layers.gru`` (``OLD_ATTRIBUTES``). Renamed keywords warn through
:func:`warn_keyword` (``lrnn._validate.renamed_keywords``, ``TrainConfig``).

Every old name goes in lrnn :data:`REMOVED_IN`, and says so; a test fails once the package's
version reaches it, so that they are removed then. The finder sits after Python's own finders
and answers only ``lrnn.`` names: an import that Python's finders satisfy never reaches it.
The folder of a package with an old name gets a shield (``_OldNameShield``) so that its
submodules, imported under the old name, are the same module objects too.
"""
from __future__ import annotations

import importlib
import importlib.abc
import importlib.machinery
import importlib.util
import os
import sys
import types
import warnings

#: The version of lrnn without the old names.
REMOVED_IN = "0.2"

OLD_NAMES = {
    "lrnn.lru": "lrnn.layers.lru",
    "lrnn.rotrnn": "lrnn.layers.rotrnn",
    "lrnn.ornn": "lrnn.layers.ornn",
    "lrnn.lstm": "lrnn.layers.lstm",
    "lrnn.gru": "lrnn.layers.gru",
    "lrnn.scan_pallas": "lrnn.scan.pallas",
    "lrnn.data": "lrnn.training.data",
    "lrnn.train": "lrnn.training.train",
    "lrnn.experiments": "lrnn.training.experiments",
    "lrnn.bench": "lrnn.benchmarks.scan",
    "lrnn.setup": "lrnn.course.setup",
    "lrnn.widgets": "lrnn.course.widgets",
    "lrnn.check": "lrnn.course.check",
    "lrnn.exercises": "lrnn.course.exercises",
    "lrnn.grade": "lrnn.course.grading",
    "lrnn.doctor": "lrnn.course.doctor",
}

#: Old names below the top level (no attribute of ``lrnn``): old -> new module. ``python -m``
#: of one runs the ``lrnn`` command of ``_COMMANDS``.
OLD_SUBMODULES = {
    "lrnn.course.grade": "lrnn.course.grading",
    "lrnn.training.bench": "lrnn.benchmarks.scan",
    "lrnn.training.bench_gpu": "lrnn.benchmarks.gpu",
    "lrnn.training.bench_layer": "lrnn.benchmarks.layer",
    "lrnn.training.bench_peers": "lrnn.benchmarks.peers",
    "lrnn.training.bench_plans": "lrnn.benchmarks.plans",
    "lrnn.training.bench_step": "lrnn.benchmarks.step",
    "lrnn.training._bench_common": "lrnn.benchmarks._common",
}

#: Old modules that are no single new module: old attribute -> (new module, its name there).
OLD_ATTRIBUTES = {
    "lrnn.rotlstm": {
        "init": ("lrnn.layers.lstm", "init"),
        "cell": ("lrnn.layers.lstm", "cell"),
        "apply": ("lrnn.layers.lstm", "apply"),
        "LSTM_GATES": ("lrnn.layers.lstm", "LSTM_GATES"),
        "angles": ("lrnn.layers.lstm", "angles"),
        "gru_init": ("lrnn.layers.gru", "init"),
        "gru_cell": ("lrnn.layers.gru", "cell"),
        "gru_apply": ("lrnn.layers.gru", "apply"),
        "GRU_GATES": ("lrnn.layers.gru", "GRU_GATES"),
    },
}

#: Names renamed inside a module that kept its own name: module -> {old name: new name}. The
#: module's ``__getattr__`` calls :func:`renamed`. (``check.run`` sat beside the ``grading.run``
#: module, and ``check.grading()`` beside the ``grading`` package.)
RENAMED_IN = {
    "lrnn.course.check": {"run": "result_of", "grading": "under_autograder"},
}

#: ``python -m OLD`` -> the subcommand of ``lrnn`` that replaces it.
OLD_COMMANDS = {"lrnn.train": "train", "lrnn.experiments": "experiments", "lrnn.bench": "bench",
                "lrnn.grade": "grade", "lrnn.doctor": "doctor", "lrnn.exercises": "exercises"}
_COMMANDS = {**OLD_COMMANDS, "lrnn.course.grade": "grade"}


def new_name(fullname: str) -> str | None:
    """The current name of ``fullname`` (a submodule of an old package included), or None.
    ``lrnn.rotlstm`` answers ``lrnn.layers.lstm``, where most of it went."""
    if fullname in OLD_ATTRIBUTES:
        return next(iter(OLD_ATTRIBUTES[fullname].values()))[0]
    module, _, name = fullname.rpartition(".")
    if name in RENAMED_IN.get(module, {}):
        return f"{module}.{RENAMED_IN[module][name]}"
    for old, new in (*OLD_NAMES.items(), *OLD_SUBMODULES.items()):
        if fullname == old or fullname.startswith(old + "."):
            return new + fullname[len(old):]
    return None


def is_old_name(fullname: str) -> bool:
    return fullname in OLD_ATTRIBUTES or new_name(fullname) is not None


_IMPORTLIB = os.path.dirname(importlib.__file__)


def _caller_stacklevel() -> int:
    """The stacklevel of the first frame outside the import machinery, this module and the
    ``lrnn`` package's ``__getattr__``: the warning points at the line that used the old name.
    ``warnings.warn`` does not count the import system's frames, so neither does this."""
    frame, level = sys._getframe(1), 1
    while frame is not None:
        name = frame.f_code.co_filename
        internal = "importlib" in name and "_bootstrap" in name
        module_getattr = frame.f_code.co_name == "__getattr__" and str(
            frame.f_globals.get("__name__", "")).startswith("lrnn")
        if not (internal or name == __file__ or name.startswith(_IMPORTLIB) or module_getattr
                or frame.f_globals.get("__name__") == "lrnn"):
            return level
        frame, level = frame.f_back, level + (not internal)
    return 1


GOES = f"(the old name goes in lrnn {REMOVED_IN})"


def notice(old: str) -> str:
    """The one line said when ``old`` is used."""
    if old in OLD_ATTRIBUTES:
        homes = sorted({module for module, _ in OLD_ATTRIBUTES[old].values()})
        return f"{old} is deprecated: use {' and '.join(homes)} {GOES}"
    return f"{old} is deprecated: use {new_name(old)} {GOES}"


def warn(old: str) -> None:
    warnings.warn(notice(old), DeprecationWarning, stacklevel=_caller_stacklevel())


def renamed(module: str, name: str):
    """For ``module``'s ``__getattr__``: the object an old ``name`` now has, with a warning, or
    the AttributeError that any other missing name gets."""
    new = RENAMED_IN.get(module, {}).get(name)
    if new is None:
        raise AttributeError(f"module {module!r} has no attribute {name!r}")
    warn(f"{module}.{name}")
    return getattr(sys.modules[module], new)


def warn_keyword(where: str, old: str, new: str, *, stacklevel: int = 2) -> None:
    """``where(old=...)`` was called: the keyword is ``new`` now. ``stacklevel`` counts from
    the caller of this function, as ``warnings.warn``'s does."""
    warnings.warn(f"{where}({old}=...) is deprecated: use {new}=... {GOES}", DeprecationWarning,
                  stacklevel=stacklevel + 1)


def _composite(fullname: str) -> types.ModuleType:
    module = types.ModuleType(fullname, f"Deprecated: {notice(fullname)}.")
    for attr, (home, name) in OLD_ATTRIBUTES[fullname].items():
        setattr(module, attr, getattr(importlib.import_module(home), name))
    module.__all__ = list(OLD_ATTRIBUTES[fullname])
    return module


class _AliasLoader(importlib.abc.Loader):
    def __init__(self, old: str, target: str):
        self.old, self.target = old, target
        self._spec = None

    def create_module(self, spec):
        if self.old in OLD_NAMES or self.old in OLD_SUBMODULES or self.old in OLD_ATTRIBUTES:
            warn(self.old)
        if self.old in OLD_ATTRIBUTES:
            return _composite(self.old)
        module = importlib.import_module(self.target)
        self._spec = module.__spec__
        _shield(getattr(module, "__path__", ()))
        return module

    def exec_module(self, module):
        if self._spec is not None:
            module.__spec__ = self._spec  # the import machinery set the alias's spec; undo it

    def get_code(self, fullname):
        """For ``python -m OLD.NAME``: one line on stderr, then the command it became
        (``lrnn.cli``, so that ``lrnn.cli.COMMANDS`` alone says which module runs it), or for
        an old name that was no command, the module under its current name as ``__main__``."""
        command = _COMMANDS.get(fullname)
        now = f"lrnn {command}" if command else f"python -m {self.target}"
        line = f"python -m {fullname} is deprecated: use `{now}` {GOES}"
        # runpy set sys.argv[0] to the alias's origin, None: a path, as `python -m` gives
        run = ("import lrnn.cli\nsys.argv[0] = lrnn.cli.__file__\n"
               f"sys.exit(lrnn.cli.main([{command!r}, *sys.argv[1:]]))\n"
               if command else
               f"runpy.run_module({self.target!r}, run_name='__main__', alter_sys=True)\n")
        source = f"import runpy, sys\nprint({line!r}, file=sys.stderr)\n" + run
        return compile(source, f"<{fullname}: now {now}>", "exec")


class _AliasFinder(importlib.abc.MetaPathFinder):
    def find_spec(self, fullname, path=None, target=None):
        if not fullname.startswith("lrnn.") or not is_old_name(fullname):
            return None
        new = new_name(fullname)
        if fullname in OLD_ATTRIBUTES or fullname in _COMMANDS:
            is_package = False   # `python -m` runs a command's get_code, not a package's __main__
        else:
            is_package = importlib.util.find_spec(new).submodule_search_locations is not None
        return importlib.machinery.ModuleSpec(fullname, _AliasLoader(fullname, new),
                                              is_package=is_package)


class _OldNameShield:
    """Python's own finder of the folder of a package that has an old name, but for names under
    the old one: ``lrnn.check.ch02`` would otherwise be found there, before the alias finder,
    and loaded a second time. Left to the alias finder, it is ``lrnn.course.check.ch02``."""

    def __init__(self, finder):
        self._finder = finder

    def find_spec(self, fullname, target=None):
        if is_old_name(fullname):
            return None
        return self._finder.find_spec(fullname, target)

    def invalidate_caches(self):
        self._finder.invalidate_caches()


def _iter_shielded_modules(importer, prefix=""):
    import pkgutil
    return pkgutil.iter_importer_modules(importer._finder, prefix)


def _shield(paths) -> None:
    import pkgutil                    # pkgutil.iter_modules lists the folder as before
    pkgutil.iter_importer_modules.register(_OldNameShield, _iter_shielded_modules)
    for entry in list(paths):
        finder = sys.path_importer_cache.get(entry)
        if isinstance(finder, _OldNameShield):
            continue
        for hook in ([] if finder is not None else sys.path_hooks):
            try:
                finder = hook(entry)
                break
            except ImportError:
                continue
        if finder is not None:
            sys.path_importer_cache[entry] = _OldNameShield(finder)


def old_attribute(package: str, name: str):
    """``lrnn.lru`` and the like, for the package's ``__getattr__``: the old module, imported
    through the finder (so with its warning), or None if ``package.name`` is no old name."""
    fullname = f"{package}.{name}"
    if not is_old_name(fullname):
        return None
    return importlib.import_module(fullname)


def install() -> None:
    """Append the finder: Python's own finders answer every existing module first."""
    if not any(isinstance(f, _AliasFinder) for f in sys.meta_path):
        sys.meta_path.append(_AliasFinder())
