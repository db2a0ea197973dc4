"""The benchmarks behind ``lrnn bench``: ``scan`` (every ``linear_scan`` method against the
papers' scans; the command's parser and ``targets``), ``layer`` (the layers and a training step
of the deep model), ``step`` (one step of every layer against attention's decode step), ``plans``
(the Pallas kernel's tuning sweep: the data behind ``lrnn.scan.pallas_tuning``), ``gpu`` (every
GPU measurement within a time budget) and ``peers`` (the PyTorch scans they are compared with);
``_common`` holds the timing, copy-rate and device helpers they share.

Imports the library (``lrnn.scan``, ``lrnn.orthogonal``, ``lrnn.layers``, ``lrnn.model``), never
``lrnn.training`` or ``lrnn.course``. Measurements go to JSON files that the book and
``lrnn.scan.pallas_tuning`` cite; nothing here is timed in a test.
"""


def __getattr__(name):
    """``lrnn.benchmarks.<module>`` without importing it first, as ``lrnn.layers.lru`` works."""
    import importlib
    import importlib.util
    if not name.startswith("_") and importlib.util.find_spec(f"{__name__}.{name}") is not None:
        return importlib.import_module(f"{__name__}.{name}")
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
