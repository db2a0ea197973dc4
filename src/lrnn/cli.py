"""``lrnn``, the course's one command: ``lrnn <subcommand> [args]``, the same as
``python -m lrnn <subcommand> [args]``.

Each subcommand is the ``main(argv)`` of one module, imported only when it runs, so that
``lrnn --help`` answers at once. ``COMMANDS`` is the one table of them.
"""
from __future__ import annotations

import importlib
import sys

#: subcommand -> (module whose ``main(argv)`` runs it, one line of help).
COMMANDS = {
    "grade": ("lrnn.course.grading.cli", "grade a folder of student notebooks into a gradebook"),
    "train": ("lrnn.training.train", "train a model on a task of the course"),
    "experiments": ("lrnn.training.experiments", "run a suite of training runs"),
    "bench": ("lrnn.benchmarks.scan", "benchmark the scans, the layers and the kernel's plans"),
    "doctor": ("lrnn.course.doctor", "check that the course works on this machine"),
    "exercises": ("lrnn.course.exercises", "build exercises/ from solutions/"),
}


def usage() -> str:
    width = max(map(len, COMMANDS))
    lines = [f"  {name:<{width}}  {help_}" for name, (_, help_) in COMMANDS.items()]
    return ("usage: lrnn <command> [args ...]    (or: python -m lrnn <command> [args ...])\n\n"
            "The lrnn course's commands:\n\n" + "\n".join(lines) +
            "\n\n`lrnn <command> --help` describes one command.")


def main(argv=None) -> int:
    """Run ``lrnn <command> [args]``; returns the exit status."""
    argv = list(sys.argv[1:] if argv is None else argv)
    if not argv or argv[0] in ("-h", "--help", "help"):
        print(usage())
        return 0 if argv else 2
    command, rest = argv[0], argv[1:]
    if command not in COMMANDS:
        print(usage(), file=sys.stderr)
        print(f"\nlrnn: error: unknown command {command!r}, expected one of "
              f"{', '.join(COMMANDS)}", file=sys.stderr)
        return 2
    module = importlib.import_module(COMMANDS[command][0])
    status = module.main(rest)
    return status if isinstance(status, int) and not isinstance(status, bool) else 0
