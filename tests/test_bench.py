"""Smoke tests of ``python -m lrnn.bench``: tiny configurations, checking the JSON it writes.
(Speed and memory goals are judged on the stored benchmark results, not here.)"""
import json

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from lrnn import bench, scan

ROW_KEYS = {"shape", "dtype", "label", "method", "compile_fwd_s", "fwd_s", "fwd_median_s",
            "elements_per_s", "fwd_GBps", "fwd_copy_fraction", "memory_fwd", "compile_fwdbwd_s",
            "fwdbwd_s", "fwdbwd_median_s", "memory_fwdbwd", "max_abs_err_vs_first_row"}
MEMORY_KEYS = {"argument_bytes", "output_bytes", "temp_bytes", "alias_bytes", "peak_bytes",
               "xla_peak_memory_bytes"}


def test_scan_benchmark_writes_its_json(tmp_path):
    out = tmp_path / "scan.json"
    bench.main(["scan", "--device", "cpu", "--shapes", "2x17x4", "--repeats", "1",
                "--copy-bytes", "4096", "--out", str(out)])
    data = json.loads(out.read_text())
    assert data["benchmark"] == "scan" and data["command"].startswith("python -m lrnn.bench scan")
    assert data["device"]["platform"] == "cpu" and data["date_utc"]
    assert data["copy_bandwidth_GBps"] > 0
    labels = [r["label"] for r in data["results"] if r["shape"] == [2, 17, 4]]
    assert labels == ["sequential", "associative", "chunked", "auto",
                      "paper: associative_scan", "paper: lax.scan"]      # no pallas on a CPU
    for row in data["results"]:
        assert ROW_KEYS <= set(row)
        assert MEMORY_KEYS <= set(row["memory_fwd"]) and MEMORY_KEYS <= set(row["memory_fwdbwd"])
        m = row["memory_fwdbwd"]
        assert m["peak_bytes"] == (m["argument_bytes"] + m["output_bytes"] + m["temp_bytes"]
                                   - m["alias_bytes"])
        assert row["fwd_s"] > 0 and row["fwdbwd_s"] > 0
        assert row["max_abs_err_vs_first_row"] < 1e-5               # every row computes the same x
        # b (B·L·N complex64) is an argument of every compiled forward
        assert row["memory_fwd"]["argument_bytes"] >= 8 * np.prod(row["shape"])
    auto = next(r for r in data["results"] if r["label"] == "auto")
    assert auto["auto_picks"] == scan.choose_method((2, 17, 4), backend="cpu")
    assert [c["shape"] for c in data["checks"]] == [[2, 17, 4]]
    for c in data["checks"]:
        assert {"fwd_s_auto_within_10pct", "fwdbwd_s_auto_within_10pct",
                "fwdbwd_memory_below_paper_associative"} <= set(c)


def test_papers_scan_context_is_the_papers_code_and_is_undone():
    lam = jnp.asarray([0.9 + 0.1j, -0.5j], jnp.complex64)
    b = jnp.asarray(np.random.default_rng(0).standard_normal((3, 7, 2)), jnp.complex64)
    before = scan._api._scan
    with bench.papers_scan():
        assert scan._api._scan is not before
        papers = str(jax.make_jaxpr(lambda b: scan.linear_scan(lam, b))(b))
        x = scan.linear_scan(lam, b)
    assert scan._api._scan is before
    ours = str(jax.make_jaxpr(lambda b: scan.linear_scan(lam, b))(b))
    assert "custom_vjp_call" in ours
    assert "custom_vjp_call" not in papers                # plain autodiff, as in the papers
    np.testing.assert_allclose(x, scan.linear_scan(lam, b, method="sequential"), atol=1e-6)


def test_layer_benchmark_smoke(tmp_path):
    out = tmp_path / "layer.json"
    bench.main(["layer", "--device", "cpu", "--d-model", "4", "--d-state", "4", "--batch", "2",
                "--length", "8", "--heads", "2", "--repeats", "1", "--out", str(out)])
    data = json.loads(out.read_text())
    assert {(r["layer"], r["scan"]) for r in data["results"]} == {
        ("lru", "auto"), ("lru", "paper: associative_scan"),
        ("rotrnn", "auto"), ("rotrnn", "paper: associative_scan")}
    assert set(data["speedup_auto_over_paper"]) == {"lru", "rotrnn"}
    for row in data["results"]:
        assert row["step_s"] > 0 and row["memory_fwdbwd"]["peak_bytes"] > 0
    # the papers' variant is really traced and compiled anew (not a cached "auto" trace)
    for layer in ("lru", "rotrnn"):
        auto, paper = (next(r for r in data["results"] if r["layer"] == layer and r["scan"] == s)
                       for s in ("auto", "paper: associative_scan"))
        assert paper["memory_fwdbwd"] != auto["memory_fwdbwd"]


def _row(shape, label, method, fwd, fwdbwd, *, copy=0.5, compile_s=1.0, err=0.0):
    return {"shape": list(shape), "label": label, "method": method, "fwd_s": fwd,
            "fwdbwd_s": fwdbwd, "fwd_copy_fraction": copy, "compile_fwd_s": compile_s,
            "compile_fwdbwd_s": compile_s, "max_abs_err_vs_first_row": err}


def _gpu_scan(**pallas_big):
    big, long = (16, 16384, 256), (1, 65536, 64)
    rows = []
    for shape, paper_fwd in ((big, 10.0), (long, 6.0)):
        rows += [_row(shape, "sequential", "sequential", 50.0, 90.0),
                 _row(shape, "pallas", "pallas", 1.0, 2.0,
                      **(pallas_big if shape == big else dict(err=1e-5))),
                 _row(shape, "paper: associative_scan", None, paper_fwd, 9.0)]
    return {"device": {"platform": "gpu", "device_kind": "H100"}, "results": rows}


def _by_name(targets):
    return {t["target"]: t for t in targets}


def test_gpu_targets_are_computed_from_the_rows():
    layer = {"device": {"platform": "gpu"}, "speedup_auto_over_paper": {"lru": 2.5, "rotrnn": 1.5},
             "results": [dict(d_model=256, d_state=256, batch=32, length=4096)]}
    t = _by_name(bench.gpu_targets(_gpu_scan(copy=0.7), layer))
    assert t["forward at ≥ 60% of copy bandwidth"]["measured"] == 0.7
    assert t["forward ≥ 5× paper associative_scan"]["measured"] == 10.0
    assert t["forward+backward ≥ 4× paper associative_scan"]["measured"] == 4.5
    assert t["forward ≥ 3× paper associative_scan"]["measured"] == 6.0
    assert t["matches sequential at L = 65 536 (relative error)"]["measured"] == 1e-5
    assert t["lru layer step ≥ 2× paper associative_scan"]["passed"] is True
    assert t["rotrnn layer step ≥ 2× paper associative_scan"]["passed"] is False
    assert all(v["passed"] for k, v in t.items() if "rotrnn" not in k)
    failing = _by_name(bench.gpu_targets(_gpu_scan(copy=0.59, compile_s=5.5)))
    assert failing["forward at ≥ 60% of copy bandwidth"]["passed"] is False
    assert failing["every pallas compile < 5 s"] == dict(
        target="every pallas compile < 5 s", shape=None, measured=5.5, threshold=5.0, passed=False)
    assert failing["lru layer step ≥ 2× paper associative_scan"]["measured"] is None
    md = bench.targets_markdown(list(failing.values()), "H100")
    assert "| 59.0% | **no** |" in md and "not measured" in md and "H100" in md


def test_gpu_targets_are_not_measured_by_cpu_results_or_other_sizes():
    cpu = _gpu_scan()
    cpu["device"]["platform"] = "cpu"
    assert all(t["measured"] is None for t in bench.gpu_targets(cpu))
    small_layer = {"device": {"platform": "gpu"}, "speedup_auto_over_paper": {"lru": 9.0},
                   "results": [dict(d_model=64, d_state=64, batch=4, length=1024)]}
    assert all(t["measured"] is None for t in bench.gpu_targets(layer=small_layer))


def test_targets_cli_reads_stored_json(tmp_path, capsys):
    path = tmp_path / "scan.json"
    path.write_text(json.dumps(_gpu_scan()))
    targets = bench.main(["targets", "--scan", str(path)])
    out = capsys.readouterr().out
    assert len(targets) == 8 and "| 10.00× | yes |" in out and "Results read from: H100." in out


def test_plan_sweep_times_every_plan_and_marks_the_default(tmp_path):
    out = bench.main(["plans", "--interpret", "--shapes", "2x64x8", "--chunks", "16,32",
                      "--block-n", "8", "--repeats", "1", "--out", str(tmp_path / "p.json")])
    plans = {(r["block_n"], r["chunk"], r["n_chunks"]) for r in out["results"]}
    assert plans == {(8, 64, 1), (8, 32, 2), (8, 16, 4)}
    assert [r["default"] for r in out["results"]].count(True) == 1
    assert all(r["rel_err_vs_sequential"] < 1e-5 and r["fwd_s"] > 0 for r in out["results"])
    assert json.loads((tmp_path / "p.json").read_text())["best"]["2x64x8"]["default_over_fastest"] >= 1


@pytest.mark.skipif(jax.default_backend() == "gpu", reason="on a GPU the sweep times the kernel")
def test_plan_sweep_refuses_to_time_the_interpreter_silently():
    with pytest.raises(SystemExit, match="--interpret"):
        bench.main(["plans", "--shapes", "2x64x8"])
