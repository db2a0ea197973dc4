"""The training stack: ``data`` (the tasks), ``train`` (the loop and its command line) and
``experiments`` (the suites behind chapter 7). The benchmarks are ``lrnn.benchmarks``.

Imports the library (``lrnn.scan``, ``lrnn.layers``, ``lrnn.model``), never ``lrnn.course``.
"""


def __getattr__(name):
    """``lrnn.<package>.<module>`` without importing it first, as ``lrnn.layers.lru`` works."""
    import importlib
    import importlib.util
    if not name.startswith("_") and importlib.util.find_spec(f"{__name__}.{name}") is not None:
        return importlib.import_module(f"{__name__}.{name}")
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
