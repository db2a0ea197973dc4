"""The course machinery: ``setup`` (the first cell of every notebook), ``widgets``, ``check``
(self-checks), ``exercises`` (builds the student notebooks) and ``grade`` (the autograder).

May import the library and ``lrnn.training``; nothing outside ``lrnn.course`` imports it.
"""
from . import precision as _precision

_precision.install_from_environment()


def __getattr__(name):
    """``lrnn.<package>.<module>`` without importing it first, as ``lrnn.layers.lru`` works."""
    import importlib
    import importlib.util
    if not name.startswith("_") and importlib.util.find_spec(f"{__name__}.{name}") is not None:
        return importlib.import_module(f"{__name__}.{name}")
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
