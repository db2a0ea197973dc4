"""``python -m lrnn.course.doctor``: the same as ``lrnn doctor``."""
import sys

from .cli import main

sys.exit(main())
