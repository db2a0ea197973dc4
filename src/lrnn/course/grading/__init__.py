"""The autograder: plan, run, score, feedback and gradebook, the sandbox and its transport.

    lrnn grade SUBMISSION.ipynb... | FOLDER --out gradebook.csv   (see :mod:`.cli`)

Nothing is imported here eagerly: the sandboxed kernel imports :mod:`.harness` and
:mod:`.wire` from this package and must not pay for (or be exposed to) the rest.
"""
from __future__ import annotations

import importlib

_PUBLIC = {"grade": ".batch", "collect": ".batch", "main": ".cli", "GradeError": ".config",
           "grade_submission": ".score", "display_key": ".score", "course_files": ".score",
           "load_solutions": ".solutions", "match_assignment": ".solutions", "plan": ".steps",
           "read_gradebook": ".gradebook", "write_gradebook": ".gradebook",
           "feedback_name": ".gradebook", "MAX_SUBMISSION_BYTES": ".config",
           "Step": ".steps", "free_names": ".solutions", "run_submission": ".run",
           "GradebookLock": ".gradebook"}


def __getattr__(name):
    if name in _PUBLIC:
        return getattr(importlib.import_module(_PUBLIC[name], __name__), name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


__all__ = sorted(_PUBLIC)
