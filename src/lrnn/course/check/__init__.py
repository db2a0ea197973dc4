"""Self-checks for the exercises: ``check("3.2", rotate_pairs)``.

Each exercise has a checker registered in ``lrnn.course.check.chNN`` with ``@exercise``. ``check``
runs it on seeded random inputs against the reference implementation in ``lrnn`` and prints
``✓`` or the first failing input with expected and received values and a hint. It is plain
Python shipped with the package, so it works the same locally and in Colab.
See ``solutions/AUTHORING.md`` for how to write an exercise.
"""
from __future__ import annotations

import importlib
import pkgutil

from ._core import (GRADING_ENV, REGISTRY, RESULTS, CheckFailure, Exercise, ExerciseFailed,
                    ForbiddenCall, NotImplementedYet, Result, StopCheck, StudentError,
                    alternative, as_array, call, call_within, check, count_calls, crandn,
                    describe, exercise, expect, expect_close, expect_dtype, expect_prediction,
                    expect_shape, forbid, get, grading_mode, largest_intermediate, randn,
                    result_of, under_autograder, unit_disk, when)
from ._core import _sort_key

_loaded = False


def load_all():
    """Import every chapter module ``lrnn.course.check.chNN`` (registering its exercises)."""
    global _loaded
    if _loaded:
        return
    for info in sorted(pkgutil.iter_modules(__path__), key=lambda m: m.name):
        if info.name.startswith("ch") and info.name[2:].isdigit():
            importlib.import_module(f"{__name__}.{info.name}")
    _loaded = True


def exercises() -> dict[str, Exercise]:
    """All registered exercises, by id, in book order."""
    load_all()
    return {k: REGISTRY[k] for k in sorted(REGISTRY, key=_sort_key)}


def __getattr__(name):
    from lrnn import _aliases
    return _aliases.renamed(__name__, name)


__all__ = ["check", "result_of", "exercise", "exercises", "get", "Exercise", "Result",
           "CheckFailure", "ExerciseFailed", "StopCheck", "StudentError", "NotImplementedYet",
           "call", "call_within", "expect", "expect_close", "expect_shape", "expect_dtype",
           "as_array", "alternative", "when", "describe", "randn", "crandn", "unit_disk", "under_autograder",
           "GRADING_ENV", "REGISTRY", "RESULTS", "load_all", "forbid", "ForbiddenCall",
           "count_calls", "grading_mode", "largest_intermediate"]
