"""The kernel's time-parallel design (``Tiles(time_warps=W)``, TUNING.md "Next design") and the
plan fixes that come with it, in Pallas interpret mode on the CPU, against the float64
transcription (``lrnn.scan.reference``): values and gradients on every shape class, the carries
from a tiny scan over chunk ends, the plan and register budget of ``design("time-parallel")``,
and its CUDA lowering at every benchmark shape (no GPU needed)."""
import dataclasses
import importlib.util
import json
import pathlib
import subprocess
import sys

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import lrnn.scan.pallas as scan_pallas
from lrnn.scan import linear_scan, pallas_tuning, reference, sequential
from lrnn.scan.pallas_triton import Tiles
from lrnn.benchmarks import scan as bench


def _inputs(rng, kind, lead, length, n):
    """``kind``: "complex"/"real", then "ti" (a of shape (N,)) or "tv" (a(t))."""
    complex_ = kind.startswith("complex")
    shape = (*lead, length, n)
    b = rng.standard_normal(shape) + (1j * rng.standard_normal(shape) if complex_ else 0)
    a_shape = (n,) if kind.endswith("ti") else shape
    a = rng.uniform(0.6, 0.995, a_shape)
    if complex_:
        a = a * np.exp(1j * rng.uniform(0, 2 * np.pi, a_shape))
    else:
        a = a * rng.choice([-1.0, 1.0], a_shape)
    dtype = np.complex64 if complex_ else np.float32
    g = rng.standard_normal(shape) + (1j * rng.standard_normal(shape) if complex_ else 0)
    return a.astype(dtype), b.astype(dtype), g.astype(dtype)


def reference_adjoint(a, b, g, reverse):
    """Float64 gradients of ``sum(g * x)`` (JAX's convention: no conjugation) for ``x =
    reference.linear_scan(a, b, reverse)``: ``λ_t = g_t + a_{t+1} λ_{t+1}`` (for a forward
    scan; ``a_{t-1} λ_{t-1}`` for a reverse one), ``db = λ``, ``da_t = λ_t x_{t-1}`` (summed
    over everything but N for a time-invariant ``a``). Returns ``(da, db)``."""
    a = np.asarray(a, np.complex128 if np.iscomplexobj(a) else np.float64)
    x = reference.linear_scan(a, b, reverse)
    pad = np.zeros_like(x[..., :1, :])
    if a.ndim == 1:
        a_next = a
    else:
        a_next = (np.concatenate([pad.astype(a.dtype), a[..., :-1, :]], -2) if reverse
                  else np.concatenate([a[..., 1:, :], pad.astype(a.dtype)], -2))
    lam = reference.linear_scan(a_next, g, not reverse)
    x_prev = (np.concatenate([x[..., 1:, :], pad], -2) if reverse
              else np.concatenate([pad, x[..., :-1, :]], -2))
    da = lam * x_prev
    if a.ndim == 1:
        da = da.reshape(-1, a.shape[-1]).sum(0)
    return da, lam


def _kernel_values_and_adjoint(a, b, g, reverse, tiles, chunk):
    a_p, b_p = scan_pallas._as_planes(jnp.asarray(a), jnp.asarray(b))
    _, g_p = scan_pallas._as_planes(jnp.asarray(a), jnp.asarray(g))
    x = scan_pallas.scan_planes(a_p, b_p, reverse=reverse, tiles=tiles, chunk=chunk)
    lam, da = scan_pallas.scan_planes(a_p, g_p, reverse=not reverse, x=x, tiles=tiles,
                                      chunk=chunk)
    return (scan_pallas.from_planes(x).reshape(b.shape),
            scan_pallas.from_planes(lam).reshape(b.shape),
            scan_pallas.from_planes(da).reshape(a.shape))


def _close(got, want, tol=3e-5):
    want = np.asarray(want)
    assert got.shape == want.shape
    np.testing.assert_allclose(np.asarray(got), want, rtol=0,
                               atol=tol * float(np.max(np.abs(want))))


#: (class, kind, lead, L, N, tiles, chunk, reverse). W·U rows make a super-block; each case
#: says which paths it runs. Every case runs the forward pass and the adjoint pass.
CASES = [
    # 3 super-blocks of 8 rows per program, 16 channels in two programs of 8: one pass.
    ("wide", "complex ti", (3,), 24, 16, Tiles(8, 2, time_warps=4), None, False),
    # chunks of 24, 24 and 22 rows (the last one's length is traced): 3 super-blocks, then
    # 2 super-blocks and a tail of 6; the carries come from the tiny scan over chunk ends.
    ("narrow, chunked", "real ti", (1,), 70, 3, Tiles(8, 2, time_warps=4), 24, False),
    # one sequence of 301 steps, W = 8: 9 super-blocks of 32 rows, 3 blocks of 4, 1 row.
    ("long single sequence", "complex ti", (1,), 301, 2, Tiles(8, 4, time_warps=8), None,
     False),
    # N = 13 padded to 16: two programs, the second mostly padding.
    ("odd N", "complex tv", (2,), 20, 13, Tiles(8, 2, time_warps=2), None, False),
    # U = 3: a super-block of 12 rows in a chunk of 13 (1 row left over), and a last chunk of
    # 3 rows that never reaches a super-block.
    ("tails", "real tv", (2,), 29, 5, Tiles(8, 3, time_warps=4), 13, False),
    ("reverse", "complex ti", (2,), 45, 6, Tiles(8, 2, time_warps=4), 16, True),
    ("time-varying a, reverse, chunked", "complex tv", (1,), 50, 4,
     Tiles(8, 2, time_warps=8), 32, True),
    ("extra batch axes", "real tv", (2, 2), 19, 3, Tiles(8, 2, time_warps=2), None, False),
]


@pytest.mark.slow
@pytest.mark.parametrize("case", CASES, ids=[c[0] for c in CASES])
def test_values_and_gradients_match_the_float64_reference(case):
    _, kind, lead, length, n, tiles, chunk, reverse = case
    rng = np.random.default_rng([length, n, tiles.time_warps])
    a, b, g = _inputs(rng, kind, lead, length, n)
    run = jax.jit(lambda a, b, g: _kernel_values_and_adjoint(a, b, g, reverse, tiles, chunk))
    x, lam, da = run(a, b, g)
    _close(x, reference.linear_scan(a, b, reverse))
    da_ref, lam_ref = reference_adjoint(a, b, g, reverse)
    _close(lam, lam_ref)
    _close(da, da_ref, tol=5e-5)


def test_the_float64_adjoint_is_the_one_the_library_differentiates_with(rng):
    # reference_adjoint above, against lrnn.scan.sequential.adjoint (float32), both ways.
    for kind in ("complex ti", "real tv"):
        for reverse in (False, True):
            a, b, g = _inputs(rng, kind, (2,), 9, 3)
            x = sequential.scan(jnp.asarray(a), jnp.asarray(b), reverse)
            da, lam = sequential.adjoint(jnp.asarray(a), x, jnp.asarray(g), reverse)
            da_ref, lam_ref = reference_adjoint(a, b, g, reverse)
            _close(lam, lam_ref)
            _close(da, da_ref)


def test_gradients_through_linear_scan_take_the_time_parallel_tiles(monkeypatch, rng):
    # The public path (linear_scan, its custom VJP, the plan) with a table whose tiles are
    # time-parallel, against autodiff of the sequential scan.
    small = pallas_tuning.Generation(
        name="time-parallel, test", target_lanes=64, min_chunk=8,
        tiles={key: Tiles(8, 2, time_warps=4) for key in pallas_tuning.KEYS})
    monkeypatch.setattr(pallas_tuning, "generation", lambda cc: small)
    plans = []
    real_plan = scan_pallas.plan
    monkeypatch.setattr(scan_pallas, "plan", lambda *a, **k: plans.append(real_plan(*a, **k))
                        or plans[-1])
    a, b, _ = _inputs(rng, "complex tv", (1,), 40, 3)
    w = rng.standard_normal(b.shape).astype(np.float32)

    def loss(method):
        return lambda a, b: jnp.sum(w * jnp.abs(linear_scan(a, b, method=method)) ** 2)
    got = jax.jit(jax.grad(loss("pallas"), argnums=(0, 1)))(a, b)
    want = jax.grad(loss("sequential"), argnums=(0, 1))(a, b)
    assert plans and all(p.tiles.time_warps == 4 and p.n_chunks > 1 for p in plans)
    for g_, r in zip(got, want):
        _close(g_, r, tol=1e-4)


def test_chunk_carries_are_the_serial_fold(rng):
    # The tiny scan over chunk ends against the fold it replaces: h_{r+1} = gain_r h_r + end_r.
    g, c, n = 2, 7, 5
    gains = (rng.uniform(-1, 1, (g, c, n)), rng.uniform(-1, 1, (g, c, n)))
    ends = (rng.standard_normal((g, c, n)), rng.standard_normal((g, c, n)))
    got = scan_pallas.chunk_carries(tuple(map(jnp.asarray, gains)), tuple(map(jnp.asarray, ends)))
    gain, end = gains[0] + 1j * gains[1], ends[0] + 1j * ends[1]
    h, want = np.zeros((g, n), complex), [np.zeros((g, n), complex)]
    for r in range(c):
        h = gain[:, r] * h + end[:, r]
        want.append(h)
    want = np.stack(want, axis=1)
    _close(np.asarray(got[0]) + 1j * np.asarray(got[1]), want, tol=1e-6)
    # A time-invariant a's gains are one row for every sequence: broadcast, not refused.
    real = scan_pallas.chunk_carries((jnp.asarray(gains[0][:1]),), (jnp.asarray(ends[0]),))
    assert real[0].shape == (g, c + 1, n)


# ----------------------------------------------------------------------------------------
# The plan of design("time-parallel")
# ----------------------------------------------------------------------------------------

def test_the_design_is_opt_in_and_refuses_unknown_names():
    assert pallas_tuning.current_design() == "measured"
    measured = scan_pallas.plan(64, 4096, 256, capability="9.0")
    assert measured.tiles.time_warps == 1
    with pallas_tuning.design("time-parallel"):
        assert pallas_tuning.current_design() == "time-parallel"
        assert scan_pallas.plan(64, 4096, 256, capability="9.0").tiles.time_warps == 8
        # An unknown GPU gets the safe default in either design.
        assert scan_pallas.plan(64, 4096, 256, capability="12.0").tiles.time_warps == 1
    assert scan_pallas.plan(64, 4096, 256, capability="9.0") == measured
    with pytest.raises(ValueError, match="design"):
        with pallas_tuning.design("fastest"):
            pass


@pytest.mark.parametrize("shape,chunks", [((64, 4096, 256), 1), ((16, 16384, 256), 1),
                                          ((8, 4096, 1024), 1), ((32, 1024, 512), 1),
                                          ((1, 65536, 64), 64), ((1, 65536, 1024), 4)])
def test_chunks_only_below_32k_lanes_counting_the_sub_blocks(shape, chunks):
    g, length, n = shape
    with pallas_tuning.design("time-parallel"):
        p = scan_pallas.plan(g, length, n, capability="9.0")
    assert p.n_chunks == chunks
    assert p.chunk % (p.tiles.unroll * p.tiles.time_warps) == 0 or p.n_chunks == 1
    lanes = g * n * p.tiles.time_warps * p.n_chunks
    assert lanes >= pallas_tuning.NEXT_TABLE["9.0"].target_lanes or \
        p.chunk == pallas_tuning.NEXT_TABLE["9.0"].min_chunk


@pytest.mark.parametrize("kind", ["ti-real", "ti-complex", "tv-real", "tv-complex"])
@pytest.mark.parametrize("adjoint", [False, True])
def test_the_unroll_is_the_smallest_that_keeps_the_most_rows_in_flight(kind, adjoint):
    with pallas_tuning.design("time-parallel"):
        p = scan_pallas.plan(64, 4096, 256, kind=kind, capability="9.0", adjoint=adjoint)
    t = p.tiles
    assert pallas_tuning.registers(t, kind, adjoint) <= pallas_tuning.register_budget(t)
    in_flight = pallas_tuning.rows_in_flight_per_sm(t, kind, adjoint)
    half = dataclasses.replace(t, unroll=t.unroll // 2)
    assert pallas_tuning.rows_in_flight_per_sm(half, kind, adjoint) < in_flight
    if t.unroll < 32:                                  # the table's U = 32 gave way
        doubled = dataclasses.replace(t, unroll=2 * t.unroll)
        assert (pallas_tuning.registers(doubled, kind, adjoint)
                > pallas_tuning.register_budget(doubled)
                or pallas_tuning.rows_in_flight_per_sm(doubled, kind, adjoint) <= in_flight)


def test_the_time_parallel_plans_per_pass():
    # From ptxas's counts (pallas_tuning.PTXAS_SM90): e.g. the complex adjoint at U = 16 needs
    # 188 registers (one 8-warp program per SM), at U = 8 126 (two): the same rows in flight,
    # and Triton compiles U = 8 five times faster, so U = 8.
    unrolls = {}
    for kind in ("ti-real", "ti-complex", "tv-real", "tv-complex"):
        for adjoint in (False, True):
            with pallas_tuning.design("time-parallel"):
                p = scan_pallas.plan(64, 4096, 256, kind=kind, capability="9.0",
                                     adjoint=adjoint)
            unrolls[kind, adjoint] = p.tiles.unroll
    assert unrolls == {("ti-real", False): 16, ("ti-real", True): 32,
                       ("ti-complex", False): 16, ("ti-complex", True): 8,
                       ("tv-real", False): 32, ("tv-real", True): 16,
                       ("tv-complex", False): 16, ("tv-complex", True): 8}


@pytest.mark.parametrize("key", list(pallas_tuning.PTXAS_SM90), ids=lambda k: "-".join(map(str, k)))
def test_the_register_estimate_bounds_what_ptxas_allocated(key):
    kind, pass_, w, u = key
    adjoint = pass_ == "adjoint"
    base, per_row = pallas_tuning.TIME_PARALLEL_FIT[(kind, adjoint)]
    assert base + u * per_row >= pallas_tuning.PTXAS_SM90[key]       # the fitted line
    assert pallas_tuning.registers(Tiles(32, u, time_warps=w), kind, adjoint) >= \
        pallas_tuning.PTXAS_SM90[key]


def test_measured_counts_are_used_only_where_every_pass_was_measured():
    # ti-complex at W = 8, U = 8: forward 80, reverse 102, so the forward tiles need 102
    assert pallas_tuning.registers(Tiles(32, 8, time_warps=8), "ti-complex", False) == 102
    # W = 16, U = 8: the forward was measured (103), the reverse was not: the line (108)
    base, per_row = pallas_tuning.TIME_PARALLEL_FIT[("ti-complex", False)]
    assert pallas_tuning.registers(Tiles(32, 8, time_warps=16), "ti-complex", False) == \
        base + 8 * per_row


def test_sixteen_warps_leave_128_registers_a_thread():
    assert pallas_tuning.register_budget(Tiles(32, 16, time_warps=16)) == 128
    assert pallas_tuning.register_budget(Tiles(32, 16, time_warps=8)) == 255
    assert pallas_tuning.register_budget(Tiles(32, 16)) == 255
    fitted = pallas_tuning.fit_registers(Tiles(32, 32, time_warps=16), "ti-complex", False)
    assert pallas_tuning.registers(fitted, "ti-complex", False) <= 128 < \
        pallas_tuning.registers(dataclasses.replace(fitted, unroll=2 * fitted.unroll),
                                "ti-complex", False)


@pytest.mark.parametrize("tiles,arg", [(Tiles(8, 4, time_warps=3), "time_warps"),
                                       (Tiles(8, 4, prefetch=True, time_warps=4), "prefetch")])
def test_bad_time_parallel_tiles_are_refused_by_name(tiles, arg):
    with pytest.raises(ValueError, match=arg):
        scan_pallas.plan(1, 64, 8, tiles=tiles)


# ----------------------------------------------------------------------------------------
# CUDA lowering of the design (no GPU needed)
# ----------------------------------------------------------------------------------------

@pytest.fixture
def as_on_an_h100(monkeypatch):
    monkeypatch.setattr(scan_pallas, "on_gpu", lambda: True)
    monkeypatch.setattr(scan_pallas, "device_capability", lambda: "9.0")


def _lowered(fn, *args):
    with scan_pallas.cuda_lowering_target():
        return jax.jit(fn).trace(*args).lower(lowering_platforms=("cuda",)).as_text()


def _forward_and_adjoint(a, b):
    a_p, b_p = scan_pallas._as_planes(a, b)
    x = scan_pallas.scan_planes(a_p, b_p)
    return scan_pallas.scan_planes(a_p, b_p, reverse=True, x=x)


@pytest.mark.slow
@pytest.mark.parametrize("kind,shape", [("complex64", s) for s in bench.GPU_EXTRA_SHAPES]
                         + [("float32 time-varying", s) for s in bench.TV_SHAPES],
                         ids=lambda v: "x".join(map(str, v)) if isinstance(v, tuple)
                         else v.replace(" ", "-"))
def test_the_time_parallel_kernel_lowers_to_triton_at_every_benchmark_shape(
        as_on_an_h100, monkeypatch, kind, shape):
    # Record the tiles of every pass traced: a trace cached from another design would lower
    # the other design's kernel and record nothing here.
    passes = []
    real_run_pass = scan_pallas.run_pass
    monkeypatch.setattr(scan_pallas, "run_pass", lambda spec, *a, tiles, **k: (
        passes.append(tiles) or real_run_pass(spec, *a, tiles=tiles, **k)))
    n = shape[-1]
    if kind == "complex64":
        a, b = (jax.ShapeDtypeStruct((n,), jnp.complex64),
                jax.ShapeDtypeStruct(shape, jnp.complex64))
    else:
        a = b = jax.ShapeDtypeStruct(shape, jnp.float32)
    with pallas_tuning.design("time-parallel"):
        p = scan_pallas.plan(*shape, kind=pallas_tuning.kind(kind != "complex64",
                                                            kind == "complex64"))
        text = _lowered(_forward_and_adjoint, a, b)
    assert p.tiles.time_warps == 8
    per_scan = 1 if p.n_chunks == 1 else 2
    assert text.count("__gpu$xla.gpu.triton") == 2 * per_scan
    assert len(passes) == 2 * per_scan and {t.time_warps for t in passes} == {8}, passes


def test_the_prediction_script_counts_only_the_programs_an_sm_holds():
    # scripts/kernel_predictions.py prints TUNING.md's predictions from this commit's plans.
    path = pathlib.Path(__file__).parents[1] / "scripts" / "kernel_predictions.py"
    spec = importlib.util.spec_from_file_location("kernel_predictions", path)
    predictions = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(predictions)
    wide = predictions.predict((64, 4096, 256), "ti-complex", "time-parallel")
    # 512 programs of 8 warps at 128 registers (ptxas): two per SM, 264 at once
    assert (wide["programs"], wide["registers"], wide["at_once"]) == (512, 128, 264)
    assert wide["fraction"] <= 0.9
    one_warp = predictions.predict((64, 4096, 256), "ti-complex", "measured")
    assert one_warp["at_once"] == one_warp["programs"] == 512
    assert 0.70 < one_warp["fraction"] < 0.74          # the probe's 72 %, from the same fit


@pytest.mark.slow
def test_the_ptxas_script_dumps_one_triton_module_per_pass(tmp_path):
    # scripts/ptxas_registers.py (TUNING.md "Registers from ptxas"): its first half, which
    # needs no Triton package, lowers each pass of the time-parallel kernel for an H100.
    script = pathlib.Path(__file__).parents[1] / "scripts" / "ptxas_registers.py"
    run = subprocess.run([sys.executable, str(script), "--out", str(tmp_path), "--dump-only",
                          "tv-real:2:4"], capture_output=True, text=True, timeout=300)
    assert run.returncode == 0, run.stderr[-2000:]
    rows = [json.loads(line) for line in run.stdout.splitlines()]
    assert [(r["pass"], r["num_warps"]) for r in rows] == \
        [("forward", 2), ("reverse", 2), ("adjoint", 2)]
    for r in rows:
        text = pathlib.Path(r["ttir"]).read_text()
        assert "tt.func" in text and "tt.load" in text and "tt.store" in text
    bad = subprocess.run([sys.executable, str(script), "--out", str(tmp_path), "--dump-only",
                          "tv-real:two:4"], capture_output=True, text=True, timeout=300)
    assert bad.returncode != 0 and "KIND:W:U" in bad.stderr
