"""The repository speaks of itself: no file names a path of the machine it was written on, a
folder outside the repository, a tracker's numbers, or how the work was organised. It names
behaviours instead.

Every tracked file is read (``git ls-files``; the tree when there is no git checkout); for a
notebook, its cells' sources and text outputs (not the images, whose base64 could hold any
letters). One assertion lists every offender."""
from __future__ import annotations

import json
import re
import subprocess
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]

#: what must not appear, and why (each pattern is written so that it does not match itself)
PATTERNS = {
    "a tracker's number": r"\bissues?\s*#?\s*\d+",
    "a folder outside the repository": r"\.\./(?:shared|measurements)\b",
    "a path of the machine it was written on": r"(?<![\w*.~-])/(?:wor[k]|roo[t])/",
    "how the work was organised": r"\blent\s+(?:machine|GPU)|\bdevice\s+tool\b|\bGPU\s+session"
                                  r"|\bthe\s+task\s+that\s+wrote\b|\bdevice\s+library\b",
}
COMPILED = {why: re.compile(p, re.IGNORECASE) for why, p in PATTERNS.items()}
SKIP_DIRS = {".git", "__pycache__", ".venv", "venv", "_build", ".whl", ".gpu-results",
             ".ipynb_checkpoints", ".pytest_cache", "build"}


def tracked_files() -> list[Path]:
    try:
        out = subprocess.run(["git", "ls-files", "-z"], cwd=ROOT, capture_output=True,
                             timeout=60, check=True).stdout
        files = [ROOT / f for f in out.decode().split("\0") if f]
        if files:
            return [f for f in files if f.is_file()]
    except (OSError, subprocess.SubprocessError):
        pass
    return [p for p in ROOT.rglob("*") if p.is_file()
            and not SKIP_DIRS.intersection(p.relative_to(ROOT).parts)]


def texts(path: Path):
    """``(where, text)`` pieces of ``path`` to search; nothing for a binary file."""
    data = path.read_bytes()
    if b"\0" in data[:8192]:
        return
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError:
        return
    if path.suffix != ".ipynb":
        yield "", text
        return
    nb = json.loads(text)
    for i, cell in enumerate(nb.get("cells", [])):
        yield f"cell {i}", "".join(cell.get("source", ""))
        for out in cell.get("outputs", []):
            if "text" in out:
                yield f"cell {i} output", "".join(out["text"])
            for kind, value in out.get("data", {}).items():
                if kind.startswith("text/") or kind.endswith("json"):
                    yield f"cell {i} output", value if isinstance(value, str) else \
                        "".join(value) if isinstance(value, list) else json.dumps(value)


def offenders(files, root=ROOT) -> list[str]:
    found = []
    for path in files:
        for where, text in texts(path):
            for why, pattern in COMPILED.items():
                for m in pattern.finditer(text):
                    line = text.count("\n", 0, m.start()) + 1
                    found.append(f"{path.relative_to(root)}:{where + ' ' if where else ''}"
                                 f"line {line}: {m.group(0)!r} ({why})")
    return found


def test_no_file_speaks_of_anything_but_the_project():
    found = offenders(tracked_files())
    assert not found, "\n".join(found)


def test_the_patterns_catch_what_they_are_for(tmp_path):
    # (split strings: this file is searched too)
    bad = {"a.py": "x = 1  # see Iss" "ue 23\n", "b.md": "copied from ../sha" "red/data\n",
           "c.sh": "PY=/wor" "k/venv/bin/python\n", "d.txt": "run it on the le" "nt  machine\n",
           "e.ipynb": json.dumps({"cells": [{"cell_type": "code", "source": ["/roo" "t/x/y"],
                                             "outputs": [{"output_type": "display_data",
                                                          "data": {"image/png": "ab/work/cd"}}]}]})}
    good = {"f.py": "glob('/proc/*/root/work')  # the attack's own path\nsession = Session()\n",
            "g.md": "an issue with the kernel\n"}
    for name, text in {**bad, **good}.items():
        (tmp_path / name).write_text(text)
    found = "\n".join(offenders(sorted(tmp_path.iterdir()), tmp_path))
    for name in bad:
        assert name in found, (name, found)
    for name in good:
        assert name not in found, (name, found)
    assert "image" not in found and found.count("e.ipynb") == 1
