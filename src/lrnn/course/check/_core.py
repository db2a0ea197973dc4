"""The self-check framework: a registry of exercise checkers, ``check()``, and the helpers
checkers use to compare a student's answer with the reference in ``lrnn``.

A checker is a plain function ``checker(answer, rng)`` registered with ``@exercise``. It draws
seeded random inputs from ``rng``, calls the student's function through ``call`` and compares
the result with ``expect_close``/``expect_shape``/``expect``; the first mismatch raises
``CheckFailure``, which ``check`` turns into a message (inputs, expected, received, hint).
Nothing here prints or inspects source code, so a check never reveals a solution.

The framework is split by job: ``_types`` (records, failures, registries), ``_registry``,
``_format``, ``_expect`` (calling student code, expectations, hints), ``_inputs``, ``_run``
(``run``, ``check``, the grading mode); the hidden tests' tools stay here. Every name is
importable from here, as before.
"""
from __future__ import annotations

import numpy as np

from ._expect import (_hint_conjugate, _hint_negated, _hint_nonfinite, _hint_real_only,  # noqa: F401
                      _hint_scaled, _hint_transposed, _hint_zero, _scalar, _shape_hint,
                      _time_shift_hints, alternative, as_array, call, expect, expect_close,
                      expect_dtype, expect_shape, when)
from ._format import _format_failure, _short, _to_numpy, describe  # noqa: F401
from ._inputs import crandn, randn, reference_scan, unit_disk  # noqa: F401
from ._registry import _sort_key, exercise, get  # noqa: F401
from ._run import _exact_matmuls, _exception_hint, check, grading, grading_mode, run  # noqa: F401
from ._types import (_GRADER, FAILURES, GRADING_ENV, REGISTRY, RESULTS, CheckFailure,  # noqa: F401
                     Exercise, ExerciseFailed, NotImplementedYet, Result, StopCheck, StudentError)


class ForbiddenCall(AssertionError):
    pass


class forbid:
    """Context manager for hidden tests: while active, calling any of ``targets`` (dotted
    names such as ``"lrnn.layers.lru.hidden_states"``) raises ``ForbiddenCall``. Compute the
    reference *before* entering it. In a notebook this only patches the module attributes;
    the grader does not trust it: it checks the student's source itself (see
    ``lrnn.course.grading.structure``)."""

    def __init__(self, *targets: str):
        self.targets = targets
        self.saved = []

    def __enter__(self):
        import importlib
        for target in self.targets:
            module_name, attr = target.rsplit(".", 1)
            module = importlib.import_module(module_name)
            original = getattr(module, attr)

            def blocked(*args, _target=target, **kwargs):
                raise ForbiddenCall(f"this exercise must not call {_target}: write it yourself.")
            self.saved.append((module, attr, original))
            setattr(module, attr, blocked)
        return self

    def __exit__(self, *exc):
        for module, attr, original in reversed(self.saved):
            setattr(module, attr, original)
        self.saved = []
        return False


class count_calls:
    """Context manager for hidden tests: count the calls of the notebook's own function
    ``name`` made while the block runs (``calls.n``), e.g. to check that a parallel scan calls
    the operator once per round, not once per step::

        with count_calls("binary_operator") as calls:
            parallel_scan(a, b)
        assert calls.n <= 12

    ``name`` is looked up in the caller's globals (the notebook's namespace), replaced by a
    counting wrapper inside the block, and restored after it."""

    def __init__(self, name: str, namespace: dict | None = None):
        import sys
        self.name = name
        self.namespace = namespace if namespace is not None else sys._getframe(1).f_globals
        self.n = 0
        self._original = None

    def __enter__(self):
        if self.name not in self.namespace or not callable(self.namespace[self.name]):
            raise NameError(f"count_calls: no function {self.name!r} is defined in the notebook")
        self._original = original = self.namespace[self.name]

        def counted(*args, **kwargs):
            self.n += 1
            return original(*args, **kwargs)
        self.namespace[self.name] = counted
        return self

    def __exit__(self, *exc):
        self.namespace[self.name] = self._original
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
