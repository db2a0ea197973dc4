"""Reading a submission without trusting it.

The file is opened without following links and without blocking (a named pipe, a device or a
folder named ``*.ipynb`` is refused, not waited on), read up to a size limit, and parsed in a
child process under a CPU-time, wall-time and memory limit, which hands back only what the
grader uses: each cell's type, source and nbgrader metadata, with malformed metadata named.
"""
from __future__ import annotations

import hashlib
import json
import os
import stat
import subprocess
import sys

import nbformat

MAX_CELLS = 2000
PARSE_SECONDS = 30
PARSE_MEMORY = 2 * 2 ** 30

_CHILD = r'''
import json, sys
try:
    import resource
    resource.setrlimit(resource.RLIMIT_AS, (PARSE_MEMORY, PARSE_MEMORY))
    resource.setrlimit(resource.RLIMIT_CPU, (PARSE_SECONDS, PARSE_SECONDS + 1))
except ImportError:
    pass
def text(v):
    if isinstance(v, str):
        return v
    if isinstance(v, list) and all(isinstance(s, str) for s in v):
        return "".join(v)
    raise ValueError("a cell source that is not text")
nb = json.loads(sys.stdin.buffer.read().decode("utf-8"))
if not isinstance(nb, dict) or not isinstance(nb.get("cells"), list):
    raise ValueError("no list of cells")
if len(nb["cells"]) > MAX_CELLS:
    raise ValueError(f"{len(nb['cells'])} cells (at most MAX_CELLS)")
cells, problems = [], []
for i, c in enumerate(nb["cells"]):
    if not isinstance(c, dict) or c.get("cell_type") not in ("code", "markdown", "raw"):
        raise ValueError(f"cell {i} is malformed")
    meta = c.get("metadata", {})
    meta = meta if isinstance(meta, dict) else {}
    grader = meta.get("nbgrader")
    keep = {}
    if grader is not None:
        if not isinstance(grader, dict):
            problems.append(f"cell {i}: its nbgrader metadata is a {type(grader).__name__}, "
                            "expected a mapping; the cell counts as an ordinary cell")
        elif not isinstance(grader.get("grade_id", ""), str):
            problems.append(f"cell {i}: its nbgrader grade_id is a "
                            f"{type(grader['grade_id']).__name__}, expected text; the cell "
                            "counts as an ordinary cell")
        else:
            keep = {k: v for k, v in grader.items()
                    if k in ("grade_id", "grade", "solution", "locked", "points", "task")
                    and isinstance(v, (str, bool, int, float))}
    cells.append({"cell_type": c["cell_type"], "source": text(c.get("source", "")),
                  "metadata": {"nbgrader": keep} if keep else {}})
json.dump({"cells": cells, "problems": problems}, sys.stdout)
'''.replace("MAX_CELLS", str(MAX_CELLS)).replace("PARSE_MEMORY", str(PARSE_MEMORY)) \
    .replace("PARSE_SECONDS", str(PARSE_SECONDS))


def open_regular(path, limit: int) -> bytes:
    """The bytes of ``path`` if it is a regular file of at most ``limit`` bytes; else an
    OSError/ValueError saying what it is."""
    flags = os.O_RDONLY | getattr(os, "O_NOFOLLOW", 0) | getattr(os, "O_NONBLOCK", 0) | \
        getattr(os, "O_CLOEXEC", 0)
    fd = os.open(path, flags)
    try:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode):
            raise ValueError("it is not a regular file (a pipe, a device or a folder)")
        if st.st_size > limit:
            raise ValueError(f"it is larger than {limit // 2 ** 20} MiB")
        chunks, total = [], 0
        while True:
            chunk = os.read(fd, 1 << 20)
            if not chunk:
                break
            total += len(chunk)
            if total > limit:
                raise ValueError(f"it is larger than {limit // 2 ** 20} MiB")
            chunks.append(chunk)
        return b"".join(chunks)
    finally:
        os.close(fd)


def sha256_of(path, limit: int) -> str:
    try:
        return hashlib.sha256(open_regular(path, limit)).hexdigest()
    except (OSError, ValueError):
        return ""


def parse(data: bytes, *, seconds: float = PARSE_SECONDS):
    """(notebook, [problems with its metadata]) parsed in a child process; ValueError with
    the reason when it cannot be parsed within the limits."""
    try:
        r = subprocess.run([sys.executable, "-I", "-S", "-c", _CHILD], input=data,
                           capture_output=True, timeout=min(seconds, PARSE_SECONDS))
    except subprocess.TimeoutExpired:
        raise ValueError(f"parsing it took longer than {min(seconds, PARSE_SECONDS):g} s") \
            from None
    if r.returncode != 0:
        last = r.stderr.decode("utf-8", "replace").strip().splitlines()[-1:] or \
            [f"exit status {r.returncode}"]
        raise ValueError(last[0][:300])
    out = json.loads(r.stdout)
    nb = nbformat.from_dict({"cells": out["cells"], "metadata": {}, "nbformat": 4,
                             "nbformat_minor": 5})
    return nb, out["problems"]
