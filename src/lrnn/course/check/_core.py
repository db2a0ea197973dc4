"""The self-check framework: a registry of exercise checkers, ``check()``, and the helpers
checkers use to compare a student's answer with the reference in ``lrnn``.

A checker is a plain function ``checker(answer, rng)`` registered with ``@exercise``. It draws
seeded random inputs from ``rng``, calls the student's function through ``call`` and compares
the result with ``expect_close``/``expect_shape``/``expect``; the first mismatch raises
``CheckFailure``, which ``check`` turns into a message (inputs, expected, received, hint).
Nothing here prints or inspects source code, so a check never reveals a solution.
"""
from __future__ import annotations

import contextlib
import contextvars
import dataclasses
import os
import zlib
from typing import Callable

import numpy as np

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


# ---------------------------------------------------------------------------------------
# Registration
# ---------------------------------------------------------------------------------------

def exercise(id: str, *, points: float, title: str, reference: str, kind: str = "function",
             stronger_hint: str | None = None):
    """Register ``checker(answer, rng)`` for exercise ``id`` ("3.2").

    ``reference`` names what to read (e.g. ``"lrnn.orthogonal.rotate_pairs; RotRNN eq. 14"``);
    the exercise build puts it into the ``NotImplementedError`` stub. ``kind="value"`` for an
    exercise whose answer is a value rather than a function (the checker gets the value).
    ``stronger_hint``: the key step in words, shown by ``check`` from the second failure on
    (never by the grader); it may name the identity to use, never give the code."""
    if kind not in ("function", "value"):
        raise ValueError(f"`kind`: got {kind!r}, expected 'function' or 'value'.")
    if stronger_hint is not None and (not isinstance(stronger_hint, str)
                                      or not stronger_hint.strip()):
        raise ValueError(f"`stronger_hint`: got {stronger_hint!r}, expected None or a "
                         "non-empty text.")

    def register(checker):
        if id in REGISTRY and REGISTRY[id].checker.__module__ != checker.__module__:
            raise ValueError(f"exercise {id!r} is registered twice "
                             f"({REGISTRY[id].checker.__module__}, {checker.__module__})")
        REGISTRY[id] = Exercise(id, points, title, reference, checker, kind, stronger_hint)
        return checker
    return register


def get(exercise_id) -> Exercise:
    from . import load_all
    load_all()
    key = str(exercise_id).removeprefix("ex")
    if key not in REGISTRY:
        known = ", ".join(sorted(REGISTRY, key=_sort_key)) or "none"
        raise KeyError(f"unknown exercise {exercise_id!r}; known exercises: {known}")
    return REGISTRY[key]


def _sort_key(ex_id: str):
    return tuple(int(p) if p.isdigit() else p for p in str(ex_id).split("."))


# ---------------------------------------------------------------------------------------
# Formatting (numbers only: never source code)
# ---------------------------------------------------------------------------------------

def _to_numpy(x):
    if isinstance(x, (np.ndarray, np.generic)):
        return x
    if hasattr(x, "__array__") and not isinstance(x, (dict, list, tuple, str)):
        try:
            return np.asarray(x)
        except Exception:
            return x
    return x


def describe(x, *, max_elements: int = 24) -> str:
    """A short, readable description of a value: small arrays in full, large ones summarised."""
    x = _to_numpy(x)
    if isinstance(x, np.ndarray):
        head = f"array of shape {x.shape}, dtype {x.dtype}"
        if x.size == 0:
            return head + " (empty)"
        if x.size <= max_elements:
            body = np.array2string(x, precision=4, suppress_small=True, separator=", ",
                                   max_line_width=100)
            body = body.replace("\n", "\n      ")
            return f"{head}:\n      {body}"
        flat = x.reshape(-1)
        first = np.array2string(flat[:4], precision=4, suppress_small=True, separator=", ")
        return f"{head}, first values {first[:-1]}, …]"
    if isinstance(x, dict):
        inner = ", ".join(f"{k}: {_short(v)}" for k, v in x.items())
        return "{" + inner + "}"
    if isinstance(x, (tuple, list)) and len(x) <= 8:
        arrays = [_to_numpy(v) for v in x]
        if all(isinstance(v, np.ndarray) and 0 < v.size <= 8 for v in arrays):
            inner = ", ".join(np.array2string(v, precision=4, suppress_small=True,
                                              separator=", ") for v in arrays)
        else:
            inner = ", ".join(_short(v) for v in x)
        return ("(" + inner + ")") if isinstance(x, tuple) else ("[" + inner + "]")
    text = repr(x)
    return text if len(text) <= 200 else text[:200] + "…"


def _short(v) -> str:
    v = _to_numpy(v)
    if isinstance(v, np.ndarray):
        return f"array{v.shape} {v.dtype}"
    text = repr(v)
    return text if len(text) <= 60 else text[:60] + "…"


def _format_failure(ex: Exercise, f: CheckFailure) -> str:
    lines = [f"✗ Exercise {ex.id} ({ex.title}): {f.message}"]
    if f.inputs:
        lines.append("  on the input")
        for name, value in f.inputs.items():
            lines.append(f"    {name} = {describe(value)}")
    show_expected = not _GRADER.get()      # the grader's feedback shows only the student's
    if f.expected is not None and show_expected:      # own inputs and outputs
        lines.append(f"  expected: {describe(f.expected)}")
    if f.received is not None or f.expected is not None:
        lines.append(f"  received: {describe(f.received)}")
    if f.detail:
        lines.append(f"  {f.detail}")
    if f.hint:
        lines.append(f"  hint: {f.hint}")
    lines.append(f"  (read: {ex.reference})")
    return "\n".join(lines)


# ---------------------------------------------------------------------------------------
# Calling student code
# ---------------------------------------------------------------------------------------

def call(fn, inputs: dict, **kwargs):
    """``fn(*inputs.values(), **kwargs)``; the student's exceptions become ``StudentError``
    (with the inputs, for the message) and ``NotImplementedError`` becomes "not implemented"."""
    shown = dict(inputs)
    shown.update(kwargs)
    try:
        return fn(*inputs.values(), **kwargs)
    except NotImplementedError as e:
        raise NotImplementedYet(str(e)) from None
    except (KeyboardInterrupt, SystemExit, StopCheck):
        raise
    except BaseException as e:  # noqa: BLE001 - any bug in student code is reported, not raised
        raise StudentError(e, shown) from None


# ---------------------------------------------------------------------------------------
# Expectations
# ---------------------------------------------------------------------------------------

def expect(condition: bool, message: str, *, inputs=None, expected=None, received=None,
           hint=None, detail=None):
    """Fail with ``message`` unless ``condition``."""
    if not condition:
        raise CheckFailure(message, inputs=inputs, expected=expected, received=received,
                           hint=hint, detail=detail)


def as_array(received, *, inputs=None, what="the result"):
    """``received`` as a NumPy array, or a CheckFailure saying what came back instead."""
    if received is None:
        raise CheckFailure(f"{what} is None.", inputs=inputs,
                           hint="the function returns nothing: did you forget `return`?")
    if isinstance(received, (dict, str)) or callable(received):
        raise CheckFailure(f"{what} is a {type(received).__name__}, expected an array.",
                           inputs=inputs)
    if isinstance(received, (tuple, list)):
        try:
            arr = np.asarray(received)
        except Exception:
            arr = None
        if arr is None or arr.dtype == object:
            raise CheckFailure(f"{what} is a {type(received).__name__} of "
                               f"{len(received)} items, expected one array.", inputs=inputs)
        return arr
    try:
        return np.asarray(received)
    except Exception as e:
        raise CheckFailure(f"{what} (a {type(received).__name__}) cannot be converted to an "
                           f"array: {e}", inputs=inputs) from None


def _shape_hint(got: tuple, want: tuple) -> str:
    if len(got) == len(want) and sorted(got) == sorted(want):
        if len(got) >= 2 and got[-2:] == want[-2:][::-1] and got[:-2] == want[:-2]:
            return "the last two axes are swapped: a transpose too many (or too few)?"
        return "the same sizes in a different order: check which axis is which (time is axis -2)."
    if len(got) == len(want) - 1 and any(got == want[:i] + want[i + 1:] for i in range(len(want))):
        return "one axis is missing: did you sum/index over an axis you should keep, or squeeze?"
    if len(got) == len(want) + 1 and any(want == got[:i] + got[i + 1:] for i in range(len(got))):
        return "one extra axis: a stray [None]/expand_dims, or stacking where you should not?"
    if len(got) < len(want):
        return "fewer axes than expected: leading batch dimensions must be kept (use `...`)."
    if np.prod(got) == np.prod(want):
        return "right number of elements, wrong layout: a reshape in the wrong order?"
    return "compare your shapes with the docstring of the function you are writing."


def expect_shape(received, shape, *, inputs=None, what="the result"):
    arr = as_array(received, inputs=inputs, what=what)
    shape = tuple(shape)
    if tuple(arr.shape) != shape:
        raise CheckFailure(f"{what} has shape {tuple(arr.shape)}, expected {shape}.",
                           inputs=inputs, hint=_shape_hint(tuple(arr.shape), shape))
    return arr


def expect_dtype(received, kind: str, *, inputs=None, what="the result"):
    """``kind`` is "complex", "real" (real floating), "float" (same) or "integer"."""
    arr = as_array(received, inputs=inputs, what=what)
    ok = {"complex": np.iscomplexobj(arr),
          "real": np.issubdtype(arr.dtype, np.floating),
          "float": np.issubdtype(arr.dtype, np.floating),
          "integer": np.issubdtype(arr.dtype, np.integer)}[kind]
    if not ok:
        hint = None
        if kind == "complex":
            hint = "you return real numbers: keep the complex values (no .real, no abs) here."
        elif np.iscomplexobj(arr):
            hint = "you return complex numbers: this quantity is real (take the real part?)."
        raise CheckFailure(f"{what} has dtype {arr.dtype}, expected a {kind} dtype.",
                           inputs=inputs, hint=hint)
    return arr


# Hints: each is a callable (received, expected, close) -> str | None, tried in order.

def alternative(value, message: str):
    """Hint ``message`` when the answer matches ``value`` (the result of a typical mistake,
    e.g. the reference applied with θ → −θ: "transposed the rotation"). ``value`` may be a
    function of no arguments, called only when the answer is wrong (saves time)."""
    def hint(received, expected, close):
        v = np.asarray(_to_numpy(value() if callable(value) else value))
        if v.shape == received.shape and close(received, v):
            return message
        return None
    return hint


def when(predicate, message: str):
    """Hint ``message`` when ``predicate(received, expected)`` is true."""
    def hint(received, expected, close):
        try:
            return message if predicate(received, expected) else None
        except Exception:
            return None
    return hint


def _hint_nonfinite(received, expected, close):
    bad = ~np.isfinite(received) & np.isfinite(expected)
    if bad.any():
        idx = tuple(int(i) for i in np.argwhere(bad)[0])
        return (f"your result has NaN/inf at index {idx} where the expected value is finite: "
                "look for a division by zero, log(0), or powers |λ|^k that overflow.")
    return None


def _hint_zero(received, expected, close):
    if not np.any(received) and np.any(expected):
        return "your result is all zeros: is the state ever updated, and is it returned?"
    return None


def _hint_conjugate(received, expected, close):
    if np.iscomplexobj(expected) and close(received, np.conj(expected)):
        return ("you have the complex conjugate of the answer: forgot a conjugate, or the "
                "imaginary part (the phase θ) has the wrong sign.")
    return None


def _hint_negated(received, expected, close):
    if close(received, -expected):
        return "right magnitude, wrong sign: a minus sign is missing or extra."
    return None


def _hint_real_only(received, expected, close):
    if np.iscomplexobj(expected) and close(received, expected.real):
        return "only the real part is right: the imaginary part got lost (a .real too early?)."
    if np.iscomplexobj(expected) and close(received, expected.imag):
        return "you return the imaginary part where the real part (or the full value) is expected."
    return None


def _hint_scaled(received, expected, close):
    e = expected.reshape(-1)
    r = received.reshape(-1)
    denom = np.vdot(e, e)
    if abs(denom) < 1e-30:
        return None
    c = np.vdot(e, r) / denom
    if abs(c - 1) < 1e-3 or abs(c) < 1e-12 or not close(received, c * expected):
        return None
    c_show = complex(c)
    c_text = f"{c_show.real:.4g}" if abs(c_show.imag) < 1e-9 else f"{c_show:.4g}"
    return (f"your result is the expected one times a constant ≈ {c_text}: a missing or extra "
            "factor (a normalisation such as γ, a 2, a square root, 1/L?).")


def _time_shift_hints(axis):
    def hint(received, expected, close):
        if expected.ndim == 0 or expected.shape[axis] < 3:
            return None
        r = np.moveaxis(received, axis, 0)
        e = np.moveaxis(expected, axis, 0)
        if close(r[1:], e[:-1]):
            return ("your output at time t is the expected output at t−1: off by one time step "
                    "(the first state is x_0 = B u_0, from x_{-1} = 0).")
        if close(r[:-1], e[1:]):
            return ("your output at time t is the expected output at t+1: off by one time step "
                    "(is the first input u_0 skipped?).")
        if close(r, e[::-1]):
            return "your output is the expected one reversed in time: run the loop forwards."
        wrong = ~np.isclose(r, e, rtol=1e-3, atol=1e-4).reshape(len(r), -1).all(axis=1)
        if wrong[0] and not wrong[1:].any():
            return "only the first time step is wrong: check the initial state (x_{-1} = 0)."
        if not wrong[0] and wrong[1:].any():
            first = int(np.argmax(wrong))
            return (f"time steps 0…{first - 1} are right and step {first} is wrong: the update "
                    "of the state from one step to the next is where to look.")
        return None
    return hint


def _hint_transposed(received, expected, close):
    if expected.ndim >= 2 and expected.shape[-1] == expected.shape[-2] and \
            close(received, np.swapaxes(expected, -1, -2)):
        return "your matrix is the transpose of the expected one."
    return None


def expect_close(received, expected, *, inputs=None, rtol: float = 1e-4, atol: float = 1e-5,
                 what: str = "the result", hints=(), time_axis: int | None = None,
                 dtype: str | None = None):
    """Compare the student's array with the reference.

    Checks, in order: an array came back; the shape (with a hint about the layout); the dtype
    when ``dtype`` is given ("complex"/"real"); real vs complex; NaN/inf; the values within
    ``rtol``/``atol``. On a mismatch the message shows the element with the largest error,
    and the first hint that applies: the ``hints`` given (``alternative(...)``, ``when(...)``),
    then the generic ones (NaN, all zeros, conjugate, sign, real part only, constant factor, transpose,
    and with ``time_axis`` off-by-one-step / reversed time / wrong first step).
    Returns the received array."""
    exp = np.asarray(_to_numpy(expected))
    rec = expect_shape(received, exp.shape, inputs=inputs, what=what)
    if dtype is not None:
        expect_dtype(rec, dtype, inputs=inputs, what=what)
    if np.iscomplexobj(exp) and not np.iscomplexobj(rec) and np.abs(exp.imag).max() > atol:
        raise CheckFailure(f"{what} is real (dtype {rec.dtype}), expected complex values.",
                           inputs=inputs, expected=exp, received=rec,
                           hint="keep the complex numbers: no .real/abs before the end.")
    if not np.iscomplexobj(exp) and np.iscomplexobj(rec):
        if np.abs(rec.imag).max() > atol + rtol * np.abs(exp).max():
            raise CheckFailure(f"{what} is complex (dtype {rec.dtype}), expected real values.",
                               inputs=inputs, expected=exp, received=rec,
                               hint="this quantity is real: take the real part (e.g. LRU's "
                                    "y = Re[C x] + D u) where the model does.")
        rec = rec.real
    if not np.issubdtype(rec.dtype, np.number) and rec.dtype != bool:
        raise CheckFailure(f"{what} has dtype {rec.dtype}, expected numbers.", inputs=inputs)
    rec_c = rec.astype(np.complex128 if np.iscomplexobj(rec) or np.iscomplexobj(exp)
                       else np.float64)
    exp_c = exp.astype(rec_c.dtype)
    ok = np.isclose(rec_c, exp_c, rtol=rtol, atol=atol)
    if ok.all():
        return rec

    def close(a, b):
        a = np.asarray(a)
        b = np.asarray(b)
        return a.shape == b.shape and bool(np.allclose(a, b, rtol=rtol * 10, atol=atol * 10))

    generic = [*hints, _hint_nonfinite, _hint_zero, _hint_conjugate, _hint_negated, _hint_real_only,
               _hint_scaled, _hint_transposed]
    if time_axis is not None:
        generic.append(_time_shift_hints(time_axis))
    hint = None
    for h in generic:
        try:
            hint = h(rec_c, exp_c, close)
        except Exception:
            hint = None
        if hint:
            break
    err = np.where(ok, 0.0, np.nan_to_num(np.abs(rec_c - exp_c), nan=np.inf, posinf=np.inf))
    idx = np.unravel_index(int(np.argmax(err)), err.shape) if err.ndim else ()
    idx_t = tuple(int(i) for i in idx)
    if _GRADER.get():
        detail = (f"{int((~ok).sum())} of {ok.size} values differ; the largest difference is "
                  f"at index {idx_t}, where you return {_scalar(rec_c[idx])} "
                  f"(rtol={rtol:g}, atol={atol:g}).")
    else:
        detail = (f"{int((~ok).sum())} of {ok.size} values differ; the largest difference is "
                  f"at index {idx_t}: expected {_scalar(exp_c[idx])}, received "
                  f"{_scalar(rec_c[idx])} (rtol={rtol:g}, atol={atol:g}).")
    raise CheckFailure(f"wrong values in {what}.", inputs=inputs, expected=exp, received=rec,
                       hint=hint, detail=detail)


def _scalar(v) -> str:
    v = complex(v) if np.iscomplexobj(v) else float(v)
    if isinstance(v, complex):
        return f"{v.real:.6g}{v.imag:+.6g}j"
    return f"{v:.6g}"


# ---------------------------------------------------------------------------------------
# Random inputs
# ---------------------------------------------------------------------------------------

def reference_scan(a, b):
    """``x_t = a_t x_{t-1} + b_t`` in float64 (``lrnn.scan.reference``, imported when a check
    runs)."""
    from lrnn.scan.reference import linear_scan
    return linear_scan(a, b)


def randn(rng, *shape, dtype=np.float32):
    return rng.standard_normal(shape).astype(dtype)


def crandn(rng, *shape, dtype=np.complex64):
    z = rng.standard_normal(shape) + 1j * rng.standard_normal(shape)
    return (z / np.sqrt(2)).astype(dtype)


def unit_disk(rng, *shape, r_min=0.3, r_max=0.95, dtype=np.complex64):
    """Complex numbers with modulus in [r_min, r_max] and uniform phase."""
    r = rng.uniform(r_min, r_max, shape)
    phase = rng.uniform(0, 2 * np.pi, shape)
    return (r * np.exp(1j * phase)).astype(dtype)


# ---------------------------------------------------------------------------------------
# Hidden tests: the student must not just call the reference
# ---------------------------------------------------------------------------------------

class ForbiddenCall(AssertionError):
    pass


class forbid:
    """Context manager for hidden tests: the block fails with ``ForbiddenCall`` if any of
    ``targets`` (dotted names such as ``"lrnn.layers.lru.hidden_states"``, with the library
    functions that do the same job) **ran** while it was active: the calls are traced by
    code object (:mod:`lrnn.course.check.calltrace`), so aliases and helpers are seen, and
    calls outside the block (a demo cell, a self-check) are not. Compute the reference
    *before* entering it. Under the grader the same trace runs in the student's kernel,
    around each call of the notebook's functions."""

    def __init__(self, *targets: str):
        self.targets = tuple(str(t) for t in targets)
        self._trace = None

    def __enter__(self):
        from .calltrace import CallTrace
        self._trace = CallTrace(self.targets)
        self._trace.__enter__()
        return self

    def __exit__(self, *exc):
        trace, self._trace = self._trace, None
        trace.__exit__(*exc)
        if trace.hits and not isinstance(exc[1], ForbiddenCall):
            target, by = trace.hits[0]
            raise ForbiddenCall(f"while this block ran, {by} called {target}: this exercise "
                                f"asks for the result without {target}.")
        return False


class count_calls:
    """Context manager for hidden tests: count the calls of the notebook's own function
    ``name`` made while the block runs (``calls.n``), e.g. to check that a parallel scan calls
    the operator once per round, not once per step::

        with count_calls("binary_operator") as calls:
            parallel_scan(a, b)
        assert calls.n <= 12

    ``name`` is looked up in the caller's globals (the notebook's namespace); the calls that
    run its code are counted (by code object: an alias or a default argument is the same
    function)."""

    def __init__(self, name: str, namespace: dict | None = None):
        import sys
        self.name = name
        self.namespace = namespace if namespace is not None else sys._getframe(1).f_globals
        self.n = 0
        self._trace = None

    def __enter__(self):
        from .calltrace import CallTrace
        if self.name not in self.namespace or not callable(self.namespace[self.name]):
            raise NameError(f"count_calls: no function {self.name!r} is defined in the notebook")
        self._trace = CallTrace((), {self.name: self.namespace[self.name]})
        self._trace.__enter__()
        return self

    def __exit__(self, *exc):
        trace, self._trace = self._trace, None
        trace.__exit__(*exc)
        self.n = trace.counts[self.name]
        return False


def largest_intermediate(fn, *args):
    """The number of entries of the largest array that ``fn(*args)`` creates when traced by JAX
    (constants included), or None when it cannot be traced (e.g. it converts to NumPy).
    Used to check that an O(n) algorithm does not build an n×n matrix. Under the grader,
    ``fn`` lives in the student's kernel, which traces it there (a structural check: the
    student's kernel answers it)."""
    probe = getattr(type(fn), "__lrnn_probe__", None)
    if probe is not None:
        return probe(fn, "largest_intermediate", *args)
    import jax
    try:
        closed = jax.make_jaxpr(fn)(*args)
    except Exception:  # noqa: BLE001 - NumPy code cannot be traced; the check is skipped
        return None
    sizes = [int(np.size(c)) for c in closed.consts]

    def walk(jaxpr):
        for eqn in jaxpr.eqns:
            for v in eqn.outvars:
                sizes.append(int(np.prod(getattr(v.aval, "shape", ()) or (1,))))
            for p in eqn.params.values():
                for sub in (p if isinstance(p, (tuple, list)) else (p,)):
                    if hasattr(sub, "jaxpr") and hasattr(sub, "consts"):
                        walk(sub.jaxpr)
                    elif hasattr(sub, "eqns"):
                        walk(sub)
    walk(closed.jaxpr)
    return max(sizes, default=0)


# ---------------------------------------------------------------------------------------
# check()
# ---------------------------------------------------------------------------------------

def grading() -> bool:
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


def run(exercise_id, answer, *, seed: int = 0) -> Result:
    """Run the checker of ``exercise_id`` on ``answer``; never raises for student mistakes."""
    ex_id = str(exercise_id).removeprefix("ex")
    try:
        ex = get(ex_id)
    except KeyError as e:
        return Result(ex_id, "error", f"✗ {e.args[0]}")
    if ex.kind == "function" and not callable(answer):
        return Result(ex.id, "fail", f"✗ Exercise {ex.id} ({ex.title}): expected a function, "
                                     f"received {describe(answer)}.")
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
    result = run(exercise_id, answer, seed=seed)
    RESULTS[result.exercise] = result
    message = result.message
    if result.passed:
        FAILURES.pop(result.exercise, None)
    elif result.status in ("fail", "error") and result.exercise in REGISTRY:
        FAILURES[result.exercise] = FAILURES.get(result.exercise, 0) + 1
        stronger = REGISTRY[result.exercise].stronger_hint
        if stronger and FAILURES[result.exercise] >= 2 and not grading():
            message += f"\n  Still stuck? A stronger hint: {stronger}"
    if not quiet and not _GRADER.get():
        print(message)
    if grading() and not result.passed:
        raise ExerciseFailed(result.message)
    return result.passed
