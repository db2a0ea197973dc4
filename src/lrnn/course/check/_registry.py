"""Registering an exercise's checker (``@exercise``) and finding it again."""
from __future__ import annotations

from ._types import REGISTRY, Exercise


def exercise(id: str, *, points: float, title: str, reference: str, kind: str = "function",
             stronger_hint: str | None = None):
    """Register ``checker(answer, rng)`` for exercise ``id`` ("3.2").

    ``reference`` names what to read (e.g. ``"lrnn.orthogonal.rotate_pairs; RotRNN eq. 14"``);
    the exercise build puts it into the ``NotImplementedError`` stub. ``kind="value"`` for an
    exercise whose answer is a value rather than a function (the checker gets the value).
    ``stronger_hint``: the key step in words, shown by ``check`` from the second failure on
    (never by the grader); it may name the identity to use, never give the code."""
    if kind not in ("function", "value"):
        raise ValueError(f"`kind`: got {kind!r}, expected 'function' or 'value'.")
    if stronger_hint is not None and (not isinstance(stronger_hint, str)
                                      or not stronger_hint.strip()):
        raise ValueError(f"`stronger_hint`: got {stronger_hint!r}, expected None or a "
                         "non-empty text.")

    def register(checker):
        if id in REGISTRY and REGISTRY[id].checker.__module__ != checker.__module__:
            raise ValueError(f"exercise {id!r} is registered twice "
                             f"({REGISTRY[id].checker.__module__}, {checker.__module__})")
        REGISTRY[id] = Exercise(id, points, title, reference, checker, kind, stronger_hint)
        return checker
    return register


def get(exercise_id) -> Exercise:
    from . import load_all
    load_all()
    key = str(exercise_id).removeprefix("ex")
    if key not in REGISTRY:
        known = ", ".join(sorted(REGISTRY, key=_sort_key)) or "none"
        raise KeyError(f"unknown exercise {exercise_id!r}; known exercises: {known}")
    return REGISTRY[key]


def _sort_key(ex_id: str):
    return tuple(int(p) if p.isdigit() else p for p in str(ex_id).split("."))
