"""The GPU command's dry run: on this CPU, in a clean environment (no inherited variables, no
network needed), every benchmark step starts, writes its results and its record where it
should, packs them for $OUT, and a second run skips what is done. (The doctor and training steps
take minutes even at their smallest; GPU.md says how to dry-run them by hand.)"""
import json
import os
import subprocess
import sys
import tarfile
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
SCRIPT = ROOT / "scripts" / "gpu_run.sh"


def _run(tmp_path, *args):
    env = {"PATH": f"{Path(sys.executable).parent}:/usr/bin:/bin", "HOME": str(tmp_path),
           "PYTHON": sys.executable, "LRNN_COMMIT": "0123abc", "OUT": str(tmp_path / "out")}
    (tmp_path / "out").mkdir(exist_ok=True)
    return subprocess.run(["bash", str(SCRIPT), *args], env=env, capture_output=True, text=True,
                          timeout=300)


@pytest.mark.slow
def test_dry_run_writes_every_step_with_its_record_and_resumes(tmp_path):
    results = tmp_path / "r"
    steps = ["env", "scan", "plans", "plans-tv", "layer", "targets"]
    done = _run(tmp_path, "--dry-run", "--results", str(results), *steps)
    assert done.returncode == 0, done.stdout + done.stderr
    for name in ["bench_scan_cpu.json", "scan_targets_cpu.md", "bench_layer_cpu.json",
                 "targets_cpu.md", "plans_ti_cpu.jsonl", "plans_tv_cpu.jsonl"]:
        assert (results / name).stat().st_size > 0, name
    scan = json.loads((results / "bench_scan_cpu.json").read_text())
    # the kernel's rows, the time-parallel design's among them, ran (in interpret mode)
    labels = {r["label"] for r in scan["results"] if "fwd_s" in r}
    assert {"pallas kernel (re/im planes)", "pallas kernel, time-parallel (planes)"} <= labels
    for kind in ("ti", "tv"):
        rows = [json.loads(line) for line in (results / f"plans_{kind}_cpu.jsonl").open()]
        assert any("synced_s" in r for r in rows[1:]), kind
    for step in steps:
        meta = json.loads((results / f"{step}.meta.json").read_text())
        assert meta["rc"] == 0 and meta["commit"] == "0123abc" and meta["device"] == ["cpu"]
        assert meta["jax"] and "lrnn" in meta["command"] or step == "env"
        assert (results / f"{step}.done").exists() and (results / f"{step}.log").exists()
    with tarfile.open(tmp_path / "out" / "gpu-results.tgz") as tar:
        assert "./targets_cpu.md" in tar.getnames()
    again = _run(tmp_path, "--dry-run", "--results", str(results), *steps)
    assert again.returncode == 0 and again.stdout.count("done before, skipped") == len(steps)


@pytest.mark.parametrize("args,message", [(["nonsense"], "unknown step 'nonsense'"),
                                          (["--fast"], "unknown option --fast"),
                                          (["--results"], "--results needs a folder")])
def test_bad_arguments_are_refused_before_any_work(tmp_path, args, message):
    got = _run(tmp_path, "--dry-run", *args)
    assert got.returncode == 2 and message in got.stderr
    assert not (tmp_path / "out" / "gpu-results.tgz").exists()


def test_a_failing_step_is_recorded_and_not_marked_done(tmp_path):
    results = tmp_path / "r"
    results.mkdir()
    (results / "layer.done").touch()            # pretend: targets reads a missing layer file
    got = _run(tmp_path, "--dry-run", "--results", str(results), "targets")
    assert got.returncode == 1 and "targets failed" in got.stdout
    assert json.loads((results / "targets.meta.json").read_text())["rc"] != 0
    assert not (results / "targets.done").exists()
