"""Every stored result and benchmark file in book/data/ names the commit it belongs to."""
import json
import pathlib
import re

import pytest

from _rules import assert_every

DATA = pathlib.Path(__file__).resolve().parents[1] / "book" / "data"
SHA = re.compile(r"^[0-9a-f]{7,40}$")
SHA_IN_TEXT = re.compile(r"commit[^0-9a-f]{0,40}\b([0-9a-f]{7,40})\b")


def commits_named(obj):
    """The values of every key named 'commit' or 'commit_*' that look like a git hash."""
    if isinstance(obj, dict):
        for key, value in obj.items():
            if (key == "commit" or key.startswith("commit_")) and isinstance(value, str) \
                    and SHA.match(value):
                yield value
            yield from commits_named(value)
    elif isinstance(obj, list):
        for item in obj:
            yield from commits_named(item)


def file_commits(path):
    text = path.read_text(encoding="utf-8")
    if path.suffix == ".json":
        return list(commits_named(json.loads(text)))
    return SHA_IN_TEXT.findall(text)


FILES = sorted(p for p in DATA.rglob("*") if p.is_file())


def test_there_are_stored_files():
    assert len(FILES) > 80


def check_every_stored_file_names_a_commit(path):
    assert file_commits(path), (f"{path.relative_to(DATA.parents[1])} names no commit: add "
                                "'commit' (the producing commit) or 'commit_added' with a note")


def test_every_stored_file_names_a_commit():
    assert_every(FILES, check_every_stored_file_names_a_commit)


def test_the_check_can_fail(tmp_path):
    bare = tmp_path / "r.json"
    bare.write_text(json.dumps({"name": "x", "commit_note": "none", "commit": "not a sha"}))
    assert file_commits(bare) == []
    (tmp_path / "t.md").write_text("| a | b |\n")
    assert file_commits(tmp_path / "t.md") == []
    (tmp_path / "t2.md").write_text("measured at commit 649d3fa\n")
    assert file_commits(tmp_path / "t2.md") == ["649d3fa"]
