"""Badges, launch links, install cells and cross-references all point at things that exist,
and all follow the one repository URL of _config.yml."""
import importlib.util
import re
from pathlib import Path
from urllib.parse import unquote

import nbformat
import pytest
import yaml

from _rules import assert_every

ROOT = Path(__file__).resolve().parents[1]
_spec = importlib.util.spec_from_file_location("sync_headers", ROOT / "scripts" / "sync_headers.py")
sync_headers = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(sync_headers)

URL, BRANCH = sync_headers.repository(ROOT)
NOTEBOOKS = sync_headers.notebooks(ROOT)
IDS = [p.relative_to(ROOT).as_posix() for p in NOTEBOOKS]
COLAB_PREFIX = "https://colab.research.google.com/github/"
REPO_PATH = URL.removeprefix("https://github.com/")

MD_LINK = re.compile(r"(?<!!)\[[^\]]*\]\(([^)\s]+)(?:\s+\"[^\"]*\")?\)")
MD_IMAGE = re.compile(r"!\[[^\]]*\]\(([^)\s]+)\)")
DOC_ROLE = re.compile(r"\{doc\}`(?:[^`<]*<)?([^`>]+)>?`")


def _toc_files(node):
    if isinstance(node, dict):
        for key, value in node.items():
            if key in ("root", "file"):
                yield value
            else:
                yield from _toc_files(value)
    elif isinstance(node, list):
        for item in node:
            yield from _toc_files(item)


def _exists_as_doc(path: Path) -> bool:
    return any(p.is_file() for p in (path, path.with_suffix(".ipynb"), path.with_suffix(".md"),
                                      Path(str(path) + ".ipynb"), Path(str(path) + ".md")))


def test_config_has_one_repository_url():
    config = yaml.safe_load((ROOT / "_config.yml").read_text())
    assert URL.startswith("https://github.com/") and URL.count("/") == 4
    assert config["launch_buttons"]["colab_url"] == "https://colab.research.google.com"
    # the URL is written in _config.yml and nowhere else in the site configuration
    assert URL not in (ROOT / "_toc.yml").read_text()


def test_toc_files_exist():
    toc = yaml.safe_load((ROOT / "_toc.yml").read_text())
    missing = [f for f in _toc_files(toc) if not _exists_as_doc(ROOT / f)]
    assert not missing, f"_toc.yml lists files that do not exist: {missing}"


def test_there_are_notebooks():
    assert any(i.startswith("book/") for i in IDS)


def check_badge_points_at_this_notebook(path):
    nb = nbformat.read(path, as_version=4)
    first = nb.cells[0]
    assert first.cell_type == "markdown"
    badges = sync_headers.BADGE_RE.findall(first.source)
    assert len(badges) == 1, "the first cell must carry exactly one Open-in-Colab badge"
    link = badges[0]
    assert link.startswith(COLAB_PREFIX + REPO_PATH + f"/blob/{BRANCH}/"), \
        f"badge {link} does not use the _config.yml repository {URL} (branch {BRANCH})"
    target = link.removeprefix(COLAB_PREFIX + REPO_PATH + f"/blob/{BRANCH}/")
    assert (ROOT / target).is_file(), f"badge points at {target}, which does not exist"
    assert target == path.relative_to(ROOT).as_posix(), "the badge must open this notebook"


def test_badge_points_at_this_notebook():
    assert_every(NOTEBOOKS, check_badge_points_at_this_notebook)


def check_install_cell_uses_config_url(path):
    nb = nbformat.read(path, as_version=4)
    specs = [m for c in nb.cells if c.cell_type == "code"
             for m in sync_headers.INSTALL_RE.findall(c.source)]
    assert specs, "no setup cell installing lrnn from the repository"
    assert set(specs) == {sync_headers.install_spec(URL, BRANCH)}


def test_install_cell_uses_config_url():
    assert_every(NOTEBOOKS, check_install_cell_uses_config_url)


def check_links_resolve(path):
    """Relative links, {doc} cross-references and links into the repository name files that
    exist; no notebook links to the placeholder of another repository."""
    nb = nbformat.read(path, as_version=4)
    broken = []
    for cell in nb.cells:
        if cell.cell_type != "markdown":
            continue
        for target in MD_LINK.findall(cell.source) + MD_IMAGE.findall(cell.source):
            target = unquote(target.split("#", 1)[0])
            if not target or target.startswith(("mailto:", "data:")):
                continue
            if target.startswith(("http://", "https://")):
                for prefix in (URL + "/blob/", URL + "/tree/", COLAB_PREFIX + REPO_PATH + "/blob/"):
                    if target.startswith(prefix):
                        branch, _, rel = target.removeprefix(prefix).partition("/")
                        if branch != BRANCH or not (ROOT / rel).exists():
                            broken.append(target)
                if "github.com/" in target and "lrnn" in target and REPO_PATH not in target:
                    broken.append(target)
                continue
            if not _exists_as_doc((path.parent / target).resolve()):
                broken.append(target)
        for target in DOC_ROLE.findall(cell.source):
            base = ROOT if target.startswith("/") else path.parent
            if not _exists_as_doc((base / target.lstrip("/")).resolve()):
                broken.append("{doc}" + target)
    assert not broken, f"links to missing files: {broken}"


def test_links_resolve():
    assert_every(NOTEBOOKS, check_links_resolve)


def test_readme_links_resolve():
    text = (ROOT / "README.md").read_text()
    missing = [t for t in MD_LINK.findall(text)
               if not t.startswith(("http://", "https://", "#", "mailto:"))
               and not (ROOT / unquote(t.split("#", 1)[0])).exists()]
    assert not missing, missing


def test_sync_headers_check_passes():
    assert sync_headers.main(["--check"]) == 0


def test_sync_headers_rewrites_a_stale_badge(tmp_path):
    nb = nbformat.v4.new_notebook(cells=[
        nbformat.v4.new_markdown_cell(
            "# Chapter 9 · X\n[![Open In Colab](https://colab.research.google.com/assets/colab-badge.svg)]"
            "(https://colab.research.google.com/github/someone/else/blob/dev/old.ipynb)"),
        nbformat.v4.new_code_cell('subprocess.run([sys.executable, "-m", "pip", "install", "-q",\n'
                                  '                "lrnn @ git+https://github.com/someone/else"])'),
    ])
    assert sync_headers.synced(nb, "book/09_x.ipynb", URL, BRANCH)
    assert f"{COLAB_PREFIX}{REPO_PATH}/blob/{BRANCH}/book/09_x.ipynb)" in nb.cells[0].source
    assert sync_headers.install_spec(URL, BRANCH) in nb.cells[1].source
    assert not sync_headers.synced(nb, "book/09_x.ipynb", URL, BRANCH)
