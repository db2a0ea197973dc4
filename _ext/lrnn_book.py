"""Sphinx extension of the lrnn book: publish the exercise solutions on demand.

``lrnn_publish_solutions`` (in ``_config.yml`` under ``sphinx: config:``; default ``false``).
When true, every ``exercises/NN_stem`` entry of ``_toc.yml`` gets ``solutions/NN_stem`` right
after it (when that notebook exists). The table of contents used for the build is written to
``_build/.doctrees/`` — ``_toc.yml`` itself is never modified. When false, the solutions are
simply not in the table of contents, and ``only_build_toc_files`` keeps them out of the build
without a warning.
"""
from __future__ import annotations

from pathlib import Path

import yaml
from sphinx.application import Sphinx
from sphinx.config import Config
from sphinx.util import logging

logger = logging.getLogger(__name__)


def with_solutions(toc: dict, srcdir: Path) -> tuple[dict, list[str]]:
    """Return a copy of ``toc`` (parsed _toc.yml) with solutions after their exercises."""
    added: list[str] = []

    def visit(node):
        if isinstance(node, list):
            out = []
            for item in node:
                out.append(visit(item))
                file = item.get("file", "") if isinstance(item, dict) else ""
                if file.startswith("exercises/"):
                    solution = "solutions/" + file[len("exercises/"):]
                    if any((srcdir / (solution + ext)).is_file() for ext in (".ipynb", ".md")):
                        out.append({"file": solution})
                        added.append(solution)
            return out
        if isinstance(node, dict):
            return {key: visit(value) for key, value in node.items()}
        return node

    return visit(toc), added


def _switch_toc(app: Sphinx, config: Config) -> None:
    if not config.lrnn_publish_solutions:
        return
    srcdir = Path(app.srcdir)
    toc_path = Path(config.external_toc_path)
    if not toc_path.is_absolute():
        toc_path = srcdir / toc_path
    toc = yaml.safe_load(toc_path.read_text(encoding="utf-8"))
    new_toc, added = with_solutions(toc, srcdir)
    target = Path(app.doctreedir) / "lrnn_toc_with_solutions.yml"
    target.parent.mkdir(parents=True, exist_ok=True)
    text = yaml.safe_dump(new_toc, sort_keys=False)
    if not target.exists() or target.read_text(encoding="utf-8") != text:
        target.write_text(text, encoding="utf-8")
    config.external_toc_path = str(target)
    logger.info("[lrnn] publishing %d solution notebook(s): %s", len(added), ", ".join(added))


def setup(app: Sphinx):
    app.add_config_value("lrnn_publish_solutions", False, "env", [bool])
    # sphinx_external_toc reads the table of contents at priority 900: switch it before.
    app.connect("config-inited", _switch_toc, priority=800)
    return {"version": "1.0", "parallel_read_safe": True, "parallel_write_safe": True}
