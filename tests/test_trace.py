"""The trace that decides bans and counts: what ran during the tested call, by code object.

Each answer below is written into a fresh module namespace, as a notebook cell would define it,
and called under :class:`lrnn.course.check.calltrace.CallTrace`. The rebindings are those a ban
read from the notebook's text missed (a list, a loop target, a ``with`` target, a lambda
parameter, a default argument), and the honest habits are those it punished (a self-check or a
scratch cell that calls the library outside the tested call).
"""
from __future__ import annotations

import textwrap

import numpy as np
import pytest

from lrnn.course.check import ForbiddenCall, count_calls, forbid
from lrnn.course.check.calltrace import CallTrace, code_objects, resolve, with_equivalents
from lrnn.course.grading.review import flags

EIG = ["numpy.linalg.eigvals"]
SCAN = ["lrnn.linear_scan", "lrnn.scan.linear_scan", "jax.lax.associative_scan"]
A = np.array([[0.5, 1.0], [0.0, -0.8]])


def cell(source: str, name: str):
    """``name`` as the cell ``source`` defines it (the file name is a notebook cell's)."""
    ns: dict = {}
    exec(compile(textwrap.dedent(source), "<ipython-input-1-test>", "exec"), ns)
    return ns[name]


def traced(fn, *args, forbidden=(), counted=None):
    with CallTrace(forbidden, counted) as trace:
        fn(*args)
    return trace


CHEATS = {
    "a list": """
        import numpy as np
        def rho(A):
            return float(max(abs([np][0].linalg.eigvals(A))))
        """,
    "a loop target": """
        import numpy as np
        for _eig in [np.linalg.eigvals]:
            pass
        def rho(A):
            return float(max(abs(_eig(A))))
        """,
    "a with target": """
        import contextlib
        import numpy as np
        with contextlib.nullcontext(np.linalg.eigvals) as _eig:
            pass
        def rho(A):
            return float(max(abs(_eig(A))))
        """,
    "a lambda parameter": """
        import numpy as np
        rho = (lambda e: lambda A: float(max(abs(e(A)))))(np.linalg.eigvals)
        """,
    "a default argument": """
        import numpy as np
        def rho(A, e=np.linalg.eigvals):
            return float(max(abs(e(A))))
        """,
    "another library function": """
        import numpy as np
        def rho(A):
            return float(max(abs(np.roots(np.poly(A)))))
        """,
    "a computed name": """
        import numpy as np
        def rho(A):
            return float(max(abs(getattr(np.linalg, "eig" + "vals")(A))))
        """,
    "eval": """
        import numpy as np
        def rho(A):
            return float(max(abs(eval("np.linalg.eigvals")(A))))
        """,
    "scipy": """
        import scipy.linalg
        def rho(A):
            return float(max(abs(scipy.linalg.eigvals(A))))
        """,
}


@pytest.mark.parametrize("how", sorted(CHEATS))
def test_a_forbidden_function_is_seen_whatever_name_reaches_it(how):
    trace = traced(cell(CHEATS[how], "rho"), A, forbidden=EIG)
    assert trace.hits, f"the call through {how} was not seen"
    assert trace.hits[0][1].split(".")[-1] in ("rho", "<lambda>")


def test_the_library_reached_through_the_module_that_defines_it_is_the_same_function():
    fn = cell("""
        import lrnn.scan.associative
        def binary_operator(left, right):
            return lrnn.scan.associative.binary_operator(left, right)
        """, "binary_operator")
    pair = (np.ones(3), np.zeros(3))
    assert traced(fn, pair, pair, forbidden=["lrnn.scan.binary_operator"]).hits


def test_honest_answers_are_not_flagged_and_calls_outside_the_test_are_not_seen():
    power = cell("""
        import numpy as np
        def rho(A):
            A = np.asarray(A, float)
            return float(np.linalg.norm(np.linalg.matrix_power(A, 64), 2) ** (1 / 64))
        """, "rho")
    np.linalg.eigvals(A)                         # a scratch cell, before the test
    trace = traced(power, A, forbidden=EIG)
    np.linalg.eigvals(A)                         # a self-check, after it
    assert trace.hits == [] and trace.review == []


def test_a_jitted_answer_runs_its_python_under_the_trace():
    fn = cell("""
        import jax
        import lrnn
        @jax.jit
        def scan(a, b):
            return lrnn.linear_scan(a, b, method="sequential")
        """, "scan")
    a, b = np.full((5, 2), 0.5, np.float32), np.ones((5, 2), np.float32)
    fn(a, b)                                     # compiled and cached before the test
    assert traced(fn, a, b, forbidden=SCAN).hits


def test_counts_are_by_code_object_so_aliases_and_default_arguments_count():
    op = cell("""
        def binary_operator(left, right):
            return left[0] * right[0], right[0] * left[1] + right[1]
        """, "binary_operator")
    ns = {"binary_operator": op}
    exec(textwrap.dedent("""
        def sequential(a, b, step=binary_operator):
            acc = (a[0], b[0])
            for t in range(1, len(a)):
                acc = step(acc, (a[t], b[t]))
            return acc
        """), ns)
    trace = traced(ns["sequential"], np.ones(37), np.ones(37),
                   counted={"binary_operator": op})
    assert trace.counts == {"binary_operator": 36}


def test_a_jitted_function_is_counted_at_every_call():
    op = cell("""
        import jax
        @jax.jit
        def binary_operator(left, right):
            return left[0] * right[0], right[0] * left[1] + right[1]
        """, "binary_operator")
    pair = (np.ones(3, np.float32), np.ones(3, np.float32))
    op(pair, pair)

    def five_calls():
        for _ in range(5):
            op(pair, pair)
    assert traced(five_calls, counted={"binary_operator": op}).counts == {"binary_operator": 5}


@pytest.mark.parametrize("source,evidence", [
    ("import sys\ndef rho(A):\n    sys.setprofile(None)\n    return 1.0\n", "sys.setprofile"),
    ("import sys\ndef rho(A):\n    return sys._getframe(1).f_lineno\n", "sys._getframe"),
    ("import gc\ndef rho(A):\n    return len(gc.get_referrers(A))\n", "gc.get_referrers"),
])
def test_what_could_fool_the_trace_goes_to_a_person(source, evidence):
    trace = traced(cell(source, "rho"), A, forbidden=EIG)
    assert trace.hits == []
    assert any(evidence in note for note in trace.review), trace.review


def test_library_internals_that_use_frames_are_not_evidence():
    fn = cell("""
        import warnings
        def rho(A):
            warnings.warn("a warning's stack level reads frames", UserWarning)
            return 1.0
        """, "rho")
    with pytest.warns(UserWarning):
        trace = traced(fn, A, forbidden=EIG)
    assert trace.review == []


def test_threads_running_before_the_test_are_noted_where_the_harness_watches():
    import threading
    stop = threading.Event()
    worker = threading.Thread(target=stop.wait, name="a notebook's worker", daemon=True)
    worker.start()
    try:
        fn = cell("def rho(A):\n    return 1.0\n", "rho")
        with CallTrace(EIG, watch_threads=True) as watched:
            fn(A)
        with CallTrace(EIG) as unwatched:
            fn(A)
    finally:
        stop.set()
        worker.join()
    assert any("a notebook's worker" in note for note in watched.review), watched.review
    assert unwatched.review == []


def test_removing_the_profile_function_is_recorded():
    import sys
    trace = traced(cell("import sys\nrho = lambda A: sys.setprofile(None)\n", "rho"), A,
                   forbidden=EIG)
    assert any("replaced or removed" in note for note in trace.review)
    assert sys.getprofile() is None


def test_the_in_process_forbid_and_count_calls_use_the_same_trace():
    fn = cell(CHEATS["a default argument"], "rho")
    with pytest.raises(ForbiddenCall, match="numpy.linalg.eigvals"):
        with forbid("numpy.linalg.eig"):
            fn(A)
    op = cell("def op(x):\n    return x\n", "op")
    ns = {"op": op}
    with count_calls("op", ns) as calls, forbid(*EIG):
        alias = [op][0]
        for _ in range(4):
            alias(1)
    assert calls.n == 4


def test_wrappers_shared_by_many_functions_are_not_targets():
    """JAX's ``api_boundary`` wraps ``jax.vjp`` and many others with one code object: only
    the wrapped function's own code may identify it."""
    codes = code_objects(resolve("jax.vjp"))
    assert [c.co_name for c in codes] == ["vjp"]
    assert "jax.numpy.linalg.eigvals" in with_equivalents(["numpy.linalg.eig"])


@pytest.mark.parametrize("source,what", [
    ("import sys\nsys.settrace(None)", "sys.settrace"),
    ("import ctypes", "ctypes"),
    ("f = lambda: 0\nf.__code__ = (lambda: 1).__code__", "code objects"),
    ("import lrnn.course.grading.harness", "the grader's own modules"),
    ("import sys\nsys.meta_path.insert(0, object())", "the import system"),
])
def test_review_flags_read_the_students_own_cells(source, what):
    assert flags([(3, source)]) == [(3, what)]


def test_review_flags_ignore_strings_comments_and_ordinary_code():
    honest = ("import numpy as np\n# sys.settrace would be cheating\n"
              "print('ctypes and gc.get_objects')\nx = np.linalg.eigvals(np.eye(2))")
    assert flags([(0, honest)]) == []
