"""The plan of a submission: its code cells, and the official tests at their places."""
from __future__ import annotations

from dataclasses import dataclass

from ..exercises import canonical_grade_id, nbgrader_meta
from .config import CHECK_CALL

@dataclass
class Step:
    kind: str              # "code" (the student's cell, run in the kernel) or "test"
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


def plan(nb, table: list[dict]):
    """(steps, {grade_id: step index}, {grade_id: the student's answer text})."""
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
            steps.append(Step("code", index, source=cell.get("source", "")))
    for gid, row in wanted.items():
        if row["kind"] == "test" and gid not in where:
            where[gid] = len(steps)
            steps.append(Step("test", None, grade_id=gid))
    return steps, where, answers

