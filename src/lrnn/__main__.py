"""``python -m lrnn <command> [args]``: the ``lrnn`` command (``lrnn.cli``)."""
import sys

from .cli import main

if __name__ == "__main__":
    sys.exit(main())
