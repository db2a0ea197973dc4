"""Step 5, on a GPU: the sequential step cost, the scan benchmark and its targets."""
from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

from .results import FAIL, INFO, MISS, PASS, SKIP, WARN, Result
from .solutions import _subprocess_env


#: The shapes of the GPU issue's scan targets; ``sequential`` first, so that the benchmark's
#: accuracy column (error against its first row) measures the accuracy target.
BENCH_ARGS = ["--shapes", "16x16384x256,1x65536x64,32x1024x512",
              "--methods", "sequential,pallas,associative,auto,paper: associative_scan",
              "--repeats", "5"]


def sequential_step_seconds(length: int = 4096, channels: int = 256, repeats: int = 5) -> float:
    """Seconds per time step of ``linear_scan(method="sequential")`` at ``(1, length, channels)``
    complex64, best of ``repeats`` after a warm-up (what ``lrnn.course.setup.size`` assumes)."""
    import jax
    import jax.numpy as jnp
    import lrnn
    lam = jnp.full((channels,), 0.99 + 0.0j, jnp.complex64)
    b = jnp.ones((1, length, channels), jnp.complex64)
    f = jax.jit(lambda a, x: lrnn.linear_scan(a, x, method="sequential"))
    f(lam, b).block_until_ready()
    best = float("inf")
    for _ in range(repeats):
        t = time.perf_counter()
        f(lam, b).block_until_ready()
        best = min(best, time.perf_counter() - t)
    return best / length


def bench_target_results(scan: dict, *, strict: bool) -> list[Result]:
    """Results for ``lrnn.benchmarks.scan``'s GPU targets evaluated on ``scan`` (its JSON). Speed targets
    missed are MISS (FAIL with ``strict``); an accuracy target missed is FAIL."""
    from ...benchmarks import scan as bench
    results = []
    for t in bench.scan_targets(scan):
        if t["measured"] is None:
            results.append(Result("gpu benchmark", t["target"], SKIP, "not measured by this run"))
            continue
        accuracy = "error" in t["target"] or "matches" in t["target"]
        status = PASS if t["passed"] else (FAIL if accuracy or strict else MISS)
        shape = "×".join(map(str, t["shape"])) if t.get("shape") else ""
        results.append(Result("gpu benchmark", t["target"] + (f" at {shape}" if shape else ""), status,
                              f"measured {t['measured']:.3g}, target {t['threshold']:g}", data=t))
    return results


def gpu_results(repo: Path | None, workdir: Path, *, strict: bool, bench_args=None,
                timeout: float = 1800) -> list[Result]:
    import jax
    from .. import setup
    if jax.default_backend() != "gpu":
        return [Result("gpu benchmark", "scan benchmark and targets", SKIP, "no GPU here")]
    results = []
    step = sequential_step_seconds()
    assumed = setup.gpu_profile().sequential_step_s
    results.append(Result("gpu benchmark", "sequential scan: seconds per step", INFO if step <= assumed else WARN,
                          f"{step * 1e6:.1f} µs per step at (1, 4096, 256) complex64; lrnn.course.setup.size "
                          f"assumes {assumed * 1e6:.0f} µs" + ("" if step <= assumed else
                                                               ": its GPU sizes are optimistic here"),
                          data={"measured_s": step, "assumed_s": assumed}))
    out = workdir / "bench_scan_gpu.json"
    cmd = [sys.executable, "-m", "lrnn", "bench", "scan", "--device", "gpu", "--out", str(out),
           *(bench_args if bench_args is not None else BENCH_ARGS)]
    start = time.perf_counter()
    try:
        proc = subprocess.run(cmd, cwd=repo or os.getcwd(), capture_output=True, text=True,
                              timeout=timeout, env=_subprocess_env())
    except subprocess.TimeoutExpired:
        return results + [Result("gpu benchmark", "python -m lrnn bench scan", FAIL,
                                 f"did not finish in {timeout:.0f} s")]
    seconds = time.perf_counter() - start
    if proc.returncode != 0 or not out.exists():
        tail = (proc.stderr or proc.stdout).strip().splitlines()[-3:]
        return results + [Result("gpu benchmark", "python -m lrnn bench scan", FAIL,
                                 f"exit code {proc.returncode}: {' | '.join(tail)[:400]}", seconds)]
    scan = json.loads(out.read_text())
    results.append(Result("gpu benchmark", "python -m lrnn bench scan", PASS,
                          f"{len(scan.get('results', []))} rows in {seconds:.0f} s; copy bandwidth "
                          f"{scan.get('copy_bandwidth_GBps', float('nan')):.0f} GB/s "
                          f"(lrnn.course.setup assumes {setup.gpu_profile().bandwidth_gbs:,.0f} GB/s)",
                          seconds, {"command": " ".join(cmd[1:]), "json": str(out)}))
    targets = subprocess.run([sys.executable, "-m", "lrnn", "bench", "targets", "--scan", str(out)],
                             cwd=repo or os.getcwd(), capture_output=True, text=True, timeout=300,
                             env=_subprocess_env())
    results.append(Result("gpu benchmark", "python -m lrnn bench targets",
                          PASS if targets.returncode == 0 else FAIL,
                          "table below" if targets.returncode == 0 else targets.stderr[-300:],
                          data={"markdown": targets.stdout}))
    return results + bench_target_results(scan, strict=strict)
