"""The quick tier (conftest.py): notebooks are marked slow, and a test that is not marked slow
cannot be slow."""
import importlib.util
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]

BURN = """
import time, pytest

def burn(seconds):
    start = time.process_time()
    while time.process_time() - start < seconds:
        pass

def test_quick():
    pass

def test_burns_unmarked():
    burn(0.5)

@pytest.mark.slow
def test_burns_marked():
    burn(0.5)
"""


def rules(limit_cpu_s=None) -> str:
    text = (ROOT / "conftest.py").read_text(encoding="utf-8")
    if limit_cpu_s is not None:
        old = "UNMARKED_LIMIT_CPU_S = 10.0"
        assert old in text
        text = text.replace(old, f"UNMARKED_LIMIT_CPU_S = {limit_cpu_s}")
    return text


def load_rules():
    spec = importlib.util.spec_from_file_location("lrnn_test_rules", ROOT / "conftest.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.fixture
def planted(pytester):
    pytester.makeconftest(rules(limit_cpu_s=0.2))
    pytester.makeini('[pytest]\nmarkers =\n    slow: slow\n    notebook: notebook\n')
    pytester.makepyfile(test_planted=BURN)
    return pytester


def test_in_the_quick_tier_an_unmarked_test_over_the_limit_fails(planted):
    result = planted.runpytest("-p", "no:cacheprovider", "-p", "no:nbval", "-m", "not slow")
    result.assert_outcomes(passed=1, failed=1, deselected=1)
    result.stdout.fnmatch_lines(["*test_burns_unmarked: used * s of CPU, over the 0.2 s allowed "
                                 "to a test that is not marked slow*"])
    result.stdout.fnmatch_lines(["tests not marked slow: 2, *"])


def test_the_full_run_lists_it_without_failing_on_time(planted):
    result = planted.runpytest("-p", "no:cacheprovider", "-p", "no:nbval")
    result.assert_outcomes(passed=3)
    result.stdout.fnmatch_lines(["unmarked tests over the quick tier's limits*",
                                 "*test_burns_unmarked: used * s of CPU*"])




def test_the_limit_is_cpu_time_or_generous_wall_time():
    conftest = load_rules()
    assert conftest.over_limit(conftest.UNMARKED_LIMIT_CPU_S + 1, 1.0)
    assert conftest.over_limit(0.5, conftest.UNMARKED_LIMIT_WALL_S + 1)
    assert conftest.over_limit(0.5, 30.0) is None             # waiting on a busy machine
    assert conftest.over_limit(15.0, 15.0, scale=2) is None


def test_every_notebook_cell_is_marked_slow_and_notebook(pytester):
    pytester.makeconftest(rules())
    pytester.makeini('[pytest]\nmarkers =\n    slow: slow\n    notebook: notebook\n')
    nb = ROOT / "book" / "00_welcome.ipynb"
    (pytester.path / "nb.ipynb").write_bytes(nb.read_bytes())
    result = pytester.runpytest("-p", "no:cacheprovider", "--collect-only", "-q", "-m", "not slow",
                                "nb.ipynb")
    result.stdout.fnmatch_lines(["*deselected*"])
    assert "nb.ipynb::" not in result.stdout.str()
    result = pytester.runpytest("-p", "no:cacheprovider", "--collect-only", "-q", "-m", "notebook",
                                "nb.ipynb")
    assert "nb.ipynb::" in result.stdout.str()
