"""The Pallas scan kernel (``method="pallas"``), run in interpret mode on the CPU, its CUDA
lowering (no GPU needed), and what ``method="auto"`` picks on a GPU.

Interpret mode compiles slowly, so each test jits one function that covers several paths
(directions, one pass and chunked passes, the unrolled tail, prefetch) and sizes are tiny."""
import dataclasses
import re
import warnings

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from jax import lax

import lrnn
import lrnn.scan.pallas as scan_pallas
from lrnn.benchmarks import scan as bench
from lrnn.scan import linear_scan, pallas_triton, pallas_tuning, sequential
from lrnn.scan.pallas_triton import Tiles

L_ODD = 13           # not a multiple of the unroll (4): the tail runs; chunks of 5: the last is short
KINDS = ["complex time-invariant", "real time-invariant", "real time-varying",
         "complex time-varying"]
#: (reverse, tiles, chunk): one pass with a tail, chunked with a short last chunk, both
#: directions, with and without prefetch.
WAYS = [(False, Tiles(8, 4), None), (True, Tiles(8, 4, prefetch=True), 5),
        (False, Tiles(8, 3, prefetch=True), 5), (True, Tiles(8, 4), None)]


def _complex(rng, *shape):
    return (rng.standard_normal(shape) + 1j * rng.standard_normal(shape)).astype(np.complex64)


def _inputs(rng, kind, lead=(2, 3), length=L_ODD, n=5):
    complex_ = kind.startswith("complex")
    b = _complex(rng, *lead, length, n) if complex_ else \
        rng.standard_normal((*lead, length, n)).astype(np.float32)
    a_shape = (n,) if kind.endswith("time-invariant") else (*lead, length, n)
    a = rng.uniform(0.5, 0.99, a_shape)
    if complex_:
        a = a * np.exp(1j * rng.uniform(0, 2 * np.pi, a_shape))
    return jnp.asarray(a.astype(b.dtype)), jnp.asarray(b)


def _close(x, ref, tol=2e-5):
    assert x.shape == ref.shape and x.dtype == ref.dtype
    scale = float(jnp.max(jnp.abs(ref)))
    np.testing.assert_allclose(np.asarray(x), np.asarray(ref), atol=tol * scale, rtol=0)


@pytest.mark.slow
@pytest.mark.parametrize("kind", KINDS)
def test_forward_matches_sequential_on_every_path(rng, kind):
    a, b = _inputs(rng, kind)

    def all_ways(a, b):
        return [scan_pallas.pallas_scan(a, b, rev, tiles=t, chunk=c) for rev, t, c in WAYS]
    for (rev, _, _), x in zip(WAYS, jax.jit(all_ways)(a, b)):
        _close(x, linear_scan(a, b, reverse=rev, method="sequential"))


@pytest.mark.slow
@pytest.mark.parametrize("kind", ["complex time-invariant", "real time-varying"])
def test_adjoint_pass_matches_the_reference_adjoint(rng, kind):
    # The fused backward pass (the kernel in the other direction, reading x one row ahead to
    # form da) against lrnn.scan.sequential.adjoint, on the chunked plan and on one pass.
    a, b = _inputs(rng, kind, lead=(2,))
    g = jnp.asarray(rng.standard_normal(b.shape).astype(np.float32)).astype(b.dtype)
    ways = [(False, Tiles(8, 4), 5), (True, Tiles(8, 3, prefetch=True), None)]

    def adjoints(a, b, g):
        out = []
        for reverse, tiles, chunk in ways:
            a_p, b_p = scan_pallas._as_planes(a, b)
            _, g_p = scan_pallas._as_planes(a, g)
            x = scan_pallas.scan_planes(a_p, b_p, reverse=reverse, tiles=tiles, chunk=chunk)
            lam, da = scan_pallas.scan_planes(a_p, g_p, reverse=not reverse, x=x, tiles=tiles,
                                              chunk=chunk)
            out.append((scan_pallas.from_planes(lam).reshape(b.shape),
                        scan_pallas.from_planes(da).reshape(a.shape)))
        return out
    for (reverse, _, _), (lam, da) in zip(ways, jax.jit(adjoints)(a, b, g)):
        x = sequential.scan(a, b, reverse)
        da_ref, lam_ref = sequential.adjoint(a, x, g, reverse)
        _close(lam, lam_ref)
        _close(da, da_ref.astype(da.dtype), tol=5e-5)


def _autodiff_sequential(a, b):
    """A plain lax.scan differentiated by JAX autodiff (no custom VJP)."""
    a_seq = jnp.broadcast_to(a, (b.shape[-2],) + a.shape) if a.ndim == 1 else jnp.moveaxis(a, -2, 0)

    def step(x, ab):
        a_k, b_k = ab
        x = a_k * x + b_k
        return x, x
    _, x = lax.scan(step, jnp.zeros_like(b[..., 0, :]), (a_seq, jnp.moveaxis(b, -2, 0)))
    return jnp.moveaxis(x, 0, -2)


@pytest.mark.slow
@pytest.mark.parametrize("kind", ["complex time-invariant", "real time-varying",
                                  "complex time-varying"])
def test_gradients_through_linear_scan_match_autodiff(rng, kind):
    a, b = _inputs(rng, kind, lead=(2,), length=7, n=3)
    w = jnp.asarray(rng.standard_normal(b.shape).astype(np.float32))

    def loss(scan):
        return lambda a, b: jnp.sum(w * jnp.abs(scan(a, b)) ** 2)

    got = jax.jit(jax.grad(loss(lambda a, b: linear_scan(a, b, method="pallas")),
                           argnums=(0, 1)))(a, b)
    want = jax.grad(loss(_autodiff_sequential), argnums=(0, 1))(a, b)
    for g, r in zip(got, want):
        assert g.shape == r.shape            # da of a time-invariant a is summed over time: (N,)
        np.testing.assert_allclose(np.asarray(g), np.asarray(r),
                                   atol=1e-4 * float(jnp.max(jnp.abs(r))), rtol=0)


@pytest.mark.slow
@settings(max_examples=5, deadline=None, derandomize=True,
          suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture])
@given(batch=st.integers(1, 2), length=st.integers(1, 11), n=st.integers(1, 9),
       unroll=st.sampled_from([1, 2, 4]), chunk=st.one_of(st.none(), st.integers(1, 6)),
       reverse=st.booleans(), varying=st.booleans())
def test_shape_edge_cases(batch, length, n, unroll, chunk, reverse, varying):
    # L = 1, L < unroll, N not a multiple of the block (padding), a chunk of one row, ...
    rng = np.random.default_rng([batch, length, n, unroll, chunk or 0])
    b = jnp.asarray(rng.standard_normal((batch, length, n)).astype(np.float32))
    a_shape = b.shape if varying else (n,)
    a = jnp.asarray(rng.uniform(-0.99, 0.99, a_shape).astype(np.float32))
    x = scan_pallas.pallas_scan(a, b, reverse, tiles=Tiles(8, unroll), chunk=chunk)
    _close(x, sequential.scan(a, b, reverse))


def test_bfloat16_in_and_out_accumulates_in_float32(rng):
    # The error is bf16 rounding of the inputs and of the output, not an error growing with L.
    a, b = _inputs(rng, "real time-varying", lead=(2,), length=40)
    a16, b16 = a.astype(jnp.bfloat16), b.astype(jnp.bfloat16)
    x16 = jax.jit(lambda a, b: scan_pallas.pallas_scan(a, b, False, tiles=Tiles(8, 4),
                                                       chunk=16))(a16, b16)
    assert x16.dtype == jnp.bfloat16
    exact = sequential.scan(a16.astype(jnp.float32), b16.astype(jnp.float32), False)
    np.testing.assert_allclose(np.asarray(x16.astype(jnp.float32)), np.asarray(exact),
                               atol=2 ** -7 * float(jnp.max(jnp.abs(exact))), rtol=0)


def test_plan_chunks_narrow_problems_only():
    # Few sequences × channels (B=1, N=64): time is cut into chunks; many: one pass.
    p = scan_pallas.plan(1, 65536, 64, capability="9.0")
    assert p.n_chunks > 1 and p.chunk * p.n_chunks >= 65536
    assert p.chunk % p.tiles.unroll == 0 and p.chunk >= pallas_tuning.TABLE["9.0"].min_chunk
    assert scan_pallas.plan(64, 4096, 256, capability="9.0").n_chunks == 1
    assert scan_pallas.plan(2, 100, 5, tiles=Tiles(8, 4), chunk=30) == scan_pallas.Plan(
        Tiles(8, 4), 30, 4, 8, pallas_tuning.GENERIC.name)
    # An unknown GPU gets the safe default, not the H100's entry.
    assert scan_pallas.plan(64, 4096, 256, capability="12.0").source == pallas_tuning.GENERIC.name


def test_every_table_entry_is_a_valid_plan():
    for gen in [pallas_tuning.GENERIC, *pallas_tuning.TABLE.values()]:
        for (kind, bucket), t in gen.tiles.items():
            assert kind in ("ti-real", "ti-complex", "tv-real", "tv-complex")
            assert bucket in ("wide", "narrow")
            assert t.block_n & (t.block_n - 1) == 0 and t.unroll >= 1 and t.warps >= 1


# ----------------------------------------------------------------------------------------
# What "auto" picks, for backend="gpu" on every dtype, with fake devices (no GPU needed)
# ----------------------------------------------------------------------------------------

class FakeGPU:
    platform = "gpu"

    def __init__(self, cc, kind):
        self.compute_capability, self.device_kind = cc, kind


DTYPES = ["float64", "complex128", "bfloat16", "complex64", "float32"]
WIDE, NARROW = (8, 4096, 1024), (1, 65536, 64)


@pytest.fixture
def fake_gpu(monkeypatch):
    def use(cc, kind="NVIDIA H100 80GB HBM3"):
        monkeypatch.setattr(jax, "devices", lambda *a, dev=FakeGPU(cc, kind): [dev])
        monkeypatch.setattr(jax, "default_backend", lambda: "gpu")
        # No real GPU: the kernel's availability is its import and its CUDA lowering.
        monkeypatch.setattr(scan_pallas, "on_gpu", lambda: False)
    return use


@pytest.fixture
def measured(monkeypatch):
    """Pretend a stored run of this very kernel on an H100 showed it winning for real inputs
    with at least 8192 lanes (the rule ``auto`` applies once such a run exists)."""
    def use(fingerprint=None, min_lanes=8192):
        gen = dataclasses.replace(
            pallas_tuning.TABLE["9.0"], auto_real_min_lanes=min_lanes,
            evidence="a stored run showed it", measurement="bench_gpu_h100_test.json",
            measured_kernel=fingerprint or scan_pallas.kernel_fingerprint("9.0"))
        monkeypatch.setitem(pallas_tuning.TABLE, "9.0", gen)
    return use


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("cc,kind", [("9.0", "NVIDIA H100 80GB HBM3"), ("8.0", "NVIDIA A100"),
                                     ("7.5", "Tesla T4"), (None, "some GPU")])
@pytest.mark.parametrize("stored", [True, False])
def test_auto_never_picks_the_kernel_without_a_stored_run_showing_it_win(fake_gpu, monkeypatch,
                                                                         dtype, cc, kind, stored):
    """Today's table (a stored run on cc 9.0 in which the kernel lost forward+backward), and a
    table with no stored run at all: ``auto`` runs ``associative`` and says why."""
    fake_gpu(cc, kind)
    if not stored:
        monkeypatch.setitem(pallas_tuning.TABLE, "9.0", dataclasses.replace(
            pallas_tuning.TABLE["9.0"], measurement=None, measured_kernel=None,
            auto_real_min_lanes=None, evidence="not measured"))
    for shape, varying in [(WIDE, True), (WIDE, False), (NARROW, False)]:
        method = lrnn.scan.choose_method(shape, backend="gpu", dtype=dtype,
                                         time_invariant=not varying)
        assert method == "associative", (shape, dtype, cc)
        text = lrnn.scan.describe(shape, dtype=dtype, time_invariant=not varying)
        assert "\n" not in text and "'associative'" in text and dtype in text
        real32 = dtype in ("float32", "bfloat16")
        if not real32 and dtype != "complex64":
            assert f"not {dtype}" in text                   # the dtype is the reason
        elif cc in ("7.5", None):
            assert ("7.5" in text) if cc else ("compute capability" in text)
        elif cc == "9.0" and stored:                        # the stored run is the reason
            assert "bench_gpu_h200_2026-11-27.json) did not show the kernel winning" in text
        elif cc == "9.0":                                   # no stored run: that is the reason
            assert "no GPU run of the kernel as built is stored" in text


def test_every_auto_threshold_comes_from_a_stored_run_of_the_kernel_as_built():
    """A generation's ``auto`` rule holds only with a measurement: a file of book/data/ that
    recorded the fingerprint of the kernel here (taken at or after its last change)."""
    import json
    import pathlib
    data = pathlib.Path(__file__).resolve().parents[1] / "book" / "data"
    for cc, gen in pallas_tuning.TABLE.items():
        if gen.measurement is None:
            assert gen.auto_real_min_lanes is None and gen.measured_kernel is None, cc
            continue
        stored = json.loads((data / gen.measurement).read_text())
        assert stored["kernel"]["capability"] == cc
        assert stored["kernel"]["fingerprint"] == gen.measured_kernel == \
            scan_pallas.kernel_fingerprint(cc), (cc, "the kernel changed since its stored run")


def test_the_fingerprint_follows_the_kernel_and_its_plans_not_the_auto_notes(monkeypatch):
    before = scan_pallas.kernel_fingerprint("9.0")
    assert before == scan_pallas.kernel_fingerprint("9.0") != scan_pallas.kernel_fingerprint()
    notes = dataclasses.replace(pallas_tuning.TABLE["9.0"], evidence="other words",
                                auto_real_min_lanes=1, measurement="x.json")
    monkeypatch.setitem(pallas_tuning.TABLE, "9.0", notes)
    assert scan_pallas.kernel_fingerprint("9.0") == before
    tiles = dict(notes.tiles)
    tiles[("ti-complex", "wide")] = Tiles(32, 8)
    monkeypatch.setitem(pallas_tuning.TABLE, "9.0", dataclasses.replace(notes, tiles=tiles))
    assert scan_pallas.kernel_fingerprint("9.0") != before
    monkeypatch.undo()
    monkeypatch.setattr(scan_pallas, "KERNEL_SOURCES", ("pallas.py", "pallas_tuning.py"))
    assert scan_pallas.kernel_fingerprint("9.0") != before


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("cc,kind", [("9.0", "NVIDIA H100 80GB HBM3"), ("8.0", "NVIDIA A100"),
                                     ("7.5", "Tesla T4"), (None, "some GPU")])
def test_with_a_stored_run_auto_follows_its_rule(fake_gpu, measured, dtype, cc, kind):
    fake_gpu(cc, kind)
    measured()
    for shape, varying in [(WIDE, True), (WIDE, False), (NARROW, False)]:
        method = lrnn.scan.choose_method(shape, backend="gpu", dtype=dtype,
                                         time_invariant=not varying)
        real32 = dtype in ("float32", "bfloat16")
        # The kernel: only on the measured generation, only for dtypes it reads, only where
        # the stored run had it winning (real inputs with many sequences × channels).
        assert (method == "pallas") == (cc == "9.0" and real32 and shape == WIDE), (shape, dtype)
        text = lrnn.scan.describe(shape, dtype=dtype, time_invariant=not varying)
        assert "\n" not in text and f"'{method}'" in text and dtype in text
        if method == "pallas":
            assert "bench_gpu_h100_test.json" in text


def test_auto_drops_the_kernel_when_it_changed_since_its_stored_run(fake_gpu, measured):
    fake_gpu("9.0")
    measured(fingerprint="0" * 16)
    assert lrnn.scan.choose_method(WIDE, backend="gpu", dtype="float32") == "associative"
    assert "the kernel changed since its stored run" in lrnn.scan.describe(WIDE, dtype="float32")


def test_auto_falls_back_when_pallas_does_not_import_or_lower(fake_gpu, measured, monkeypatch):
    fake_gpu("9.0")
    measured()
    assert lrnn.scan.choose_method(WIDE, backend="gpu", dtype="float32") == "pallas"
    for err in (ImportError("No module named 'jax.experimental.pallas.triton'"),
                NotImplementedError("Unimplemented primitive in Pallas GPU lowering: scan")):
        def broken():
            raise err
        monkeypatch.setattr(scan_pallas, "_probe_lowering", broken)
        scan_pallas._kernel_status.cache_clear()
        try:
            assert lrnn.scan.choose_method(WIDE, backend="gpu", dtype="float32") == "associative"
            text = lrnn.scan.describe(WIDE, dtype="float32")
            assert "'associative'" in text and "does not lower" in text and \
                type(err).__name__ in text
            with pytest.raises(ValueError, match=r"`method`: got 'pallas'.*cannot run"):
                monkeypatch.setattr(scan_pallas, "on_gpu", lambda: True)
                linear_scan(jnp.ones(4), jnp.ones((5, 4)), method="pallas")
        finally:
            monkeypatch.undo()
            scan_pallas._kernel_status.cache_clear()
            fake_gpu("9.0")
            measured()
    assert scan_pallas.kernel_status("gpu")[0] is True     # and the real lowering is cached again


def test_auto_on_cpu_is_sequential_and_describe_says_why():
    for shape in [(1, 65536, 64), (16, 16384, 256), (8, 3, 4)]:
        assert lrnn.scan.choose_method(shape, backend="cpu") == "sequential"
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        text = lrnn.scan.describe((8, 4096, 256))
    assert "'sequential'" in text and "interpret mode" in text and "\n" not in text


def test_pallas_rejects_float64_clearly(x64):
    with pytest.raises(ValueError, match="`b`.*float64"):
        scan_pallas.pallas_scan(jnp.ones(3), np.ones((4, 3), np.float64))
    with pytest.raises(ValueError, match="`method`: got 'pallas' for float64"):
        linear_scan(jnp.ones(3), np.ones((4, 3), np.float64), method="pallas")


def test_only_the_triton_deprecation_warning_is_silenced():
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("default")
        pallas_triton.quiet_triton_deprecation()
        warnings.warn("The Pallas Triton backend is deprecated and will be removed in a future "
                      "JAX version.", DeprecationWarning)
        warnings.warn("Some other API is deprecated.", DeprecationWarning)
        warnings.warn("The Pallas Triton backend is deprecated and will be removed in a future "
                      "JAX version.", UserWarning)
    assert [str(w.message) for w in caught] == [
        "Some other API is deprecated.",
        "The Pallas Triton backend is deprecated and will be removed in a future JAX version."]


# ----------------------------------------------------------------------------------------
# Lowering for CUDA (no GPU needed): the kernel the tests above run is accepted by the Pallas
# -> Triton lowering, with the H100's plan, at every shape the GPU benchmark times.
# ----------------------------------------------------------------------------------------

@pytest.fixture
def as_on_an_h100(monkeypatch):
    monkeypatch.setattr(scan_pallas, "on_gpu", lambda: True)
    monkeypatch.setattr(scan_pallas, "device_capability", lambda: "9.0")
    monkeypatch.setattr(scan_pallas, "kernel_status", lambda *a: (True, "lowers"))


def _triton_calls(fn, *args):
    with scan_pallas.cuda_lowering_target():
        text = jax.jit(fn).trace(*args).lower(lowering_platforms=("cuda",)).as_text()
    return len(re.findall(r"__gpu\$xla\.gpu\.triton", text))


def _forward_and_adjoint(a, b):
    a_p, b_p = scan_pallas._as_planes(a, b)
    x = scan_pallas.scan_planes(a_p, b_p)
    return scan_pallas.scan_planes(a_p, b_p, reverse=True, x=x)


CASES = ([("complex64", s) for s in bench.GPU_EXTRA_SHAPES]
         + [("float32 time-varying", s) for s in bench.TV_SHAPES]
         + [("bfloat16", (16, 16384, 256))])


@pytest.mark.parametrize("kind,shape", CASES, ids=lambda v: "x".join(map(str, v))
                         if isinstance(v, tuple) else v.replace(" ", "-"))
def test_gpu_code_lowers_to_triton_at_every_benchmark_shape(as_on_an_h100, kind, shape):
    n = shape[-1]
    if kind == "complex64":
        a = jax.ShapeDtypeStruct((n,), jnp.complex64)
        b = jax.ShapeDtypeStruct(shape, jnp.complex64)
    elif kind == "bfloat16":
        a, b = jax.ShapeDtypeStruct((n,), jnp.float32), jax.ShapeDtypeStruct(shape, jnp.bfloat16)
    else:
        a = b = jax.ShapeDtypeStruct(shape, jnp.float32)
    p = scan_pallas.plan(*shape, kind=pallas_tuning.kind(kind.startswith("float32 time"),
                                                        kind == "complex64"))
    per_scan = 1 if p.n_chunks == 1 else 2          # scan pass, after a reduce pass if chunked
    assert _triton_calls(_forward_and_adjoint, a, b) == 2 * per_scan


def test_gradient_of_linear_scan_lowers_to_one_forward_and_one_adjoint(as_on_an_h100):
    shape = (8, 4096, 256)
    a = jnp.full((shape[-1],), 0.9 * np.exp(0.3j), jnp.complex64)
    b = jax.ShapeDtypeStruct(shape, jnp.complex64)

    def loss(a, b):
        return jnp.sum(jnp.abs(linear_scan(a, b, method="pallas")) ** 2)
    chunked = scan_pallas.plan(*shape).n_chunks > 1
    assert _triton_calls(jax.grad(loss, argnums=(0, 1)), a, b) == (4 if chunked else 2)


@pytest.mark.parametrize("cc,ok", [("9.0", True), ("8.0", True), ("12.0", True), ("7.5", False),
                                   (None, False), ("unknown", False)])
def test_the_capability_check(cc, ok):
    got, why = scan_pallas.capability_ok(cc)
    assert got is ok and str(cc) in why


def test_the_cuda_lowering_target_is_an_abstract_h100():
    """JAX >= 0.11 reads the GPU for the Triton lowering from the abstract mesh's device (else
    the default device, a CPU here, which it refuses). Check what that lookup sees inside the
    target, through JAX's own lookup where this version has it."""
    if not hasattr(jax.sharding, "use_abstract_mesh"):
        pytest.skip(f"JAX {jax.__version__} has no abstract mesh; its Triton lowering needs none")
    if "platform" not in {f.name for f in dataclasses.fields(jax.sharding.AbstractDevice)}:
        pytest.skip(f"JAX {jax.__version__}: abstract devices have no platform and its Triton "
                    "lowering falls back to sm_90 without one")
    with scan_pallas.cuda_lowering_target():
        device = jax.sharding.get_abstract_mesh().abstract_device
        assert device.device_kind == scan_pallas.LOWERING_TARGET and device.platform == "gpu"
        try:
            from jax._src.pallas.triton import gpu_info
        except ImportError:                          # JAX < 0.11: falls back to sm_90 itself
            return
        assert gpu_info.is_gpu_device() and gpu_info.get_gpu_info().compute_capability == 90
    assert jax.sharding.get_abstract_mesh().abstract_device is None


# ----------------------------------------------------------------------------------------
# Guards: 32-bit offsets, and the register budget per tile
# ----------------------------------------------------------------------------------------

@pytest.mark.parametrize("shape,ok", [((1, 2**21, 1023), True), ((1, 2**21, 1024), False),
                                      ((2**31 - 1, 1, 1), True), ((3, 1 << 20, 1 << 10), False)])
def test_planes_of_2_31_elements_are_refused_from_the_shape_alone(shape, ok):
    if ok:
        scan_pallas.check_plane_size(shape)
    else:
        with pytest.raises(ValueError, match=r"`b`.*2\*\*31 - 1.*32-bit"):
            scan_pallas.check_plane_size(shape)


def test_the_entry_point_refuses_a_huge_plane_without_allocating_it():
    b = jax.ShapeDtypeStruct((2, 2**20, 1000), jnp.float32)   # N = 1000 pads to 1024: 2**31
    with pytest.raises(ValueError, match=r"\(2, 1048576, 1024\)"):
        jax.eval_shape(lambda b: scan_pallas.pallas_scan(jnp.ones(1000), b), b)


def test_register_estimate_matches_the_measured_adjoint_and_predicts_spills():
    heavy = "tv-complex"
    at16 = pallas_tuning.registers(Tiles(32, 16, prefetch=True), heavy, adjoint=True)
    assert 226 <= at16 <= 235                      # ptxas, sm_90 (BASE_REGISTERS)
    assert pallas_tuning.registers(Tiles(32, 32, prefetch=True), heavy, True) > 255
    # fewer live values need fewer registers; a warp per 32 channels, one channel per thread
    assert (pallas_tuning.registers(Tiles(32, 16), "ti-real", False)
            < pallas_tuning.registers(Tiles(32, 16), heavy, False) < at16)
    assert pallas_tuning.registers(Tiles(64, 16), "ti-real", False) > \
        pallas_tuning.registers(Tiles(64, 16, warps=2), "ti-real", False)


@pytest.mark.parametrize("kind", pallas_tuning.KEYS)
def test_table_tiles_are_shrunk_to_the_register_budget(kind):
    k = kind[0]
    for adjoint in (False, True):
        wanted = Tiles(32, 64, prefetch=True)
        fitted = pallas_tuning.fit_registers(wanted, k, adjoint)
        assert pallas_tuning.registers(fitted, k, adjoint) <= pallas_tuning.MAX_REGISTERS
        if fitted != wanted:                        # shrunk no further than needed
            bigger = dataclasses.replace(fitted, unroll=fitted.unroll * 2)
            assert pallas_tuning.registers(bigger, k, adjoint) > pallas_tuning.MAX_REGISTERS
    assert pallas_tuning.fit_registers(Tiles(32, 32, prefetch=True), "tv-complex", True) == \
        Tiles(32, 16, prefetch=True)
    for cc in ("9.0", None):
        for lanes in (1024, 1 << 20):
            for adjoint in (False, True):
                p = scan_pallas.plan(lanes // 256, 4096, 256, kind=k, capability=cc,
                                     adjoint=adjoint)
                assert pallas_tuning.registers(p.tiles, k, adjoint) <= 255


@pytest.mark.slow
@pytest.mark.parametrize("design", ["measured", "time-parallel"])
def test_lowering_survives_a_0_11_style_gpu_lookup(monkeypatch, design):
    """Without JAX >= 0.11 here, its lookup is emulated on the older lowering: the GPU comes
    from the abstract mesh's device or the lowering fails hard (0.11 raises instead of falling
    back to sm_90). The kernel must lower inside ``cuda_lowering_target`` and only there, in
    both designs (the time-parallel one: W = 8 sub-blocks per program)."""
    try:
        from jax._src.pallas.triton import gpu_info            # noqa: F401
        pytest.skip(f"JAX {jax.__version__} has the real lookup (tested by the test above)")
    except ImportError:
        pass
    try:
        from jax._src.pallas.triton import pallas_call_registration as reg
    except ImportError:
        pytest.skip(f"JAX {jax.__version__}: no Pallas-Triton registration module to emulate on")
    if not hasattr(jax.sharding, "use_abstract_mesh") or "platform" not in {
            f.name for f in dataclasses.fields(jax.sharding.AbstractDevice)}:
        pytest.skip(f"JAX {jax.__version__} has no abstract GPU device to emulate 0.11 with")

    class Seen:
        compute_capability = "9.0"

    def like_0_11(*args, **kwargs):
        device = jax.sharding.get_abstract_mesh().abstract_device
        if device is not None and device.platform == "gpu" and "H100" in device.device_kind:
            return [Seen()]
        raise AssertionError("No supported GPU devices found, please specify an abstract GPU "
                             "device")
    monkeypatch.setattr(reg.jax, "local_devices", like_0_11)
    a = jnp.full((16,), 0.9 + 0.1j, jnp.complex64)
    b = jax.ShapeDtypeStruct((1, 64, 16), jnp.complex64)

    def forward_and_adjoint(a, b):                   # the GPU code, not interpret mode
        a_p, b_p = scan_pallas._as_planes(a, b)
        x = scan_pallas.scan_planes(a_p, b_p, interpret=False, capability="9.0")
        return scan_pallas.scan_planes(a_p, b_p, reverse=True, x=x, interpret=False,
                                       capability="9.0")

    def lower():
        with pallas_tuning.design(design):
            return jax.jit(forward_and_adjoint).trace(a, b).lower(lowering_platforms=("cuda",))
    with pallas_tuning.design(design):
        assert scan_pallas.plan(1, 64, 16, capability="9.0").tiles.time_warps == (
            8 if design == "time-parallel" else 1)
    with pytest.raises(AssertionError, match="No supported GPU devices found"):
        lower()
    with scan_pallas.cuda_lowering_target():     # the trace records the abstract mesh
        assert "__gpu$xla.gpu.triton" in lower().as_text()
    scan_pallas._probe_lowering()                  # off a GPU it lowers inside the target


def test_the_run_probe_really_runs_the_kernel_when_asked_during_a_trace():
    """``method="auto"`` asks for the kernel's status while a function is being traced. The
    probe must then still compile and run the kernel (here in interpret mode), not evaluate its
    body primitive by primitive (``Evaluation rule for 'program_id' not implemented``)."""
    seen = []

    def traced(z):
        scan_pallas._probe_run(interpret=True)
        seen.append("probed")
        return z + 1
    assert float(jax.jit(traced)(1.0)) == 2.0
    with jax.ensure_compile_time_eval():
        scan_pallas._probe_run(interpret=True)
    assert seen == ["probed"]


def test_the_run_probe_fails_on_a_wrong_kernel(monkeypatch):
    monkeypatch.setattr(scan_pallas, "pallas_scan", lambda a, b, **kw: b * 0.5)
    with pytest.raises(RuntimeError, match="disagrees with a NumPy loop"):
        scan_pallas._probe_run(interpret=True)
