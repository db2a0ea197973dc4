"""Smoke tests of ``python -m lrnn bench``: tiny configurations, checking the JSON it writes.
(Speed and memory goals are judged on the stored benchmark results, not here.)"""
import json

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from lrnn.benchmarks import scan as bench, layer as bench_layer
from lrnn import scan

ROW_KEYS = {"shape", "dtype", "label", "method", "compile_fwd_s", "fwd_s", "fwd_median_s",
            "elements_per_s", "fwd_GBps", "fwd_copy_fraction", "memory_fwd", "compile_fwdbwd_s",
            "fwdbwd_s", "fwdbwd_median_s", "memory_fwdbwd", "err_vs_sequential"}
MEMORY_KEYS = {"argument_bytes", "output_bytes", "temp_bytes", "alias_bytes", "peak_bytes",
               "xla_peak_memory_bytes"}


@pytest.mark.slow
def test_scan_benchmark_writes_its_json(tmp_path):
    out = tmp_path / "scan.json"
    md = tmp_path / "targets.md"
    bench.main(["scan", "--device", "cpu", "--shapes", "2x17x4", "--tv-shapes", "2x9x3",
                "--repeats", "1", "--copy-bytes", "65536", "--out", str(out),
                "--targets-md", str(md)])
    data = json.loads(out.read_text())
    assert data["benchmark"] == "scan" and data["command"].startswith("python -m lrnn bench scan")
    assert data["device"]["platform"] == "cpu" and data["date_utc"] and data["device"]["jax"]
    assert "commit" in data
    assert data["copy_bandwidth_GBps"] == data["copy"]["GBps"] > 0
    assert data["copy"]["repeats"] >= 20 and data["copy"]["statistic"] == "median"
    # float32 time-varying rows (the peers need PyTorch and a GPU: absent here)
    tv = data["tv_results"]
    assert [r["label"] for r in tv] == ["sequential", "associative", "auto"]
    assert all(r["err_vs_first_row"] < 1e-5 and r["fwd_s"] > 0 for r in tv)
    assert "not measured" in md.read_text()              # CPU results measure no GPU target
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
        assert row["err_vs_sequential"] < 1e-5               # every row computes the same x
        # b (B·L·N complex64) is an argument of every compiled forward
        assert row["memory_fwd"]["argument_bytes"] >= 8 * np.prod(row["shape"])
    auto = next(r for r in data["results"] if r["label"] == "auto")
    assert auto["auto_picks"] == scan.choose_method((2, 17, 4), backend="cpu")
    assert [c["shape"] for c in data["checks"]] == [[2, 17, 4], [2, 9, 3]]
    assert {"fwd_s_auto_within_10pct", "fwdbwd_s_auto_within_10pct",
            "fwdbwd_memory_below_paper_associative"} <= set(data["checks"][0])


def test_papers_scan_context_is_the_papers_code_and_is_undone():
    lam = jnp.asarray([0.9 + 0.1j, -0.5j], jnp.complex64)
    b = jnp.asarray(np.random.default_rng(0).standard_normal((3, 7, 2)), jnp.complex64)
    with bench.papers_scan():
        papers = str(jax.make_jaxpr(lambda b: scan.linear_scan(lam, b))(b))
        x = scan.linear_scan(lam, b)
    ours = str(jax.make_jaxpr(lambda b: scan.linear_scan(lam, b))(b))
    assert "custom_vjp_call" in ours
    assert "custom_vjp_call" not in papers                # plain autodiff, as in the papers
    np.testing.assert_allclose(x, scan.linear_scan(lam, b, method="sequential"), atol=1e-6)


def test_scan_override_is_public_validated_and_undone():
    b = jnp.ones((1, 3, 2))
    seen = []

    def fn(a, b, reverse):
        seen.append((a.shape, b.shape, reverse))
        return jnp.zeros_like(b)

    with scan.override(fn):
        assert float(jnp.abs(scan.linear_scan(jnp.asarray([0.5, 0.5]), b, reverse=True)).sum()) == 0
        assert float(jnp.abs(scan.linear_scan(jnp.full((3, 1), 0.5), b)).sum()) == 0
        with pytest.raises(ValueError, match="`b`"):          # inputs still checked first
            scan.linear_scan(jnp.asarray([0.5]), jnp.ones(3))
    assert seen == [((2,), (1, 3, 2), True), ((1, 3, 2), (1, 3, 2), False)]
    assert float(scan.linear_scan(jnp.asarray([0.5, 0.5]), b)[0, -1, 0]) == 1.75
    with pytest.raises(ValueError, match="`fn`: got 'sequential'"):
        with scan.override("sequential"):
            pass


@pytest.mark.slow
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
            "compile_fwdbwd_s": compile_s, "err_vs_sequential": err}


def _gpu_scan(planes_copy=0.85, array_copy=0.4, fwdbwd=2.0, compile_s=1.0, peer=0.9):
    rows, tv = [], []
    for shape in bench.BANDWIDTH_SHAPES + [(1, 65536, 64)]:
        rows += [_row(shape, "associative", "associative", 3.0, 6.0),
                 _row(shape, "pallas", "pallas", 1.0, fwdbwd, copy=array_copy,
                      compile_s=compile_s, err=1e-5),
                 _row(shape, "pallas kernel (re/im planes)", "pallas", 0.5, 1.1,
                      copy=planes_copy),
                 dict(_row(shape, "auto", "auto", 1.0, 2.0), auto_picks="associative"),
                 _row(shape, "paper: associative_scan", None, 5.0, 9.0)]
    for shape in bench.TV_SHAPES:
        tv += [_row(shape, "pallas", "pallas", 1.0, 2.0),
               _row(shape, bench.PEER_TRITON, None, peer, 2.0)]
    scan = {"device": {"platform": "gpu", "device_kind": "H100", "jax": "0.11.2"},
            "commit": "abc1234", "results": rows, "tv_results": tv}
    scan["checks"] = bench.scan_checks(rows)
    return scan


def _by_name(targets):
    out = {}
    for t in targets:
        out.setdefault(t["target"], []).append(t)
    return out


def test_gpu_targets_are_computed_from_the_rows():
    layer = {"device": {"platform": "gpu"}, "speedup_auto_over_paper": {"lru": 2.5, "rotrnn": 1.4},
             "results": [dict(d_model=256, d_state=256, batch=32, length=4096)]}
    t = _by_name(bench.gpu_targets(_gpu_scan(), layer))
    planes = t["forward ≥ 80% of copy, kernel on re/im planes"]
    assert [x["measured"] for x in planes] == [0.85] * 3 and all(x["passed"] for x in planes)
    arrays = t["forward ≥ 80% of copy, linear_scan on complex64 arrays"]
    assert [x["passed"] for x in arrays] == [False] * 3
    peers = t["forward ≥ 1.0× accelerated-scan (Triton), float32 time-varying"]
    assert [x["measured"] for x in peers] == [0.9] * 3 and not any(x["passed"] for x in peers)
    assert t["forward ≥ 4× lax.associative_scan"][0]["measured"] == 5.0
    assert t["forward+backward ≤ 2.5× forward (pallas rows, worst shape)"][0]["measured"] == 2.2
    assert t["every pallas compile < 5 s"][0]["passed"] is True
    assert t["matches sequential at L = 65 536 (relative error)"][0]["measured"] == 1e-5
    # auto picked "associative", 3× slower than the fastest method ("pallas") at every shape
    assert t["auto picks a method within 10% of the fastest (forward), every shape"][0][
        "passed"] is False
    assert t["lru layer fwd+bwd ≥ 1.5× paper associative_scan"][0]["passed"] is True
    assert t["rotrnn layer fwd+bwd ≥ 1.5× paper associative_scan"][0]["passed"] is False
    failing = _by_name(bench.gpu_targets(_gpu_scan(fwdbwd=3.0, compile_s=5.5)))
    assert failing["forward+backward ≤ 2.5× forward (pallas rows, worst shape)"][0]["passed"] \
        is False
    assert failing["every pallas compile < 5 s"][0]["measured"] == 5.5
    assert failing["lru layer fwd+bwd ≥ 1.5× paper associative_scan"][0]["measured"] is None
    md = bench.targets_markdown(sum(failing.values(), []), "H100")
    assert "| 85.0% of copy | met |" in md and "**not met**" in md and "not measured" in md
    assert md.endswith("Results read from: H100.")


def test_gpu_targets_are_not_measured_by_cpu_results_or_other_sizes():
    cpu = _gpu_scan()
    cpu["device"]["platform"] = "cpu"
    assert all(t["measured"] is None for t in bench.gpu_targets(cpu))
    small_layer = {"device": {"platform": "gpu"}, "speedup_auto_over_paper": {"lru": 9.0},
                   "results": [dict(d_model=64, d_state=64, batch=4, length=1024)]}
    assert all(t["measured"] is None for t in bench.gpu_targets(layer=small_layer))
    assert all(t["measured"] is None for t in bench.gpu_targets())


def test_targets_cli_reads_stored_json_and_names_the_source(tmp_path, capsys):
    path = tmp_path / "scan.json"
    path.write_text(json.dumps(dict(_gpu_scan(), benchmark="scan",
                                    command="python -m lrnn bench scan",
                                    date_utc="2026-11-23T00:00:00")))
    out = tmp_path / "t.md"
    targets = bench.main(["targets", "--scan", str(path), "--out", str(out)])
    printed = capsys.readouterr().out
    assert len(targets) == 16 and "| 5.00× | met |" in printed
    assert "H100 (JAX 0.11.2, commit abc1234, 2026-11-23" in printed
    assert out.read_text().strip() == printed.strip().split("\nwrote")[0].strip()


def test_targets_replace_their_own_table_and_nothing_else(tmp_path, capsys):
    path = tmp_path / "scan.json"
    path.write_text(json.dumps(dict(_gpu_scan(), benchmark="scan")))
    out = tmp_path / "t.md"
    bench.main(["targets", "--scan", str(path), "--out", str(out)])
    out.write_text(out.read_text() + "\nold run\n")
    bench.main(["targets", "--scan", str(path), "--out", str(out)])     # its own: replaced
    assert out.read_text().startswith(bench.TARGETS_HEADER) and "old run" not in out.read_text()
    notes = tmp_path / "notes.md"
    notes.write_bytes(b"# My notes\r\n")
    folder = tmp_path / "folder.md"
    folder.mkdir()
    capsys.readouterr()
    for target, expected in ((notes, "not written by lrnn bench"), (folder, "existing folder"),
                             (tmp_path / "no" / "t.md", "no folder")):
        with pytest.raises(SystemExit) as err:
            bench.main(["targets", "--scan", str(path), "--out", str(target)])
        text = capsys.readouterr().err
        assert err.value.code == 2 and f"--out: got '{target}'" in text and expected in text
        assert len([t for t in text.splitlines() if "error" in t]) == 1
    assert notes.read_bytes() == b"# My notes\r\n" and not list(folder.iterdir())
    assert sorted(p.name for p in tmp_path.iterdir()) == ["folder.md", "notes.md", "scan.json",
                                                         "t.md"]


@pytest.mark.slow
def test_plan_sweep_times_tiles_and_chunks_in_interpret_mode(tmp_path):
    out = tmp_path / "plans.jsonl"
    bench.main(["plans", "--interpret", "--shapes", "2x24x8", "--kinds", "tv-real",
                "--max-tiles", "1", "--repeats", "1", "--copy-bytes", "65536",
                "--xla-methods", "associative", "--out", str(out)])
    rows = [json.loads(line) for line in out.read_text().splitlines()]
    assert rows[0]["benchmark"] == "plans" and rows[0]["interpret"] is True
    timed = [r for r in rows[1:] if "tiles" in r]
    assert timed and all(r["rel_err"] < 1e-5 for r in timed if not r["adjoint"])
    assert any(r["adjoint"] and r["synced_s"] > 0 for r in timed)
    assert {r.get("method") for r in rows[1:]} >= {"associative", "pallas"}
    assert any("best" in r for r in rows[1:])
    # a second run appends to its own log (its first record says "benchmark": "plans")
    bench.main(["plans", "--interpret", "--shapes", "2x24x8", "--kinds", "tv-real",
                "--copy-bytes", "65536", "--budget-s", "1e-9", "--out", str(out)])
    again = [json.loads(line) for line in out.read_text().splitlines()]
    assert again[:len(rows)] == rows and again[len(rows)]["benchmark"] == "plans"
    assert again[-1]["skipped"] == "time budget"


@pytest.mark.parametrize("name, content", [
    ("notes.jsonl", b'{"mine": 1}\n'), ("results.json", b'{"benchmark": "scan"}\n'),
    ("notes.ipynb", b'{"cells": [], "nbformat": 4}\n'), ("empty.jsonl", b"")])
def test_plan_sweep_never_appends_to_a_file_it_did_not_write(tmp_path, capsys, name, content):
    out = tmp_path / name
    out.write_bytes(content)
    with pytest.raises(SystemExit) as err:
        bench.main(["plans", "--interpret", "--out", str(out)])
    assert err.value.code == 2 and name in capsys.readouterr().err
    assert out.read_bytes() == content and sorted(p.name for p in tmp_path.iterdir()) == [name]


@pytest.mark.skipif(jax.default_backend() == "gpu", reason="on a GPU the sweep times the kernel")
def test_plan_sweep_refuses_to_time_the_interpreter_silently():
    with pytest.raises(SystemExit, match="--interpret"):
        bench.main(["plans", "--shapes", "2x64x8"])


def test_pallas_copy_kernel_copies():
    x = jnp.arange(8 * 1024 * 2, dtype=jnp.float32).reshape(-1, 1024)
    np.testing.assert_array_equal(bench._pallas_copy(x, interpret=True), x)


# ------------------------------------------------------------- planes as the headline rows

def test_scan_rows_put_the_kernel_on_planes_first_as_the_headline():
    for platform, pallas in (("gpu", "yes"), ("cpu", "yes")):
        rows = bench.scan_rows(platform, pallas)
        labels = [r.label for r in rows]
        i = labels.index("pallas kernel (re/im planes)")
        assert labels[i + 1] == "pallas"                             # the arrays row beside it
        assert rows[i].headline and rows[i].layout == "planes"
        assert [r.label for r in rows if r.headline] == ["pallas kernel (re/im planes)"]
        # the next design beside them, on planes too, never the headline
        assert labels[i + 2] == bench.TIME_PARALLEL_PLANES
        assert rows[i + 2].layout == "planes" and not rows[i + 2].headline
        assert all(r.layout == "complex arrays" for r in rows if r not in (rows[i], rows[i + 2]))
    assert "pallas" not in [r.label for r in bench.scan_rows("cpu")]
    assert "pallas" not in [r.label for r in bench.scan_rows("gpu", "no")]


@pytest.mark.slow
def test_scan_benchmark_times_the_planes_row_in_interpret_mode(tmp_path):
    out = tmp_path / "scan.json"
    bench.main(["scan", "--device", "cpu", "--shapes", "2x9x4", "--no-tv", "--repeats", "1",
                "--copy-bytes", "65536", "--pallas", "yes", "--out", str(out)])
    rows = {r["label"]: r for r in json.loads(out.read_text())["results"]}
    planes, arrays = rows["pallas kernel (re/im planes)"], rows["pallas"]
    assert (planes["layout"], planes["headline"]) == ("planes", True)
    assert (arrays["layout"], arrays["headline"]) == ("complex arrays", False)
    assert planes["err_vs_sequential"] < 1e-5 and planes["fwdbwd_s"] > 0
    proposed = rows[bench.TIME_PARALLEL_PLANES]
    assert proposed["err_vs_sequential"] < 1e-5 and proposed["fwdbwd_s"] > 0


def test_the_time_parallel_rows_plan_with_the_next_design(monkeypatch):
    # The row traces its function (forward and VJP) inside design("time-parallel"): the plan
    # it gets is the next design's, while the other rows keep the measured table.
    from lrnn.scan import pallas as scan_pallas
    from lrnn.scan import pallas_tuning
    seen = []
    real = scan_pallas.plan
    monkeypatch.setattr(scan_pallas, "plan", lambda *a, **k: seen.append(
        pallas_tuning.current_design()) or real(*a, **k))
    rows = {r.label: r for r in bench.scan_rows("cpu", "yes")}
    lam = jnp.full((4,), 0.9 + 0.1j, jnp.complex64)
    bu = jnp.ones((1, 8, 4), jnp.complex64)
    for label, design in ((bench.TIME_PARALLEL_PLANES, "time-parallel"),
                          ("pallas kernel (re/im planes)", "measured")):
        seen.clear()
        fwd_args, fwdbwd_args = rows[label].prepare(lam, bu, bu)
        jax.jit(rows[label].fwdbwd)(*fwdbwd_args)
        assert seen and set(seen) == {design}, (label, seen)


def test_layer_rows_are_labelled_by_layout():
    with_kernel = bench_layer.layer_scan_rows(True)
    assert [(r["scan"], r["layout"], r["headline"]) for r in with_kernel[:2]] == [
        ("pallas", "planes", True), ("pallas, complex arrays", "complex arrays", False)]
    assert (with_kernel[2]["scan"], with_kernel[2]["design"]) == (bench_layer.TIME_PARALLEL,
                                                                 "time-parallel")
    without = bench_layer.layer_scan_rows(False)
    assert [r["scan"] for r in without] == ["auto", "paper: associative_scan"]
    assert without[0]["headline"]


@pytest.mark.slow
def test_layer_benchmark_with_the_kernel_in_interpret_mode(tmp_path):
    out = tmp_path / "layer.json"
    bench.main(["layer", "--device", "cpu", "--d-model", "4", "--d-state", "4", "--batch", "2",
                "--length", "8", "--heads", "2", "--repeats", "1", "--models", "none",
                "--pallas", "yes", "--out", str(out)])
    rows = json.loads(out.read_text())["results"]
    for layer in ("lru", "rotrnn"):
        mine = {r["scan"]: r for r in rows if r["layer"] == layer}
        assert list(mine) == ["pallas", "pallas, complex arrays", "pallas, time-parallel",
                              "auto", "paper: associative_scan"]
        assert mine["pallas, time-parallel"]["layout"] == "planes"
        assert not mine["pallas, time-parallel"]["headline"]
        assert mine["pallas"]["layout"] == "planes" and mine["pallas"]["headline"]
        assert mine["pallas, complex arrays"]["layout"] == "complex arrays"
        assert mine["auto"]["layout"] == "complex arrays" and not mine["auto"]["headline"]
        assert all(r["step_s"] > 0 for r in mine.values())
    # that the arrays row really splits and joins: test_scan_planes.py, complex_arrays()
