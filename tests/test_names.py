"""One name for everything: the ``lrnn`` command and its subcommands, and no old module name
(``lrnn._aliases``) in the code, the book, the solutions, the README or CI. The old names
themselves (they still work, with a notice) are tested in ``test_layout.py``."""
from __future__ import annotations

import importlib
import json
import pathlib
import re
import subprocess
import sys
import types

import pytest

from lrnn import _aliases, cli

ROOT = pathlib.Path(__file__).resolve().parents[1]
SRC = ROOT / "src" / "lrnn"

sys.path.insert(0, str(ROOT / "scripts"))
import rename_old_names  # noqa: E402

from _rules import assert_every

OLD_LEAVES = sorted({old.split(".")[1] for old in [*_aliases.OLD_NAMES, *_aliases.OLD_ATTRIBUTES]})
OLD_DOTTED = re.compile(rf"(?<![\w.])lrnn\.({'|'.join(OLD_LEAVES)})(?![\w])")
OLD_FROM_IMPORT = re.compile(r"^[ \t]*from lrnn import \(?([\w ,]+)", re.M)


def old_names_in(text: str) -> list[str]:
    """Every old module name that ``text`` uses: ``lrnn.OLD`` (dotted, in a command, in a
    string) and ``from lrnn import OLD``."""
    found = [m.group(0) for m in OLD_DOTTED.finditer(text)]
    for m in OLD_FROM_IMPORT.finditer(text):
        for item in m[1].split(","):
            name = item.strip().split(" ")[0]
            if name in OLD_LEAVES:
                found.append(f"from lrnn import {name}")
    return found


def sources(path: pathlib.Path) -> str:
    """A file's text; a notebook's cell sources only (outputs are whatever the code printed)."""
    text = path.read_text(encoding="utf-8")
    if path.suffix != ".ipynb":
        return text
    cells = json.loads(text)["cells"]
    return "\n".join("".join(c["source"]) if isinstance(c["source"], list) else c["source"]
                     for c in cells)


def scanned_files():
    files = [p for p in SRC.rglob("*.py") if p.name != "_aliases.py"]
    files += [p for p in SRC.rglob("*.md")]
    for folder in ("book", "solutions"):
        files += [p for p in (ROOT / folder).rglob("*") if p.suffix in (".ipynb", ".md", ".py")
                  and ".ipynb_checkpoints" not in p.parts and "_build" not in p.parts]
    files += [ROOT / "README.md", *sorted((ROOT / ".ci").glob("*"))]
    files += [p for p in (ROOT / "scripts").glob("*") if p.name != "rename_old_names.py"
              and p.is_file()]
    return sorted(p for p in files if p.is_file())


def check_no_old_module_name(path):
    found = old_names_in(sources(path))
    assert not found, (f"{path.relative_to(ROOT)} uses old names {sorted(set(found))}: "
                       "run `python scripts/rename_old_names.py` on it")


def test_no_old_module_name():
    assert_every(scanned_files(), check_no_old_module_name, name=lambda p: str(p.relative_to(ROOT)))


@pytest.mark.parametrize("text", [
    "import lrnn.lru", "x = lrnn.check.check", "python -m lrnn.train --task adding",
    "from lrnn import model, lru", "from lrnn.setup import environment", "`lrnn.rotlstm.cell`",
    '[sys.executable, "-m", "lrnn.grade", path]', "lrnn.scan_pallas.plan(1, 2, 3)"])
def test_the_search_finds_an_old_name_and_the_script_removes_it(text):
    assert old_names_in(text), text
    renamed = rename_old_names.rename(text)
    assert not old_names_in(renamed), renamed
    assert rename_old_names.rename(renamed) == renamed        # idempotent


@pytest.mark.parametrize("text", [
    "import lrnn.layers.lru", "lrnn.training.train.main()", "python -m lrnn train --task x",
    "from lrnn import model, layers", "lrnn.trainer", "see book/data/ for lrnn's data",
    "lrnn.course.check.check", "from lrnn.scan import pallas"])
def test_new_names_are_not_old_ones(text):
    assert not old_names_in(text), text
    assert rename_old_names.rename(text) == text


def test_the_script_rewrites_imports_commands_and_rotlstm():
    r = rename_old_names.rename
    assert r("    from lrnn import lru, model as M, setup  # x") == (
        "    from lrnn.layers import lru\n    from lrnn import model as M\n"
        "    from lrnn.course import setup  # x")
    assert r("!python -m lrnn.bench scan --out a.json") == "!python -m lrnn bench scan --out a.json"
    assert r("`lrnn.exercises build`") == "`lrnn exercises build`"
    assert r("lrnn.exercises.demo()") == "lrnn.course.exercises.demo()"
    assert r("lrnn.rotlstm.gru_init(k)") == "lrnn.layers.gru.init(k)"
    assert r("import lrnn.check as C") == "import lrnn.course.check as C"
    assert r('prog="python -m lrnn.train",') == 'prog="lrnn train",'
    assert r("from lrnn import orthogonal, rotlstm\nrotlstm.cell(p, c, x)") == (
        "from lrnn import orthogonal\nfrom lrnn.layers import lstm as rotlstm\nrotlstm.cell(p, c, x)")
    kept = "from lrnn import rotlstm\nrotlstm.gru_init(k, 2, 4)"
    assert r(kept) == kept                                     # reported, not broken


def test_the_script_changes_only_cell_sources(tmp_path):
    nb = {"cells": [{"cell_type": "code", "execution_count": 1, "id": "a", "metadata": {},
                     "outputs": [{"name": "stdout", "output_type": "stream",
                                  "text": ["lrnn.lru is printed\n"]}],
                     "source": ["import lrnn\n", "lrnn.lru.init(k, 2, 4)"]}],
          "metadata": {}, "nbformat": 4, "nbformat_minor": 5}
    path = tmp_path / "n.ipynb"
    path.write_text(json.dumps(nb, sort_keys=True, indent=1, ensure_ascii=False) + "\n")
    assert rename_old_names.main([str(path)]) == 0
    after = json.loads(path.read_text())
    assert after["cells"][0]["source"] == ["import lrnn\n", "lrnn.layers.lru.init(k, 2, 4)"]
    assert after["cells"][0]["outputs"] == nb["cells"][0]["outputs"]
    before = path.read_text()
    assert rename_old_names.main([str(path)]) == 0 and path.read_text() == before
    assert rename_old_names.main(["--check", str(path)]) == 0


# ----------------------------------------------------------------------------------------
# The command
# ----------------------------------------------------------------------------------------

def test_the_console_script_is_lrnn_cli_main():
    tomllib = pytest.importorskip("tomllib")
    scripts = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["scripts"]
    module, _, function = scripts["lrnn"].partition(":")
    assert getattr(importlib.import_module(module), function) is cli.main


def test_lrnn_help_lists_every_subcommand():
    out = subprocess.run([sys.executable, "-W", "error", "-m", "lrnn", "--help"],
                         capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    listed = re.findall(r"^  (\w+)  ", out.stdout, re.M)
    assert listed == ["grade", "train", "experiments", "bench", "doctor", "exercises"]
    assert set(listed) == set(cli.COMMANDS)


def test_an_unknown_subcommand_is_an_error(capsys):
    assert cli.main(["grades"]) == 2
    assert "unknown command 'grades'" in capsys.readouterr().err
    assert cli.main([]) == 2


def test_help_imports_no_subcommand_and_not_jax():
    code = ("import sys, lrnn.cli\nlrnn.cli.main(['--help'])\n"
            "print(sorted(m for m in sys.modules if m.startswith(('lrnn.training', "
            "'lrnn.course', 'lrnn.scan', 'jax'))))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip().splitlines()[-1] == "[]"


@pytest.mark.parametrize("command", list(cli.COMMANDS))
def test_every_subcommand_runs_under_its_new_name(command):
    out = subprocess.run([sys.executable, "-W", "error", "-m", "lrnn", command, "--help"],
                         capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    assert out.stdout.startswith(f"usage: lrnn {command}"), out.stdout[:200]
    assert out.stderr == ""


@pytest.mark.parametrize("returned,status", [(None, 0), (3, 3), ({"rows": []}, 0), (True, 0)])
def test_the_exit_status_is_the_subcommands_or_0(monkeypatch, returned, status):
    fake = types.ModuleType("fake_command")
    fake.main = lambda argv: returned if argv == ["--x"] else 99
    monkeypatch.setitem(sys.modules, "fake_command", fake)
    monkeypatch.setitem(cli.COMMANDS, "fake", ("fake_command", "a fake"))
    assert cli.main(["fake", "--x"]) == status
