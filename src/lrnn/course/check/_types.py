"""What a check is made of: the exercise record, its result, the failures a checker raises,
and the registries of this kernel."""
from __future__ import annotations

import contextvars
import dataclasses
from typing import Callable

GRADING_ENV = "LRNN_GRADING"

#: True while an autograder runs an exercise's official tests in this process (see
#: ``grading_mode``): failing checks then raise, print nothing and show no expected values.
_GRADER: contextvars.ContextVar = contextvars.ContextVar("lrnn_check_grader", default=False)

REGISTRY: dict[str, "Exercise"] = {}
RESULTS: dict[str, "Result"] = {}
#: Failed checks per exercise since its last pass, in this kernel: from the second one on,
#: ``check`` adds the exercise's stronger hint.
FAILURES: dict[str, int] = {}


@dataclasses.dataclass(frozen=True)
class Exercise:
    id: str
    points: float
    title: str
    reference: str
    checker: Callable
    kind: str = "function"
    stronger_hint: str | None = None


@dataclasses.dataclass
class Result:
    exercise: str
    status: str            # "pass", "fail", "not implemented", "error"
    message: str

    @property
    def passed(self) -> bool:
        return self.status == "pass"


class CheckFailure(Exception):
    """Raised by a checker at the first wrong answer; ``check`` formats it."""

    def __init__(self, message, *, inputs=None, expected=None, received=None, hint=None,
                 detail=None):
        super().__init__(message)
        self.message = message
        self.inputs = inputs
        self.expected = expected
        self.received = received
        self.hint = hint
        self.detail = detail


class StudentError(Exception):
    """The student's code raised ``error`` on ``inputs``."""

    def __init__(self, error: BaseException, inputs=None):
        super().__init__(f"{type(error).__name__}: {error}")
        self.error = error
        self.inputs = inputs


class NotImplementedYet(Exception):
    pass


class StopCheck(BaseException):
    """Stops a check at once, never reported as the student's error (an autograder subclasses
    it for "the student's kernel is lost")."""


class ExerciseFailed(AssertionError):
    """Raised by ``check`` only while the autograder runs (``LRNN_GRADING=1``)."""
