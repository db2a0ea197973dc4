"""Rewrite the old module names of ``lrnn`` (``lrnn._aliases``) to the new ones, in place.

    python scripts/rename_old_names.py                 # the default places (below)
    python scripts/rename_old_names.py PATH ...        # files or folders
    python scripts/rename_old_names.py --check PATH    # only list what would change (exit 1 if any)

Notebooks change only in their cells' sources (never outputs or metadata) and are written back
as nbformat writes them; other files are read and written as UTF-8 text. A file is edited in
place: it keeps its mode (a script stays executable), a symlink stays a link (its target is
edited), and CRLF line endings stay CRLF; each write is atomic. ``_aliases.py`` and ``tests/``
are never touched, and neither is ``.ci/`` unless named (CI's scripts run unattended, and
tests/test_names.py already fails on an old name there). Running it twice changes nothing the
second time.

The rules, in order:

* ``prog="python -m lrnn.train"`` -> ``prog="lrnn train"`` (argparse's name of a command);
* ``python -m lrnn.train`` (and ``bench``, ``grade``, ``doctor``, ``exercises``,
  ``experiments``) -> ``python -m lrnn train``; ``lrnn.bench scan`` (a command in prose) ->
  ``lrnn bench scan``;
* ``from lrnn import lru, model`` -> ``from lrnn.layers import lru`` + ``from lrnn import
  model`` (same indentation; single-line imports only);
* ``lrnn.rotlstm.gru_init`` -> ``lrnn.layers.gru.init`` (each name of the old combined module);
  ``from lrnn import rotlstm`` -> ``from lrnn.layers import lstm as rotlstm`` where the text
  uses none of its GRU names;
* every other ``lrnn.OLD`` -> its new name (``lrnn.lru.init`` -> ``lrnn.layers.lru.init``).

What it cannot rewrite (``from lrnn import rotlstm`` beside its GRU names, multi-line imports)
it reports.
"""
from __future__ import annotations

import argparse
import importlib.util
import json
import pathlib
import re
import sys

ROOT = pathlib.Path(__file__).resolve().parents[1]
DEFAULT_PATHS = ["src/lrnn", "book", "solutions", "exercises", "README.md", "scripts"]
SUFFIXES = {".py", ".md", ".ipynb", ".txt", ".cfg", ".toml", ".yml", ".yaml", ".sh", ""}
SKIP_NAMES = {"_aliases.py", "rename_old_names.py"}


def _load(name):
    """``lrnn/<name>.py`` by path, so that the script needs neither JAX nor an install."""
    path = ROOT / "src" / "lrnn" / f"{name}.py"
    spec = importlib.util.spec_from_file_location(f"_lrnn{name}", path)
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module            # dataclasses look their module up there
    spec.loader.exec_module(module)
    return module


_A = _load("_aliases")
_IO = _load("_io")
OLD_NAMES: dict[str, str] = dict(_A.OLD_NAMES)
OLD_ATTRIBUTES: dict[str, dict] = dict(_A.OLD_ATTRIBUTES)
COMMANDS = sorted({old.split(".")[1] for old in _A.OLD_COMMANDS})
SUBCOMMAND_WORDS = ("scan", "layer", "targets", "plans", "build", "execute", "slowest")

_LEAVES = sorted({old.split(".")[1] for old in [*OLD_NAMES, *OLD_ATTRIBUTES]}, key=len,
                 reverse=True)
_EDGE_BEFORE = r"(?<![\w.])"
_EDGE_AFTER = r"(?![\w])"

_COMMAND_ALTERNATIVES = "|".join(COMMANDS)
_RE_PROG = re.compile(rf'prog="python -m lrnn[. ]({_COMMAND_ALTERNATIVES}){_EDGE_AFTER}')
_RE_DASH_M = re.compile(rf"-m lrnn\.({'|'.join(COMMANDS)}){_EDGE_AFTER}")
_RE_PROSE_COMMAND = re.compile(
    rf"{_EDGE_BEFORE}lrnn\.({'|'.join(COMMANDS)}) (?=--|(?:{'|'.join(SUBCOMMAND_WORDS)})\b)")
_RE_FROM_IMPORT = re.compile(r"^(?P<indent>[ \t]*)from lrnn import (?P<names>[^()\n#]+?)"
                             r"(?P<tail>[ \t]*(?:#[^\n]*)?)$", re.M)
_RE_ROTLSTM_ATTR = re.compile(rf"{_EDGE_BEFORE}lrnn\.rotlstm\.(\w+)")
_RE_DOTTED = re.compile(rf"{_EDGE_BEFORE}lrnn\.({'|'.join(_LEAVES)}){_EDGE_AFTER}")


def _split_from_import(match: re.Match, *, lstm_only: bool = False) -> str:
    indent, tail = match["indent"], match["tail"]
    groups: dict[str, list[str]] = {}
    for item in match["names"].split(","):
        item = item.strip()
        if not item:
            continue
        name, _, alias = item.partition(" as ")
        name, alias = name.strip(), alias.strip()
        new = OLD_NAMES.get(f"lrnn.{name}")
        if name == "rotlstm" and lstm_only:        # only LSTM names used: lrnn.layers.lstm
            new = "lrnn.layers.lstm"
        if new is None:                            # a new name, or lrnn.rotlstm: kept
            groups.setdefault("lrnn", []).append(item)
            continue
        package, _, leaf = new.rpartition(".")
        local = alias or name
        groups.setdefault(package, []).append(leaf if leaf == local else f"{leaf} as {local}")
    if list(groups) == ["lrnn"]:
        return match.group(0)
    lines = [f"{indent}from {package} import {', '.join(names)}" for package, names in groups.items()]
    return "\n".join(lines) + tail


def _rotlstm_attribute(match: re.Match) -> str:
    found = OLD_ATTRIBUTES["lrnn.rotlstm"].get(match[1])
    if found is None:
        return match.group(0)
    module, name = found
    return f"{module}.{name}"


def _dotted(match: re.Match) -> str:
    old = f"lrnn.{match[1]}"
    return OLD_NAMES.get(old, match.group(0))


def rename(text: str) -> str:
    """``text`` with every old name it can rewrite rewritten."""
    text = _RE_DASH_M.sub(lambda m: f"-m lrnn {m[1]}", text)
    text = _RE_PROSE_COMMAND.sub(lambda m: f"lrnn {m[1]} ", text)
    text = _RE_PROG.sub(lambda m: f'prog="lrnn {m[1]}', text)
    lstm_only = not re.search(r"\brotlstm\.(gru_\w+|GRU_GATES)", text)
    text = _RE_FROM_IMPORT.sub(lambda m: _split_from_import(m, lstm_only=lstm_only), text)
    text = _RE_ROTLSTM_ATTR.sub(_rotlstm_attribute, text)
    return _RE_DOTTED.sub(_dotted, text)


def leftovers(text: str) -> list[str]:
    """Old names that ``rename`` leaves in ``text`` (for the report)."""
    found = [m.group(0) for m in _RE_DOTTED.finditer(text)]
    for m in re.finditer(r"^[ \t]*from lrnn import (.+)$", text, re.M):
        names = {n.strip().partition(" as ")[0] for n in m[1].strip("()").split(",")}
        found += [f"from lrnn import {n}" for n in sorted(names)
                  if f"lrnn.{n}" in OLD_NAMES or f"lrnn.{n}" in OLD_ATTRIBUTES]
    return found


def _cell_text(cell) -> str:
    source = cell.get("source", "")
    return "".join(source) if isinstance(source, list) else source


def _set_cell_text(cell, text: str) -> None:
    if isinstance(cell.get("source"), list):
        cell["source"] = text.splitlines(keepends=True)
    else:
        cell["source"] = text


def rename_notebook(raw: str) -> tuple[str, list[str]]:
    nb = json.loads(raw)
    left = []
    for cell in nb.get("cells", []):
        old = _cell_text(cell)
        new = rename(old)
        if new != old:
            _set_cell_text(cell, new)
        left += leftovers(new)
    out = json.dumps(nb, sort_keys=True, indent=1, ensure_ascii=False) + "\n"
    return out, left


def rename_file(path: pathlib.Path, *, check: bool) -> tuple[bool, list[str]]:
    raw, newline = _IO.split_newlines(path.read_bytes().decode("utf-8"))
    if path.suffix == ".ipynb":
        nb_before = json.loads(raw)
        new, left = rename_notebook(raw)
        changed = json.loads(new) != nb_before
        if not changed:
            new = raw                       # never reformat a notebook it does not change
    else:
        new = rename(raw)
        left = leftovers(new)
        changed = new != raw
    if changed and not check:
        _IO.edit_in_place(path, _IO.join_newlines(new, newline).encode("utf-8"))
    return changed, left


def files(paths):
    for p in paths:
        p = pathlib.Path(p)
        if p.is_dir():
            for f in sorted(p.rglob("*")):
                if (f.is_file() and f.suffix in SUFFIXES and f.name not in SKIP_NAMES
                        and "tests" not in f.parts and not any(part.startswith(".ipynb_checkpoints")
                                                               or part == "__pycache__"
                                                               or part == "_build"
                                                               for part in f.parts)):
                    yield f
        elif p.is_file() and p.name not in SKIP_NAMES:
            yield p


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(prog="python scripts/rename_old_names.py",
                                     description=__doc__.split("\n")[0])
    parser.add_argument("paths", nargs="*", help=f"default: {' '.join(DEFAULT_PATHS)}")
    parser.add_argument("--check", action="store_true", help="change nothing; exit 1 if any would")
    args = parser.parse_args(argv)
    paths = args.paths or [ROOT / p for p in DEFAULT_PATHS if (ROOT / p).exists()]
    missing = [p for p in args.paths if not pathlib.Path(p).exists()]
    if missing:
        parser.error(f"no such file or folder: {', '.join(map(str, missing))}")
    changed_any = False
    for f in files(paths):
        try:
            changed, left = rename_file(f, check=args.check)
        except (UnicodeDecodeError, json.JSONDecodeError):
            continue
        if changed:
            changed_any = True
            print(f"{'would change' if args.check else 'changed'}: {f}")
        for name in sorted(set(left)):
            print(f"left for a person: {f}: {name}", file=sys.stderr)
    return 1 if (args.check and changed_any) else 0


if __name__ == "__main__":
    sys.exit(main())
