"""Peak memory and wall time of grading one notebook, over the grader's whole process tree.

    python scripts/grading_footprint.py solutions/01_linear_recurrence.ipynb [--sandbox bwrap]

Runs ``python -m lrnn grade NOTEBOOK --workers 1`` into a temporary folder and samples, every
0.2 s, every process descending from it (the grader, bubblewrap, the kernel, its helpers):
the sum of their resident set sizes (RSS: shared pages counted once per process, so an upper
bound) and of their proportional set sizes (PSS: shared pages split between processes, close
to what a container's memory limit charges for them). Prints the peaks and the wall time: the
numbers the README quotes for Gradescope's memory and time settings.
"""
from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path


def children() -> dict[int, list[int]]:
    tree: dict[int, list[int]] = {}
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/stat", encoding="ascii", errors="replace") as f:
                ppid = int(f.read().rsplit(")", 1)[1].split()[1])
        except (OSError, ValueError, IndexError):
            continue
        tree.setdefault(ppid, []).append(int(entry))
    return tree


def descendants(pid: int) -> list[int]:
    tree, out, todo = children(), [], [pid]
    while todo:
        p = todo.pop()
        out.append(p)
        todo += tree.get(p, [])
    return out


def memory_kib(pid: int) -> tuple[int, int]:
    """(RSS, PSS) of one process in KiB; (0, 0) when it is gone or unreadable."""
    try:
        with open(f"/proc/{pid}/smaps_rollup", encoding="ascii") as f:
            fields = dict(line.split(":", 1) for line in f if ":" in line and
                          not line.startswith(("0", "1", "2", "3", "4", "5", "6", "7",
                                               "8", "9", "a", "b", "c", "d", "e", "f")))
        return (int(fields.get("Rss", "0 kB").split()[0]),
                int(fields.get("Pss", "0 kB").split()[0]))
    except (OSError, ValueError):
        return 0, 0


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("notebook")
    p.add_argument("--sandbox", default="bwrap", choices=["auto", "bwrap", "none"])
    p.add_argument("--interval", type=float, default=0.2)
    a = p.parse_args(argv)
    with tempfile.TemporaryDirectory() as tmp:
        cmd = [sys.executable, "-m", "lrnn", "grade", a.notebook, "--out",
               str(Path(tmp) / "gradebook.csv"), "--workers", "1", "--sandbox", a.sandbox]
        start = time.monotonic()
        proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                                text=True)
        peak_rss = peak_pss = peak_procs = 0
        while proc.poll() is None:
            pids = descendants(proc.pid)
            mem = [memory_kib(pid) for pid in pids]
            peak_rss = max(peak_rss, sum(m[0] for m in mem))
            peak_pss = max(peak_pss, sum(m[1] for m in mem))
            peak_procs = max(peak_procs, len(pids))
            time.sleep(a.interval)
        seconds = time.monotonic() - start
        log = proc.stdout.read()
    print(log.strip().splitlines()[-1] if log.strip() else "(no output)")
    print(f"notebook: {Path(a.notebook).name}")
    print(f"wall time: {seconds:.1f} s; exit status {proc.returncode}")
    print(f"peak over the process tree: RSS {peak_rss / 1024:.0f} MiB, "
          f"PSS {peak_pss / 1024:.0f} MiB, {peak_procs} processes")
    return proc.returncode


if __name__ == "__main__":
    sys.exit(main())
