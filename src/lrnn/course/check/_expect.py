"""Calling the student's code and comparing what it returns with the reference, with hints."""
from __future__ import annotations

import numpy as np

from ._format import _short, _to_numpy, describe
from ._types import _GRADER, CheckFailure, NotImplementedYet, StopCheck, StudentError


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


class _OutOfTime(StopCheck):
    """The alarm of ``call_within``: a StopCheck, so ``call`` lets it through."""


def call_within(seconds: float, fn, inputs: dict, *, what: str, hint: str, **kwargs):
    """``call(fn, inputs, **kwargs)``, stopped after ``seconds``: a CheckFailure saying that
    ``what`` did not come back in time, with ``hint``, instead of a cell that never ends. The
    alarm is SIGALRM, so it interrupts Python code (a loop over a billion steps), not one long
    compiled computation; where no alarm can be set (not the main thread, no SIGALRM, or a timer
    already running that is not ours to replace) it is plain ``call``."""
    import signal
    import threading
    main = threading.current_thread() is threading.main_thread()
    if not (hasattr(signal, "setitimer") and main) or signal.getitimer(signal.ITIMER_REAL)[0] > 0:
        return call(fn, inputs, **kwargs)

    def on_alarm(signum, frame):
        raise _OutOfTime()

    previous = signal.signal(signal.SIGALRM, on_alarm)
    try:
        # it rings again every tenth of the limit: an alarm that lands in a callback whose
        # exceptions are ignored (a garbage collector's) would otherwise be lost
        signal.setitimer(signal.ITIMER_REAL, seconds, seconds / 10)
        try:
            return call(fn, inputs, **kwargs)
        finally:
            signal.setitimer(signal.ITIMER_REAL, 0)
    except _OutOfTime:
        raise CheckFailure(f"{what} did not come back within {seconds:g} s.", inputs=inputs,
                           hint=hint) from None
    finally:
        signal.signal(signal.SIGALRM, previous)


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


def _first_hint(hints, received, expected, close) -> str | None:
    """The message of the first hint that applies (a hint that fails counts as not applying)."""
    for h in hints:
        try:
            hint = h(received, expected, close)
        except Exception:                                    # noqa: BLE001
            hint = None
        if hint:
            return hint
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
    hint = _first_hint(generic, rec_c, exp_c, close)
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


def expect_prediction(received, true_value: float, *, rtol: float = 0.0, atol: float = 0.0,
                      what: str = "your prediction", hints=()):
    """Check a prediction (an exercise of ``kind="value"``): one real number within ``atol`` +
    ``rtol`` × |true value| of what the run gives. A miss says so and gives the first hint
    that applies (``alternative``, ``when``), never the value itself, which the next cell of
    the notebook shows. Returns the prediction as a float."""
    if isinstance(received, (bool, np.bool_)) or received is None or received is Ellipsis:
        raise CheckFailure(f"{what} is {describe(received)}, expected a number.")
    try:
        value = np.asarray(_to_numpy(received))
    except Exception:                                        # noqa: BLE001
        value = None
    if value is None or value.size != 1 or not np.issubdtype(value.dtype, np.number):
        raise CheckFailure(f"{what} is {describe(received)}, expected one number.")
    if np.iscomplexobj(value):
        raise CheckFailure(f"{what} is a complex number, expected a real one.")
    got = float(value.reshape(()))
    if not np.isfinite(got):
        raise CheckFailure(f"{what} is {got}, expected a finite number.")
    tolerance = atol + rtol * abs(float(true_value))

    def close(a, b):
        return np.all(np.abs(np.asarray(a, np.float64) - np.asarray(b, np.float64)) <= tolerance)
    if abs(got - float(true_value)) <= tolerance:
        return got
    hint = _first_hint(hints, np.asarray(got), np.asarray(float(true_value)), close)
    within = (f" (within {rtol:.0%})" if rtol and not atol else "")
    raise CheckFailure(f"{what}, {got:g}, is not what the run gives{within}.", hint=hint)

