"""Bad destinations and arguments of the commands: every command that writes checks
where it writes before any work, writes atomically and never replaces a file it did not write;
a damaged checkpoint or stored result names the file. Each data-loss case asserts that the file
is unchanged (bytes and mtime) and that no work ran (a spy on the training step, the runs or
the doctor's steps)."""
import io
import json
import os
import shutil
import zipfile
from pathlib import Path

import pytest

from lrnn import _io
from lrnn.course import doctor
from lrnn.course import exercises as ex
from lrnn.training import experiments, train

ROOT = Path(__file__).resolve().parents[1]
TINY = ["--task", "adding", "--seq-len", "6", "--layer", "lru", "--depth", "1", "--d-model",
        "4", "--d-state", "4", "--batch-size", "4", "--steps", "400", "--eval-every", "200",
        "--n-test", "8", "--no-progress"]


def _tiny_cfg(**kw):
    base = dict(task="adding", seq_len=6, layer="lru", depth=1, d_model=4, d_state=4,
                batch_size=4, steps=4, eval_every=2, n_test=8)
    return train.TrainConfig(**{**base, **kw})


def _stamp(path):
    path = Path(path)
    return path.read_bytes(), path.stat().st_mtime_ns


@pytest.fixture
def no_training(monkeypatch):
    """Fails the test if a training step is even compiled."""
    calls = []

    def spy(*args, **kwargs):
        calls.append(args)
        raise AssertionError("a training step was built: the check came after the work")

    monkeypatch.setattr(train, "_make_fns", spy)
    return calls


def _cli_error(capsys, main, argv):
    with pytest.raises(SystemExit) as err:
        main(argv)
    assert err.value.code not in (0, None)
    captured = capsys.readouterr()
    return captured.err + str(err.value.code)


# ------------------------------------------------------------------ lrnn train: destinations

@pytest.mark.parametrize("name, content, expected", [
    ("r.txt", "my notes\n", r"--out: got '.*r\.txt', expected a file name ending in \.json or \.csv"),
    ("notes.json", '{"answer": 42}', "notes.json.*exists and was not written by lrnn train"),
    ("grades.csv", "student,points\nalice,10\n", "grades.csv.*not written by lrnn train"),
    ("empty.json", "", "empty.json.*not written by lrnn train"),
    ("list.json", "[1, 2]", "list.json.*not written by lrnn train"),
])
def test_train_out_refuses_a_file_it_did_not_write(tmp_path, capsys, no_training, name,
                                                   content, expected):
    path = tmp_path / name
    path.write_text(content)
    before = _stamp(path)
    text = _cli_error(capsys, train.main, TINY + ["--out", str(path)])
    assert __import__("re").search(expected, text), text
    assert _stamp(path) == before and not no_training


@pytest.mark.parametrize("flag, value, expected", [
    ("--out", "{tmp}/nonexistent/dir/h.json", "no folder"),
    ("--out", "{tmp}/folder", "ending in .json or .csv"),
    ("--out", "{tmp}/folder.json", "it is an existing folder"),
    ("--checkpoint", "{tmp}/nonexistent/dir/ck.npz", "no folder"),
    ("--checkpoint", "{tmp}/ck.txt", "ending in .npz"),
    ("--checkpoint", "{tmp}/folder.npz", "it is an existing folder"),
])
def test_train_checks_its_destinations_before_any_step(tmp_path, capsys, no_training, flag,
                                                       value, expected):
    (tmp_path / "folder").mkdir()
    (tmp_path / "folder.json").mkdir()
    (tmp_path / "folder.npz").mkdir()
    text = _cli_error(capsys, train.main, TINY + [flag, value.format(tmp=tmp_path)])
    assert expected in text and not no_training
    assert sorted(p.name for p in tmp_path.iterdir()) == ["folder", "folder.json", "folder.npz"]


def test_train_api_checks_before_work_too(tmp_path, no_training):
    notes = tmp_path / "notes.json"
    notes.write_text("{}")
    before = _stamp(notes)
    with pytest.raises(ValueError, match="`out`.*notes.json.*not written by lrnn train"):
        train.train(_tiny_cfg(out=str(notes)), progress=False)
    assert _stamp(notes) == before and not no_training


@pytest.mark.skipif(os.geteuid() == 0, reason="root can write into any folder")
def test_train_refuses_a_folder_it_cannot_write(tmp_path, capsys, no_training):
    ro = tmp_path / "ro"
    ro.mkdir()
    ro.chmod(0o500)
    try:
        text = _cli_error(capsys, train.main, TINY + ["--out", str(ro / "h.json")])
    finally:
        ro.chmod(0o700)
    assert "cannot write" in text or "can write" in text


def test_train_replaces_its_own_history_and_writes_atomically(tmp_path):
    out = tmp_path / "h.csv"
    train.train(_tiny_cfg(out=str(out)), progress=False)
    first = out.read_text()
    assert first.splitlines()[0] == ",".join(train.HISTORY_KEYS)
    train.train(_tiny_cfg(out=str(out), seed=1), progress=False)   # its own output: replaced
    assert out.read_text() != first
    assert sorted(p.name for p in tmp_path.iterdir()) == ["h.csv"]  # no temporary file left


# ------------------------------------------------------------------ checkpoints

def _good_checkpoint(tmp_path):
    ck = tmp_path / "ck.npz"
    train.train(_tiny_cfg(checkpoint=str(ck)), progress=False)
    return ck


@pytest.mark.parametrize("damage, expected", [
    (lambda b: b"", "the file is empty"),
    (lambda b: b[: len(b) // 2], "not a .npz checkpoint"),
    (lambda b: b"\x93NUMPY" + b"\0" * 40, "not a .npz checkpoint"),
    (lambda b: b"garbage " * 50, "not a .npz checkpoint"),
])
def test_a_damaged_checkpoint_names_the_file_before_any_step(tmp_path, monkeypatch, damage,
                                                             expected):
    ck = _good_checkpoint(tmp_path)
    ck.write_bytes(damage(ck.read_bytes()))
    before = _stamp(ck)
    monkeypatch.setattr(train, "_make_fns", lambda *a, **k: pytest.fail("trained"))
    with pytest.raises(ValueError, match=f"checkpoint '.*ck.npz': {expected}"):
        train.train(_tiny_cfg(checkpoint=str(ck)), progress=False)
    assert _stamp(ck) == before


def test_an_npz_that_is_not_a_checkpoint_is_named(tmp_path, no_training):
    import numpy as np
    other = tmp_path / "weights.npz"
    np.savez(other, W=np.ones(3))
    before = _stamp(other)
    with pytest.raises(ValueError, match="weights.npz.*not a checkpoint written by lrnn train"):
        train.train(_tiny_cfg(checkpoint=str(other)), progress=False)
    assert _stamp(other) == before and not no_training
    bad_meta = tmp_path / "meta.npz"
    np.savez(bad_meta, step=np.int64(1), meta=np.array("{not json"))
    with pytest.raises(ValueError, match="meta.npz.*metadata cannot be read"):
        train.train(_tiny_cfg(checkpoint=str(bad_meta)), progress=False)
    with zipfile.ZipFile(tmp_path / "zip.npz", "w") as z:
        z.writestr("step.npy", b"not an array")
        z.writestr("meta.npy", b"not an array")
    with pytest.raises(ValueError, match="zip.npz.*(damaged or truncated|metadata cannot be read)"):
        train.train(_tiny_cfg(checkpoint=str(tmp_path / "zip.npz")), progress=False)


def test_a_checkpoint_of_another_model_is_named(tmp_path):
    ck = _good_checkpoint(tmp_path)
    with pytest.raises(ValueError, match="ck.npz"):
        train.train(_tiny_cfg(checkpoint=str(ck), d_state=6), progress=False)


def test_a_shared_checkpoint_is_locked_and_the_clash_named(tmp_path, no_training):
    ck = tmp_path / "ck.npz"
    with _io.lock(ck):                              # another run holds it
        with pytest.raises(ValueError, match="ck.npz.*another running process"):
            train.train(_tiny_cfg(checkpoint=str(ck)), progress=False)
    assert not ck.exists() and not no_training


def test_checkpoints_are_written_atomically_without_shared_temporary_names(tmp_path):
    ck = _good_checkpoint(tmp_path)
    assert not list(tmp_path.glob("*.tmp*"))
    assert train.is_checkpoint(ck)


def test_an_interrupted_atomic_write_leaves_the_old_file(tmp_path):
    path = tmp_path / "h.json"
    path.write_text("old")
    before = _stamp(path)
    with pytest.raises(RuntimeError):
        with _io.atomic_open(path, "w") as f:
            f.write("half of the new")
            raise RuntimeError("killed")
    assert _stamp(path) == before and sorted(p.name for p in tmp_path.iterdir()) == ["h.json"]


# ------------------------------------------------------------------ lrnn experiments

def test_experiments_out_that_is_a_file_is_refused_before_any_run(tmp_path, capsys, monkeypatch):
    monkeypatch.setattr(experiments, "train", lambda *a, **k: pytest.fail("a run started"))
    target = tmp_path / "results.txt"
    target.write_text("keep me\n")
    before = _stamp(target)
    text = _cli_error(capsys, experiments.main, ["run", "smoke", "--out", str(target)])
    assert "expected a folder, but it is an existing file" in text
    assert _stamp(target) == before


def test_experiments_never_replace_a_file_that_is_not_a_record(tmp_path, capsys, monkeypatch):
    monkeypatch.setattr(experiments, "train", lambda *a, **k: pytest.fail("a run started"))
    (tmp_path / "smoke__smoke-rotrnn.json").write_text('{"my": "analysis"}')
    before = _stamp(tmp_path / "smoke__smoke-rotrnn.json")
    text = _cli_error(capsys, experiments.main, ["run", "smoke", "--out", str(tmp_path)])
    assert "smoke__smoke-rotrnn.json" in text and "not written by lrnn experiments" in text
    assert _stamp(tmp_path / "smoke__smoke-rotrnn.json") == before
    with pytest.raises(ValueError, match="no folder"):
        experiments.run("smoke", str(tmp_path / "a" / "b"), progress=False)


def test_stored_results_that_fail_to_load_name_the_file(tmp_path):
    (tmp_path / "a.json").write_text("{truncated")
    with pytest.raises(ValueError, match="stored result '.*a.json': cannot be read as JSON"):
        experiments.load_results(str(tmp_path))
    (tmp_path / "a.json").write_text('{"suite": "s"}')
    with pytest.raises(ValueError, match="a.json.*not a run record.*'name'"):
        experiments.load_results(str(tmp_path))
    (tmp_path / "a.json").write_text("[]")
    with pytest.raises(ValueError, match="a.json.*not a run record"):
        experiments.load_results(str(tmp_path))


def test_old_records_load_in_todays_names():
    records = experiments.load_results(str(ROOT / "book" / "data" / "results"))
    assert records and all("layer" in r["config"] for r in records)
    assert experiments.summarize(records)


# ------------------------------------------------------------------ lrnn doctor

def test_doctor_out_dir_checked_before_any_step(tmp_path, capsys, monkeypatch):
    monkeypatch.setattr(doctor.checkup, "environment_results",
                        lambda *a, **k: pytest.fail("the doctor started its checks"))
    target = tmp_path / "report.txt"
    target.write_text("keep")
    before = _stamp(target)
    text = _cli_error(capsys, doctor.main, ["--quick", "--out-dir", str(target)])
    assert "--out-dir" in text and "existing file" in text and _stamp(target) == before
    text = _cli_error(capsys, doctor.main, ["--out-dir", str(tmp_path / "no" / "such")])
    assert "parent exists" in text
    with pytest.raises(ValueError, match="--out-dir"):
        doctor.run_doctor(quick=True, out_dir=target)


def test_doctor_never_replaces_a_file_that_is_not_its_report(tmp_path, monkeypatch):
    import jax
    monkeypatch.setattr(doctor.checkup, "environment_results",
                        lambda *a, **k: pytest.fail("the doctor started its checks"))
    d = jax.devices()[0]
    slug = doctor.device_slug({"platform": d.platform, "device_kind": d.device_kind})
    other = tmp_path / f"doctor-quick_{slug}.md"
    other.write_text("# my notes\n")
    before = _stamp(other)
    with pytest.raises(ValueError, match="not written by lrnn doctor"):
        doctor.run_doctor(quick=True, out_dir=tmp_path)
    assert _stamp(other) == before


@pytest.mark.parametrize("argv, expected", [
    (["--cell-timeout", "-1"], "--cell-timeout"), (["--cell-timeout", "0"], "--cell-timeout"),
    (["--cell-timeout", "inf"], "--cell-timeout"), (["--cell-timeout", "nan"], "--cell-timeout"),
    (["--repo", "/nonexistent"], "--repo: got '/nonexistent'"),
    (["slowest", "--top", "-3"], "--top"), (["slowest", "--top", "0"], "--top"),
    (["execute", "x.ipynb", "--cell-timeout", "-5"], "--cell-timeout"),
])
def test_doctor_arguments(capsys, monkeypatch, argv, expected):
    monkeypatch.setattr(doctor.cli, "run_doctor", lambda **k: pytest.fail("the doctor ran"))
    assert expected in _cli_error(capsys, doctor.main, argv)


# ------------------------------------------------------------------ lrnn exercises build

@pytest.fixture
def course(tmp_path):
    sol, exe = tmp_path / "solutions", tmp_path / "exercises"
    shutil.copytree(ROOT / "solutions", sol, ignore=shutil.ignore_patterns(".ipynb_checkpoints"))
    assert ex.build(sol, exe, out=io.StringIO()) == 0
    return sol, exe


def _all_stamps(folder):
    return {p.name: _stamp(p) for p in sorted(Path(folder).iterdir())}


def test_build_refuses_to_overwrite_a_students_answer(course):
    sol, exe = course
    nb = sorted(exe.glob(ex.NOTEBOOK_GLOB))[0]
    data = json.loads(nb.read_text())
    data["cells"].append({"cell_type": "code", "id": "student-cell", "metadata": {},
                          "source": "answer = 42", "outputs": [], "execution_count": None})
    nb.write_text(json.dumps(data, indent=1))
    # the solution changes, so the build has something to write
    s = sorted(sol.glob(ex.NOTEBOOK_GLOB))[0]
    s.write_text(s.read_text().replace("Chapter", "Chapter ", 1))
    before = _all_stamps(exe)
    out = io.StringIO()
    assert ex.build(sol, exe, out=out) == 2
    assert f"{nb.name}: edited since the build wrote it" in out.getvalue()
    assert _all_stamps(exe) == before
    out = io.StringIO()
    assert ex.build(sol, exe, check=True, out=out) == 1 and "differs" in out.getvalue()
    assert ex.build(sol, exe, force=True, out=io.StringIO()) == 0
    (backup,) = exe.glob(nb.name + ".backup-*")
    assert "answer = 42" in backup.read_text() and "answer = 42" not in nb.read_text()


def test_build_into_a_folder_of_chapters_writes_nothing(tmp_path, capsys):
    book = tmp_path / "book"
    shutil.copytree(ROOT / "book", book, ignore=shutil.ignore_patterns("data", "_build", "*.png"))
    clashes = [p.name for p in (ROOT / "solutions").glob(ex.NOTEBOOK_GLOB) if (book / p.name).exists()]
    assert clashes                                      # the chapters share the exercises' names
    before = _all_stamps(book)
    assert ex.main(["build", "--solutions", str(ROOT / "solutions"), "--exercises", str(book)]) == 2
    out = capsys.readouterr().out
    assert "nothing was written" in out and all(n in out for n in clashes)
    assert _all_stamps(book) == before


def test_build_command_line_arguments(tmp_path, capsys):
    (tmp_path / "file").write_text("x")
    for folder, expected in ((tmp_path / "file", "expected a folder, but it is an existing file"),
                             (tmp_path / "no" / "such", "parent exists")):
        with pytest.raises(SystemExit) as err:       # refused as the command line is parsed
            ex.main(["build", "--solutions", str(ROOT / "solutions"), "--exercises", str(folder)])
        assert err.value.code == 2
        text = capsys.readouterr().err
        assert f"--exercises: got '{folder}'" in text and expected in text
    assert (tmp_path / "file").read_text() == "x" and not (tmp_path / "no").exists()
    with pytest.raises(SystemExit):
        ex.main(["build", "--check", "--force"])
    assert ex.build(ROOT / "solutions", tmp_path / "e", force="yes", out=io.StringIO()) == 2


# ------------------------------------------------------------------ lrnn train: arguments

@pytest.mark.parametrize("argv, expected", [
    (["--steps", "10000000000000000000"], "--steps: got 10000000000000000000.*at most 1e\\+09"),
    (["--steps", "1e3"], "--steps: expected an integer, got '1e3'"),
    (["--seed", "-1"], "--seed: got -1"), (["--seed", str(2**40)], f"--seed: got {2**40}"),
    (["--batch-size", str(2**40)], f"--batch-size: got {2**40}"),
    (["--pool", "nonesuch"], "--pool: got 'nonesuch'.*'auto'.*'none'"),
    (["--pool", "None"], "--pool: got 'None'"),
    (["--layer", "ornn", "--r-min", "0.5"], "--r-min does not apply to --layer ornn"),
    (["--layer", "ornn", "--scan-method", "chunked"], "--scan-method does not apply"),
    (["--layer", "lstm", "--bidirectional"], "--bidirectional: got True"),
    (["--layer", "lru", "--n-reflections", "3"], "--n-reflections does not apply"),
    (["--layer", "lru", "--activation", "oplu"], "--activation does not apply"),
    (["--layer", "lru", "--forget-bias", "5"], "--forget-bias does not apply to --layer lru"),
    (["--layer", "lstm", "--forget-bias", "nan"], "--forget-bias: got nan"),
    (["--scan-method", "nosuch"], "--scan-method: got 'nosuch'"),
    (["--r-min", "2"], "--r-min: got 2.0"),
    (["--dropout", "1.5"], "--dropout: got 1.5"), (["--dropout", "nan"], "--dropout: got nan"),
    (["--layer", "lru", "--bidirectional", "--pool", "none"], "--pool: got 'none'"),
    (["--checkpoint-every", "-1"], "--checkpoint-every: got -1"),
])
def test_train_arguments_are_refused_before_any_work(capsys, no_training, argv, expected):
    import re
    text = _cli_error(capsys, train.main, ["--no-progress", "--steps", "2"] + argv
                      if "--steps" not in argv else ["--no-progress"] + argv)
    assert re.search(expected, text), text
    assert not no_training


def test_pool_none_is_a_real_choice_and_auto_the_tasks_default():
    task = train.load_task(_tiny_cfg(n_test=4))
    assert train.model_config(_tiny_cfg(pool="none"), task).pool == "none"
    assert train.model_config(_tiny_cfg(), task).pool == "mean"
    assert train.model_config(_tiny_cfg(pool=None), task).pool == "mean"    # older configs


def test_model_is_a_deprecated_alias_of_layer(capsys, no_training):
    args = train.build_parser().parse_args(["--model", "gru"])
    assert "--model is deprecated, use --layer" in capsys.readouterr().err
    assert train.config_from_args(args).layer == "gru"


# ------------------------------------------------------------------ Ctrl-C

def test_ctrl_c_in_grade_says_what_the_gradebook_kept_and_exits_130(tmp_path, monkeypatch,
                                                                    capsys):
    from lrnn.course.grading import cli as grade_cli
    from lrnn.course.grading.gradebook import write_gradebook
    out = tmp_path / "gradebook.csv"

    def interrupted(paths, out_, **kwargs):
        write_gradebook(out_, [{"submission": "alice.ipynb"}, {"submission": "bob.ipynb"}])
        raise KeyboardInterrupt
    monkeypatch.setattr(grade_cli, "grade", interrupted)
    assert grade_cli.main([str(tmp_path), "--out", str(out)]) == 130
    captured = capsys.readouterr()
    lines = [t for t in (captured.out + captured.err).splitlines() if t.strip()]
    assert lines == [f"lrnn grade: interrupted; 2 graded submission(s) kept in {out}; the same "
                     "command grades the rest"], lines
    assert "Traceback" not in captured.err

    def at_once(paths, out_, **kwargs):
        raise KeyboardInterrupt
    monkeypatch.setattr(grade_cli, "grade", at_once)
    assert grade_cli.main([str(tmp_path), "--out", str(tmp_path / "new.csv")]) == 130
    assert "no submission was graded yet, nothing was written" in capsys.readouterr().err
    assert not (tmp_path / "new.csv").exists()
