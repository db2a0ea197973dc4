"""Old names, one mechanism (lrnn._aliases): each says when it goes, they go then, and the
finder that answers them leaves every other import alone."""
import importlib
import subprocess
import sys
import warnings

import pytest

import lrnn
from lrnn import _aliases, _validate


def version(text: str) -> tuple[int, ...]:
    return tuple(int(p) for p in text.split(".")[:3] if p.isdigit())


def test_old_names_are_removed_in_the_stated_version():
    """Fails once the package reaches lrnn._aliases.REMOVED_IN: remove the old names then (the
    tables of _aliases, renamed keywords, the old flag of `lrnn train`) and this test."""
    assert version(lrnn.__version__) < version(_aliases.REMOVED_IN), (
        f"lrnn {lrnn.__version__} still carries the old names deprecated until "
        f"{_aliases.REMOVED_IN}: remove them")


def test_every_notice_states_the_removal_version():
    renamed = [f"{m}.{old}" for m, names in _aliases.RENAMED_IN.items() for old in names]
    for old in [*_aliases.OLD_NAMES, *_aliases.OLD_SUBMODULES, *_aliases.OLD_ATTRIBUTES,
                *renamed]:
        assert f"lrnn {_aliases.REMOVED_IN}" in _aliases.notice(old), old

    @_validate.renamed_keywords(old_size="size")
    def f(size):
        return size
    with pytest.warns(DeprecationWarning, match=rf"f\(old_size=\.\.\.\) is deprecated: use "
                                                rf"size=\.\.\. .*lrnn {_aliases.REMOVED_IN}"):
        assert f(old_size=3) == 3


def test_renamed_names_warn_at_the_callers_line_and_give_the_new_object():
    """Names renamed inside a module (``check.run`` beside the ``grading.run`` module,
    ``check.grading()`` beside the ``grading`` package): the old name warns once per use,
    pointing at the line that used it, and is the new object; a name never defined is an
    AttributeError as before."""
    import lrnn.course.check as check
    for module, names in _aliases.RENAMED_IN.items():
        target = importlib.import_module(module)
        for old, new in names.items():
            with pytest.warns(DeprecationWarning, match=rf"{module}\.{old} is deprecated: use "
                                                        rf"{module}\.{new}") as caught:
                assert getattr(target, old) is getattr(target, new)
            assert caught[0].filename == __file__, caught[0].filename
            assert not hasattr(target, old + "_never_defined")
    with pytest.warns(DeprecationWarning, match="result_of"):
        from lrnn.course.check import run  # noqa: F401
    assert _aliases.is_old_name("lrnn.course.check.grading")
    assert not _aliases.is_old_name("lrnn.course.check.result_of")
    assert check.result_of("1.5", lambda A: 0.0).status == "fail"


def test_the_finder_comes_after_pythons_own():
    ours = [k for k, f in enumerate(sys.meta_path) if isinstance(f, _aliases._AliasFinder)]
    assert len(ours) == 1
    assert ours[0] > sys.meta_path.index(importlib.machinery.PathFinder)


SPY = """
import sys, lrnn
from lrnn import _aliases
asked = []
finder = next(f for f in sys.meta_path if isinstance(f, _aliases._AliasFinder))
real = finder.find_spec
finder.find_spec = lambda name, *a, **k: asked.append(name) or real(name, *a, **k)
sys.path.insert(0, sys.argv[1])
import colorsys, wave, json.tool, mine          # never imported before in this process
before = list(asked)
import warnings
warnings.simplefilter("ignore")
import lrnn.lru
print([before, asked[len(before):][:1]])
"""


def test_import_lrnn_leaves_other_imports_untouched(tmp_path):
    """After ``import lrnn``, importing other packages (the standard library's, one of the
    user's) never consults lrnn's finder; an old lrnn name does."""
    (tmp_path / "mine.py").write_text("x = 1\n")
    out = subprocess.run([sys.executable, "-c", SPY, str(tmp_path)], capture_output=True,
                         text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    assert eval(out.stdout) == [[], ["lrnn.lru"]]


def test_the_finder_answers_lrnn_names_only():
    finder = next(f for f in sys.meta_path if isinstance(f, _aliases._AliasFinder))
    assert finder.find_spec("lru") is None and finder.find_spec("json.lru") is None
    assert finder.find_spec("lrnn.layers.lru") is None           # a current name: not its job
    assert finder.find_spec("lrnn.lru") is not None


@pytest.mark.filterwarnings("ignore::DeprecationWarning")
def test_a_submodule_under_an_old_package_name_is_one_module(tmp_path):
    code = ("import sys, warnings\nwarnings.simplefilter('ignore')\n"
            "from lrnn.check.ch02 import random_params\nimport lrnn.course.check.ch02 as new\n"
            "import lrnn.doctor.budgets as b, lrnn.course.doctor.budgets as b2\n"
            "from lrnn.course.check import exercises\n"
            "print(sys.modules['lrnn.check.ch02'] is new, random_params is new.random_params, "
            "b is b2, '1.1' in exercises())")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    assert out.stdout.split() == ["True", "True", "True", "True"]   # the folder still lists


def test_course_grade_is_an_old_name_with_a_warning():
    sys.modules.pop("lrnn.course.grade", None)
    with pytest.warns(DeprecationWarning, match=r"lrnn.course.grade is deprecated: use "
                                                r"lrnn.course.grading"):
        old = importlib.import_module("lrnn.course.grade")
    assert old is importlib.import_module("lrnn.course.grading")


def test_python_dash_m_course_grade_runs_lrnn_grade():
    out = subprocess.run([sys.executable, "-W", "error", "-m", "lrnn.course.grade", "--help"],
                         capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    assert out.stdout.startswith("usage: lrnn grade")
    assert out.stderr == (f"python -m lrnn.course.grade is deprecated: use `lrnn grade` "
                          f"(the old name goes in lrnn {_aliases.REMOVED_IN})\n")


def test_the_version_rule_can_fail():
    assert version("0.2.0") >= version("0.2") and version("0.1.9") < version("0.2")
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert _aliases.new_name("lrnn.course.grade.cli") == "lrnn.course.grading.cli"
        assert _aliases.new_name("lrnn.course.grading") is None
