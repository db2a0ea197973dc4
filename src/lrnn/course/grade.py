"""The grader moved to :mod:`lrnn.course.grading`; ``python -m lrnn.course.grade`` still runs
its command line (``lrnn grade``)."""
import sys

from .grading.cli import main

if __name__ == "__main__":
    sys.exit(main())
