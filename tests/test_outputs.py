"""Nothing lost, everywhere: every output option of every command, found in the commands'
own argument parsers, refuses a file the command did not write before any work, and leaves its
bytes, its mode and its symlink as they were. A new command or subcommand is picked up here
without a change to this file: its parser is walked (``build_parser()``, else the parser its
``main`` builds), subparsers included, and its output options are found by
``lrnn._io.output_argument``'s mark or by their name and help. The scripts that edit the
repository in place keep modes, links and line endings."""
from __future__ import annotations

import argparse
import contextlib
import importlib
import io
import json
import os
import re
import stat
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from lrnn import _io, cli

ROOT = Path(__file__).resolve().parents[1]

#: A notebook: what a typo in an output option must never cost.
NOTEBOOK = (b'{\n "cells": [{"cell_type": "markdown", "metadata": {}, "source": ["my notes"]}],\n'
            b' "metadata": {}, "nbformat": 4, "nbformat_minor": 5\n}\n')
#: Files of other programs with the suffixes an output option may ask for.
FOREIGN = {".json": b'{"answer": 42}\n', ".jsonl": b'{"mine": 1}\n{"mine": 2}\n',
           ".csv": b"student,points\r\nalice,10\r\n", ".md": b"# My notes\n\nkeep me\n",
           ".txt": b"notes\n", ".ipynb": NOTEBOOK}
#: An option whose name or help says it is written, though nobody marked it.
OUTPUT_NAME = re.compile(r"^--(out|output|results|save|log|report)(-.+)?$|^--.+-(out|dir|md)$")
OUTPUT_HELP = re.compile(r"\b(write|writes|append|appends|created or updated)\b", re.I)
#: Positionals a subcommand needs, where an empty folder will not do.
POSITIONALS = {("experiments", "run", "suite"): "smoke",
               ("grade", "classroom", "tests_repo"): "course/lrnn-tests"}
#: Options whose name looks like an output's but that the command only reads.
INPUTS = {(("grade", "report"), "--feedback-dir")}


class _Captured(Exception):
    def __init__(self, parser):
        self.parser = parser


def parser_of(module):
    """The module's own parser: ``build_parser()``, else the one its ``main`` builds (caught
    as it starts parsing, so that nothing runs)."""
    if hasattr(module, "build_parser"):
        return module.build_parser()

    def capture(self, *args, **kwargs):
        raise _Captured(self)
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(argparse.ArgumentParser, "parse_args", capture)
        mp.setattr(argparse.ArgumentParser, "parse_known_args", capture)
        try:
            module.main([])
        except _Captured as caught:
            return caught.parser
    raise AssertionError(f"{module.__name__}.main builds no argparse parser")


def walk(parser, path):
    """``(command path, parser)`` for ``parser`` and every subparser under it."""
    yield path, parser
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for name, sub in action.choices.items():
                yield from walk(sub, path + (name,))


def is_output(action) -> bool:
    if hasattr(action, "lrnn_output"):
        return True
    if not action.option_strings or action.nargs == 0 or action.type not in (None, str, Path):
        return False                       # a flag or a number is not where anything goes
    return any(OUTPUT_NAME.match(o) for o in action.option_strings) or \
        bool(OUTPUT_HELP.search(action.help or ""))


def command_parsers():
    """``(module run by lrnn, command path, parser)`` of every command and subcommand: the
    argparse subparsers, and the subcommands a module dispatches by hand (``PLATFORMS``:
    ``lrnn grade gradescope|classroom|report|nbgrader``)."""
    for command, (module_name, _) in cli.COMMANDS.items():
        module = importlib.import_module(module_name)
        for path, parser in walk(parser_of(module), (command,)):
            yield module_name, path, parser
        for name, sub in getattr(module, "PLATFORMS", {}).items():
            submodule = importlib.import_module(f"{module.__package__}.{sub}")
            for path, parser in walk(parser_of(submodule), (command, name)):
                yield module_name, path, parser


def output_options():
    found = []
    for module_name, path, parser in command_parsers():
        for action in parser._actions:
            if is_output(action) and (path, action.option_strings[0]) not in INPUTS:
                found.append(pytest.param(module_name, path, parser, action,
                                          id=" ".join(path) + " " + action.option_strings[0]))
    return found


OPTIONS = output_options()


def test_the_walk_finds_the_known_outputs():
    ids = {p.id for p in OPTIONS}
    assert {"bench scan --out", "bench scan --targets-md", "bench layer --out",
            "bench plans --out", "bench targets --out", "train --out", "train --checkpoint",
            "experiments run --out", "experiments run --checkpoint-dir", "doctor --out-dir",
            "grade --out", "grade --feedback-dir", "exercises build --exercises",
            "grade gradescope --out", "grade nbgrader --out", "grade report --out",
            "grade classroom --out"} <= ids, ids
    assert not {i for i in ids if i.endswith(("--scan", "--layer", "--solutions"))}, ids


def _required(parser, path, tmp_path, skip):
    """Values for what ``parser`` requires besides the option under test."""
    argv = []
    for action in parser._actions:
        if action is skip or isinstance(action, argparse._SubParsersAction):
            continue
        if action.option_strings and not action.required:
            continue
        value = POSITIONALS.get(path[:2] + (action.dest,))
        if value is None and is_output(action):        # a new file where it is expected
            value = str(tmp_path / ("fresh" + _suffix_of(action)))
        if value is None:
            value = action.choices[0] if action.choices else str(tmp_path / "inputs")
        argv += ([action.option_strings[0]] if action.option_strings else []) + [value]
    return argv


def _suffix_of(action) -> str:
    spec = getattr(action, "lrnn_output", None)
    if spec is not None:
        return "" if spec.folder or not spec.suffixes else spec.suffixes[0]
    words = re.findall(r"\b(csv|json|markdown)\b", (action.help or "").lower())
    return {"csv": ".csv", "json": ".json", "markdown": ".md"}[words[0]] if words else ""


def _state(path: Path):
    link = path.is_symlink()
    target = Path(os.path.realpath(path))
    return (link, os.readlink(path) if link else None, target.read_bytes(),
            stat.S_IMODE(target.stat().st_mode))


@pytest.fixture
def no_work(monkeypatch):
    """Fails if a command compiles anything or starts a process: the check came after work."""
    import jax

    def work(*args, **kwargs):
        raise AssertionError("work began before the output was checked")
    monkeypatch.setattr(jax, "jit", work)
    monkeypatch.setattr(subprocess, "Popen", work)


def _run(module_name, argv):
    """``main(argv)``: (exit status, everything it printed)."""
    module = importlib.import_module(module_name)
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        try:
            status = module.main(argv)
        except SystemExit as exit_:
            status = exit_.code
    text = out.getvalue() + err.getvalue() + (status if isinstance(status, str) else "")
    return (1 if isinstance(status, str) else status), text


def _targets(action, tmp_path):
    """Foreign files to point ``action`` at: a notebook; a file of another program with each
    suffix the option accepts; and a symlink to the notebook."""
    spec = getattr(action, "lrnn_output", None)
    suffixes = (".ipynb",) if spec is not None and spec.folder else \
        (".ipynb",) + (tuple(spec.suffixes) if spec is not None and spec.suffixes
                       else tuple(FOREIGN))
    made = []
    for i, suffix in enumerate(dict.fromkeys(suffixes)):
        path = tmp_path / f"mine{i}{suffix}"
        path.write_bytes(FOREIGN.get(suffix, NOTEBOOK) if suffix != ".npz" else b"")
        if suffix == ".npz":
            np.savez(path, W=np.ones(3))
        path.chmod(0o754)
        made.append(path)
    link = tmp_path / f"link{made[-1].suffix}"
    link.symlink_to(made[0].name)
    return made + [link]


@pytest.mark.parametrize("module_name, path, parser, action", OPTIONS)
def test_an_output_option_never_touches_a_file_it_did_not_write(tmp_path, monkeypatch, no_work,
                                                               module_name, path, parser,
                                                               action):
    (tmp_path / "inputs").mkdir()           # positionals: a folder with one notebook
    (tmp_path / "inputs" / "01_linear_recurrence.ipynb").write_bytes(NOTEBOOK)
    monkeypatch.chdir(tmp_path)
    flag = action.option_strings[0]
    for target in _targets(action, tmp_path):
        before = _state(target)
        argv = list(path[1:]) + [flag, str(target)] + _required(parser, path, tmp_path, action)
        status, text = _run(module_name, argv)
        assert status not in (0, None), f"{' '.join(path)} {flag} {target.name}: accepted\n{text}"
        assert flag in text and target.name in text, text
        assert len([t for t in text.splitlines() if "error" in t.lower()]) <= 2, text
        assert _state(target) == before, f"{' '.join(path)} {flag} changed {target.name}"
        assert not [p.name for p in tmp_path.iterdir() if ".tmp" in p.name], text
        assert (tmp_path / "inputs" / "01_linear_recurrence.ipynb").read_bytes() == NOTEBOOK


def test_every_marked_output_is_checked_as_it_is_parsed(tmp_path):
    """The mark of ``_io.output_argument`` is a check, not a label: parsing alone refuses."""
    notebook = tmp_path / "notes.ipynb"
    notebook.write_bytes(NOTEBOOK)
    marked = [p for p in OPTIONS if hasattr(p.values[3], "lrnn_output")]
    assert len(marked) >= 8
    for param in marked:
        _, path, parser, action = param.values
        with pytest.raises(argparse.ArgumentTypeError, match="notes.ipynb"):
            action.type(str(notebook))
    assert notebook.read_bytes() == NOTEBOOK


# ------------------------------------------------------------------ lrnn._io's helpers

def test_replace_own_checks_again_just_before_writing(tmp_path):
    out = tmp_path / "r.json"
    spec = dict(suffixes=(".json",), owned_by=_io.json_field_is("benchmark", "x"),
                command="lrnn bench x")
    _io.replace_own(out, '{"benchmark": "x", "n": 1}', **spec)
    _io.replace_own(out, '{"benchmark": "x", "n": 2}', **spec)       # its own: replaced
    assert json.loads(out.read_text())["n"] == 2
    out.write_bytes(NOTEBOOK)                                         # someone's, meanwhile
    with pytest.raises(_io.DestinationError, match="not written by lrnn bench x"):
        _io.replace_own(out, '{"benchmark": "x"}', **spec)
    assert out.read_bytes() == NOTEBOOK and sorted(p.name for p in tmp_path.iterdir()) == ["r.json"]


def test_append_own_line_appends_only_to_its_own_log(tmp_path):
    marker = _io.jsonl_first_record_is("benchmark", "plans")
    log = tmp_path / "p.jsonl"
    _io.append_own_line(log, '{"benchmark": "plans"}', marker=marker)
    _io.append_own_line(log, '{"row": 1}', marker=marker)
    with open(log, "ab") as f:
        f.write(b'{"row": 2, "cut sh')                    # an interrupted run's last line
    _io.append_own_line(log, '{"row": 3}', marker=marker)
    lines = log.read_text().splitlines()
    assert lines[0] == '{"benchmark": "plans"}' and lines[-1] == '{"row": 3}'
    assert json.loads(lines[1]) == {"row": 1} and len(lines) == 4
    other = tmp_path / "other.jsonl"
    other.write_bytes(FOREIGN[".jsonl"])
    with pytest.raises(_io.DestinationError, match="not this command's own log"):
        _io.append_own_line(other, '{"row": 1}', marker=marker)
    assert other.read_bytes() == FOREIGN[".jsonl"]


def test_edit_in_place_keeps_mode_link_and_the_links_target(tmp_path):
    script = tmp_path / "run.sh"
    script.write_bytes(b"#!/bin/sh\r\necho old\r\n")
    script.chmod(0o755)
    link = tmp_path / "link.sh"
    link.symlink_to("run.sh")
    _io.edit_in_place(link, b"#!/bin/sh\r\necho new\r\n")
    assert link.is_symlink() and os.readlink(link) == "run.sh"
    assert script.read_bytes() == b"#!/bin/sh\r\necho new\r\n"
    assert stat.S_IMODE(script.stat().st_mode) == 0o755
    assert _io.split_newlines("a\r\nb\r\n") == ("a\nb\n", "\r\n")
    assert _io.split_newlines("a\r\nb\n") == ("a\r\nb\n", "\n")          # mixed: as it is


# ------------------------------------------------------------------ the scripts

def _script(name):
    sys.path.insert(0, str(ROOT / "scripts"))
    try:
        return importlib.import_module(name)
    finally:
        sys.path.remove(str(ROOT / "scripts"))


def test_rename_old_names_keeps_mode_link_and_line_endings(tmp_path):
    rename = _script("rename_old_names")
    tool = tmp_path / "tool.py"
    tool.write_bytes(b"#!/usr/bin/env python\r\nimport lrnn.lru\r\nlrnn.lru.init(k)\r\n")
    tool.chmod(0o755)
    real = tmp_path / "real.md"
    real.write_bytes(b"Run `python -m lrnn.train --task adding`.\n")
    real.chmod(0o640)
    (tmp_path / "sub").mkdir()
    link = tmp_path / "sub" / "linked.md"
    link.symlink_to("../real.md")
    assert rename.main([str(tool), str(link)]) == 0
    assert tool.read_bytes() == (b"#!/usr/bin/env python\r\nimport lrnn.layers.lru\r\n"
                                 b"lrnn.layers.lru.init(k)\r\n")
    assert stat.S_IMODE(tool.stat().st_mode) == 0o755
    assert link.is_symlink() and os.readlink(link) == "../real.md"
    assert real.read_bytes() == b"Run `python -m lrnn train --task adding`.\n"
    assert stat.S_IMODE(real.stat().st_mode) == 0o640
    assert sorted(p.name for p in tmp_path.iterdir()) == ["real.md", "sub", "tool.py"]


def test_rename_old_names_leaves_ci_alone_unless_named():
    rename = _script("rename_old_names")
    assert not any(p.strip("/").startswith(".ci") for p in rename.DEFAULT_PATHS)
