"""``lrnn grade``: the grader's command line."""
from __future__ import annotations

import argparse
import os
import sys

from .config import DEFAULT_CELL_TIMEOUT, DEFAULT_MAX_OUTPUT, DEFAULT_TIMEOUT, GradeError
from .batch import grade

#: ``lrnn grade WORD ...``: the platforms' commands (a submission folder of that name: ``./WORD``).
PLATFORMS = {"gradescope": "gradescope", "classroom": "classroom", "report": "report",
             "nbgrader": "nbgrader_export"}


def main(argv=None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    if argv and argv[0] in PLATFORMS:
        import importlib
        module = importlib.import_module(f"{__package__}.{PLATFORMS[argv[0]]}")
        return module.main(argv[1:])
    os.environ.setdefault("XLA_PYTHON_CLIENT_PREALLOCATE", "false")   # share a GPU with kernels
    parser = argparse.ArgumentParser(prog="lrnn grade",
                                     description="Autograde exercise notebooks, each in a "
                                                 "sandbox of its own.",
                                     epilog="Also: lrnn grade gradescope|classroom|report|"
                                            "nbgrader --help (grading on those platforms, the "
                                            "instructor's report).")
    parser.add_argument("paths", nargs="+", help="submission notebooks or folders of them")
    parser.add_argument("--out", required=True, help="gradebook CSV (created or updated)")
    parser.add_argument("--force", action="store_true",
                        help="regrade graded submissions (hand grades of open questions are "
                             "kept; the gradebook is backed up first)")
    parser.add_argument("--timeout", type=float, default=DEFAULT_TIMEOUT,
                        help=f"seconds per notebook (default {DEFAULT_TIMEOUT})")
    parser.add_argument("--cell-timeout", type=float, default=DEFAULT_CELL_TIMEOUT,
                        help=f"seconds per cell or test before it is interrupted "
                             f"(default {DEFAULT_CELL_TIMEOUT})")
    parser.add_argument("--feedback-dir", default=None,
                        help="folder for the Markdown feedback (default: feedback/ beside --out)")
    parser.add_argument("--workers", type=int, default=2, help="notebooks run in parallel")
    parser.add_argument("--solutions", default=None,
                        help="folder of solution notebooks (default: ./solutions)")
    parser.add_argument("--max-output", type=int, default=DEFAULT_MAX_OUTPUT,
                        help="bytes a cell may print before the feedback notes it")
    parser.add_argument("--sandbox", choices=["auto", "bwrap", "none"], default="auto",
                        help="auto (default): bubblewrap if it works here, else none with a "
                             "warning; bwrap: fail if it does not; none: no isolation")
    parser.add_argument("--memory-limit", type=int, default=None, metavar="MB",
                        help="address space per kernel process, MiB (default 8192; not "
                             "applied on a GPU)")
    parser.add_argument("--max-processes", type=int, default=None, metavar="N",
                        help="processes and threads per sandbox (default 1024)")
    parser.add_argument("--sandbox-path", action="append", default=[], metavar="DIR",
                        help="an extra folder the kernel may read (e.g. packages installed "
                             "outside the Python environment); repeatable")
    parser.add_argument("--assignment", default=None, metavar="STEM",
                        help="the chapter every submission answers (a solution notebook's "
                             "name, e.g. 01_linear_recurrence); default: the chapter each "
                             "file name names")
    args = parser.parse_args(argv)
    try:
        grade(args.paths, args.out, force=args.force, timeout=args.timeout,
              cell_timeout=args.cell_timeout, feedback_dir=args.feedback_dir,
              workers=args.workers, solutions=args.solutions, max_output=args.max_output,
              sandbox=args.sandbox, memory_limit_mb=args.memory_limit,
              max_processes=args.max_processes, sandbox_paths=args.sandbox_path,
              assignment=args.assignment,
              log=lambda m: print(m, file=sys.stderr if m.startswith("WARNING") else sys.stdout,
                                  flush=True))
    except GradeError as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print(f"\nlrnn grade: interrupted; {_kept(args.out)}", file=sys.stderr)
        return 130
    return 0


def _kept(out) -> str:
    """What an interrupted grading leaves: the gradebook is rewritten atomically after each
    submission, so it holds every submission graded before the interrupt."""
    from .gradebook import read_gradebook
    try:
        rows = read_gradebook(out)
    except (GradeError, OSError):
        return f"the gradebook {out} was not changed"
    if not rows:
        return "no submission was graded yet, nothing was written"
    return (f"{len(rows)} graded submission(s) kept in {out}; the same command grades the "
            "rest")

