"""Smoke tests of ``python -m lrnn.bench``: tiny configurations, checking the JSON it writes.
(Speed and memory goals are judged on the stored benchmark results, not here.)"""
import json

import jax
import jax.numpy as jnp
import numpy as np

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
    before = scan._scan
    with bench.papers_scan():
        assert scan._scan is not before
        papers = str(jax.make_jaxpr(lambda b: scan.linear_scan(lam, b))(b))
        x = scan.linear_scan(lam, b)
    assert scan._scan is before
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
