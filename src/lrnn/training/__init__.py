"""The training stack: ``data`` (the tasks), ``train`` (the loop and its command line),
``experiments`` (the suites behind chapter 7) and ``bench`` (scan and layer benchmarks).

Imports the library (``lrnn.scan``, ``lrnn.layers``, ``lrnn.model``), never ``lrnn.course``.
"""
