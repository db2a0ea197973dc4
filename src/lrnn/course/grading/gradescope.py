"""A Gradescope autograder for the course: the bundle, and the program that runs in it.

    lrnn grade gradescope --chapter 01 --out autograder.zip [--force] [--project DIR]
        [--timeout 480] [--cell-timeout 120] [--visibility visible] [--sandbox auto]
    python -m lrnn.course.grading.gradescope run [--root /autograder]      # what run_autograder calls

A bundle is one Gradescope assignment: one chapter. It follows Gradescope's autograder
specification: at the root of the zip, ``setup.sh`` (run once, as root, when Gradescope builds
the image) and ``run_autograder`` (run for each submission, working folder ``/autograder``);
the rest lands in ``/autograder/source``:

* ``lrnn-<version>-py3-none-any.whl``: the ``lrnn`` of the checkout the bundle was built from,
  built by pip (``pip wheel --no-deps``, the project's build backend), so every submission is
  graded by that code; ``setup.sh`` installs it with pip, which checks its metadata;
* ``constraints.txt``: the versions of the grading dependencies in the environment that built
  the bundle (``setup.sh`` installs :data:`GRADING_REQUIREMENT` under these pins);
* ``solutions/NN_*.ipynb``: the chapter's solution notebook: the hidden tests;
* ``lrnn-autograder.json``: what was built from what (commit, chapter, limits, the Gradescope
  settings the chapter needs).

``run_autograder`` grades every notebook in ``/autograder/submission`` exactly as
``lrnn grade`` does (same harness, same official and hidden tests, same precision policy,
same feedback text) and writes ``/autograder/results/results.json``: the score of the best
notebook of the bundle's chapter (notebooks of other chapters are named and ignored), one
test per exercise without a visibility of its own (so the top-level ``visibility``, the
bundle's ``--visibility``, applies), and the open questions as tests worth 0 automatic points
tagged ``manual`` (add a manually graded question to the Gradescope outline for them).

Inside the container, ``--sandbox`` keeps its meaning: ``auto`` uses bubblewrap when the
container lets it create namespaces (then a submission cannot see ``/autograder/source``,
``/autograder/results`` or the grader), and otherwise grades without it (``none``). Without
bubblewrap the container is the only boundary: it holds one submission, so no classmate can be
harmed, but the student's code runs as the grader's user. Two measures then keep the hidden
tests out of what the student sees: the solutions are read into memory and the bundle's own
copy of the solution notebook (``/autograder/source/solutions``, unpacked by the platform) is
deleted before any student code runs (a folder given with ``--solutions`` is the
instructor's and is never deleted), and any line of a hidden test that still reaches a
feedback text is replaced by ``[hidden]``. A submission could still write its own
``results.json`` (after the grader wrote it), so on Gradescope use ``--sandbox bwrap`` where
the container allows it (the run then fails loudly instead of grading unconfined).
"""
from __future__ import annotations

import argparse
import datetime
import json
import math
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
import zipfile
from pathlib import Path

GRADING_REQUIREMENT = "lrnn[grading]"
MANIFEST = "lrnn-autograder.json"
ROOT_ENV = "LRNN_AUTOGRADER_ROOT"
PYTHON_ENV = "LRNN_AUTOGRADER_PYTHON"
SANDBOX_PATH_ENV = "LRNN_AUTOGRADER_SANDBOX_PATH"     # extra folders kernels may read (os.pathsep)
VENV = "/opt/lrnn-venv"
VISIBILITIES = ("hidden", "after_due_date", "after_published", "visible")
MAX_NOTEBOOKS = 10
HIDDEN_MARK = "[hidden]"
MODULE = __spec__.name if __spec__ is not None else __name__       # python -m MODULE
# Packages whose versions decide a verdict: pinned in constraints.txt when present.
PINNED = ("jax", "jaxlib", "numpy", "scipy", "ml_dtypes", "opt_einsum", "nbformat", "nbclient",
          "ipykernel", "ipython", "jupyter_client", "matplotlib", "optax", "mlxtend",
          "scikit-learn", "tqdm", "ipywidgets", "fastjsonschema", "jsonschema", "traitlets")


class PlatformError(ValueError):
    """A bad argument or an unusable path (the message says which and why)."""


# ---------------------------------------------------------------------------------------
# The one seam to the grader: every call into it goes through these two functions.
# ---------------------------------------------------------------------------------------

def _grader():
    """(the grader's functions as one namespace, the sandbox module)."""
    import types
    from . import batch, config, gradebook, sandbox as sb, score, solutions
    g = types.SimpleNamespace(
        DEFAULT_TIMEOUT=config.DEFAULT_TIMEOUT, DEFAULT_CELL_TIMEOUT=config.DEFAULT_CELL_TIMEOUT,
        NO_SANDBOX_WARNING=config.NO_SANDBOX_WARNING, load_solutions=solutions.load_solutions,
        grade_submission=score.grade_submission, display_key=score.display_key,
        _title=score._title, _preload=batch._preload, grade=batch.grade,
        feedback_name=gradebook.feedback_name, read_gradebook=gradebook.read_gradebook)
    return g, sb


def grade_notebooks(paths, solutions, *, sandbox="auto", timeout=None, cell_timeout=None,
                    hidden=(), log=print) -> tuple[list[dict], str]:
    """Grade ``paths`` one by one against ``solutions`` (a folder, or what
    ``load_solutions`` returned) as ``lrnn grade`` does. Returns (the result of
    ``grade_submission`` for each, the sandbox kind)."""
    g, sb = _grader()
    sols = g.load_solutions(solutions) if isinstance(solutions, (str, os.PathLike)) \
        else solutions
    if not sols:
        raise PlatformError(f"no solution notebooks in {solutions}")
    if isinstance(sandbox, sb.Sandbox):
        box = sandbox
    else:
        hide = {Path(p).resolve() for p in hidden} | {Path(p).resolve().parent for p in paths}
        try:
            box = sb.choose(sandbox, hidden=tuple(sorted(hide)))
        except sb.SandboxError as e:
            raise PlatformError(str(e)) from None
    if box.kind == "none":
        log(g.NO_SANDBOX_WARNING.format(why=box.note or "--sandbox none"))
    out = []
    for p in paths:
        start = time.monotonic()
        try:
            res = g.grade_submission(p, sols, sandbox=box,
                                     timeout=timeout or g.DEFAULT_TIMEOUT,
                                     cell_timeout=cell_timeout or g.DEFAULT_CELL_TIMEOUT)
        except Exception as e:  # noqa: BLE001 - a grader failure costs this notebook only
            key = g.display_key(p)
            res = {"row": {"submission": key, "sha256": "", "assignment": "",
                           "sandbox": box.kind, "total": 0, "max_total": 0,
                           "status": f"grader error: {type(e).__name__}: {e}"[:300]},
                   "results": [],
                   "feedback": f"# Feedback on `{Path(key).name}`\n\nThe grader failed on "
                               f"this submission ({type(e).__name__}); ask your "
                               "instructor.\n"}
        res["seconds"] = time.monotonic() - start
        out.append(res)
    return out, box.kind


# ---------------------------------------------------------------------------------------
# results.json
# ---------------------------------------------------------------------------------------

def feedback_sections(feedback: str) -> tuple[str, dict[str, str]]:
    """(the head of a feedback text, {exercise id: its section}) as ``lrnn grade`` wrote it."""
    parts = re.split(r"(?m)^## Exercise ", feedback)
    sections = {}
    for part in parts[1:]:
        ex = part.split(" ", 1)[0]
        sections[ex] = "## Exercise " + part.rstrip("\n") + "\n"
    return parts[0], sections


def hidden_lines(solutions: dict) -> list[str]:
    """The lines of the hidden tests (at least 12 characters long) of the loaded solutions."""
    lines = set()
    for sol in solutions.values():
        for row in sol["table"]:
            src = row.get("source", "")
            if row["kind"] == "test" and "### BEGIN HIDDEN TESTS" in src:
                block = src.split("### BEGIN HIDDEN TESTS", 1)[1].split("### END HIDDEN", 1)[0]
                lines |= {ln.strip() for ln in block.splitlines() if len(ln.strip()) >= 12}
    return sorted(lines, key=len, reverse=True)


def redact(text: str, lines) -> str:
    for line in lines:
        if line in text:
            text = text.replace(line, HIDDEN_MARK)
    return text


def _best_per_assignment(graded: list[dict]) -> list[dict]:
    best = {}
    for res in graded:
        key = res["row"].get("assignment") or f"?{res['row']['submission']}"
        if key not in best or float(res["row"]["total"]) > float(best[key]["row"]["total"]):
            best[key] = res
    return [best[k] for k in sorted(best)]


def results_json(graded: list[dict], *, visibility="visible", sandbox="", seconds=0.0,
                 hidden=(), note="", assignment=None) -> dict:
    """Gradescope's results.json for the notebooks of one submission: the notebook that
    scored best for the bundle's ``assignment`` (any, when None); notebooks of other
    assignments are ignored, with a note."""
    import lrnn
    ignored = []
    if assignment is not None:
        ignored = [r for r in graded if r["row"].get("assignment") != assignment]
        graded = [r for r in graded if r["row"].get("assignment") == assignment]
    kept = _best_per_assignment(graded)
    tests, outputs, extra = [], [], []
    for res in kept:
        row = res["row"]
        feedback = redact(res["feedback"], hidden)
        head, sections = feedback_sections(feedback)
        outputs.append(feedback)
        name = Path(row["submission"]).name
        for e in res["results"]:
            test = {"number": e["exercise"], "name": f"Exercise {e['exercise']} · {e['title']}",
                    "output": sections.get(e["exercise"], "Passed.\n"), "output_format": "md"}
            # no per-test "visibility": each test then follows the top-level one (the
            # bundle's --visibility), which a per-test value would override
            if e["score"] == "manual":
                test.update(score=0.0, max_score=0.0, tags=["manual"],
                            name=test["name"] + f" ({_num(e['points'])} points, graded by hand)")
            else:
                test.update(score=float(e["score"]), max_score=float(e["points"]),
                            status="passed" if e["result"] == "passed" else "failed")
            if len(kept) > 1:
                test["name"] = f"{name}: {test['name']}"
            tests.append(test)
        extra.append({"notebook": name, "assignment": row.get("assignment", ""),
                      "status": row.get("status", ""), "sha256": row.get("sha256", ""),
                      "total": float(row["total"]), "max_total": float(row["max_total"]),
                      "seconds": round(res.get("seconds", 0.0), 1)})
    if ignored:
        names = ", ".join(f"`{Path(r['row']['submission']).name}`" for r in ignored)
        outputs.insert(0, f"Not graded here: {names} (this assignment is "
                          f"`{assignment}`; a notebook of another assignment scores "
                          "nothing here: submit it to its own assignment).")
    if assignment is not None and not kept and graded == [] and not note:
        note = f"**Score: 0.** No notebook of this submission is the assignment `{assignment}`."
    if note:
        outputs.insert(0, note)
    score = sum(float(r["row"]["total"]) for r in kept)
    top = sum(float(r["row"]["max_total"]) for r in kept)
    return {"score": float(min(score, top)) if kept else 0.0,
            "execution_time": int(round(seconds)),
            "output": "\n\n".join(outputs) or "No notebook was graded.",
            "output_format": "md", "visibility": visibility, "stdout_visibility": "hidden",
            "tests": tests,
            "extra_data": {"lrnn": lrnn.__version__, "sandbox": sandbox, "notebooks": extra,
                           "ignored": [Path(r["row"]["submission"]).name for r in ignored]}}


def _num(x) -> str:
    return f"{float(x):g}"


def write_json_atomically(path: Path, data: dict):
    from ..._io import atomic_write_text
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    atomic_write_text(path, json.dumps(data, indent=1, ensure_ascii=False) + "\n")


# ---------------------------------------------------------------------------------------
# run_autograder
# ---------------------------------------------------------------------------------------

def _read_manifest(root: Path) -> dict:
    try:
        data = json.loads((Path(root) / "source" / MANIFEST).read_text(encoding="utf-8"))
        return data if isinstance(data, dict) else {}
    except (OSError, ValueError):
        return {}


def _assignment(manifest: dict, sols: dict) -> str | None:
    """The one assignment a bundle grades: its manifest's chapter, else the only solution."""
    chapters = [Path(c).stem for c in manifest.get("chapters", [])]
    if len(chapters) == 1 and chapters[0] in sols:
        return chapters[0]
    return next(iter(sols)) if len(sols) == 1 else None


def scrub_bundle_solutions(root: Path, sol_dir: Path, sols: dict, manifest: dict,
                           log=print) -> list[Path]:
    """Before unconfined student code runs: delete the solution notebooks of the bundle's
    own copy (``ROOT/source/solutions``, unpacked from the zip by the platform), one by one,
    and nothing else. A solutions folder given with ``--solutions`` is the instructor's: it
    is never deleted (a warning says a submission can read it)."""
    own = (Path(root) / "source" / "solutions").resolve()
    if sol_dir.resolve() != own or not manifest:
        log(f"WARNING: grading unconfined with the solutions in {sol_dir}, which is not the "
            "bundle's own copy: they are left in place, and a submission can read them.")
        return []
    listed = {Path(c).name for c in manifest.get("chapters", [])}
    removed = []
    for sol in sols.values():
        p = Path(sol["path"])
        if p.name in listed and p.resolve().parent == own and p.is_file():
            p.unlink()
            removed.append(p)
    return removed


def submission_notebooks(folder: Path) -> list[Path]:
    found = []
    for root, dirs, files in os.walk(folder):
        dirs[:] = sorted(d for d in dirs if not d.startswith("."))
        found += [Path(root) / f for f in sorted(files) if f.endswith(".ipynb")]
    return found


def run(root=None, *, solutions=None, sandbox="auto", timeout=None, cell_timeout=None,
        visibility="visible", scrub=True, extra=None, log=print) -> dict:
    """Grade ``ROOT/submission`` and write ``ROOT/results/results.json``; return it.
    ``scrub``: when the kernels run unconfined, delete the solution files once loaded.
    ``extra``: folders the kernels may read besides the Python environment (default:
    ``$LRNN_AUTOGRADER_SANDBOX_PATH``), as ``lrnn grade --sandbox-path``."""
    start = time.monotonic()
    g, sb = _grader()
    root = Path(root or os.environ.get(ROOT_ENV) or "/autograder")
    sol_dir = Path(solutions) if solutions else root / "source" / "solutions"
    out = root / "results" / "results.json"
    if solutions is not None and not sol_dir.is_dir():
        raise PlatformError(f"`--solutions`: got {str(solutions)!r}, expected a folder of "
                            "solution notebooks")
    manifest = _read_manifest(root)
    if visibility not in VISIBILITIES:
        raise PlatformError(f"`--visibility`: got {visibility!r}, expected one of "
                            f"{', '.join(VISIBILITIES)}")
    try:
        sols = g.load_solutions(sol_dir)
        if not sols:
            raise PlatformError(f"no solution notebooks in {sol_dir}")
        hidden = hidden_lines(sols)
        assignment = _assignment(manifest, sols)
        notebooks = submission_notebooks(root / "submission")
        if not notebooks:
            data = results_json([], visibility=visibility, seconds=time.monotonic() - start,
                                note="**Score: 0.** Your submission holds no `.ipynb` "
                                     "notebook: upload the exercise notebook itself.")
            write_json_atomically(out, data)
            return data
        note = ""
        if len(notebooks) > MAX_NOTEBOOKS:
            note = (f"Your submission holds {len(notebooks)} notebooks; the first "
                    f"{MAX_NOTEBOOKS} were graded.")
            notebooks = notebooks[:MAX_NOTEBOOKS]
        try:
            if extra is None:
                extra = [p for p in os.environ.get(SANDBOX_PATH_ENV, "").split(os.pathsep) if p]
            box = sb.choose(sandbox, hidden=tuple(sorted({sol_dir.resolve(), out.parent.resolve(),
                                                         (root / "submission").resolve()})),
                            extra=tuple(extra))
        except sb.SandboxError as e:
            raise PlatformError(str(e)) from None
        if box.kind == "none" and scrub:
            g._preload(sols, references=True)        # nothing is read from disk after this
            scrub_bundle_solutions(root, sol_dir, sols, manifest, log=log)
        graded, kind = grade_notebooks(notebooks, sols, sandbox=box, timeout=timeout,
                                       cell_timeout=cell_timeout, log=log)
        data = results_json(graded, visibility=visibility, sandbox=kind, hidden=hidden,
                            seconds=time.monotonic() - start, note=note,
                            assignment=assignment)
    except Exception as e:  # noqa: BLE001 - Gradescope must always get a results.json
        import traceback
        traceback.print_exc()
        data = {"score": 0.0, "execution_time": int(time.monotonic() - start),
                "output": f"The autograder failed ({type(e).__name__}); your instructor has "
                          "been shown the details. Please tell them.",
                "output_format": "md", "visibility": visibility, "stdout_visibility": "hidden",
                "tests": [], "extra_data": {"error": f"{type(e).__name__}: {e}"[:2000]}}
    write_json_atomically(out, data)
    for t in data["tests"]:
        log(f"{t['name']}: {_num(t['score'])} / {_num(t['max_score'])}")
    log(f"total: {_num(data['score'])}")
    return data


# ---------------------------------------------------------------------------------------
# The bundle
# ---------------------------------------------------------------------------------------

def repository_root() -> Path:
    return Path(__file__).resolve().parents[4]              # src/lrnn/course/grading/<this>.py


def _is_checkout(root: Path) -> bool:
    return (root / "pyproject.toml").is_file() and (root / "src" / "lrnn" / "__init__.py").is_file()


def project_root(project=None) -> Path:
    """The lrnn checkout a bundle's wheel is built from: ``project``, else the checkout this
    ``lrnn`` was imported from, else the current folder."""
    if project is not None:
        root = Path(project)
        if not _is_checkout(root):
            raise PlatformError(f"`--project`: got {str(project)!r}, expected a checkout of "
                                "lrnn (pyproject.toml and src/lrnn/)")
        return root
    for root in (repository_root(), Path.cwd()):
        if _is_checkout(root):
            return root
    raise PlatformError("the bundle's wheel is built from a checkout of lrnn, and this lrnn "
                        "is an installed package: run the command in a checkout, or pass "
                        "`--project` (its folder)")


def default_solutions(solutions=None) -> Path:
    """``solutions`` (a folder), else ``./solutions``, else the checkout's ``solutions/``."""
    if solutions is not None:
        if not Path(solutions).is_dir():
            raise PlatformError(f"`--solutions`: got {str(solutions)!r}, expected a folder of "
                                "solution notebooks")
        return Path(solutions)
    for cand in (Path("solutions"), repository_root() / "solutions"):
        if cand.is_dir() and any(cand.glob("[0-9][0-9]_*.ipynb")):
            return cand
    raise PlatformError("no solutions/ folder here or in an lrnn checkout: pass `--solutions` "
                        "(the folder of solution notebooks)")


def _pyproject(root: Path) -> dict:
    try:
        import tomllib
    except ImportError:                                      # Python 3.10
        import tomli as tomllib
    with open(root / "pyproject.toml", "rb") as f:
        return tomllib.load(f)


def build_wheel(root: Path) -> tuple[str, bytes]:
    """The wheel of the checkout ``root`` (name, bytes), built by pip with the project's own
    build backend (``pip wheel --no-deps``) from a copy of pyproject.toml, README.md and src/
    (the checkout gets no build/ or egg-info)."""
    if not _is_checkout(root):
        raise PlatformError(f"no lrnn checkout at {root}: build the bundle from a checkout")
    ignore = shutil.ignore_patterns("__pycache__", "*.pyc", "*.pyo", "*.egg-info")
    with tempfile.TemporaryDirectory(prefix="lrnn-wheel-") as tmp:
        stage, dist = Path(tmp) / "project", Path(tmp) / "dist"
        stage.mkdir()
        for name in ("pyproject.toml", "README.md", "LICENSE"):
            if (root / name).is_file():
                shutil.copy2(root / name, stage / name)
        shutil.copytree(root / "src", stage / "src", ignore=ignore)
        cmd = [sys.executable, "-m", "pip", "wheel", "--no-deps", "--quiet",
               "--wheel-dir", str(dist), str(stage)]
        if _local_backend_ok(root):
            cmd.insert(4, "--no-build-isolation")
        r = subprocess.run(cmd, capture_output=True, text=True, timeout=600,
                           env=dict(os.environ, PIP_DISABLE_PIP_VERSION_CHECK="1"))
        wheels = sorted(dist.glob("*.whl"))
        if r.returncode != 0 or len(wheels) != 1:
            raise PlatformError("pip could not build the wheel of this checkout "
                                f"({' '.join(cmd[2:5])} ...): {(r.stderr or r.stdout)[-1500:]}")
        return wheels[0].name, wheels[0].read_bytes()


def _local_backend_ok(root: Path) -> bool:
    """The build backend pyproject.toml asks for (``name>=X.Y`` requirements) is installed
    here: pip then builds without downloading it."""
    from importlib import metadata

    def version(text):
        return tuple(int(p) for p in re.findall(r"\d+", text)[:3])

    try:
        for req in _pyproject(root)["build-system"]["requires"]:
            m = re.fullmatch(r"\s*([A-Za-z0-9_.-]+)\s*(?:>=\s*([0-9.]+))?\s*", req)
            if m is None or (m[2] and version(metadata.version(m[1])) < version(m[2])):
                return False
            metadata.version(m[1])
        return True
    except Exception:  # noqa: BLE001 - unknown: let pip fetch the backend
        return False


def constraints() -> str:
    from importlib import metadata
    lines = []
    for name in PINNED:
        try:
            lines.append(f"{name}=={metadata.version(name)}")
        except metadata.PackageNotFoundError:
            continue
    return "\n".join(lines) + "\n"


def _commit(root: Path) -> str:
    try:
        r = subprocess.run(["git", "-C", str(root), "rev-parse", "HEAD"], capture_output=True,
                           text=True, timeout=10)
        dirty = subprocess.run(["git", "-C", str(root), "status", "--porcelain", "--", "src",
                                "solutions", "pyproject.toml"], capture_output=True, text=True,
                               timeout=30).stdout.strip()
        return r.stdout.strip() + ("+local changes" if dirty else "") if r.returncode == 0 else ""
    except (OSError, subprocess.SubprocessError):
        return ""


SETUP_SH = """#!/usr/bin/env bash
# Gradescope runs this once, as root, when it builds the autograder image (network allowed).
# Generated by `lrnn grade gradescope`; edit the options there, not here.
set -euo pipefail
cd "$(dirname "$0")"
if [ -z "${{LRNN_SETUP_OFFLINE_SITE:-}}" ]; then
  export DEBIAN_FRONTEND=noninteractive
  apt-get update
  apt-get install -y --no-install-recommends python3 python3-venv bubblewrap ca-certificates
  # The Python minor version the bundle was built with: uv fetches it when the image lacks it.
  python3 -m venv /opt/lrnn-uv
  /opt/lrnn-uv/bin/pip install --quiet uv
  /opt/lrnn-uv/bin/uv venv --seed --python {python} {venv}
  PIP_OPTIONS=()
else
  # A simulated image (the test of this bundle): no apt, no network; the packages in the
  # folders of LRNN_SETUP_OFFLINE_SITE (os.pathsep-separated) stand in for the index.
  python3 -m venv {venv}
  site="$({venv}/bin/python -c 'import sysconfig; print(sysconfig.get_path("purelib"))')"
  tr ':' '\\n' <<<"$LRNN_SETUP_OFFLINE_SITE" >"$site/zz_lrnn_offline_site.pth"
  PIP_OPTIONS=(--no-index)
fi
# pip checks the wheel's metadata and every requirement of the extra, under the versions
# of the environment that built the bundle.
{venv}/bin/python -m pip install --disable-pip-version-check ${{PIP_OPTIONS[@]+"${{PIP_OPTIONS[@]}}"}} \\
    --constraint constraints.txt "./{wheel}[{extra}]"
# What the container can do is decided now, not during a student's run:
{venv}/bin/python -c "import lrnn, jax; print('lrnn', lrnn.__version__, 'jax', jax.__version__)"
{venv}/bin/python -m {module} probe || true
"""

RUN_AUTOGRADER = """#!/usr/bin/env bash
# Gradescope runs this for each submission (working folder /autograder).
# Generated by `lrnn grade gradescope`. LRNN_AUTOGRADER_ROOT / LRNN_AUTOGRADER_PYTHON let a
# test run it in a simulated /autograder.
ROOT="${{LRNN_AUTOGRADER_ROOT:-/autograder}}"
PY="${{LRNN_AUTOGRADER_PYTHON:-{venv}/bin/python}}"
export JAX_PLATFORMS="${{JAX_PLATFORMS:-cpu}}"
export XLA_PYTHON_CLIENT_PREALLOCATE=false
exec "$PY" -m {module} run --root "$ROOT" --sandbox {sandbox} --timeout {timeout:g} \\
    --cell-timeout {cell_timeout:g} --visibility {visibility}
"""


def _chapter_notebooks(sol_dir: Path, chapters) -> list[Path]:
    g, _ = _grader()
    from ..exercises import NOTEBOOK_GLOB
    every = sorted(sol_dir.glob(NOTEBOOK_GLOB))
    if not every:
        raise PlatformError(f"no solution notebooks in {sol_dir}")
    if not chapters:
        return every
    picked = []
    for ch in chapters:
        want = f"{int(ch):02d}_" if str(ch).isdigit() else None
        match = [p for p in every if (want and p.name.startswith(want)) or p.stem == ch]
        if not match:
            raise PlatformError(f"`--chapter`: got {ch!r}, expected one of "
                                f"{', '.join(p.name[:2] for p in every)}")
        picked += [p for p in match if p not in picked]
    return picked


def _check_out_path(out: Path, force: bool, marker: str):
    """Refuse to replace what this command did not write (or anything, without --force)."""
    if out.is_dir():
        raise PlatformError(f"--out {out} is a folder; give a file name")
    if out.suffix != ".zip":
        raise PlatformError(f"--out: got {out.name!r}, expected a file name ending in .zip")
    if out.exists():
        ours = False
        try:
            with zipfile.ZipFile(out) as z:
                ours = marker in z.namelist()
        except (zipfile.BadZipFile, OSError):
            pass
        if not ours:
            raise PlatformError(f"--out {out} exists and is not an lrnn autograder bundle; "
                                "not replacing it")
        if not force:
            raise PlatformError(f"--out {out} exists; pass --force to replace it")
    if not out.parent.exists():
        raise PlatformError(f"--out: the folder {out.parent} does not exist")


#: Peak memory (MiB, PSS over the grader's process tree) and wall time (s) of grading the
#: solution notebook with ``scripts/grading_footprint.py`` (2 shared CPU cores, bubblewrap;
#: README, "Grading a large class"). Chapters not listed were not measured.
FOOTPRINT = {"01_linear_recurrence": (289, 539, 8), "08_capstone": (1761, 2036, 144)}
#: Gradescope's defaults: 768 MB per container, 10 minutes per run, half a CPU.
GRADESCOPE_MEMORY_MB, GRADESCOPE_TIMEOUT_S = 768, 600
BUNDLE_TIMEOUT = 480          # per notebook: below Gradescope's 10 minutes, room to report


def settings_advice(stem: str, timeout: float) -> str:
    """The Gradescope "Autograder Settings" a bundle of ``stem`` needs."""
    need_s = timeout + 120                     # container start, loading, results
    time_text = (f"its timeout must exceed --timeout {timeout:g} s by about 2 minutes: "
                 + ("the default 10 minutes does" if need_s <= GRADESCOPE_TIMEOUT_S else
                    f"set it to {math.ceil(need_s / 60):d} minutes (at most 40)"))
    if stem not in FOOTPRINT:
        return (f"{stem}'s memory was not measured (scripts/grading_footprint.py measures it); "
                f"{time_text}")
    pss, rss, secs = FOOTPRINT[stem]
    mem = pss * 1.048576 * 1.25                # MiB -> MB, and a quarter for headroom
    mem_text = ("the default 768 MB is enough" if mem <= GRADESCOPE_MEMORY_MB else
                f"set the memory to at least {math.ceil(mem / 100) / 10:g} GB")
    slow = secs * 4                            # 2 cores -> Gradescope's default half a CPU
    cpu_text = (f"at the default half a CPU expect up to about {slow:g} s, within --timeout"
                if slow <= 0.8 * timeout else
                f"at the default half a CPU expect up to about {slow:g} s, over 80 % of "
                f"--timeout: give it 2 CPUs (or raise --timeout and the platform's timeout)")
    return (f"{stem} peaked at {pss} MiB (PSS; {rss} MiB RSS) and took {secs} s on 2 CPU "
            f"cores: {mem_text}; {time_text}; {cpu_text}")


def build_bundle(out, *, chapters=(), solutions=None, root=None, timeout=None,
                 cell_timeout=None, sandbox="auto", visibility="visible", force=False,
                 log=print) -> Path:
    """Write the Gradescope autograder zip ``out`` for one assignment (one chapter); return
    its path."""
    from ..._io import atomic_open
    g, sb = _grader()
    from .batch import without_hidden_tests
    out = Path(out)
    timeout = timeout or BUNDLE_TIMEOUT
    cell_timeout = cell_timeout or g.DEFAULT_CELL_TIMEOUT
    for name, value in (("--timeout", timeout), ("--cell-timeout", cell_timeout)):
        if not isinstance(value, (int, float)) or not value > 0:
            raise PlatformError(f"`{name}`: got {value!r}, expected a number > 0")
    if visibility not in VISIBILITIES:
        raise PlatformError(f"`--visibility`: got {visibility!r}, expected one of "
                            f"{', '.join(VISIBILITIES)}")
    if sandbox not in sb.MODES:
        raise PlatformError(f"`--sandbox`: got {sandbox!r}, expected one of "
                            f"{', '.join(sb.MODES)}")
    if len(chapters) != 1:
        raise PlatformError(f"`--chapter`: got {list(chapters)!r}, expected exactly one: a "
                            "bundle is one Gradescope assignment, scored out of that "
                            "chapter's points (build one bundle per chapter)")
    _check_out_path(out, force, MANIFEST)
    if solutions is not None:
        default_solutions(solutions)                 # a bad --solutions: said first
    root = project_root(root)
    sol_dir = default_solutions(solutions if solutions is not None else
                                (root / "solutions" if (root / "solutions").is_dir() else None))
    notebooks = _chapter_notebooks(sol_dir, chapters)
    sols = {k: v for k, v in g.load_solutions(sol_dir).items()
            if k in {p.stem for p in notebooks}}
    missing = without_hidden_tests(sols)
    if missing:
        raise PlatformError(f"`--solutions` {sol_dir}: {', '.join(missing)} holds no hidden "
                            "tests (is it the exercises/ folder?); a bundle of it would grade "
                            "with the visible checks only")
    wheel_name, wheel = build_wheel(root)
    module = MODULE
    py = f"{sys.version_info.major}.{sys.version_info.minor}"
    manifest = {"built": datetime.datetime.now(datetime.timezone.utc).isoformat(
                    timespec="seconds"),
                "commit": _commit(root), "lrnn_wheel": wheel_name, "python": py,
                "chapters": [p.name for p in notebooks], "timeout": timeout,
                "cell_timeout": cell_timeout, "sandbox": sandbox, "visibility": visibility,
                "requirement": GRADING_REQUIREMENT,
                "settings": settings_advice(notebooks[0].stem, timeout)}
    files = {
        "setup.sh": SETUP_SH.format(python=py, venv=VENV, wheel=wheel_name,
                                    extra=GRADING_REQUIREMENT.split("[")[1].rstrip("]"),
                                    module=module),
        "run_autograder": RUN_AUTOGRADER.format(venv=VENV, module=module, sandbox=sandbox,
                                                timeout=timeout, cell_timeout=cell_timeout,
                                                visibility=visibility),
        "constraints.txt": constraints(),
        MANIFEST: json.dumps(manifest, indent=1) + "\n",
    }
    if out.is_file():
        from ..._io import backup_copy
        log(f"backup: {backup_copy(out)}")
    with atomic_open(out, "wb") as f, zipfile.ZipFile(f, "w", zipfile.ZIP_DEFLATED) as z:
        for name, text in files.items():
            info = zipfile.ZipInfo(name, date_time=(1980, 1, 1, 0, 0, 0))
            info.external_attr = (0o755 if name in ("setup.sh", "run_autograder")
                                  else 0o644) << 16
            info.compress_type = zipfile.ZIP_DEFLATED
            z.writestr(info, text)
        info = zipfile.ZipInfo(wheel_name, date_time=(1980, 1, 1, 0, 0, 0))
        info.external_attr = 0o644 << 16
        z.writestr(info, wheel)
        for p in notebooks:
            z.write(p, f"solutions/{p.name}")
    log(f"wrote {out}: {', '.join(manifest['chapters'])}; lrnn {wheel_name} "
        f"(commit {manifest['commit'] or 'unknown'}); upload it as the autograder of a "
        "Gradescope programming assignment. Autograder Settings: " + manifest["settings"])
    return out


def probe(log=print) -> str:
    """Which sandbox a run would get here (setup.sh prints it into Gradescope's build log)."""
    _, sb = _grader()
    box = sb.choose("auto")
    log(f"sandbox in this container: {box.describe()}")
    return box.kind


def unpack(bundle, root) -> Path:
    """Lay ``bundle`` out as Gradescope does: ``ROOT/source`` (the zip's contents),
    ``ROOT/run_autograder``, empty ``ROOT/submission`` and ``ROOT/results``. For tests and
    for an instructor trying a bundle locally."""
    root = Path(root)
    with zipfile.ZipFile(bundle) as z:
        z.extractall(root / "source")
    for name in ("setup.sh", "run_autograder"):
        (root / "source" / name).chmod(0o755)
    shutil.copy2(root / "source" / "run_autograder", root / "run_autograder")
    (root / "submission").mkdir(exist_ok=True)
    (root / "results").mkdir(exist_ok=True)
    return root


# ---------------------------------------------------------------------------------------
# Command line
# ---------------------------------------------------------------------------------------

def main(argv=None) -> int:
    """``lrnn grade gradescope ...`` (build), ``... gradescope run`` and ``... probe``."""
    argv = list(sys.argv[1:] if argv is None else argv)
    if argv and argv[0] == "run":
        p = argparse.ArgumentParser(prog="lrnn grade gradescope run",
                                    description="Grade /autograder/submission (run_autograder).")
        p.add_argument("--root", default=None, help=f"default: ${ROOT_ENV} or /autograder")
        p.add_argument("--solutions", default=None, help="default: ROOT/source/solutions")
        p.add_argument("--sandbox", choices=["auto", "bwrap", "none"], default="auto")
        p.add_argument("--timeout", type=float, default=None)
        p.add_argument("--cell-timeout", type=float, default=None)
        p.add_argument("--visibility", choices=VISIBILITIES, default="visible")
        p.add_argument("--keep-solutions", action="store_true",
                       help="do not delete the solution files when grading unconfined")
        a = p.parse_args(argv[1:])
        try:
            run(a.root, solutions=a.solutions, sandbox=a.sandbox, timeout=a.timeout,
                cell_timeout=a.cell_timeout, visibility=a.visibility,
                scrub=not a.keep_solutions)
        except PlatformError as e:
            print(f"error: {e}", file=sys.stderr)
            return 2
        return 0
    if argv and argv[0] == "probe":
        probe()
        return 0
    if argv and argv[0] == "build":
        argv = argv[1:]
    p = argparse.ArgumentParser(prog="lrnn grade gradescope",
                                description="Build a Gradescope autograder bundle (zip).")
    p.add_argument("--chapter", action="append", default=[], required=True,
                   help="the chapter (01) or solution stem this assignment is")
    p.add_argument("--project", default=None,
                   help="the lrnn checkout the wheel is built from (default: this one)")
    p.add_argument("--out", required=True, help="the zip to write (e.g. autograder.zip)")
    p.add_argument("--force", action="store_true", help="replace a bundle written before")
    p.add_argument("--solutions", default=None, help="default: the checkout's solutions/")
    p.add_argument("--timeout", type=float, default=None,
                   help=f"seconds per notebook (default {BUNDLE_TIMEOUT}: within Gradescope's "
                        "10 minutes)")
    p.add_argument("--cell-timeout", type=float, default=None, help="seconds per cell/test")
    p.add_argument("--sandbox", choices=["auto", "bwrap", "none"], default="auto",
                   help="what the container does (README: Grading a large class)")
    p.add_argument("--visibility", choices=VISIBILITIES, default="visible",
                   help="when students see the results (Gradescope's setting)")
    a = p.parse_args(argv)
    try:
        build_bundle(a.out, chapters=a.chapter, solutions=a.solutions, root=a.project,
                     timeout=a.timeout,
                     cell_timeout=a.cell_timeout, sandbox=a.sandbox, visibility=a.visibility,
                     force=a.force)
    except (PlatformError, ValueError) as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main())
