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
import re
import sys
from pathlib import Path

import nbformat

from ..._io import atomic_write_text, backup_copy, output_argument
from .gradescope import PlatformError, _chapter_notebooks, default_solutions

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
    chapter, named after its stem). Every target is checked before anything is written; with
    ``--force`` a replaced notebook is first copied to ``<name>.<time>.bak`` (an instructor
    may have edited it in the course's source/)."""
    out = Path(out)
    sol_dir = default_solutions(solutions)
    picked = _chapter_notebooks(sol_dir, chapters)
    targets = [out / p.stem / p.name for p in picked]
    for target in targets:
        if target.is_symlink() or (target.exists() and not target.is_file()):
            raise PlatformError(f"{target} exists and is not a regular file; not replacing it")
        if target.exists() and not force:
            raise PlatformError(f"{target} exists; pass --force to replace it (a copy is "
                                "kept as <name>.<time>.bak)")
    written = []
    for p, target in zip(picked, targets):
        nb = convert(nbformat.read(p, as_version=4))
        target.parent.mkdir(parents=True, exist_ok=True)
        if target.is_file():
            log(f"backup: {backup_copy(target)}")
        atomic_write_text(target, nbformat.writes(nb) + "\n")
        written.append(target)
    log(f"wrote {', '.join(map(str, written))}; run `nbgrader generate_assignment <stem>` in "
        "the course folder, and nbgrader with LRNN_GRADING=1 in its environment (a failed "
        "check() then fails its test cell)")
    return written


def main(argv=None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    p = argparse.ArgumentParser(prog="lrnn grade nbgrader",
                                description="Export solution notebooks to an nbgrader "
                                            "course's source/ folder.")
    output_argument(p, "--out", required=True, folder=True, command="lrnn grade nbgrader",
                    help="the course's source/ folder")
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
