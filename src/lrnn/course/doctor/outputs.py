"""Outputs that must not reach the website: warnings and temporary kernel paths."""
from __future__ import annotations

import json
import re

from .budgets import _code_cells


WARNING_PATTERN = re.compile(r"\b\w*Warning\b|^WARNING\b", re.MULTILINE)
TMP_KERNEL_PATTERN = re.compile(r"/tmp/ipykernel_\d*")


def _output_texts(output):
    if output.get("output_type") == "stream":
        yield output.get("name", "stdout"), output.get("text", "")
    elif output.get("output_type") == "error":
        yield "error", "\n".join([output.get("ename", ""), output.get("evalue", ""),
                                  *output.get("traceback", [])])
    else:
        for mime, value in output.get("data", {}).items():
            if mime.startswith("text/") or mime.endswith("json"):
                yield mime, value if isinstance(value, str) else json.dumps(value)


def output_problems(nb, *, warnings: bool = True) -> list[tuple[int, str, str]]:
    """``(cell index, what, excerpt)`` for every output that shows a temporary kernel path
    (``/tmp/ipykernel_…``) or, with ``warnings``, a warning printed to stderr."""
    found = []
    for index, _, cell in _code_cells(nb):
        for output in cell.get("outputs", []):
            for kind, text in _output_texts(output):
                m = TMP_KERNEL_PATTERN.search(text)
                if m:
                    found.append((index, "temporary kernel path", _excerpt(text, m.start())))
                if warnings and kind == "stderr":
                    w = WARNING_PATTERN.search(text)
                    if w:
                        found.append((index, "warning", _excerpt(text, w.start())))
    return found


def _excerpt(text, at, width=160):
    start = text.rfind("\n", 0, at) + 1
    line = text[start:].split("\n", 1)[0]
    return line[:width]


def setup_cells(nb) -> list[int]:
    """Indices of the cells that call ``lrnn.course.setup.environment``."""
    return [i for i, _, c in _code_cells(nb) if "setup.environment(" in c.source]
