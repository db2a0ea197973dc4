"""Make every notebook's Colab badge and setup cell follow _config.yml and the template below.

    python scripts/sync_headers.py           # rewrite the notebooks that disagree
    python scripts/sync_headers.py --check   # only list them; exit status 1 if any

The repository URL and branch live only in `_config.yml` (`repository: url, branch`). A badge
points at the notebook's own path on that branch. The setup cell starts with BOOTSTRAP, which
installs `lrnn @ git+<url>` (with `@<branch>` when the branch is not `main`) without its
dependencies, then only the missing requirements of `lrnn[notebooks]`, with every installed
package held at its version (`lrnn.course.colab.install_missing`): in Colab it changes none of
the preinstalled packages. `LRNN_INSTALL_SOURCE` (a pip requirement, e.g. `lrnn @ file:///src`)
replaces the URL, which CI's Colab lane uses to install the checkout. Only the bootstrap (the
lines before `import lrnn`) and the badge are rewritten; the rest of each cell is the chapter's.

A notebook is edited in place: a symlink stays a link, the file keeps its mode and line
endings. An exercise notebook that `lrnn exercises build` generated and nobody edited is
stamped again after the rewrite (`lrnn.course.exercises.restamp`), so that the build, which
regenerates the same text from the synced solution, still recognises it as its own; one with
student edits keeps its old stamp and the build goes on refusing to replace it.
"""
from __future__ import annotations

import argparse
import re
import sys
from pathlib import Path

import nbformat
import yaml

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "src"))
from lrnn import _io  # noqa: E402 - the checkout's own package, whatever is installed
from lrnn.course import exercises  # noqa: E402
NOTEBOOK_DIRS = ("book", "exercises", "solutions")
BADGE_SVG = "https://colab.research.google.com/assets/colab-badge.svg"
BADGE_RE = re.compile(r"\[!\[Open In Colab\]\(" + re.escape(BADGE_SVG) + r"\)\]\(([^)\s]*)\)")
INSTALL_RE = re.compile(r'"lrnn @ git\+[^"]*"')
BOOTSTRAP = """\
# Setup: install lrnn, changing none of the packages that Colab preinstalled.
import importlib.util, os, subprocess, sys
if importlib.util.find_spec("lrnn") is None:
    spec = os.environ.get("LRNN_INSTALL_SOURCE", {spec})
    subprocess.run([sys.executable, "-m", "pip", "install", "-q", "--no-deps", spec], check=True)
    import lrnn.course.colab; lrnn.course.colab.install_missing()
"""
IMPORT_LINE = re.compile(r"^import lrnn$", re.MULTILINE)


def repository(root: Path = ROOT) -> tuple[str, str]:
    """(url without trailing slash or .git, branch) from _config.yml."""
    config = yaml.safe_load((root / "_config.yml").read_text(encoding="utf-8"))
    repo = config["repository"]
    url = repo["url"].rstrip("/").removesuffix(".git")
    return url, repo.get("branch", "main")


def colab_url(url: str, branch: str, relpath: str) -> str:
    if not url.startswith("https://github.com/"):
        raise ValueError(f"repository url {url!r}: Colab opens notebooks from github.com only")
    return f"https://colab.research.google.com/github/{url.removeprefix('https://github.com/')}/blob/{branch}/{relpath}"


def install_spec(url: str, branch: str) -> str:
    return f'"lrnn @ git+{url}"' if branch == "main" else f'"lrnn @ git+{url}@{branch}"'


def bootstrap(url: str, branch: str) -> str:
    return BOOTSTRAP.format(spec=install_spec(url, branch))


def setup_source(source: str, url: str, branch: str) -> str:
    """A setup cell's source with its bootstrap regenerated (a cell that installs lrnn from git
    and then imports it); any other source with only its install spec updated."""
    m = IMPORT_LINE.search(source)
    if m is None or not INSTALL_RE.search(source[:m.start()]):
        return INSTALL_RE.sub(lambda _: install_spec(url, branch), source)
    return bootstrap(url, branch) + source[m.start():]


def notebooks(root: Path = ROOT) -> list[Path]:
    out = []
    for d in NOTEBOOK_DIRS:
        out += sorted(p for p in (root / d).glob("*.ipynb") if ".ipynb_checkpoints" not in p.parts)
    return out


def synced(nb, relpath: str, url: str, branch: str) -> bool:
    """Rewrite badge and setup bootstrap in place; return True if anything changed."""
    changed = False
    badge = f"[![Open In Colab]({BADGE_SVG})]({colab_url(url, branch, relpath)})"
    for cell in nb.cells:
        src = cell.source
        if cell.cell_type == "markdown":
            new = BADGE_RE.sub(lambda m: badge, src)
        elif cell.cell_type == "code":
            new = setup_source(src, url, branch)
        else:
            continue
        if new != src:
            cell.source, changed = new, True
    return changed


def rewritten(path: Path, nb, was_ours: bool) -> bytes:
    """The bytes to write back: an unedited exercise notebook restamped, any other notebook as
    nbformat writes it; in the file's own line endings."""
    text = exercises.restamp(nb, path.name) if was_ours else exercises.render(nb)
    _, newline = _io.split_newlines(path.read_bytes().decode("utf-8"))
    return _io.join_newlines(text, newline).encode("utf-8")


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--check", action="store_true", help="list, do not rewrite")
    parser.add_argument("--root", type=Path, default=ROOT,
                        help="the course repository (default: this script's checkout)")
    args = parser.parse_args(argv)
    url, branch = repository(args.root)
    stale = []
    for path in notebooks(args.root):
        nb = nbformat.read(path, as_version=4)
        rel = path.relative_to(args.root).as_posix()
        was_ours = rel.startswith("exercises/") and exercises.unedited_output(path)[0]
        if synced(nb, rel, url, branch):
            stale.append(rel)
            if not args.check:
                _io.edit_in_place(path, rewritten(path, nb, was_ours))
    verb = "out of date" if args.check else "rewritten"
    for rel in stale:
        print(f"{verb}: {rel}")
    print(f"{len(stale)} notebook(s) {verb}; repository {url} (branch {branch}).")
    return 1 if (args.check and stale) else 0


if __name__ == "__main__":
    sys.exit(main())
