"""lrnn.course.colab and the setup cell's bootstrap: nothing preinstalled is changed, what is
too old is said plainly, drift from the tested pins is reported; the pins match Colab's freeze."""
import importlib.util
import re
import subprocess
import sys
from pathlib import Path

import nbformat
import pytest

from lrnn.course import colab

ROOT = Path(__file__).resolve().parents[1]
PINS = ROOT / ".ci" / "colab-pins.txt"
_spec = importlib.util.spec_from_file_location("sync_headers", ROOT / "scripts" / "sync_headers.py")
sync_headers = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(sync_headers)
_spec = importlib.util.spec_from_file_location("colab_pins", ROOT / "scripts" / "colab_pins.py")
colab_pins = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(colab_pins)


def test_version_tuple():
    assert colab.version_tuple("2.1.3") == (2, 1, 3)
    assert colab.version_tuple("0.7.2rc1") == (0, 7, 2)
    assert colab.version_tuple("8.1.9.post1") == (8, 1, 9)
    assert colab.version_tuple("7.7.1") < colab.version_tuple("7.10")


def test_requirements_follow_pyproject_extras():
    reqs = dict(colab.requirements(("notebooks",)))
    assert reqs["jax"] and reqs["ipywidgets"] == "7.7.1"
    assert "nbclient" not in reqs                 # grading only
    grading = dict(colab.requirements(("grading",)))
    assert {"nbclient", "nbformat", "ipykernel", "matplotlib"} <= set(grading)


def _fake_env(monkeypatch, have, reqs):
    state = {"have": dict(have), "cmd": None, "constraints": None}

    def installed():
        return dict(state["have"])

    def run(cmd, check):
        state["cmd"] = cmd
        state["constraints"] = Path(cmd[cmd.index("-c") + 1]).read_text()
        for name in cmd[cmd.index("-c") + 2:]:
            state["have"][name] = "9.9"
        return subprocess.CompletedProcess(cmd, 0)

    monkeypatch.setattr(colab, "installed", installed)
    monkeypatch.setattr(colab, "requirements", lambda extras: reqs)
    return state, run


def test_install_missing_adds_only_what_is_missing_and_holds_the_rest(monkeypatch, capsys):
    have = {"lrnn": "0.1.0", "jax": "0.7.2", "numpy": "2.1.3", "ipywidgets": "7.7.1", "torch": "2.11"}
    reqs = [("jax", "0.7.2"), ("numpy", "2.1.3"), ("ipywidgets", "7.7.1"), ("mlxtend", "0.23.4")]
    state, run = _fake_env(monkeypatch, have, reqs)
    result = colab.install_missing(run=run)
    assert state["cmd"][-1:] == ["mlxtend"] and "--upgrade" not in state["cmd"]
    assert set(state["constraints"].splitlines()) == {f"{n}=={v}" for n, v in have.items()}
    assert result == {"installed": {"mlxtend": "9.9", "lrnn": "0.1.0"}, "too_old": []}
    out = capsys.readouterr().out.strip().splitlines()
    assert out == ["Installed lrnn 0.1.0 with mlxtend 9.9; the 4 packages already here kept "
                   "their versions."]


def test_install_missing_says_plainly_what_is_too_old_and_does_not_upgrade(monkeypatch, capsys):
    have = {"lrnn": "0.1.0", "jax": "0.4.30", "numpy": "2.1.3"}
    state, run = _fake_env(monkeypatch, have, [("jax", "0.7.2"), ("numpy", "2.1.3")])
    result = colab.install_missing(run=run)
    assert state["cmd"] is None                   # nothing missing: pip is not even called
    assert result["too_old"] == [("jax", "0.4.30", "0.7.2")]
    out = capsys.readouterr().out
    assert len(out.strip().splitlines()) == 1
    assert "Older than the course supports, not upgraded: jax 0.4.30 (course needs ≥0.7.2" in out


def test_install_missing_refuses_a_changed_package(monkeypatch):
    state, _ = _fake_env(monkeypatch, {"lrnn": "0.1", "numpy": "2.1.3"}, [("tqdm", None)])

    def upgrading_run(cmd, check):
        state["have"]["numpy"] = "2.3.0"
        state["have"]["tqdm"] = "4.67.3"
    with pytest.raises(RuntimeError, match="changed preinstalled packages.*numpy"):
        colab.install_missing(run=upgrading_run, quiet=True)


def test_drift_verdicts():
    pins = {"jax": "0.7.2", "numpy": "2.1.3", "ipywidgets": "7.7.1", "six": "1.17.0",
            "tqdm": "4.67.3", "scipy": "1.16.3"}
    have = {"jax": "0.8.0", "numpy": "2.1.4", "ipywidgets": "7.7.1", "six": "1.16.0",
            "tqdm": "4.60.0"}
    rows = {r[0]: r for r in colab.drift(pins, have, {"tqdm": "4.67.3"})}
    assert rows["jax"][3] == "matters" and rows["numpy"][3] == "minor"
    assert rows["six"][3] == "unlikely" and rows["tqdm"][3] == "too old"
    assert rows["scipy"] == ("scipy", "1.16.3", None, "matters")
    assert "ipywidgets" not in rows


def test_drift_lines(tmp_path):
    pins = tmp_path / "pins.txt"
    pins.write_text("# source: somewhere, commit abc, date 2026-08-19\njax==0.7.2\nsix==1.17.0\n")
    same = colab.drift_lines(pins, {"jax": "0.7.2", "six": "1.17.0"})
    assert same == ["Colab drift against the pins CI tested (somewhere, commit abc, date "
                    "2026-08-19): none, all 2 pinned packages at the tested versions"]
    lines = colab.drift_lines(pins, {"jax": "0.9.0", "six": "1.16.0"})
    assert "2 of 2 differ, 1 may matter to the course" in lines[0]
    assert lines[1].startswith("  jax: tested 0.7.2, here 0.9.0") and "six" in lines[2]
    assert colab.doctor_status(lines) == "WARN" and colab.doctor_status(same) == "INFO"


# -- the pins --------------------------------------------------------------------------------
def test_pins_come_from_the_committed_freeze_with_their_source():
    text = PINS.read_text()
    assert re.search(r"^# source: https://github.com/googlecolab/backend-info .*commit a724079, "
                     r"date 2026-08-19$", text, re.M)
    assert (ROOT / "src" / "lrnn" / "course" / "colab-pins.txt").read_text() == text
    pins, _ = colab.read_pins(PINS)
    freeze = colab_pins.read_freeze(ROOT / ".ci" / "colab" / "pip-freeze.gpu.2026-08-19.txt")
    for name, version in pins.items():
        if name in freeze:
            assert freeze[name] == version, name
        else:
            assert re.search(rf"^{re.escape(name)}=={re.escape(version)}  # not in the freeze$",
                             text, re.M), name
    assert {"jax": "0.7.2", "ipywidgets": "7.7.1", "ipython": "7.34.0",
            "ipykernel": "6.17.1"}.items() <= pins.items()
    assert not {"torch", "tensorflow", "jax-cuda12-plugin"} & set(pins)


# -- the setup cell's bootstrap ---------------------------------------------------------------
URL, BRANCH = "https://github.com/lrnn-course/lrnn", "main"


def test_sync_rewrites_only_the_bootstrap_and_is_idempotent():
    old = ('# Setup: old words\nimport importlib.util, subprocess, sys\n'
           'if importlib.util.find_spec("lrnn") is None:\n'
           '    subprocess.run([sys.executable, "-m", "pip", "install", "-q",\n'
           '                    "lrnn @ git+https://github.com/x/y"], check=True)\n'
           'import lrnn\nenv = lrnn.course.setup.environment(matmul_precision="default")  # mine')
    nb = nbformat.v4.new_notebook(cells=[nbformat.v4.new_code_cell(old),
                                         nbformat.v4.new_code_cell("x = 1\nimport lrnn")])
    assert sync_headers.synced(nb, "book/09_x.ipynb", URL, BRANCH)
    src = nb.cells[0].source
    assert src == sync_headers.bootstrap(URL, BRANCH) + (
        'import lrnn\nenv = lrnn.course.setup.environment(matmul_precision="default")  # mine')
    assert nb.cells[1].source == "x = 1\nimport lrnn"
    assert not sync_headers.synced(nb, "book/09_x.ipynb", URL, BRANCH)
    assert all(len(line) <= 100 for line in src.splitlines())


def test_bootstrap_installs_lrnn_alone_from_the_source_then_only_what_is_missing(monkeypatch):
    calls = []
    monkeypatch.setattr(subprocess, "run", lambda cmd, check: calls.append(cmd))
    real = importlib.util.find_spec
    monkeypatch.setattr(importlib.util, "find_spec",
                        lambda name, *a: None if name == "lrnn" else real(name, *a))
    monkeypatch.setattr(colab, "install_missing", lambda: calls.append("install_missing"))
    code = sync_headers.bootstrap(URL, BRANCH)
    monkeypatch.delenv("LRNN_INSTALL_SOURCE", raising=False)
    exec(code, {})
    assert calls == [[sys.executable, "-m", "pip", "install", "-q", "--no-deps",
                      f"lrnn @ git+{URL}"], "install_missing"]
    calls.clear()
    monkeypatch.setenv("LRNN_INSTALL_SOURCE", "lrnn @ file:///checkout")
    exec(code, {})
    assert calls[0][-1] == "lrnn @ file:///checkout"


def test_doctor_reports_drift_only_in_colab():
    from lrnn.course import doctor
    assert doctor._colab_drift(False) == []
    [result] = doctor._colab_drift(True)
    assert result.name == "Colab drift" and result.status in ("INFO", "WARN")
    assert result.detail.startswith("Colab drift against the pins CI tested")


def test_install_missing_explains_when_pip_cannot_add_without_upgrading(monkeypatch, capsys):
    state, _ = _fake_env(monkeypatch, {"lrnn": "0.1", "numpy": "1.0"}, [("optax", None)])

    def refusing_run(cmd, check):
        raise subprocess.CalledProcessError(1, cmd)
    result = colab.install_missing(run=refusing_run)
    out = capsys.readouterr().out
    assert "Could not add optax without changing packages already here" in out
    assert "nothing was changed" in out and result["installed"] == {"lrnn": "0.1"}
