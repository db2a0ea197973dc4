"""The plan of a submission: its code cells, and the official tests at their places."""
from __future__ import annotations

from dataclasses import dataclass

from ..exercises import canonical_grade_id, nbgrader_meta
from .config import CHECK_CALL
from .solutions import _python_ast, free_names

@dataclass
class Step:
    kind: str              # "code" (the student's cell, run in the kernel), "test", or "skip"
                           # (a course demo no grade depends on, left unrun)
    cell: int | None       # index in the student's notebook (None: an appended test)
    source: str = ""       # code cells
    grade_id: str = ""     # tests


def _test_cell_for(cell, wanted: dict) -> str | None:
    """The grade_id of the solution test cell this submission cell stands for, if any."""
    gid = canonical_grade_id(nbgrader_meta(cell).get("grade_id"))
    if gid in wanted and wanted[gid]["kind"] == "test":
        return gid
    if cell.get("cell_type") == "code" and not gid:
        ids = CHECK_CALL.findall(cell.get("source", ""))
        if len(set(ids)) == 1 and f"ex{ids[0]}" in wanted and \
                wanted[f"ex{ids[0]}"]["kind"] == "test":
            return f"ex{ids[0]}"
    return None


def plan(nb, table: list[dict], skip=None):
    """(steps, {grade_id: step index}, {grade_id: the student's answer text}). A code cell
    whose text is a key of ``skip`` ({a course demo that no grade depends on, as the student
    received it: the names it binds}) becomes a "skip" step, unless a later cell the grader
    runs (the student's own) reads one of its names."""
    skip = skip or {}
    wanted = {row["grade_id"]: row for row in table}
    steps, where, answers = [], {}, {}
    for index, cell in enumerate(nb.cells):
        gid = _test_cell_for(cell, wanted)
        if gid:                                    # never run in the kernel
            if gid not in where:
                where[gid] = len(steps)
                steps.append(Step("test", index, grade_id=gid))
            continue
        mgid = canonical_grade_id(nbgrader_meta(cell).get("grade_id"))
        if mgid in wanted and wanted[mgid]["kind"] == "manual" and mgid not in answers:
            answers[mgid] = cell.get("source", "")
        if cell.get("cell_type") == "code":
            source = cell.get("source", "")
            steps.append(Step("skip" if source.strip() in skip else "code", index,
                              source=source))
    _run_what_students_read(steps, skip)
    for gid, row in wanted.items():
        if row["kind"] == "test" and gid not in where:
            where[gid] = len(steps)
            steps.append(Step("test", None, grade_id=gid))
    return steps, where, answers



def _run_what_students_read(steps, skip: dict) -> None:
    """A skipped demo whose names a later cell reads (a student's cell that uses its result)
    runs after all: skipping it would fail that cell."""
    read: set = set()
    for step in reversed(steps):
        if step.kind == "skip" and skip[step.source.strip()] & read:
            step.kind = "code"
        if step.kind == "code":
            tree = _python_ast(step.source)
            read |= set(free_names(tree)) if tree is not None else set()
