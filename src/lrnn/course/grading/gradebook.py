"""The gradebook: one CSV row per submission, written atomically under a lock."""
from __future__ import annotations

import csv
import hashlib
import os
import re
import tempfile
from pathlib import Path

from .config import FIXED_COLUMNS, TAIL_COLUMNS, GradeError
from .feedback import fmt as _fmt

def _ex_key(col: str):
    return tuple(int(p) for p in col[2:].split(".") if p.isdigit())


def read_gradebook(path) -> list[dict]:
    path = Path(path)
    if not path.exists():
        return []
    with open(path, newline="", encoding="utf-8") as f:
        return list(csv.DictReader(f))


def write_gradebook(path, rows: list[dict]):
    """Write ``rows`` atomically (temporary file in the same folder, then ``os.replace``)."""
    path = Path(path)
    ex_cols = sorted({k for r in rows for k in r if re.fullmatch(r"ex\d+\.\d+", k)},
                     key=_ex_key)
    columns = FIXED_COLUMNS + ex_cols + TAIL_COLUMNS
    rows = sorted(rows, key=lambda r: r["submission"])
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    try:
        with os.fdopen(fd, "w", newline="", encoding="utf-8") as f:
            w = csv.DictWriter(f, fieldnames=columns, extrasaction="ignore")
            w.writeheader()
            for r in rows:
                w.writerow({k: _fmt(v) if isinstance(v, (int, float)) else v
                            for k, v in r.items()})
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
    except BaseException:
        if os.path.exists(tmp):
            os.unlink(tmp)
        raise


def _clean_stale_temporaries(out: Path):
    """Temporary gradebooks left by a grader that was killed while writing."""
    for p in out.parent.glob(f".{out.name}.*.tmp"):
        try:
            p.unlink()
        except OSError:
            pass


class GradebookLock:
    """An exclusive lock on ``<gradebook>.lock``: two graders never write one gradebook."""

    def __init__(self, out: Path):
        self.path = out.parent / f"{out.name}.lock"
        self.fd = None

    def __enter__(self):
        try:
            import fcntl
        except ImportError:
            return self
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self.fd = os.open(self.path, os.O_RDWR | os.O_CREAT, 0o644)
        try:
            fcntl.flock(self.fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError:
            os.close(self.fd)
            self.fd = None
            raise GradeError(f"another grader is writing {self.path.parent / self.path.stem}; "
                             "wait for it to finish") from None
        return self

    def __exit__(self, *exc):
        if self.fd is not None:
            os.close(self.fd)
            self.fd = None
        return False


def feedback_name(key: str) -> str:
    stem = re.sub(r"[^A-Za-z0-9_.-]+", "_", Path(key).stem)[:80]
    return f"{stem}-{hashlib.sha1(key.encode('utf-8', 'backslashreplace')).hexdigest()[:8]}.md"

