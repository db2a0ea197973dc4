"""``lrnn bench gpu`` (and its wrapper ``scripts/gpu_run.sh``): one command, one budget.

The dry run, in a clean environment (no inherited variables, no network), runs every part on
this CPU at tiny sizes and leaves for each a JSON and a Markdown result naming the device, the
JAX version and the commit; the real plan's own estimate fits the budget; parts that do not
fit are skipped and said; the results folder and the archive are checked before any work."""
import dataclasses
import json
import subprocess
import sys
import tarfile
from pathlib import Path

import pytest

from lrnn.benchmarks import scan as bench, gpu as bench_gpu

ROOT = Path(__file__).resolve().parents[1]
SCRIPT = ROOT / "scripts" / "gpu_run.sh"


def _run(tmp_path, *args, timeout=400):
    env = {"PATH": f"{Path(sys.executable).parent}:/usr/bin:/bin", "HOME": str(tmp_path),
           "PYTHON": sys.executable, "LRNN_COMMIT": "0123abc"}
    return subprocess.run(["bash", str(SCRIPT), *args], env=env, capture_output=True, text=True,
                          timeout=timeout)


def _check_result(folder, name, status=None):
    result = json.loads((folder / f"{name}.json").read_text())
    md = (folder / f"{name}.md").read_text()
    assert result["commit"] == "0123abc" and "`0123abc`" in md, name
    assert result["jax"] and f"JAX {result['jax']}" in md, name
    assert result["device"]["device_kind"] in md and result["kernel"]["fingerprint"] in md, name
    if status:
        assert result["status"] == status, (name, result.get("reason"), md)
    return result


@pytest.mark.slow
def test_the_dry_run_writes_every_part_with_device_jax_and_commit(tmp_path):
    out, pack = tmp_path / "results", tmp_path / "results.tgz"
    done = _run(tmp_path, "--dry-run", "--budget-s", "900", "--out", str(out), "--pack", str(pack))
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    for part in bench_gpu.PART_NAMES:
        result = _check_result(out, part, "ok")
        assert result["device"]["platform"] == "cpu" and result["dry_run"] is True
    summary = _check_result(out, "bench_gpu")
    assert [p["name"] for p in summary["parts"]] == list(bench_gpu.PART_NAMES)
    assert set(summary["results"]) == set(bench_gpu.PART_NAMES)
    check = json.loads((out / "kernel-check.json").read_text())["data"]["rows"]
    assert check and all(r["passed"] for r in check)
    scan = json.loads((out / "scan.json").read_text())["data"]
    labels = {r["label"] for r in scan["results"] if "fwd_s" in r}
    assert labels == {bench_gpu.HEADLINE, "associative"}    # one design, no sweep
    assert {r["label"] for r in scan["tv_results"] if "fwd_s" in r} == {"associative", "pallas"}
    assert all("compile_fwd_s" in r for r in scan["results"])
    assert "| shape (B, L, N) | kind | predicted fraction of copy" in \
        (out / "bench_gpu.md").read_text()
    with tarfile.open(pack) as tar:
        names = {Path(n).name for n in tar.getnames()}
    assert {bench_gpu.MARKER, "bench_gpu.json", "scan.md", "grading.json",
            "bench_scan.json"} <= names
    record = json.loads((out / "bench_scan.json").read_text())
    assert record["benchmark"] == "scan" and record["results"] == scan["results"]


def test_the_real_plan_fits_its_budget_and_keeps_the_order():
    assert bench_gpu.planned_seconds() <= 420
    assert bench_gpu.PART_NAMES == ("environment", "kernel-check", "scan", "layer", "grading",
                                    "notebooks")
    assert [p.name for p in bench_gpu.PARTS if not p.required] == ["notebooks"]
    assert all(p.estimate_s > 0 and p.dry_estimate_s > 0 for p in bench_gpu.PARTS)


def test_parts_that_do_not_fit_are_skipped_and_said(tmp_path, capsys):
    out = tmp_path / "r"
    status = bench.main(["gpu", "--dry-run", "--budget-s", "1", "--out", str(out)])
    assert status == 0
    for part in bench_gpu.PARTS:
        result = json.loads((out / f"{part.name}.json").read_text())
        assert result["status"] == "skipped" and "estimated" in result["reason"]
        assert "skipped" in (out / f"{part.name}.md").read_text()
    summary = json.loads((out / "bench_gpu.json").read_text())
    assert all(p["status"] == "skipped" for p in summary["parts"])
    # run again into its own folder: allowed; earlier results are replaced, not mixed
    (out / "scan.log").write_text("from an earlier run")
    assert bench.main(["gpu", "--dry-run", "--budget-s", "1", "--out", str(out)]) == 0
    assert not (out / "scan.log").exists()


def test_a_folder_it_did_not_make_is_refused_before_any_work(tmp_path, capsys):
    foreign = tmp_path / "notes"
    foreign.mkdir()
    (foreign / "mine.txt").write_text("keep me")
    with pytest.raises(SystemExit, match="not empty and was not made by `lrnn bench gpu`"):
        bench.main(["gpu", "--dry-run", "--out", str(foreign)])
    assert [p.name for p in foreign.iterdir()] == ["mine.txt"]
    other = tmp_path / "other.tgz"
    other.write_bytes(b"not ours")
    capsys.readouterr()
    with pytest.raises(SystemExit):                      # refused as the line is parsed
        bench.main(["gpu", "--dry-run", "--out", str(tmp_path / "new"), "--pack", str(other)])
    assert "--pack" in capsys.readouterr().err
    assert not (tmp_path / "new").exists() and other.read_bytes() == b"not ours"
    for bad in (["--budget-s", "0"], ["--budget-s", "nan"], ["--parts", "scan,nonsense"]):
        with pytest.raises(SystemExit):
            bench.main(["gpu", "--dry-run", "--out", str(tmp_path / "x"), *bad])
    assert not (tmp_path / "x").exists()


def test_the_measured_column_is_filled_from_the_scan_rows():
    p = bench_gpu.measured_predictions
    ti = [{"shape": [16, 16384, 256], "label": bench_gpu.HEADLINE, "fwd_s": 1e-3,
           "fwd_copy_fraction": 0.5},
          {"shape": [16, 16384, 256], "label": "associative", "fwd_s": 2e-3,
           "fwd_copy_fraction": 0.25}]
    rows = p(ti, [])
    first = next(r for r in rows if r["shape"] == [16, 16384, 256])
    assert first["measured_copy_fraction"] == 0.5 and first["measured_vs_associative"] == 2.0
    assert all(r["measured_copy_fraction"] is None for r in rows if r is not first)
    md = bench_gpu.predictions_markdown(rows)
    assert "| 16×16384×256 | ti-complex | 36% | 1.27× | 50%, 2.00× |" in md


@pytest.mark.slow
def test_the_wrapper_passes_its_arguments_and_refuses_bad_ones(tmp_path):
    got = _run(tmp_path, "--dry-run", "--budget-s", "-3", "--out", str(tmp_path / "r"),
               timeout=120)
    assert got.returncode != 0 and "--budget-s: got -3.0" in got.stderr
    assert not (tmp_path / "r").exists()
    got = _run(tmp_path, "--dry-run", "--fast", timeout=120)
    assert got.returncode == 2 and "unrecognized arguments: --fast" in got.stderr


def test_tuning_md_keeps_the_table_of_record_of_the_predictions():
    """TUNING.md's table and ``pallas_tuning.PREDICTIONS`` say the same, in the format the run
    prints; its measured column is empty until a run of the kernel is stored."""
    from lrnn.scan import pallas_tuning
    text = (ROOT / "src" / "lrnn" / "scan" / "TUNING.md").read_text()
    head = "| shape (B, L, N) | kind | predicted fraction of copy |"
    rows = [line for line in text[text.index(head):].split("\n\n")[0].splitlines()[2:]]
    printed = bench_gpu.predictions_markdown(bench_gpu.measured_predictions([], []))
    assert text.count(head) == 1
    measured = any(g.measurement for g in pallas_tuning.TABLE.values())
    want = [line.rsplit("|", 2)[0] for line in printed.splitlines()[2:]]
    assert [line.rsplit("|", 2)[0] for line in rows] == want
    assert all((line.rsplit("|", 2)[1].strip() != "") == measured for line in rows)


def test_the_predicted_fractions_are_those_of_the_model():
    """``PREDICTIONS``' fractions of copy are the default design's forward rows of
    scripts/kernel_predictions.py (the probe's curve of bytes in flight)."""
    import importlib.util
    from lrnn.scan import pallas_tuning
    path = ROOT / "scripts" / "kernel_predictions.py"
    spec = importlib.util.spec_from_file_location("kernel_predictions", path)
    model = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(model)
    for p in pallas_tuning.PREDICTIONS:
        got = model.predict(p.shape, p.kind, pallas_tuning.DEFAULT_DESIGN)["fraction"]
        assert abs(got - p.copy_fraction) < 0.005, (p, got)


@pytest.mark.slow
def test_a_part_still_running_when_the_budget_ends_is_stopped_and_said(tmp_path, monkeypatch):
    # the layer part's estimate says 1 s; it needs far more: stopped at the budget (+ grace)
    parts = tuple(dataclasses.replace(p, dry_estimate_s=1) if p.name == "layer" else p
                  for p in bench_gpu.PARTS)
    monkeypatch.setattr(bench_gpu, "PARTS", parts)
    monkeypatch.setattr(bench_gpu, "GRACE_S", 1.0)
    out = tmp_path / "r"
    status = bench.main(["gpu", "--dry-run", "--budget-s", "2", "--parts", "layer,grading",
                         "--out", str(out)])
    assert status == 1
    layer = json.loads((out / "layer.json").read_text())
    assert layer["status"] == "stopped" and "budget ran out" in layer["reason"]
    assert "Tail of `layer.log`" in (out / "layer.md").read_text()
    assert json.loads((out / "grading.json").read_text())["status"] == "skipped"
    summary = json.loads((out / "bench_gpu.json").read_text())
    assert [p["status"] for p in summary["parts"]] == ["stopped", "skipped"]


def test_a_doctor_stopped_at_the_budget_keeps_the_notebooks_that_finished(tmp_path, monkeypatch):
    # a stand-in doctor: two notebooks end, the third never does
    fake = tmp_path / "fake-doctor"
    fake.write_text("#!/bin/sh\n"
                    "echo 'lrnn doctor (full): the course on this machine'\n"
                    "echo 'PASS  notebooks     book/00_setup.ipynb: 9.1 s (kernel start included)'\n"
                    "echo 'WARN  notebooks     book/01_linear_recurrence.ipynb: 30.2 s; a warning'\n"
                    "echo 'PASS  library       not a notebook: 1.0'\n"
                    "exec sleep 60\n")
    fake.chmod(0o755)
    monkeypatch.setattr(sys, "executable", str(fake))
    (tmp_path / "out").mkdir()
    ctx = {"out": tmp_path / "out", "dry_run": True, "deadline": __import__("time").time() + 3}
    status, data, body = bench_gpu.part_notebooks(ctx)
    assert status == "stopped"
    assert [line.split()[2] for line in data["finished"]] == \
        ["book/00_setup.ipynb:", "book/01_linear_recurrence.ipynb:"]
    assert "2 finished before the stop" in body and "30.2 s" in body
    assert (tmp_path / "out" / "notebooks" / "doctor.log").exists()


def test_the_doctors_result_lines_are_read_by_section():
    text = ("PASS  grading       solutions/01.ipynb: 15 / 15\n"
            "FAIL  notebooks     book/02_lru.ipynb: error: boom\n"
            "PASSING notebooks   not a result line\n")
    assert bench_gpu.finished_lines(text, "notebooks") == \
        ["FAIL  notebooks     book/02_lru.ipynb: error: boom"]
    assert len(bench_gpu.finished_lines(text, "grading")) == 1
