"""The course machinery: ``setup`` (the first cell of every notebook), ``widgets``, ``check``
(self-checks), ``exercises`` (builds the student notebooks) and ``grade`` (the autograder).

May import the library and ``lrnn.training``; nothing outside ``lrnn.course`` imports it.
"""
from . import precision as _precision

_precision.install_from_environment()
