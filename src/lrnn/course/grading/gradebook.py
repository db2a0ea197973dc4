"""The gradebook: one CSV row per submission, written atomically under a lock."""
from __future__ import annotations

import csv
import hashlib
import io
import json
import os
import re
from pathlib import Path

from ..._io import atomic_open
from .config import FIXED_COLUMNS, TAIL_COLUMNS, GradeError
from .feedback import fmt as _fmt
from .parse import open_regular

def _ex_key(col: str):
    return tuple(int(p) for p in col[2:].split(".") if p.isdigit())


MAX_GRADEBOOK_BYTES = 256 * 2 ** 20


def is_gradebook_header(columns) -> bool:
    """The first row of a gradebook this grader wrote."""
    columns = list(columns or [])
    return (columns[:len(FIXED_COLUMNS)] == FIXED_COLUMNS and
            columns[-len(TAIL_COLUMNS):] == TAIL_COLUMNS and
            all(re.fullmatch(r"ex\d+\.\d+", c)
                for c in columns[len(FIXED_COLUMNS):-len(TAIL_COLUMNS)]))


def check_destination(path):
    """Before any grading: ``path`` may be written (a ``.csv`` name, not a folder, a folder
    for it that exists or can be made) and, if it exists, is a gradebook this grader wrote,
    recognised by its header; anything else (a student's notebook, notes) is refused."""
    path = Path(path)
    if path.suffix.lower() != ".csv":
        raise GradeError(f"--out {path}: expected a .csv file name for the gradebook")
    if path.is_dir():
        raise GradeError(f"--out {path} is a folder; give a .csv file name")
    if os.path.lexists(path):
        read_gradebook(path)
    parent = path.parent
    while not parent.exists() and parent != parent.parent:
        parent = parent.parent
    if not parent.is_dir() or not os.access(parent, os.W_OK):
        raise GradeError(f"--out {path}: its folder cannot be created or written")


def read_gradebook(path) -> list[dict]:
    """The rows of the gradebook at ``path`` ([] if there is none); a GradeError if the file
    is not one this grader wrote."""
    path = Path(path)
    if not os.path.lexists(path):
        return []
    try:
        data = open_regular(path, MAX_GRADEBOOK_BYTES)
        text = data.decode("utf-8")
        reader = csv.DictReader(io.StringIO(text, newline=""))
        header = reader.fieldnames
        rows = list(reader) if is_gradebook_header(header) else None
    except (OSError, ValueError, csv.Error) as e:
        raise GradeError(f"--out {path} exists and cannot be read as a gradebook ({e}); "
                         "it is left untouched: choose another file name") from None
    if rows is None:
        first = text.splitlines()[0][:80] if text else "(empty)"
        raise GradeError(f"--out {path} exists and is not a gradebook written by the grader "
                         f"(its first line is {first!r}); it is left untouched: choose "
                         "another file name")
    return rows


def write_gradebook(path, rows: list[dict]):
    """Write ``rows`` atomically (temporary file in the same folder, then ``os.replace``)."""
    path = Path(path)
    ex_cols = sorted({k for r in rows for k in r if re.fullmatch(r"ex\d+\.\d+", k)},
                     key=_ex_key)
    columns = FIXED_COLUMNS + ex_cols + TAIL_COLUMNS
    rows = sorted(rows, key=lambda r: r["submission"])
    path.parent.mkdir(parents=True, exist_ok=True)
    with atomic_open(path, "w", newline="", encoding="utf-8") as f:      # the user's umask
        w = csv.DictWriter(f, fieldnames=columns, extrasaction="ignore")
        w.writeheader()
        for r in rows:
            w.writerow({k: _fmt(v) if isinstance(v, (int, float)) else v
                        for k, v in r.items()})


# ---------------------------------------------------------------------------------------
# The details beside the gradebook: what the report and a regrade need, as data
# ---------------------------------------------------------------------------------------

DETAILS_FORMAT = "lrnn-gradebook-details"
DETAILS_VERSION = 1


def details_path(gradebook) -> Path:
    """``gradebook.csv`` -> ``gradebook.details.json`` (same folder)."""
    gradebook = Path(gradebook)
    return gradebook.with_name(gradebook.stem + ".details.json")


def _is_details(data) -> bool:
    return isinstance(data, dict) and data.get("format") == DETAILS_FORMAT and \
        isinstance(data.get("submissions"), dict)


def read_details(path) -> dict:
    """{submission key: record} of the details file at ``path`` ({} when there is none); a
    GradeError if the file exists and is not one the grader wrote."""
    path = Path(path)
    if not os.path.lexists(path):
        return {}
    try:
        data = json.loads(open_regular(path, MAX_GRADEBOOK_BYTES).decode("utf-8"))
    except (OSError, ValueError) as e:
        raise GradeError(f"{path} exists and cannot be read as the grader's details ({e}); "
                         "it is left untouched: move it away or choose another --out") from None
    if not _is_details(data):
        raise GradeError(f"{path} exists and was not written by the grader; it is left "
                         "untouched: move it away or choose another --out")
    return data["submissions"]


def write_details(path, records: dict):
    data = {"format": DETAILS_FORMAT, "version": DETAILS_VERSION,
            "submissions": dict(sorted(records.items()))}
    with atomic_open(path, "w", encoding="utf-8") as f:
        json.dump(data, f, indent=1, ensure_ascii=False)
        f.write("\n")


def hint_of(detail: str) -> str:
    """The hint a failed check printed (``hint: ...``), else "" ."""
    for line in str(detail or "").splitlines():
        if line.strip().startswith("hint:"):
            return line.strip()[5:].strip()
    return ""


def mistake_of(entry: dict) -> str:
    """One line saying what went wrong in a result entry: its hint, else its first message."""
    hint = hint_of(entry.get("detail", ""))
    if hint:
        return hint[:200]
    first = next((ln.strip() for ln in str(entry.get("detail") or "").splitlines()
                  if ln.strip()), "")
    first = re.sub(r"^[✗…] Exercise \S+ \([^)]*\):\s*", "", first)
    first = re.sub(r"\s*\(read: .*$", "", first)
    return first.split(" — ")[0][:200] or str(entry.get("result", ""))


def details_record(res: dict, seconds: float) -> dict:
    """What the report and a regrade need of one graded submission (``grade_submission``'s
    result): per exercise its points, score, status, hint and review evidence; the row as
    written; the time it took; and ``fatal``, why the notebook could not be run to the end
    (a kernel that could not start, say), or None."""
    import datetime
    row = res["row"]
    exercises = []
    for e in res.get("results", []):
        item = {"exercise": e["exercise"], "title": e.get("title", ""),
                "points": float(e["points"]),
                "score": e["score"] if e["score"] == "manual" else float(e["score"]),
                "status": e.get("result", ""), "hint": hint_of(e.get("detail", "")),
                "seconds": e.get("seconds")}
        if e.get("result") not in ("passed", "graded by hand"):
            item["mistake"] = mistake_of(e)
        if e.get("review"):
            item["review"] = str(e["review"])[:4000]
        exercises.append(item)
    return {"assignment": row.get("assignment", ""), "status": row.get("status", ""),
            "sha256": row.get("sha256", ""), "seconds": round(float(seconds), 2),
            "graded_at": datetime.datetime.now(datetime.timezone.utc).isoformat(
                timespec="seconds"),
            "written": {k: _fmt(v) if isinstance(v, (int, float)) else v
                        for k, v in row.items()},
            "fatal": res.get("fatal"),
            "exercises": exercises}


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


FEEDBACK_NAME = re.compile(r"-[0-9a-f]{64}\.md$")


def feedback_name(key: str) -> str:
    """The feedback file of the submission ``key``: a readable stem and the full sha256 of
    the key (no two submissions share a file)."""
    stem = re.sub(r"[^A-Za-z0-9_.-]+", "_", Path(key).stem)[:80]
    digest = hashlib.sha256(key.encode("utf-8", "surrogatepass")).hexdigest()
    return f"{stem}-{digest}.md"

