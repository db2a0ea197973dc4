"""lrnn: long-sequence recurrent networks in JAX, from a linear recurrence to rotations and
reflections. The reference library of the course.

The library: ``scan`` (``linear_scan``, ``rotation_scan`` and their backends), ``orthogonal``
(skew exponential, block rotations, Householder reflections, compact WY), ``layers`` (``lru``,
``rotrnn``, ``ornn``, ``lstm``, ``gru``) and ``model`` (the deep model around any layer).
Beside it, ``lrnn.training`` (data, training loop, experiments), ``lrnn.benchmarks`` (the
scans, layers and kernel plans timed: ``lrnn bench``) and ``lrnn.course`` (setup, widgets,
self-checks, exercises, grader). The commands: ``lrnn <command>`` or ``python -m lrnn
<command>`` (``lrnn.cli``). The flat module names of earlier
versions and their ``python -m`` commands still work, with a deprecation notice
(``lrnn._aliases``).
"""
import importlib as _importlib

from . import _aliases

_aliases.install()

__version__ = "0.1.0"

# Imported on first use, so that `lrnn --help` does not wait for JAX.
_SUBMODULES = ("scan", "orthogonal", "layers", "model", "training", "benchmarks", "course",
               "cli")
_FROM_SCAN = ("linear_scan", "rotation_scan")


def __getattr__(name):
    if name in _SUBMODULES:
        return _importlib.import_module(f"{__name__}.{name}")
    if name in _FROM_SCAN:
        return getattr(_importlib.import_module(f"{__name__}.scan"), name)
    old = _aliases.old_attribute(__name__, name)       # a flat name of old, with a warning
    if old is not None:
        return old
    raise AttributeError(f"module 'lrnn' has no attribute {name!r}")


def __dir__():
    return sorted({*globals(), *_SUBMODULES, *_FROM_SCAN})


__all__ = [*_FROM_SCAN, *_SUBMODULES]
