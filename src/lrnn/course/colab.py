"""Colab: install what the course needs without changing what Colab preinstalled, and say how
far this runtime has drifted from the package set that CI tested (``.ci/colab-pins.txt``).

Two entry points, both standard library only (they run before anything else is installed):

* :func:`install_missing` — called by every notebook's setup cell right after
  ``pip install --no-deps lrnn``. It installs the requirements of ``lrnn[notebooks]`` that are
  missing, with every installed distribution pinned at its version (a pip constraints file), so
  pip can only add packages. An installed version older than the course's floor is reported in
  plain words and left alone. It prints one line.
* :func:`drift` / :func:`drift_lines` — for ``python -m lrnn doctor``: which installed versions
  differ from the pins, and whether any difference matters to the course.
"""
from __future__ import annotations

import importlib.metadata as metadata
import re
import subprocess
import sys
import tempfile
from pathlib import Path

#: The packages whose version decides whether the course works: what it imports, and the
#: kernel and widget stack that runs it. A different major.minor version of one of these is
#: worth a look; anything else that drifts is a dependency of theirs.
COURSE_PACKAGES = ("jax", "jaxlib", "numpy", "scipy", "matplotlib", "ipython", "ipywidgets",
                   "widgetsnbextension", "jupyterlab-widgets", "ipykernel", "jupyter-client",
                   "optax", "tqdm", "mlxtend", "scikit-learn", "nbformat", "nbclient", "pillow")


def canonical(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()


def version_tuple(version: str) -> tuple[int, ...]:
    """The leading release numbers of a version string: ``"2.1.3rc1"`` -> ``(2, 1, 3)``."""
    out = []
    for part in version.split("."):
        m = re.match(r"\d+", part)
        if not m:
            break
        out.append(int(m.group(0)))
        if m.group(0) != part:
            break
    return tuple(out)


def installed() -> dict[str, str]:
    """{canonical name: version} of every distribution this interpreter sees."""
    out = {}
    for dist in metadata.distributions():
        name = dist.metadata["Name"]
        if name:
            out.setdefault(canonical(name), dist.version)
    return out


def _requirement(spec: str):
    """(name, extra or None, floor or None) of a requirement string of lrnn's metadata."""
    m = re.match(r"\s*([A-Za-z0-9][A-Za-z0-9._-]*)\s*(\[[^\]]*\])?\s*(?:>=\s*([\w.]+))?", spec)
    extra = re.search(r"""extra\s*==\s*["']([\w-]+)["']""", spec)
    return canonical(m.group(1)), extra and extra.group(1), m.group(3)


def requirements(extras=("notebooks",)) -> list[tuple[str, str | None]]:
    """[(name, floor)] that ``lrnn[extras]`` needs, from the installed lrnn's metadata."""
    specs = metadata.requires("lrnn") or []
    wanted, todo, out = set(), list(extras), {}
    while todo:
        extra = todo.pop()
        if extra in wanted:
            continue
        wanted.add(extra)
        for spec in specs:
            name, extra_of, floor = _requirement(spec)
            inner = re.match(r"\s*lrnn\s*\[([^\]]*)\]", spec)
            if extra_of == extra and inner:
                todo += [e.strip() for e in inner.group(1).split(",")]
    for spec in specs:
        name, extra_of, floor = _requirement(spec)
        if name != "lrnn" and (extra_of is None or extra_of in wanted):
            out.setdefault(name, floor)
    return sorted(out.items())


def plan(reqs, have: dict[str, str]):
    """(missing names, [(name, installed, floor)] installed below the floor)."""
    missing = [n for n, _ in reqs if n not in have]
    old = [(n, have[n], f) for n, f in reqs
           if n in have and f and version_tuple(have[n]) < version_tuple(f)]
    return missing, old


def install_missing(extras=("notebooks",), *, run=subprocess.run, quiet: bool = False) -> dict:
    """Install what ``lrnn[extras]`` lacks, changing no installed package; print one line.

    Returns ``{"installed": {name: version}, "too_old": [(name, version, floor)]}``."""
    before = installed()
    missing, old = plan(requirements(extras), before)
    if missing:
        with tempfile.TemporaryDirectory() as tmp:
            keep = Path(tmp, "keep-installed.txt")
            keep.write_text("".join(f"{n}=={v}\n" for n, v in sorted(before.items())))
            try:
                run([sys.executable, "-m", "pip", "install", "-q", "-c", str(keep), *missing],
                    check=True)
            except subprocess.CalledProcessError:
                print(f"Could not add {', '.join(missing)} without changing packages already "
                      f"here (pip's message is above); nothing was changed. To accept upgrades: "
                      f"pip install {' '.join(missing)}, then restart the runtime.")
    after = installed()
    added = {n: v for n, v in after.items() if n not in before}
    changed = {n: (before[n], after[n]) for n in before if n in after and after[n] != before[n]}
    if changed:   # cannot happen with the constraints; said loudly if pip ever does it
        raise RuntimeError(f"pip changed preinstalled packages: {changed}")
    added.setdefault("lrnn", after.get("lrnn", "?"))   # the setup cell installed it just before
    if not quiet:
        print(install_line(added, old, len([n for n in before if n != "lrnn"])))
    return {"installed": added, "too_old": old}


def install_line(added: dict, old, n_before: int) -> str:
    lrnn = f"lrnn {added.get('lrnn', '')}".strip()
    others = ", ".join(f"{n} {v}" for n, v in sorted(added.items()) if n != "lrnn")
    line = f"Installed {lrnn}{' with ' + others if others else ''}; " \
           f"the {n_before} packages already here kept their versions."
    if old:
        line += " Older than the course supports, not upgraded: " + ", ".join(
            f"{n} {v} (course needs ≥{f}; some cells may fail)" for n, v, f in old) + "."
    return line


# -- drift ---------------------------------------------------------------------------------------
def pins_path() -> Path | None:
    """The pins CI tested: the checkout's .ci/colab-pins.txt, else the copy inside the package."""
    here = Path(__file__).resolve()
    for p in (here.parents[3] / ".ci" / "colab-pins.txt", here.with_name("colab-pins.txt")):
        if p.is_file():
            return p
    return None


def read_pins(path: Path) -> tuple[dict[str, str], str]:
    """({name: version}, the header's source line) of a pins file."""
    pins, source = {}, ""
    for line in path.read_text(encoding="utf-8").splitlines():
        if line.startswith("# source:"):
            source = line.removeprefix("# source:").strip()
        m = re.match(r"([A-Za-z0-9][A-Za-z0-9._-]*)==([^\s#]+)", line)
        if m:
            pins[canonical(m.group(1))] = m.group(2)
    return pins, source


def drift(pins: dict[str, str], have: dict[str, str], floors: dict[str, str] | None = None):
    """[(name, pinned, installed or None, verdict)] for every pin that differs.

    verdict: ``"too old"`` (below the course's floor), ``"matters"`` (a course package at another
    major.minor version, or missing), ``"minor"`` (a course package, same major.minor) or
    ``"unlikely"`` (a dependency of the course's packages)."""
    floors = floors or {}
    out = []
    for name, pinned in sorted(pins.items()):
        got = have.get(name)
        if got == pinned:
            continue
        course = name in COURSE_PACKAGES
        if got is not None and floors.get(name) and version_tuple(got) < version_tuple(floors[name]):
            verdict = "too old"
        elif course and (got is None or version_tuple(got)[:2] != version_tuple(pinned)[:2]):
            verdict = "matters"
        elif course:
            verdict = "minor"
        else:
            verdict = "unlikely"
        out.append((name, pinned, got, verdict))
    return out


def drift_lines(path: Path | None = None, have: dict[str, str] | None = None) -> list[str]:
    """The doctor's report of drift from the pins, a few lines."""
    path = path or pins_path()
    if path is None:
        return ["Colab drift: no pins file found (.ci/colab-pins.txt), nothing to compare"]
    pins, source = read_pins(path)
    have = installed() if have is None else have
    try:
        floors = dict(requirements(("grading",)))
    except metadata.PackageNotFoundError:
        floors = {}
    rows = drift(pins, have, floors)
    head = f"Colab drift against the pins CI tested ({source or path.name}): "
    if not rows:
        return [head + f"none, all {len(pins)} pinned packages at the tested versions"]
    worst = [r for r in rows if r[3] in ("too old", "matters")]
    lines = [head + f"{len(rows)} of {len(pins)} differ, "
             + (f"{len(worst)} may matter to the course" if worst else "none that matters to the course")]
    say = {"too old": "older than the course supports: cells may fail",
           "matters": "the course uses it; untested version, report problems",
           "minor": "the course uses it; same major.minor, unlikely to matter",
           "unlikely": "a dependency of the course's packages, unlikely to matter"}
    order = ("too old", "matters", "minor", "unlikely")
    for name, pinned, got, verdict in sorted(rows, key=lambda r: (order.index(r[3]), r[0])):
        lines.append(f"  {name}: tested {pinned}, here {got or 'not installed'} ({say[verdict]})")
    return lines


def doctor_status(lines: list[str]) -> str:
    """WARN when a difference may matter to the course, else INFO (the doctor's statuses)."""
    return "WARN" if "may matter" in lines[0] else "INFO"
