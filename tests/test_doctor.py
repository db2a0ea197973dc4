"""python -m lrnn doctor: recorded cell times and budgets, output problems, the library checks
(each must pass, and fail on a planted mistake), the benchmark targets, the reports, and the
quick mode end to end (the CI run of the doctor)."""
import datetime as dt
import json
import subprocess
import sys
from pathlib import Path

import jax
import jax.numpy as jnp
import nbformat
import numpy as np
import pytest

import lrnn
from lrnn.course import doctor, precision

REPO = Path(__file__).resolve().parents[1]
T0 = dt.datetime(2026, 11, 23, 9, 0, 0, tzinfo=dt.timezone.utc)


def timed_notebook(seconds, *, gap=0.1, sources=None):
    """A notebook whose code cells carry nbclient timing metadata: cell k ran seconds[k]
    (None: no metadata)."""
    nb = nbformat.v4.new_notebook()
    nb.cells.append(nbformat.v4.new_markdown_cell("# title"))
    t = T0
    for k, s in enumerate(seconds):
        cell = nbformat.v4.new_code_cell(sources[k] if sources else f"x{k} = {k}")
        if s is not None:
            end = t + dt.timedelta(seconds=s)
            stamp = lambda v: v.strftime("%Y-%m-%dT%H:%M:%S.%fZ")  # noqa: E731
            cell.metadata["execution"] = {"iopub.status.busy": stamp(t), "iopub.execute_input": stamp(t),
                                          "shell.execute_reply": stamp(end), "iopub.status.idle": stamp(end)}
            cell.execution_count = k + 1
            t = end + dt.timedelta(seconds=gap)
        nb.cells.append(cell)
    return nb


# ---------------------------------------------------------------------------------------------
# Recorded times and budgets
# ---------------------------------------------------------------------------------------------

def test_cell_times_read_nbclient_metadata():
    nb = timed_notebook([1.5, 30.0, None, 2.0])
    times = doctor.cell_times(nb)
    assert [(t.index, t.code_index, round(t.seconds, 3)) for t in times] == [(1, 0, 1.5), (2, 1, 30.0), (4, 3, 2.0)]
    assert doctor.untimed_cells(nb) == [(3, 2, "x2 = 2")]
    assert doctor.notebook_seconds(times) == pytest.approx(33.7)


def test_a_notebook_within_budget_has_no_problem():
    assert doctor.budget_problems("book/ok.ipynb", timed_notebook([10, 50, 40])) == []


def test_a_slow_cell_is_named_with_its_notebook_and_source():
    nb = timed_notebook([5, 61, 5], sources=["a = 1", "# comment\ntrain(steps=5000)", "b = 2"])
    problems = doctor.budget_problems("book/07_experiments.ipynb", nb)
    assert len(problems) == 1
    assert problems[0].startswith("book/07_experiments.ipynb: cell 2 (nbval Cell 1) took 61.0 s")
    assert "60 s budget per cell" in problems[0] and "train(steps=5000)" in problems[0]


def test_a_slow_notebook_is_reported_with_its_slowest_cells():
    problems = doctor.budget_problems("solutions/04.ipynb", timed_notebook([50] * 4))
    assert len(problems) == 1 and "ran 200.3 s top to bottom, over the 180 s budget" in problems[0]
    gpu = doctor.budget_problems("x.ipynb", timed_notebook([40] * 4), doctor.BUDGETS["gpu"])
    assert "over the 120 s budget on Colab T4" in gpu[0]


def test_an_executed_cell_without_time_is_a_problem_unless_allowed():
    nb = timed_notebook([1, None, 1])
    problems = doctor.budget_problems("book/01.ipynb", nb)
    assert len(problems) == 1 and "1 code cells have no recorded time (cell 2 (nbval Cell 1))" in problems[0]
    assert "python -m lrnn doctor execute book/01.ipynb" in problems[0]
    assert doctor.budget_problems("book/01.ipynb", nb, require_timing=False) == []
    nb.cells.append(nbformat.v4.new_code_cell("   "))          # empty cells are never executed
    assert len(doctor.budget_problems("book/01.ipynb", nb)) == 1


def test_slowest_report_marks_what_is_over_budget(tmp_path):
    nbformat.write(timed_notebook([2, 70, 3], sources=["a", "slow_cell()", "b"]), tmp_path / "a.ipynb")
    nbformat.write(timed_notebook([1, None]), tmp_path / "b.ipynb")
    text = doctor.slowest_report(doctor.notebook_paths([tmp_path]), top=2)
    assert "cell 2: 70.0 s!" in text and "1 code cells without a recorded time" in text
    assert "70.0 s!" in text.split("slowest cells:")[1] and "slow_cell()" in text
    out = subprocess.run([sys.executable, "-m", "lrnn", "doctor", "slowest", str(tmp_path), "--top", "1"],
                         capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    assert "a.ipynb" in out.stdout and "cell 2 (nbval Cell 1): slow_cell()" in out.stdout


@pytest.mark.slow
def test_execute_writes_cell_times_in_place(tmp_path):
    path = tmp_path / "tiny.ipynb"
    nb = nbformat.v4.new_notebook()
    nb.cells = [nbformat.v4.new_code_cell("import time\ntime.sleep(0.2)"), nbformat.v4.new_code_cell("print(1 + 1)")]
    nb.metadata["kernelspec"] = {"name": "python3", "display_name": "Python 3", "language": "python"}
    nbformat.write(nb, path)
    out = subprocess.run([sys.executable, "-m", "lrnn", "doctor", "execute", str(path)],
                         capture_output=True, text=True, timeout=300)
    assert out.returncode == 0, out.stdout + out.stderr
    executed = nbformat.read(path, as_version=4)
    times = doctor.cell_times(executed)
    assert len(times) == 2 and times[0].seconds >= 0.2
    assert executed.cells[1].outputs[0]["text"] == "2\n"
    assert doctor.budget_problems(str(path), executed) == []


def test_execute_leaves_generated_exercise_notebooks_alone(tmp_path):
    """`exercises/` is generated by `lrnn exercises build` and must match it byte for byte, so
    `doctor execute exercises` skips those notebooks instead of writing outputs into them."""
    for folder in ("solutions", "exercises"):
        (tmp_path / folder).mkdir()
        nb = nbformat.v4.new_notebook()
        nb.cells = [nbformat.v4.new_code_cell("print(1)")]
        nb.metadata["kernelspec"] = {"name": "python3", "display_name": "Python 3", "language": "python"}
        nbformat.write(nb, tmp_path / folder / "01_x.ipynb")
    exercise = tmp_path / "exercises" / "01_x.ipynb"
    before = exercise.read_bytes()
    assert doctor.is_generated_exercise(exercise)
    assert not doctor.is_generated_exercise(tmp_path / "solutions" / "01_x.ipynb")
    out = subprocess.run([sys.executable, "-m", "lrnn", "doctor", "execute", str(tmp_path / "exercises")],
                         capture_output=True, text=True, timeout=300)
    assert out.returncode == 0 and "skip" in out.stdout and "lrnn exercises build" in out.stdout
    assert exercise.read_bytes() == before


# ---------------------------------------------------------------------------------------------
# Outputs that must not reach the site
# ---------------------------------------------------------------------------------------------

def test_output_problems_find_temporary_paths_and_warnings():
    nb = timed_notebook([1, 1, 1])
    nb.cells[1].outputs = [nbformat.v4.new_output(
        "stream", name="stderr", text="/tmp/ipykernel_2367/3416337952.py:7: UserWarning: No GPU found\n")]
    nb.cells[2].outputs = [nbformat.v4.new_output("stream", name="stdout", text="all fine\n")]
    nb.cells[3].outputs = [nbformat.v4.new_output("error", ename="ValueError", evalue="x",
                                                  traceback=['File /tmp/ipykernel_99/1.py:3'])]
    found = doctor.output_problems(nb)
    assert [(i, what) for i, what, _ in found] == [(1, "temporary kernel path"), (1, "warning"),
                                                  (3, "temporary kernel path")]
    assert "UserWarning: No GPU found" in found[1][2]
    assert doctor.setup_cells(timed_notebook([1], sources=["env = lrnn.course.setup.environment()"])) == [1]


# ---------------------------------------------------------------------------------------------
# Library checks: pass on the library, fail on a planted mistake
# ---------------------------------------------------------------------------------------------

def _wrong_scan(a, b, reverse=False, method="auto"):       # forgets the last input
    x = lrnn.linear_scan(a, b, reverse=reverse, method=method)
    return x.at[..., -1, :].add(-b[..., -1, :])


def _scan_without_decay_gradient(a, b, reverse=False, method="auto"):
    return lrnn.linear_scan(jax.lax.stop_gradient(a), b, reverse=reverse, method=method)


def _lru_without_skip(params, u, method="auto"):
    return lrnn.layers.lru.apply(params, u) - params["D"] * u


def _rotrnn_turning_backwards(params, u):                 # D(-θ) instead of D(θ)
    return lrnn.layers.rotrnn.apply({**params, "theta": -params["theta"]}, u)


def _householder_reversed(U, u1_sign=None):                # H(U[:, m-1]) ⋯ H(U[:, 0]): wrong order
    return lrnn.orthogonal.householder_product(U, u1_sign).T


def _skew_expm_transposed(M):
    return lrnn.orthogonal.skew_expm(-M)                   # expm(Mᵀ - M): orthogonal, not Lemma 2


PLANTED = [   # (name, check with a mistake planted, the tolerance library_checks gives it)
    ("scan", lambda: doctor.check_scan("sequential", linear_scan=_wrong_scan), 1e-4),
    ("scan gradient", lambda: doctor.check_scan_gradient("sequential", linear_scan=_scan_without_decay_gradient), 1e-4),
    ("float64", lambda: doctor.check_scan_float64(linear_scan=lambda a, b, method: lrnn.linear_scan(
        a.astype(jnp.float32), b.astype(jnp.float32), method=method)), 1e-10),
    ("rotation", lambda: doctor.check_rotation_scan(rotation_scan=lambda g, t, b: lrnn.rotation_scan(g, -t, b)), 1e-4),
    ("skew_expm", lambda: doctor.check_skew_expm(skew_expm=_skew_expm_transposed), 1e-5),
    ("householder", lambda: doctor.check_householder(householder_product=_householder_reversed), 1e-5),
    ("lru", lambda: doctor.check_lru(apply=_lru_without_skip), 1e-4),
    ("rotrnn", lambda: doctor.check_rotrnn(apply=_rotrnn_turning_backwards), 1e-4),
]


def test_planted_tolerances_are_those_of_the_doctor():
    tolerances = {t for _, _, t in doctor.library_checks()}
    assert {t for _, _, t in PLANTED} <= tolerances


@pytest.mark.parametrize("name,fn,tol", PLANTED, ids=[p[0] for p in PLANTED])
def test_library_check_fails_on_a_planted_mistake(name, fn, tol):
    result = doctor.run_check(name, fn, tol)
    assert result.status == doctor.FAIL, result.detail


@pytest.mark.slow
def test_checks_hold_under_emulated_tf32_only_through_the_course_policy():
    with precision.tf32_emulated():
        probe = doctor.tf32_probe(256)
        assert probe["tf32_by_default"] and probe["course_policy_rel_err"] < doctor.TF32_THRESHOLD
        # JAX's default: TF32-rounded products (householder_product asks for exact products
        # itself, so the RotRNN layer's mixing is the check that shows it)
        err, _ = doctor.check_rotrnn()
        assert err > 1e-4
        assert doctor.run_check("rotrnn", doctor.check_rotrnn, 1e-4).status == doctor.PASS
        assert doctor.run_check("householder", doctor.check_householder, 1e-5).status == doctor.PASS
    assert not doctor.tf32_probe(256)["tf32_by_default"]


def test_a_crashing_check_fails():
    def boom():
        raise RuntimeError("no kernel")
    result = doctor.run_check("boom", boom, 1.0)
    assert result.status == doctor.FAIL and "RuntimeError: no kernel" in result.detail


# ---------------------------------------------------------------------------------------------
# GPU benchmark targets (evaluated on a benchmark JSON; the benchmark itself needs a GPU)
# ---------------------------------------------------------------------------------------------

def bench_json(pallas_fwd, *, err):
    """A fake GPU run of ``lrnn bench scan`` with a row for every target: the pallas rows take
    ``pallas_fwd`` s against 1 s for the others, at ``err`` relative error."""
    from lrnn.benchmarks import scan as bench
    fraction = 0.085 / pallas_fwd                     # 0.1 s -> 85% of copy, 0.9 s -> 9%
    rows, tv_rows = [], []
    for shape in sorted({tuple(s) for s in bench.BANDWIDTH_SHAPES} | {(1, 65536, 64)}):
        rows.append({"shape": list(shape), "label": "sequential", "method": "sequential", "fwd_s": 1.0,
                     "fwdbwd_s": 2.0, "max_abs_err_vs_first_row": 0.0})
        for label in ("pallas", "pallas kernel (re/im planes)"):
            rows.append({"shape": list(shape), "label": label, "method": "pallas",
                         "fwd_s": pallas_fwd, "fwdbwd_s": 2 * pallas_fwd, "fwd_copy_fraction": fraction,
                         "compile_fwd_s": 1.0, "compile_fwdbwd_s": 2.0, "err_vs_sequential": err,
                         "max_abs_err_vs_first_row": err})
        rows.append({"shape": list(shape), "label": "paper: associative_scan", "method": None,
                     "fwd_s": 1.0, "fwdbwd_s": 2.0})
    for shape in bench.TV_SHAPES:
        tv_rows.append({"shape": list(shape), "label": "pallas", "method": "pallas", "fwd_s": pallas_fwd})
        tv_rows.append({"shape": list(shape), "label": bench.PEER_TRITON, "method": None, "fwd_s": 0.2})
    checks = [{"shape": list(s), "fwd_s_picked_within_10pct": True} for s in bench.BANDWIDTH_SHAPES]
    return {"device": {"platform": "gpu", "device_kind": "Fake GPU"}, "results": rows,
            "tv_results": tv_rows, "checks": checks}


def test_bench_targets_pass_miss_and_fail():
    fast = {r.name: r.status for r in doctor.bench_target_results(bench_json(0.1, err=1e-6), strict=False)}
    assert set(fast.values()) == {doctor.PASS}, fast
    slow = doctor.bench_target_results(bench_json(0.9, err=1e-6), strict=False)
    assert {r.status for r in slow if "lax.associative_scan" in r.name} == {doctor.MISS}
    assert {r.status for r in slow if "of copy" in r.name or "accelerated-scan" in r.name} == {doctor.MISS}
    assert {r.status for r in doctor.bench_target_results(bench_json(0.9, err=1e-6), strict=True)
            if "lax.associative_scan" in r.name} == {doctor.FAIL}
    wrong = {r.name: r.status for r in doctor.bench_target_results(bench_json(0.1, err=1e-2), strict=False)}
    assert [s for n, s in wrong.items() if "matches sequential" in n] == [doctor.FAIL]
    unmeasured = doctor.bench_target_results({"device": {"platform": "gpu"}, "results": []}, strict=True)
    assert {r.status for r in unmeasured} == {doctor.SKIP}


def test_no_gpu_benchmark_on_a_cpu(tmp_path):
    assert [r.status for r in doctor.gpu_results(REPO, tmp_path, strict=True)] == [doctor.SKIP]


# ---------------------------------------------------------------------------------------------
# Reports and exit status
# ---------------------------------------------------------------------------------------------

def test_a_failing_check_fails_the_run_and_the_report_says_so(monkeypatch, tmp_path, capsys):
    monkeypatch.setattr(doctor.checkup, "library_checks", lambda: [
        ("a good check", lambda: (0.0, "exact"), 1e-6),
        ("a planted failure", lambda: (1.0, "off by one"), 1e-6)])
    code = doctor.main(["--skip", "grading", "notebooks", "gpu", "--out-dir", str(tmp_path)])
    assert code == 1
    out = capsys.readouterr().out
    assert "FAIL  library       a planted failure: off by one" in out
    report = json.loads((tmp_path / "doctor_cpu.json").read_text())
    assert report["ok"] is False and report["counts"]["FAIL"] == 1
    assert report["device"]["platform"] == "cpu" and report["device"]["jax"] == jax.__version__
    assert report["commit"] is None or len(report["commit"]) == 40
    md = (tmp_path / "doctor_cpu.md").read_text()
    assert md.startswith("# lrnn doctor: cpu (full)") and "| FAIL | library | a planted failure |" in md
    assert "does NOT work here" in md


def test_skipped_parts_are_named_in_the_verdict_and_the_saved_report(monkeypatch, tmp_path, capsys):
    monkeypatch.setattr(doctor.checkup, "library_checks", lambda: [
        ("a good check", lambda: (0.0, "exact"), 1e-6)])
    code = doctor.main(["--skip", "grading", "notebooks", "gpu", "--out-dir", str(tmp_path)])
    assert code == 0
    out = capsys.readouterr().out
    assert "partly checked: skipped grading, notebooks, gpu" in out
    assert "the course works here" not in out
    report = json.loads((tmp_path / "doctor_cpu.json").read_text())
    assert report["skipped"] == ["grading", "notebooks", "gpu"] and report["ok"] is True
    md = (tmp_path / "doctor_cpu.md").read_text()
    assert "partly checked: skipped grading, notebooks, gpu" in md


def test_nothing_checked_is_no_pass(monkeypatch, tmp_path, capsys):
    monkeypatch.setattr(doctor.checkup, "library_checks",
                        lambda: pytest.fail("the library was checked although skipped"))
    code = doctor.main(["--skip", "library", "grading", "notebooks", "gpu", "--out-dir", str(tmp_path)])
    assert code == 1
    out = capsys.readouterr().out
    assert "nothing checked: skipped library, grading, notebooks, gpu" in out
    assert "works here" not in out
    report = json.loads((tmp_path / "doctor_cpu.json").read_text())
    assert report["ok"] is False
    assert "nothing checked" in (tmp_path / "doctor_cpu.md").read_text()


def test_skipping_an_unknown_part_is_refused():
    with pytest.raises(ValueError, match="skip: got \\['tests'\\]"):
        doctor.skipped_parts({"tests"}, REPO)


@pytest.mark.slow
def test_quick_doctor_is_green_on_this_machine(tmp_path):
    """The CI run: library checks, one solution graded with full marks, one chapter executed."""
    out = subprocess.run([sys.executable, "-m", "lrnn", "doctor", "--quick", "--out-dir", str(tmp_path)],
                         capture_output=True, text=True, timeout=600, cwd=REPO)
    assert out.returncode == 0, out.stdout[-3000:] + out.stderr[-3000:]
    report = json.loads((tmp_path / f"doctor-quick_{report_slug()}.json").read_text())
    assert report["ok"] and report["mode"] == "quick"
    by_section = {}
    for r in report["results"]:
        by_section.setdefault(r["section"], []).append(r)
    # Every library check, each by name (they are not run a second time on their own).
    assert [r["name"] for r in by_section["library"]] == [c[0] for c in doctor.library_checks()]
    failed = {r["name"]: r.get("detail") for r in by_section["library"] if r["status"] != "PASS"}
    assert not failed, failed
    assert [(r["name"], r["status"]) for r in by_section["grading"]] == \
        [("solutions/01_linear_recurrence.ipynb", "PASS")]
    assert [(r["name"], r["status"]) for r in by_section["notebooks"]] == [("book/00_welcome.ipynb", "PASS")]
    assert "the course works here" in out.stdout
    assert (tmp_path / f"doctor-quick_{report_slug()}.md").exists()


def report_slug():
    return jax.devices()[0].platform if jax.default_backend() != "gpu" else \
        doctor.device_slug({"platform": "gpu", "device_kind": jax.devices()[0].device_kind})


def test_doctor_help():
    out = subprocess.run([sys.executable, "-W", "error", "-m", "lrnn", "doctor", "--help"],
                         capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    assert "usage: lrnn doctor" in out.stdout and "--quick" in out.stdout


def test_the_doctor_checks_scans_against_the_tests_reference():
    from lrnn.scan import reference
    assert doctor.reference is reference
    assert not hasattr(doctor, "np_scan")


def test_a_grader_error_names_its_reason_from_the_gradebook_details(tmp_path, monkeypatch):
    """A solution not run to the end (a kernel that could not start, say): the grader records
    why in the ``fatal`` field of the gradebook's details file, and the doctor's line names
    that reason, not only the status."""
    from lrnn.course import grading as g
    from lrnn.course.doctor.solutions import _why_not_run
    from lrnn.course.grading import gradebook, score
    reason = ("the kernel could not start (died: ModuleNotFoundError: No module named "
              "'traitlets')")

    def no_kernel(steps, sol, sandbox, **kw):
        return {"timed_out": False, "fatal": reason, "fatal_kind": "grader error",
                "outcomes": {}}
    monkeypatch.setattr(score, "run_submission", no_kernel)
    subs = tmp_path / "subs"
    subs.mkdir()
    nb = subs / "01_linear_recurrence.ipynb"
    nb.write_bytes((REPO / "solutions" / "01_linear_recurrence.ipynb").read_bytes())
    out = tmp_path / "gradebook.csv"
    (row,) = g.grade([subs], out, solutions=REPO / "solutions", sandbox="none",
                     log=lambda *a: None)
    assert row["status"] == "grader error" and float(row["total"]) == 0
    details = gradebook.read_details(gradebook.details_path(out))
    assert _why_not_run(details, nb) == f"not run to the end: {reason}"
    assert _why_not_run(details, tmp_path / "other.ipynb") is None
    monkeypatch.undo()
    (row,) = g.grade([subs], out, solutions=REPO / "solutions", sandbox="none", force=True,
                     log=lambda *a: None)
    assert row["status"] == "graded"
    assert _why_not_run(gradebook.read_details(gradebook.details_path(out)), nb) is None


def test_the_commit_named_in_lrnn_commit_wins_over_a_stale_git_copy(tmp_path, monkeypatch):
    """A copy of the tree may carry an old ``.git``: ``$LRNN_COMMIT`` (what ``lrnn bench gpu``
    records too) names the commit the reports belong to."""
    from lrnn.course.doctor.environment import git_commit
    monkeypatch.delenv("LRNN_COMMIT", raising=False)
    assert git_commit(None)["commit"] is None
    monkeypatch.setenv("LRNN_COMMIT", "05f93d9")
    assert git_commit(tmp_path) == {"commit": "05f93d9", "short": "05f93d9", "dirty": False,
                                    "source": "LRNN_COMMIT"}
