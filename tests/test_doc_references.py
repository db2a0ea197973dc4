"""What the repository's own texts tell a reader to import or open exists under that name: every
``from lrnn… import …`` line, every dotted ``lrnn.…`` name and every repository path in the
README, the authoring guide, pyproject.toml and the book's _config.yml. A name that only an
old alias still answers (a DeprecationWarning) counts as stale."""
import importlib
import re
import warnings
from pathlib import Path

import pytest

from _rules import assert_every

ROOT = Path(__file__).resolve().parents[1]
TEXTS = [ROOT / "README.md", ROOT / "solutions" / "AUTHORING.md", ROOT / "pyproject.toml",
         ROOT / "_config.yml"]
#: Names that stand for any name in the text (``forbid("lrnn.x.y")``).
PLACEHOLDERS = {"lrnn.x.y"}

FROM_IMPORT = re.compile(r"from (lrnn(?:\.\w+)*) import ([\w ,]+?)(?= as |[`\"';)]|$)", re.M)
DOTTED = re.compile(r"(?<![\w/.])lrnn(?:\.[A-Za-z_]\w*)+")
BRACES = re.compile(r"(?<![\w/.])(lrnn(?:\.\w+)*)\.\{([\w, ]+)\}")
#: A path ends where the text goes on with a space, quote, bracket or punctuation; one that goes
#: on otherwise (``book/00–08``, ``pip-freeze.gpu.<date>.txt``) or says ``NN`` is a pattern.
PATH = re.compile(r"(?<![\w/.<-])((?:src|tests|scripts|book|solutions|exercises|\.ci|_ext)/"
                  r"[\w./-]*\w)(?=[\s`'\"),;:]|\.\s|\.$|$)", re.M)


def stale(dotted: str) -> str | None:
    """Why ``dotted`` (a module, or a module then attributes) does not resolve, or None."""
    parts = dotted.split(".")
    from lrnn import _aliases
    for k in range(len(parts), 0, -1):            # an old name, even if already imported
        prefix = ".".join(parts[:k])
        if _aliases.is_old_name(prefix):
            return f"deprecated: {_aliases.notice(prefix)}"
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        for k in range(len(parts), 0, -1):
            try:
                obj = importlib.import_module(".".join(parts[:k]))
            except ModuleNotFoundError:
                continue
            except (ImportError, DeprecationWarning) as err:
                return f"{type(err).__name__}: {err}"
            try:
                for attr in parts[k:]:
                    obj = getattr(obj, attr)
            except (AttributeError, DeprecationWarning) as err:
                return f"{type(err).__name__}: {err}"
            return None
    return "no such module"


def names_in(text: str) -> set[str]:
    names = {m.rstrip(".") for m in DOTTED.findall(text)}
    for module, listed in FROM_IMPORT.findall(text):
        names |= {f"{module}.{n.strip()}" for n in listed.split(",") if n.strip()}
    for module, listed in BRACES.findall(text):
        names |= {f"{module}.{n.strip()}" for n in listed.split(",") if n.strip()}
    return names - PLACEHOLDERS


def check_every_lrnn_name_resolves(path):
    found = sorted(f"{n} ({why})" for n in names_in(path.read_text(encoding="utf-8"))
                   if (why := stale(n)))
    assert not found, "; ".join(found)


def test_every_lrnn_name_in_the_texts_resolves():
    assert_every(TEXTS, check_every_lrnn_name_resolves, name=lambda p: p.name)


def check_every_path_exists(path):
    missing = sorted({p for p in PATH.findall(path.read_text(encoding="utf-8"))
                      if "NN" not in p and not (ROOT / p).exists()})
    assert not missing, f"no such file or folder: {missing}"


def test_every_path_in_the_texts_exists():
    assert_every(TEXTS, check_every_path_exists, name=lambda p: p.name)


@pytest.mark.parametrize("text, bad", [
    ("`from lrnn.course import gradescope`", "lrnn.course.gradescope"),
    ("# lrnn.course.{grading,sandbox}: the grader", "lrnn.course.sandbox"),
    ("(lrnn.widgets.explore)", "lrnn.widgets.explore"),
    ("`from lrnn.course.check import check, nothing_here`", "lrnn.course.check.nothing_here"),
])
def test_the_rules_catch_a_stale_name(text, bad):
    assert bad in names_in(text) and stale(bad)


def test_the_path_rule_catches_a_missing_file_and_skips_patterns():
    text = "see `tests/test_gone.py`, tests/test_layout.py, book/00–08 and solutions/NN_x.ipynb."
    assert PATH.findall(text) == ["tests/test_gone.py", "tests/test_layout.py", "solutions/NN_x.ipynb"]


def test_the_rules_accept_current_names():
    text = "`from lrnn.course.grading import gradescope as s` and lrnn.layers.lru.apply."
    assert names_in(text) == {"lrnn.course.grading", "lrnn.course.grading.gradescope",
                              "lrnn.layers.lru.apply"}
    assert not any(stale(n) for n in names_in(text))
