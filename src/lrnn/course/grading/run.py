"""Running a submission: its cells in the kernel, the official tests in the grader."""
from __future__ import annotations

import builtins
import time

from .config import MAX_RESTARTS
from .solutions import setup_namespace

def _builtin_name(ename) -> str:
    return ename if isinstance(ename, str) and isinstance(getattr(builtins, ename, None), type) \
        else "an exception"


def _quiet_print(*args, **kwargs):
    return None


def run_official_test(kernel, sol, grade_id: str, limit: float) -> dict:
    """Run the solution's test code for ``grade_id`` in this process against the notebook in
    ``kernel``. Returns the outcome (with ``review``: what the kernel's call traces could not
    decide); raises ``KernelLost`` if the kernel is lost."""
    from .. import precision
    from ..check import check
    from .context import GraderAbort, grader_context, test_builtins
    from .remote import Proxy, Session, Unavailable, guard_broadcasting
    test = sol["tests"][grade_id]
    ns = dict(setup_namespace(sol))
    ns["check"] = check
    ns["__builtins__"] = test_builtins()
    ns["print"] = _quiet_print
    session = Session(kernel, limit)
    wanted = [n for n in test["free"]
              if n in sol["student_names"] or (n not in ns and not hasattr(builtins, n))]
    for name, info in session.names(wanted).items():
        if name not in wanted or not isinstance(info, dict):
            continue
        kind = info.get("kind")
        if kind == "function":
            ns[name] = Proxy(name, session)
        elif kind == "value":
            from . import wire
            try:
                ns[name] = guard_broadcasting(wire.decode(info.get("value"), jax_arrays=False))
            except wire.WireError as e:
                ns[name] = Unavailable(name, f"unreadable ({e})")
        elif kind == "unsendable":
            ns[name] = Unavailable(name, str(info.get("detail", "not plain data"))[:300])
        else:
            ns.pop(name, None)                  # missing: a NameError, as in the notebook
    try:
        with grader_context(session), precision.exact_matmuls():
            exec(test["code"], ns)
    except GraderAbort:
        raise
    except BaseException as e:  # noqa: BLE001 - every failure of the test is the outcome
        try:
            text = str(e)
        except Exception:  # noqa: BLE001
            text = ""
        return {"status": "error", "ename": type(e).__name__, "evalue": text[:4000],
                "review": list(session.review)}
    return {"status": "ok", "review": list(session.review)}


def structural_tests(sol) -> tuple[list[str], set[str]]:
    """(every target the assignment's hidden tests forbid, the grade ids of the tests that
    forbid or count calls)."""
    targets, ids = [], set()
    for gid, test in (sol.get("tests") or {}).items() if sol else ():
        found = test.get("forbid") or []
        if found or test.get("counts"):
            ids.add(gid)
        targets += [t for t in found if t not in targets]
    return targets, ids


def run_submission(steps, sol, sandbox, *, files: dict, timeout: float, cell_timeout: float,
                   max_output: int) -> dict:
    """Run the steps; returns {"outcomes": {step: outcome}, "timed_out", "restarts",
    "fatal", "kernel_s", "flags": [(cell, what)] for a person to look at, "structural": the
    grade ids of the tests that forbid or count calls}. Every wait is bounded by ``timeout`` (plus a few seconds of grace
    to kill the sandbox).

    Long because restarting is its loop: a kernel that dies is started again and the steps run
    without the culprit, and every branch shares that state (outcomes, culprits, restarts, the
    deadline)."""
    from .remote import HIDDEN_MESSAGE, CallTimeout, Kernel, KernelLost
    from .review import flags
    course = sol["course_cells"] if sol else set()
    targets, structural = structural_tests(sol)
    own = [(s.cell, s.source) for s in steps
           if s.kind == "code" and s.source.strip() not in course]
    start = time.monotonic()
    deadline = start + timeout
    outcomes: dict[int, dict] = {}
    killers: set[int] = set()
    state = {"timed_out": False, "restarts": 0, "fatal": None,
             "flags": flags(own) if structural else [], "structural": structural}
    while True:
        try:
            kernel = Kernel(sandbox, files=files, deadline=deadline, targets=targets)
        except KernelLost as e:
            if time.monotonic() >= deadline:
                state["timed_out"] = True
            else:
                state["fatal"] = f"the kernel could not start ({e})"[:2000]
                state["fatal_kind"] = "grader error"
            break
        lost_at = None
        try:
            for pos, step in enumerate(steps):
                if pos in killers or step.kind == "skip" or \
                        (step.kind == "test" and pos in outcomes):
                    continue
                now = time.monotonic()
                if now >= deadline:
                    state["timed_out"] = True
                    break
                limit = min(now + cell_timeout, deadline)
                try:
                    if step.kind == "code":
                        out = kernel.run_cell(step.source, limit)
                        size = out.get("output_bytes", 0)
                        # After an official test, the kernel may hold its inputs: its
                        # error messages no longer reach the feedback.
                        seen = any(steps[i].kind == "test" for i in outcomes)
                        out = {"status": out.get("status", "error"),
                               "ename": _builtin_name(out.get("ename")) if seen
                               else str(out.get("ename", ""))[:100],
                               "evalue": HIDDEN_MESSAGE if seen
                               else str(out.get("evalue", ""))[:4000],
                               "output_bytes": size if isinstance(size, int) else 0}
                        out["truncated"] = out["output_bytes"] > max_output
                    else:
                        try:
                            out = run_official_test(kernel, sol, step.grade_id, limit)
                        except CallTimeout:
                            out = {"status": "timeout", "ename": "CallTimeout", "evalue": ""}
                except KernelLost as e:
                    if time.monotonic() >= deadline - 0.05 and limit >= deadline - 0.05:
                        state["timed_out"] = True
                        break
                    out = {"status": "timeout" if e.reason == "timeout" else "died",
                           "ename": "KernelLost", "evalue": e.detail[:2000]}
                    outcomes.setdefault(pos, out)
                    killers.add(pos)
                    lost_at = pos
                    break
                if out["status"] == "timeout" and limit >= deadline - 0.05 and \
                        time.monotonic() >= deadline - 0.05:
                    state["timed_out"] = True          # the notebook's limit, not the cell's
                    break
                outcomes.setdefault(pos, out)
        finally:
            kernel.kill()
        if state["timed_out"] or lost_at is None:
            break
        state["restarts"] += 1
        if state["restarts"] > MAX_RESTARTS:
            state["fatal"] = (f"the kernel was lost {state['restarts']} times; the cells not "
                              "run by then score zero")
            state["fatal_kind"] = "kernel died"
            break
    state["outcomes"] = outcomes
    state["kernel_s"] = time.monotonic() - start
    return state

