"""Make .ci/colab-pins.txt: the part of Colab's package set that the course's kernel touches.

    python scripts/colab_pins.py .ci/colab/pip-freeze.gpu.2026-08-19.txt --commit a724079

Refresh after Colab changes its image: save the new `pip-freeze.gpu.txt` of the repository
googlecolab/backend-info as `.ci/colab/pip-freeze.gpu.<YYYY-MM-DD>.txt` and run the command above
with that file and the commit it came from (it writes the copy in src/lrnn/course/ too).

The pins are the packages named in ROOTS (the Jupyter kernel stack, widgets, JAX and the
scientific packages the chapters import) and everything they depend on, all at Colab's versions: pip resolves ROOTS with the whole freeze as constraints,
for Python 3.13 (Colab's) where available. Torch, TensorFlow, the CUDA libraries and the other
~600 packages are left out: the course never imports them, and installing them would cost CI
gigabytes and minutes for nothing it tests. JAX's CUDA plugin is left out as CI has no GPU; the
CPU jaxlib of the same version stands in for it.
"""
from __future__ import annotations

import argparse
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
OUT = ROOT / ".ci" / "colab-pins.txt"
#: the copy shipped inside the package, for `python -m lrnn doctor` in Colab (lrnn.course.colab)
PACKAGE_COPY = ROOT / "src" / "lrnn" / "course" / "colab-pins.txt"
SOURCE = "https://github.com/googlecolab/backend-info (pip-freeze.gpu.txt)"
ROOTS = ("ipykernel", "ipython", "jupyter_client", "jupyter_core", "traitlets", "pyzmq",
         "tornado", "ipywidgets", "widgetsnbextension", "jupyterlab_widgets", "notebook",
         "nbclient", "nbformat", "matplotlib-inline", "jax", "jaxlib", "ml_dtypes", "numpy",
         "scipy", "matplotlib", "pillow", "optax", "tqdm", "mlxtend", "scikit-learn", "pandas",
         "pip", "setuptools", "wheel", "packaging",
         "pytest")   # Colab's too; the lane runs tests/test_widgets.py with it on ipywidgets 7.7
#: Colab's Python, where pyenv keeps it (``$COLAB_PYTHON`` names another)
PYTHON_313 = str(Path(os.environ.get("PYENV_ROOT") or Path.home() / ".pyenv")
                 / "versions" / "3.13.0" / "bin" / "python3.13")


def canonical(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()


def read_freeze(path: Path) -> dict[str, str]:
    """{canonical name: version} of the ``name==version`` lines (URL installs are skipped)."""
    out = {}
    for line in path.read_text(encoding="utf-8").splitlines():
        m = re.fullmatch(r"\s*([A-Za-z0-9][A-Za-z0-9._-]*)==([^\s;#]+)\s*", line)
        if m:
            out[canonical(m.group(1))] = m.group(2)
    return out


def python_for_pins() -> str:
    exe = os.environ.get("COLAB_PYTHON") or (PYTHON_313 if Path(PYTHON_313).exists() else None)
    exe = exe or shutil.which("python3.13")
    if exe is None:
        print("note: no Python 3.13 found; resolving with", sys.executable, file=sys.stderr)
        exe = sys.executable
    return exe


def resolve(freeze: dict[str, str], python: str) -> dict[str, str]:
    """pip's resolution of ROOTS under the freeze as constraints: {name: version}."""
    missing = [r for r in ROOTS if canonical(r) not in freeze]
    if missing:
        raise SystemExit(f"the freeze lacks {missing}: update ROOTS in {__file__}")
    with tempfile.TemporaryDirectory() as tmp:
        cons = Path(tmp, "constraints.txt")
        cons.write_text("".join(f"{n}=={v}\n" for n, v in sorted(freeze.items())))
        report = Path(tmp, "report.json")
        cmd = [python, "-m", "pip", "install", "--dry-run", "--ignore-installed", "--quiet",
               "--only-binary=:all:", "--report", str(report), "-c", str(cons), *ROOTS]
        subprocess.run(cmd, check=True)
        data = json.loads(report.read_text())
    return {canonical(i["metadata"]["name"]): i["metadata"]["version"] for i in data["install"]}


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("freeze", type=Path, help="a saved pip-freeze.gpu.<YYYY-MM-DD>.txt")
    parser.add_argument("--commit", required=True, help="backend-info commit it came from")
    parser.add_argument("--out", type=Path, default=OUT)
    args = parser.parse_args(argv)
    date = re.search(r"\d{4}-\d{2}-\d{2}", args.freeze.name)
    if date is None:
        raise SystemExit(f"{args.freeze.name}: name it pip-freeze.gpu.<YYYY-MM-DD>.txt")
    freeze = read_freeze(args.freeze)
    python = python_for_pins()
    pins = resolve(freeze, python)
    differ = {n: v for n, v in pins.items() if n in freeze and freeze[n] != v}
    if differ:
        raise SystemExit(f"pip chose versions that are not Colab's: {differ}")
    absent = sorted(n for n in pins if n not in freeze)
    path = args.freeze.resolve()
    rel = path.relative_to(ROOT).as_posix() if path.is_relative_to(ROOT) else path
    version = subprocess.run([python, "-V"], capture_output=True, text=True).stdout.strip()
    head = ("# Colab's package set, the part the course's kernel touches "
            "(made by scripts/colab_pins.py).\n"
            f"# source: {SOURCE}, commit {args.commit}, date {date.group(0)}\n"
            f"# freeze copy: {rel}; resolved for {version}\n"
            "# refresh: python scripts/colab_pins.py .ci/colab/pip-freeze.gpu.<date>.txt "
            "--commit <sha>\n")
    if absent:
        head += (f"# not in Colab's freeze but required by what is (pip's choice, marked below): "
                 f"{', '.join(absent)}\n")
    body = "".join(f"{n}=={v}{'  # not in the freeze' if n in absent else ''}\n"
                   for n, v in sorted(pins.items()))
    for out in (args.out, PACKAGE_COPY) if args.out == OUT else (args.out,):
        tmp = out.with_suffix(".tmp")
        tmp.write_text(head + body, encoding="utf-8")
        tmp.replace(out)
    print(f"{args.out}: {len(pins)} pins from {args.freeze.name} (commit {args.commit})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
