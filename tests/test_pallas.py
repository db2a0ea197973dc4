"""The Pallas scan kernel (``method="pallas"``), run in interpret mode on the CPU.

Interpret mode compiles slowly, so every test jits one function that covers several cases
(both directions, both the single-pass and the two-pass plan) and the sizes are tiny."""
import re

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from jax import lax

import lrnn
from lrnn import bench, scan_pallas
from lrnn.scan import linear_scan

L_ODD = 13           # not a multiple of the chunk: exercises the padding
CHUNK = 4            # forces the two-pass scan (4 chunks of 4, the last one padded)


def _complex(rng, *shape):
    return (rng.standard_normal(shape) + 1j * rng.standard_normal(shape)).astype(np.complex64)


def _all_ways(a, b, **kw):
    """x for reverse in (False, True) × plan in (single pass, two passes)."""
    return [scan_pallas.pallas_scan(a, b, reverse, chunk=chunk, **kw)
            for reverse in (False, True) for chunk in (None, CHUNK)]


def _reference(a, b):
    return [linear_scan(a, b, reverse=reverse, method="sequential")
            for reverse in (False, True) for _ in (None, CHUNK)]


def _check(xs, refs, tol=2e-5):
    for x, ref in zip(xs, refs):
        assert x.shape == ref.shape and x.dtype == ref.dtype
        scale = float(jnp.max(jnp.abs(ref)))
        np.testing.assert_allclose(np.asarray(x), np.asarray(ref), atol=tol * scale, rtol=0)


def _inputs(rng, kind, lead=(2, 3), length=L_ODD, n=5):
    if kind == "complex time-invariant":
        a = (rng.uniform(0.6, 0.99, n) * np.exp(1j * rng.uniform(0, 2 * np.pi, n)))
        return jnp.asarray(a.astype(np.complex64)), jnp.asarray(_complex(rng, *lead, length, n))
    b = jnp.asarray(rng.standard_normal((*lead, length, n)).astype(np.float32))
    if kind == "real time-invariant":
        return jnp.asarray(rng.uniform(-0.99, 0.99, n).astype(np.float32)), b
    if kind == "real time-varying":
        return jnp.asarray(rng.uniform(0.5, 1.0, (*lead, length, n)).astype(np.float32)), b
    raise AssertionError(kind)


@pytest.mark.parametrize("kind", ["complex time-invariant", "real time-invariant",
                                  "real time-varying"])
def test_matches_sequential(rng, kind):
    a, b = _inputs(rng, kind)
    _check(jax.jit(_all_ways)(a, b), _reference(a, b))


def test_plans_cover_both_paths():
    # The test above forces chunk=CHUNK; check that the planner itself picks the two-pass scan
    # when batch x channels is small (B=1, L=65536, N=64) and a single pass when it is large.
    block_n, chunk, n_chunks = scan_pallas.plan(1, 65536, 64)
    assert n_chunks > 1 and chunk * n_chunks >= 65536 and chunk >= scan_pallas.MIN_CHUNK
    assert scan_pallas.plan(64, 4096, 4096)[2] == 1
    assert scan_pallas.plan(2, 100, 5, chunk=4) == (8, 4, 25)


def test_length_one_and_channel_padding(rng):
    a, b = _inputs(rng, "complex time-invariant", lead=(3,), length=1, n=3)
    x = jax.jit(lambda a, b: scan_pallas.pallas_scan(a, b, True))(a, b)
    np.testing.assert_array_equal(np.asarray(x), np.asarray(b))


def test_linear_scan_method_pallas_and_bf16(rng):
    # Through the public API, complex time-invariant a on two batch dims ...
    a, b = _inputs(rng, "complex time-invariant", lead=(2,), length=6)
    x = jax.jit(lambda a, b: linear_scan(a, b, method="pallas"))(a, b)
    _check([x], [linear_scan(a, b, method="sequential")])
    # ... and bfloat16 in and out, accumulating in float32: the error is bf16 rounding of the
    # inputs and of the output, not an error that grows with L.
    a, b = _inputs(rng, "real time-varying", lead=(2,), length=L_ODD)
    a16, b16 = a.astype(jnp.bfloat16), b.astype(jnp.bfloat16)
    x16 = jax.jit(lambda a, b: scan_pallas.pallas_scan(a, b, False, chunk=CHUNK))(a16, b16)
    assert x16.dtype == jnp.bfloat16
    exact = linear_scan(a16.astype(jnp.float32), b16.astype(jnp.float32), method="sequential")
    scale = float(jnp.max(jnp.abs(exact)))
    np.testing.assert_allclose(np.asarray(x16.astype(jnp.float32)), np.asarray(exact),
                               atol=2 ** -8 * scale, rtol=0)


def _autodiff_sequential(a, b):
    """A plain lax.scan differentiated by JAX autodiff (no custom VJP)."""
    a_t = a if a.ndim == 1 else jnp.moveaxis(a, -2, 0)

    def step(x, ab):
        a_k, b_k = ab
        x = a_k * x + b_k
        return x, x
    a_seq = jnp.broadcast_to(a_t, (b.shape[-2],) + a_t.shape) if a.ndim == 1 else a_t
    _, x = lax.scan(step, jnp.zeros_like(b[..., 0, :]), (a_seq, jnp.moveaxis(b, -2, 0)))
    return jnp.moveaxis(x, 0, -2)


@pytest.mark.parametrize("kind", ["complex time-invariant", "real time-varying"])
def test_gradients_match_autodiff_of_sequential(rng, kind):
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


def test_auto_never_picks_pallas_on_cpu_and_describe_says_so():
    for shape in [(1, 65536, 64), (16, 16384, 256), (8, 3, 4)]:
        assert lrnn.scan.choose_method(shape, backend="cpu") != "pallas"
    text = lrnn.scan.describe((8, 4096, 256))
    method = lrnn.scan.choose_method((8, 4096, 256))
    assert f"{method!r}" in text and "pallas" in text and "interpret" in text
    assert "pallas" in lrnn.scan.METHODS


def test_auto_rule_for_gpus(monkeypatch):
    class FakeGPU:
        def __init__(self, cc, kind):
            self.compute_capability, self.device_kind = cc, kind
    for cc, kind, expected in [("9.0", "NVIDIA H100", True), ("8.0", "NVIDIA A100", True),
                               ("7.5", "Tesla T4", False)]:
        monkeypatch.setattr(jax, "devices", lambda *a, dev=FakeGPU(cc, kind): [dev])
        ok, why = scan_pallas.auto_ok("gpu")
        assert ok is expected and cc in why
    assert scan_pallas.auto_ok("cpu")[0] is False


def test_rejects_float64(x64):
    with pytest.raises(ValueError, match="`b`.*float64"):
        scan_pallas.pallas_scan(jnp.ones(3), np.ones((4, 3), np.float64))


def _cuda_text(fn, *args):
    return jax.jit(fn).trace(*args).lower(lowering_platforms=("cuda",)).as_text()


def _triton_calls(text):
    return len(re.findall(r"__gpu\$xla\.gpu\.triton", text))


def _gpu_inputs(kind, shape):
    batch, length, n = shape
    if kind == "complex64":
        return (jax.ShapeDtypeStruct((n,), jnp.complex64),
                jax.ShapeDtypeStruct(shape, jnp.complex64))
    if kind == "float32 time-varying":
        return jax.ShapeDtypeStruct(shape, jnp.float32), jax.ShapeDtypeStruct(shape, jnp.float32)
    return jax.ShapeDtypeStruct((n,), jnp.float32), jax.ShapeDtypeStruct(shape, jnp.bfloat16)


@pytest.mark.parametrize("shape", bench.GPU_EXTRA_SHAPES, ids=lambda s: "x".join(map(str, s)))
@pytest.mark.parametrize("kind", ["complex64", "float32 time-varying", "bfloat16"])
def test_gpu_code_path_lowers_to_triton(kind, shape):
    # Lowering for CUDA needs no GPU: it checks that the very kernel tested above in interpret
    # mode is accepted by the Pallas Triton lowering (power-of-two blocks, supported ops) at
    # every shape the GPU benchmark times, in both directions, and that each plan launches the
    # kernels it should: one (single pass) or two (summary, then scan) per direction.
    a, b = _gpu_inputs(kind, shape)
    _, _, n_chunks = scan_pallas.plan(*shape)
    per_scan = 1 if n_chunks == 1 else 2
    text = _cuda_text(lambda a, b: [scan_pallas.pallas_scan(a, b, r, interpret=False)
                                    for r in (False, True)], a, b)
    assert _triton_calls(text) == 2 * per_scan


def test_gpu_gradient_lowers_to_triton(monkeypatch):
    # The backward pass of method="pallas" is the same kernel run in reverse: with the GPU
    # branch taken, forward + backward of one scan launch the kernels of two scans (two-pass
    # plan at this shape: summary and scan kernels, in each direction).
    monkeypatch.setattr(scan_pallas, "on_gpu", lambda: True)
    shape = (32, 1024, 512)
    assert scan_pallas.plan(*shape)[2] > 1
    a = jnp.full((shape[-1],), 0.9 * np.exp(0.3j), jnp.complex64)
    b = jax.ShapeDtypeStruct(shape, jnp.complex64)

    def loss(a, b):
        return jnp.sum(jnp.abs(linear_scan(a, b, method="pallas")) ** 2)

    text = _cuda_text(jax.grad(loss, argnums=(0, 1)), a, b)
    assert _triton_calls(text) == 4
