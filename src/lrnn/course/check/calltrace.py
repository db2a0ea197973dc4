"""What ran: the calls of given functions, recorded while an answer is tested.

A hidden test's ``forbid("numpy.linalg.eigvals")`` and ``count_calls("binary_operator")`` are
decided by what the answer's function runs while the test calls it, not by the text of the
notebook: :class:`CallTrace` installs a profile function (``sys.setprofile``, and for threads
started meanwhile ``threading.setprofile``) that matches every Python call by its **code
object** and every call of a C function by identity. So an alias, a default argument, a
rebinding through a list or a loop variable, or a call from a helper cell is seen as the call
it is; a scratch cell that calls the library outside the test is never seen. JAX's compiled
functions are made to run their Python: a ban clears JAX's caches first, so that whatever the
answer compiles is traced again (its Python runs once per shape, which is all a ban needs);
a count disables ``jit`` for the call, so that every call runs its Python and is counted.

What a profile function cannot decide (the answer removed it, called tracing or frame
functions, or ran work on a thread started before the test) is recorded in ``review``: the
grader does not decide it, a person does.
"""
from __future__ import annotations

import importlib
import os
import sys
import threading
import types

# Taken when this module is loaded (the grader loads a private copy before any student code
# runs), so that a notebook that rebinds these names later changes nothing here.
_import_module = importlib.import_module
_getattr = getattr
_setprofile, _getprofile = sys.setprofile, sys.getprofile
_thread_setprofile, _enumerate_threads = threading.setprofile, threading.enumerate
_current_thread = threading.current_thread

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
EQUIVALENTS["numpy.linalg.eig"] = ("numpy.linalg.eigvals",) + EQUIVALENTS["numpy.linalg.eigvals"]

#: Functions an answer has no reason to call while it is tested: calling one of them puts the
#: submission up for review (each can switch off or fool a profile function).
SUSPECT = ("sys.settrace", "sys.setprofile", "threading.settrace", "threading.setprofile",
           "threading.settrace_all_threads", "threading.setprofile_all_threads",
           "sys._getframe", "sys._current_frames", "gc.get_referrers", "gc.get_referents",
           "gc.get_objects", "inspect.currentframe", "inspect.stack")
SUSPECT_MODULES = ("ctypes", "sys.monitoring")


def resolve(dotted: str):
    """The object a dotted name names (``numpy.linalg.eigvals``), or None."""
    if not isinstance(dotted, str) or not dotted:
        return None
    parts = dotted.split(".")
    obj, i = None, len(parts)
    while i > 0:
        try:
            obj = _import_module(".".join(parts[:i]))
            break
        except Exception:  # noqa: BLE001 - not a module: go up one level
            i -= 1
    if obj is None:
        return None
    for attr in parts[i:]:
        try:
            obj = _getattr(obj, attr)
        except Exception:  # noqa: BLE001
            return None
    return obj


def with_equivalents(targets) -> list[str]:
    """``targets`` and the library functions that do the same job, without repeats."""
    out = []
    for t in targets:
        obj = resolve(t)
        same = [k for k in EQUIVALENTS if k == t or (obj is not None and resolve(k) is obj)]
        for name in [t, *same, *(e for k in same for e in EQUIVALENTS[k])]:
            if name not in out:
                out.append(name)
    return out


def code_objects(obj, _depth=0) -> set:
    """The code objects that run when ``obj`` is called: those of the function it wraps, if
    it wraps one (``functools.wraps``, ``jax.jit``, ``custom_vjp``, NumPy's array-function
    dispatch, bound methods, ``functools.partial``), else its own. A wrapper's own code is
    left out: wrappers such as JAX's ``api_boundary`` share one code object among many
    functions."""
    if obj is None or _depth > 8:
        return set()
    out = set()
    for attr in ("__wrapped__", "_implementation", "__func__", "func", "fun", "_fun"):
        try:
            inner = getattr(obj, attr, None)
        except Exception:  # noqa: BLE001 - a property that raises
            inner = None
        if inner is not None and inner is not obj and callable(inner):
            out |= code_objects(inner, _depth + 1)
    if out:
        return out
    code = getattr(obj, "__code__", None)
    if isinstance(code, types.CodeType):
        return {code}
    call = getattr(type(obj), "__call__", None)
    if isinstance(call, types.FunctionType):
        return {call.__code__}
    return set()


def _module_prefix(module: types.ModuleType) -> str | None:
    path = getattr(module, "__file__", None)
    if not path:
        return None
    if os.path.basename(path).startswith("__init__."):
        return os.path.dirname(path) + os.sep
    return path


class Targets:
    """Resolved targets: code objects, C functions and module folders, each with its name."""

    def __init__(self, names):
        self.codes: dict = {}
        self.builtins: dict[int, tuple[object, str]] = {}
        self.prefixes: list[tuple[str, str]] = []
        for name in names:
            self.add(name, _resolved(name))

    def add(self, name, obj):
        if obj is None:
            return
        if isinstance(obj, types.ModuleType):
            prefix = _module_prefix(obj)
            if prefix:
                self.prefixes.append((prefix, name))
            return
        codes = code_objects(obj)
        for code in codes:
            self.codes.setdefault(code, name)
        if not codes and callable(obj):
            self.builtins.setdefault(id(obj), (obj, name))

    def match_code(self, code):
        name = self.codes.get(code)
        if name is None and self.prefixes:
            filename = code.co_filename
            for prefix, target in self.prefixes:
                if filename.startswith(prefix):
                    return target
        return name

    def match_builtin(self, fn):
        hit = self.builtins.get(id(fn))
        return hit[1] if hit is not None and hit[0] is fn else None


def _library_roots() -> tuple[str, ...]:
    import sysconfig
    roots = {sys.prefix, sys.base_prefix, sys.exec_prefix, sys.base_exec_prefix}
    for key in ("stdlib", "platstdlib", "purelib", "platlib"):
        try:
            roots.add(sysconfig.get_path(key))
        except KeyError:
            pass
    here = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    roots.add(here)
    return tuple(sorted(r.rstrip(os.sep) + os.sep for r in roots if r))


_ROOTS = _library_roots()


def is_notebook_code(code) -> bool:
    """Code written in the notebook (its cells, or a module it wrote), not the library's."""
    filename = code.co_filename
    if filename.startswith("<frozen") or filename.startswith(_ROOTS):
        return False
    return True


def _describe(code) -> str:
    name = getattr(code, "co_qualname", code.co_name)
    return name if is_notebook_code(code) else f"{name} (library)"


_RESOLVED: dict[str, object] = {}


def remember(names) -> None:
    """Resolve ``names`` now, before any student code runs: later traces use these objects
    even if the notebook rebinds a module's attribute to a function of its own."""
    for name in with_equivalents(names):
        _RESOLVED.setdefault(name, resolve(name))
    for name in SUSPECT + SUSPECT_MODULES:
        _RESOLVED.setdefault(name, resolve(name))
    jax = sys.modules.get("jax")
    if jax is not None:
        _RESOLVED.setdefault("jax.disable_jit", jax.disable_jit)
        _RESOLVED.setdefault("jax.clear_caches", jax.clear_caches)


def _resolved(name):
    return _RESOLVED[name] if name in _RESOLVED else resolve(name)


class CallTrace:
    """Records, while entered, the calls of ``forbidden`` targets (dotted names, with their
    equivalents) and of the notebook functions in ``counted`` ({label: function}).

    After the block: ``hits`` lists (target, the function that called it), ``counts`` the
    calls per label, and ``review`` what the trace could not decide. With ``watch_threads``
    (the grader's kernel, where the harness knows its own threads), threads that were running
    before the block are noted too: their calls are not traced on Python 3.11."""

    def __init__(self, forbidden=(), counted=None, *, watch_threads=False):
        self.targets = Targets(with_equivalents(forbidden))
        self.suspect = Targets(SUSPECT)
        for name in SUSPECT_MODULES:
            self.suspect.add(name, _resolved(name))
        self.counted: dict = {}
        self.counts: dict[str, int] = {}
        for label, fn in (counted or {}).items():
            self.counts[label] = 0
            for code in code_objects(fn):
                self.counted.setdefault(code, []).append(label)
            if not code_objects(fn):
                raise NameError(f"count_calls: {label!r} is not a Python function of the "
                                "notebook")
        self.hits: list[tuple[str, str]] = []
        self.review: list[str] = []
        self.watch_threads = watch_threads
        self._saved = None
        self._chain = None
        self._threads: set = set()
        self._jit = None

    # -- the profile function -----------------------------------------------------------
    def _profile(self, frame, event, arg):
        if self._chain is not None:
            self._chain(frame, event, arg)
        if event == "call":
            code = frame.f_code
            labels = self.counted.get(code)
            if labels is not None:
                for label in labels:
                    self.counts[label] += 1
            target = self.targets.match_code(code)
            if target is not None:
                caller = frame.f_back
                if caller is None or self.targets.match_code(caller.f_code) is None:
                    self._hit(target, caller)
            elif self.suspect.codes or self.suspect.prefixes:
                what = self.suspect.match_code(code)
                if what is not None and frame.f_back is not None and \
                        is_notebook_code(frame.f_back.f_code):
                    self._suspect(what, frame.f_back)
        elif event == "c_call":
            target = self.targets.match_builtin(arg)
            if target is not None:
                self._hit(target, frame)
            else:
                what = self.suspect.match_builtin(arg) or self._suspect_module(arg)
                if what is not None and is_notebook_code(frame.f_code):
                    self._suspect(what, frame)

    def _suspect_module(self, fn):
        module = getattr(fn, "__module__", None)
        if isinstance(module, str):
            for name in SUSPECT_MODULES:
                if module == name or module.startswith(name + ".") or \
                        module == "_" + name:
                    return f"{module}.{getattr(fn, '__name__', '?')}"
        return None

    def _hit(self, target, caller_frame):
        frame = caller_frame
        while frame is not None and not is_notebook_code(frame.f_code):
            frame = frame.f_back
        frame = frame or caller_frame
        by = _describe(frame.f_code) if frame is not None else "?"
        if (target, by) not in self.hits:
            self.hits.append((target, by))

    def _suspect(self, what, frame):
        note = f"{_describe(frame.f_code)} called {what} while the test ran"
        if note not in self.review:
            self.review.append(note)

    # -- arming -------------------------------------------------------------------------
    def __enter__(self):
        jax = sys.modules.get("jax")
        if jax is not None and self.counted:
            self._jit = _resolved("jax.disable_jit")()
            self._jit.__enter__()
        elif jax is not None:
            _resolved("jax.clear_caches")()
        self._threads = {t.ident for t in _enumerate_threads()}
        self._saved = _getprofile()
        if isinstance(getattr(self._saved, "__self__", None), CallTrace):
            self._chain = self._saved           # nested blocks: both record
        elif self._saved is not None:
            self.review.append("a profile function was already installed when the test "
                               "started")
        _thread_setprofile(self._profile)
        _setprofile(self._profile)
        return self

    def __exit__(self, *exc):
        current = _getprofile()
        _setprofile(self._saved)
        _thread_setprofile(None)
        if current is not self._profile and current != self._profile:
            self.review.append("the profile function that records the calls was replaced "
                               "or removed while the test ran")
        others = [t for t in _enumerate_threads()
                  if t.ident in self._threads and t is not _current_thread()
                  and t.is_alive() and not getattr(t, "_lrnn_harness", False)]
        if others and self.watch_threads and (self.targets.codes or self.targets.builtins or
                                              self.counted):
            names = ", ".join(sorted({t.name for t in others}))[:200]
            self.review.append(f"threads started before the test were running ({names}): "
                               "calls made on them are not recorded")
        if self._jit is not None:
            self._jit.__exit__(None, None, None)
            self._jit = None
        return False
