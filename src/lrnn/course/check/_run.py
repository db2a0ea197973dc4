"""Running a checker: ``result_of`` (a Result, never raises for a student's mistake) and
``check`` (prints it; raises under the autograder), and the autograder's mode."""
from __future__ import annotations

import contextlib
import os
import zlib

import numpy as np

from ._format import _format_failure, describe
from ._registry import get
from ._types import (_GRADER, FAILURES, GRADING_ENV, REGISTRY, RESULTS, CheckFailure, ExerciseFailed,
                     NotImplementedYet, Result, StopCheck, StudentError)


def under_autograder() -> bool:
    """True under the autograder: in its process while it runs official tests, or in a
    process started with ``LRNN_GRADING=1``."""
    return _GRADER.get() or os.environ.get(GRADING_ENV) == "1"


@contextlib.contextmanager
def grading_mode():
    """What an autograder wraps around an exercise's official tests (in its own process):
    failing checks raise ``ExerciseFailed``, print nothing and show no expected values."""
    token = _GRADER.set(True)
    try:
        yield
    finally:
        _GRADER.reset(token)


def _exact_matmuls():
    from lrnn.course.precision import exact_matmuls
    return exact_matmuls()


def result_of(exercise_id, answer, *, seed: int = 0) -> Result:
    """Run the checker of ``exercise_id`` on ``answer``; never raises for student mistakes."""
    ex_id = str(exercise_id).removeprefix("ex")
    try:
        ex = get(ex_id)
    except KeyError as e:
        return Result(ex_id, "error", f"✗ {e.args[0]}")
    if ex.kind == "function" and not callable(answer):
        return Result(ex.id, "fail", f"✗ Exercise {ex.id} ({ex.title}): expected a function, "
                                     f"received {describe(answer)}.")
    if ex.kind == "value" and answer is Ellipsis:
        return Result(ex.id, "not implemented",
                      f"… Exercise {ex.id} ({ex.title}): no prediction yet — write your "
                      f"number in place of `...` (read: {ex.reference}).")
    rng = np.random.default_rng([seed, zlib.crc32(ex.id.encode())])
    try:
        with _exact_matmuls():          # the course's precision policy: full float32 products
            ex.checker(answer, rng)
    except NotImplementedYet:
        return Result(ex.id, "not implemented",
                      f"… Exercise {ex.id} ({ex.title}): not implemented yet — replace the "
                      f"`raise NotImplementedError(...)` line with your code (read: "
                      f"{ex.reference}).")
    except CheckFailure as f:
        return Result(ex.id, "fail", _format_failure(ex, f))
    except StudentError as s:
        f = CheckFailure(f"your code raised {type(s.error).__name__}: {s.error}",
                         inputs=s.inputs,
                         hint=_exception_hint(s.error))
        return Result(ex.id, "error", _format_failure(ex, f))
    except (KeyboardInterrupt, SystemExit, StopCheck):
        raise
    except BaseException as e:  # noqa: BLE001 - reported, never raised
        f = CheckFailure(f"the check stopped with {type(e).__name__}: {e}",
                         hint="if this comes from your function, test it on small inputs first.")
        return Result(ex.id, "error", _format_failure(ex, f))
    return Result(ex.id, "pass", f"✓ Exercise {ex.id} ({ex.title}): all tests passed.")


def _exception_hint(error: BaseException) -> str | None:
    text = str(error)
    if isinstance(error, TypeError) and ("positional argument" in text or "argument" in text):
        return "check the signature: the arguments are given in the order of the docstring."
    if isinstance(error, (ValueError, TypeError)) and ("shape" in text or "broadcast" in text
                                                      or "dimension" in text):
        return "a shape mismatch inside your code: print the shapes of the arrays you combine."
    if "TracerBoolConversionError" in type(error).__name__ or "ConcretizationTypeError" in \
            type(error).__name__:
        return "Python `if`/`for` on a traced JAX value: use jnp.where or lax control flow."
    if isinstance(error, NameError):
        return "a name is not defined: run the cells above (or define the helper) first."
    return None


def check(exercise_id, answer, *, seed: int = 0, quiet: bool = False) -> bool:
    """Self-check ``answer`` for exercise ``exercise_id`` (e.g. ``check("3.2", rotate_pairs)``).

    Prints ``✓ …`` or the first failing input with expected and received values and a hint,
    and returns True/False. From the second failure of the same exercise (since its last
    pass) on, the exercise's stronger hint follows the usual message. Never raises for a
    mistake in ``answer``, except under the autograder (environment variable
    ``LRNN_GRADING=1``), where a failure raises ``ExerciseFailed`` so the test cell is marked
    as failed; the grader never shows the stronger hint."""
    result = result_of(exercise_id, answer, seed=seed)
    RESULTS[result.exercise] = result
    message = result.message
    if result.passed:
        FAILURES.pop(result.exercise, None)
    elif result.status in ("fail", "error") and result.exercise in REGISTRY:
        FAILURES[result.exercise] = FAILURES.get(result.exercise, 0) + 1
        stronger = REGISTRY[result.exercise].stronger_hint
        if stronger and FAILURES[result.exercise] >= 2 and not under_autograder():
            message += f"\n  Still stuck? A stronger hint: {stronger}"
    if not quiet and not _GRADER.get():
        print(message)
    if under_autograder() and not result.passed:
        raise ExerciseFailed(result.message)
    return result.passed
