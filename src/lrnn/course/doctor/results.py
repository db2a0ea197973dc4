"""What every check of the doctor gives: a status and a :class:`Result`."""
from __future__ import annotations

import dataclasses

import numpy as np

PASS, FAIL, SKIP, INFO, WARN, MISS = "PASS", "FAIL", "SKIP", "INFO", "WARN", "MISS"


@dataclasses.dataclass
class Result:
    section: str
    name: str
    status: str
    detail: str = ""
    seconds: float | None = None
    data: dict = dataclasses.field(default_factory=dict)


def _rel_err(got, ref) -> float:
    got, ref = np.asarray(got), np.asarray(ref)
    scale = float(np.max(np.abs(ref))) or 1.0
    return float(np.max(np.abs(got - ref))) / scale
