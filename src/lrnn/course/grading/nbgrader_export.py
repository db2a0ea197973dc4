"""The solutions as an nbgrader course's ``source/`` folder.

    lrnn grade nbgrader --chapter 01 --out COURSE/source/    # then: nbgrader generate_assignment

The solutions' cell metadata is nbgrader's (schema 3) with one difference: nbgrader's schema
allows only letters, digits, ``_`` and ``-`` in a ``grade_id``, and the course's ids carry the
exercise number with a dot (``ex3.2``, ``ex3.2-solution``: the grader, the build and the
checks key on it). The export writes ``ex3_2``, ``ex3_2-solution``; everything else is copied
unchanged. ``lrnn grade`` matches such notebooks by their ``check("3.2", ...)`` calls (or file
name), not by these ids. See solutions/AUTHORING.md §7.
"""
from __future__ import annotations

import argparse
import os
import re
import sys
from pathlib import Path

import nbformat

from .gradescope import PlatformError, _chapter_notebooks, repository_root

NBGRADER_ID = re.compile(r"^[a-zA-Z0-9_\-]*$")       # nbgrader's schema 3, grade_id


def nbgrader_id(grade_id: str) -> str:
    return grade_id.replace(".", "_")


def convert(nb):
    """A copy of ``nb`` whose grade_ids nbgrader's schema accepts."""
    nb = nbformat.from_dict(nb)
    for cell in nb.cells:
        meta = cell.metadata.get("nbgrader")
        if meta and "grade_id" in meta:
            meta["grade_id"] = nbgrader_id(meta["grade_id"])
            if not NBGRADER_ID.match(meta["grade_id"]):
                raise PlatformError(f"grade_id {meta['grade_id']!r} cannot be made valid for "
                                    "nbgrader")
    return nb


def export(out, *, chapters=(), solutions=None, force=False, log=print) -> list[Path]:
    """Write ``OUT/<stem>/<stem>.ipynb`` for each chosen chapter (an nbgrader assignment per
    chapter, named after its stem)."""
    out = Path(out)
    sol_dir = Path(solutions) if solutions else repository_root() / "solutions"
    written = []
    for p in _chapter_notebooks(sol_dir, chapters):
        target = out / p.stem / p.name
        if target.exists() and not force:
            raise PlatformError(f"{target} exists; pass --force to replace it")
        nb = convert(nbformat.read(p, as_version=4))
        target.parent.mkdir(parents=True, exist_ok=True)
        tmp = target.with_name(f".{target.name}.tmp")
        nbformat.write(nb, tmp)
        os.replace(tmp, target)
        written.append(target)
    log(f"wrote {', '.join(map(str, written))}; run `nbgrader generate_assignment <stem>` in "
        "the course folder")
    return written


def main(argv=None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    p = argparse.ArgumentParser(prog="lrnn grade nbgrader",
                                description="Export solution notebooks to an nbgrader "
                                            "course's source/ folder.")
    p.add_argument("--out", required=True, help="the course's source/ folder")
    p.add_argument("--chapter", action="append", default=[])
    p.add_argument("--solutions", default=None)
    p.add_argument("--force", action="store_true")
    a = p.parse_args(argv)
    try:
        export(a.out, chapters=a.chapter, solutions=a.solutions, force=a.force)
    except PlatformError as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main())
