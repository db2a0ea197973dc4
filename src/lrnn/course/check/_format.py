"""Formatting what a check shows: numbers only, never source code."""
from __future__ import annotations

import numpy as np

from ._types import _GRADER, CheckFailure, Exercise


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
