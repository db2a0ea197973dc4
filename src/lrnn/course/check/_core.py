"""The self-check framework: a registry of exercise checkers, ``check()``, and the helpers
checkers use to compare a student's answer with the reference in ``lrnn``.

A checker is a plain function ``checker(answer, rng)`` registered with ``@exercise``. It draws
seeded random inputs from ``rng``, calls the student's function through ``call`` and compares
the result with ``expect_close``/``expect_shape``/``expect``; the first mismatch raises
``CheckFailure``, which ``check`` turns into a message (inputs, expected, received, hint).
Nothing here prints or inspects source code, so a check never reveals a solution.

The framework is split by job: ``_types`` (records, failures, registries), ``_registry``,
``_format``, ``_expect`` (calling student code, expectations, hints), ``_inputs``, ``_run``
(``result_of``, ``check``, the grading mode); the hidden tests' tools stay here. Every name is
importable from here, as before.
"""
from __future__ import annotations

import numpy as np

from ._expect import (_hint_conjugate, _hint_negated, _hint_nonfinite, _hint_real_only,  # noqa: F401
                      _hint_scaled, _hint_transposed, _hint_zero, _scalar, _shape_hint,
                      _time_shift_hints, alternative, as_array, call, call_within, expect,
                      expect_close,
                      expect_dtype, expect_prediction, expect_shape, when)
from ._format import _format_failure, _short, _to_numpy, describe  # noqa: F401
from ._inputs import crandn, randn, reference_scan, unit_disk  # noqa: F401
from ._registry import _sort_key, exercise, get  # noqa: F401
from ._run import (_exact_matmuls, _exception_hint, check, grading_mode,  # noqa: F401
                   result_of, under_autograder)
from ._types import (_GRADER, FAILURES, GRADING_ENV, REGISTRY, RESULTS, CheckFailure,  # noqa: F401
                     Exercise, ExerciseFailed, NotImplementedYet, Result, StopCheck, StudentError)


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
