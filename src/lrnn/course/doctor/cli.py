"""``lrnn doctor`` and its subcommands ``slowest`` and ``execute``."""
from __future__ import annotations

import argparse
import sys
from pathlib import Path

from .budgets import BUDGETS, budget_problems, cell_times, is_generated_exercise, notebook_paths, notebook_seconds, slowest_report
from .checkup import check_out_dir, run_doctor
from .execution import execute_notebook


def _positive_seconds(s: str) -> float:
    try:
        value = float(s)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a number of seconds, got {s!r}") from None
    if not (0 < value < float("inf")):
        raise argparse.ArgumentTypeError(f"expected a finite number of seconds > 0, got {s!r}")
    return value


def _positive_int(s: str) -> int:
    try:
        value = int(s)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a positive integer, got {s!r}") from None
    if value <= 0:
        raise argparse.ArgumentTypeError(f"expected a positive integer, got {s!r}")
    return value


def _main_check(argv):
    p = argparse.ArgumentParser(prog="lrnn doctor",
                                description="Check that the course works on this machine "
                                            "(subcommands: slowest, execute; see --help of each).")
    p.add_argument("--quick", action="store_true",
                   help="library checks, one solution graded, one short notebook executed (CI)")
    p.add_argument("--repo", type=Path, default=None, help="the course repository (default: found)")
    p.add_argument("--out-dir", type=Path, default=None,
                   help="where doctor_<device>.json/.md go (default: book/data for a full run, "
                        "a temporary folder for --quick)")
    p.add_argument("--strict", action="store_true", help="missed GPU speed targets fail the run")
    p.add_argument("--skip", nargs="*", default=[], choices=["library", "grading", "notebooks", "gpu"],
                   help="steps to leave out")
    p.add_argument("--cell-timeout", type=_positive_seconds, default=600,
                   help="seconds before a cell is stopped")
    args = p.parse_args(argv)
    if args.repo is not None and not ((args.repo / "solutions").is_dir()
                                      or (args.repo / "book").is_dir()):
        p.error(f"--repo: got {str(args.repo)!r}, expected the course repository (a folder "
                "with solutions/ or book/)")
    try:
        check_out_dir(args.out_dir, quick=args.quick)
    except ValueError as err:
        p.error(str(err))
    report = run_doctor(quick=args.quick, repo=args.repo.resolve() if args.repo else None,
                        out_dir=args.out_dir, strict=args.strict, skip=set(args.skip),
                        cell_timeout=args.cell_timeout)
    return 0 if report["ok"] else 1


def _main_slowest(argv):
    p = argparse.ArgumentParser(prog="lrnn doctor slowest",
                                description="List the slowest recorded cells of every notebook "
                                            "(from the cell times nbclient stores in the notebooks).")
    p.add_argument("paths", nargs="*", help="notebooks or folders (default: book/ solutions/ "
                                            "exercises/ of the course repository)")
    p.add_argument("--top", type=_positive_int, default=15,
                   help="how many of the slowest cells to list")
    p.add_argument("--device", choices=sorted(BUDGETS), default="cpu", help="whose budget to mark")
    args = p.parse_args(argv)
    paths = notebook_paths(args.paths)
    if not paths:
        print("no notebooks found", file=sys.stderr)
        return 2
    print(slowest_report(paths, top=args.top, budget=BUDGETS[args.device]))
    return 0


def _main_execute(argv):
    p = argparse.ArgumentParser(prog="lrnn doctor execute",
                                description="Execute notebooks in place, top to bottom in a fresh "
                                            "kernel each, keeping nbclient's per-cell times.")
    p.add_argument("paths", nargs="+", help="notebooks or folders")
    p.add_argument("--cell-timeout", type=_positive_seconds, default=600)
    args = p.parse_args(argv)
    status = 0
    for path in notebook_paths(args.paths):
        if is_generated_exercise(path):
            print(f"skip  {path}: generated from solutions/{Path(path).name} by "
                  "`python -m lrnn exercises build`, which it must match; not executed")
            continue
        run = execute_notebook(path, cell_timeout=args.cell_timeout, in_place=True)
        times = cell_times(run.nb)
        total = notebook_seconds(times) or 0.0
        worst = max(times, key=lambda t: t.seconds, default=None)
        if run.error:
            status = 1
            print(f"FAIL  {path}: {run.error} (not written)")
            continue
        problems = budget_problems(str(path), run.nb, BUDGETS["cpu"], require_timing=False)
        print(f"{'OVER' if problems else 'ok  '}  {path}: {total:.1f} s"
              + (f", slowest {worst.where()} {worst.seconds:.1f} s" if worst else ""))
        for prob in problems:
            print(f"      {prob}")
    return status


def main(argv=None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    if argv and argv[0] == "slowest":
        return _main_slowest(argv[1:])
    if argv and argv[0] == "execute":
        return _main_execute(argv[1:])
    return _main_check(argv)


if __name__ == "__main__":
    sys.exit(main())
