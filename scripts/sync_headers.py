"""Make every notebook's Colab badge and install cell follow the repository URL of _config.yml.

    python scripts/sync_headers.py           # rewrite the notebooks that disagree
    python scripts/sync_headers.py --check   # only list them; exit status 1 if any

The repository URL and branch live only in `_config.yml` (`repository: url, branch`). A badge
points at the notebook's own path on that branch; the setup cell installs
`lrnn @ git+<url>` (with `@<branch>` when the branch is not `main`).
"""
from __future__ import annotations

import argparse
import re
import sys
from pathlib import Path

import nbformat
import yaml

ROOT = Path(__file__).resolve().parents[1]
NOTEBOOK_DIRS = ("book", "exercises", "solutions")
BADGE_SVG = "https://colab.research.google.com/assets/colab-badge.svg"
BADGE_RE = re.compile(r"\[!\[Open In Colab\]\(" + re.escape(BADGE_SVG) + r"\)\]\(([^)\s]*)\)")
INSTALL_RE = re.compile(r'"lrnn @ git\+[^"]*"')


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


def notebooks(root: Path = ROOT) -> list[Path]:
    out = []
    for d in NOTEBOOK_DIRS:
        out += sorted(p for p in (root / d).glob("*.ipynb") if ".ipynb_checkpoints" not in p.parts)
    return out


def synced(nb, relpath: str, url: str, branch: str) -> bool:
    """Rewrite badge and install spec in place; return True if anything changed."""
    changed = False
    badge = f"[![Open In Colab]({BADGE_SVG})]({colab_url(url, branch, relpath)})"
    spec = install_spec(url, branch)
    for cell in nb.cells:
        src = cell.source
        if cell.cell_type == "markdown":
            new = BADGE_RE.sub(lambda m: badge, src)
        elif cell.cell_type == "code":
            new = INSTALL_RE.sub(lambda m: spec, src)
        else:
            continue
        if new != src:
            cell.source, changed = new, True
    return changed


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--check", action="store_true", help="list, do not rewrite")
    args = parser.parse_args(argv)
    url, branch = repository()
    stale = []
    for path in notebooks():
        nb = nbformat.read(path, as_version=4)
        rel = path.relative_to(ROOT).as_posix()
        if synced(nb, rel, url, branch):
            stale.append(rel)
            if not args.check:
                nbformat.write(nb, path)
    verb = "out of date" if args.check else "rewritten"
    for rel in stale:
        print(f"{verb}: {rel}")
    print(f"{len(stale)} notebook(s) {verb}; repository {url} (branch {branch}).")
    return 1 if (args.check and stale) else 0


if __name__ == "__main__":
    sys.exit(main())
