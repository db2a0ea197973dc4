"""What the official tests see while the grader runs them in its own process.

A hidden test writes ``from lrnn.course.check import forbid, count_calls`` (or its old name, kept
until its removal). In the grader those two names are the grader's own: entering a block records
it on the test's :class:`~lrnn.course.grading.remote.Session`, and the calls of notebook
functions made inside it carry the block to the kernel, which traces what the call runs
(:mod:`lrnn.course.check.calltrace`): a forbidden function that ran fails the test, counts come
back with the results, and what the trace could not decide goes to a person ("needs
review"). Nothing outside the tested call counts: a demo cell or a self-check that calls the
library is not the answer.
"""
from __future__ import annotations

import builtins
import contextlib
import contextvars
import types

from ... import _aliases
from .. import check

OLD_NAMES = _aliases.OLD_NAMES

_SESSION: contextvars.ContextVar = contextvars.ContextVar("lrnn_grading_session", default=None)
#: The checker package under its name and its old one: a hidden test importing either gets
#: the grader's ``forbid`` and ``count_calls``.
CHECK_MODULES = ("lrnn.course.check",) + tuple(
    old for old, new in OLD_NAMES.items() if new == "lrnn.course.check")


class GraderAbort(check.StopCheck):
    """Stops an official test at once (the grader lost the student's kernel). A
    ``BaseException``: neither checkers nor hidden tests catch it."""


@contextlib.contextmanager
def grader_context(session=None):
    """Around an exercise's official tests: checks in grading mode, and ``forbid`` /
    ``count_calls`` blocks recorded on ``session``."""
    token = _SESSION.set(session)
    try:
        with check.grading_mode():
            yield
    finally:
        _SESSION.reset(token)


class forbid:
    """The grader's ``forbid``: the targets travel with every notebook call made inside."""

    def __init__(self, *targets: str):
        self.targets = tuple(str(t) for t in targets)
        self._session = None

    def __enter__(self):
        self._session = _SESSION.get()
        if self._session is not None:
            self._session.push_forbid(self.targets)
        return self

    def __exit__(self, *exc):
        if self._session is not None:
            self._session.pop_forbid()
            self._session = None
        return False


class count_calls:
    """The grader's ``count_calls``: counted in the kernel around each notebook call."""

    def __init__(self, name: str, namespace=None):
        self.name = str(name)
        self.n = 0
        self._session = None

    def __enter__(self):
        self._session = _SESSION.get()
        if self._session is not None:
            self._session.push_counter(self)
        return self

    def __exit__(self, *exc):
        if self._session is not None:
            self._session.pop_counter(self)
            self._session = None
        return False


def _check_for_tests() -> types.ModuleType:
    """``lrnn.course.check`` as the official tests import it: the grader's forbid and
    count_calls in place of the notebook ones."""
    mod = types.ModuleType("lrnn.course.check")
    mod.__dict__.update({k: getattr(check, k) for k in check.__all__})
    mod.forbid, mod.count_calls = forbid, count_calls
    return mod


def test_builtins() -> dict:
    """Builtins for the official tests' namespace, whose ``__import__`` hands out
    :func:`_check_for_tests` for the checker package."""
    shim = _check_for_tests()
    real_import = builtins.__import__

    def _import(name, globals=None, locals=None, fromlist=(), level=0):
        if level == 0 and name in CHECK_MODULES and fromlist:
            return shim
        return real_import(name, globals, locals, fromlist, level)
    out = dict(vars(builtins))
    out["__import__"] = _import
    return out
