"""lrnn: long-sequence recurrent networks in JAX, from a linear recurrence to rotations and
reflections. The reference library of the course.

Submodules: ``scan`` (linear and rotation scans), ``orthogonal`` (skew exponential, block
rotations, Householder reflections, compact WY), ``lru``, ``rotrnn``, ``rotlstm``, ``ornn``.
"""
from . import scan
from .scan import linear_scan, rotation_scan

__version__ = "0.1.0"

_LAZY = ("orthogonal", "lru", "rotrnn", "rotlstm", "ornn", "model", "data", "train", "widgets",
         "bench", "check", "grade", "exercises", "experiments", "setup")


def __getattr__(name):
    if name in _LAZY:
        import importlib
        return importlib.import_module(f"{__name__}.{name}")
    raise AttributeError(f"module 'lrnn' has no attribute {name!r}")


__all__ = ["linear_scan", "rotation_scan", "scan", *_LAZY]
