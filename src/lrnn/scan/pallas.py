"""``method="pallas"``: a Pallas kernel for the linear scan ``x_t = a_t x_{t-1} + b_t``.

The scan is memory-bound: per element it does one multiply-add but must read ``b_t`` and write
``x_t``. For complex64 that is 8 + 8 = 16 bytes per element, so the best a kernel can do is to
touch memory once in each direction and keep everything else in registers. The kernel below
does exactly that:

* **Layout.** ``b`` of shape ``(..., L, N)`` is flattened to ``(G, L, N)`` (``G`` = product of
  the batch dims). A complex array is handed to the kernel as two float planes (real and
  imaginary), since GPU kernels work on real registers; complex multiplication is written out.
* **One program per (sequence, block of channels, chunk of time).** Every program walks its
  chunk of ``T`` time steps in a ``fori_loop``, one row of ``block_n`` channels per step,
  holding the running state ``x`` (float32) in registers. Channels are independent, so the
  blocks of channels and the sequences run in parallel.
* **Two passes when there is too little parallelism.** With ``G·N`` small (a single long
  sequence) the time axis is split into ``C`` chunks that run in parallel:

  1. *summary pass* — every chunk scans from zero and writes only its final state and, for
     time-varying ``a``, the product of its ``a`` (the chunk's gain);
  2. *combine* — a length-``C`` recurrence over those summaries gives the state entering each
     chunk (plain JAX, tiny: ``1/T`` of the data);
  3. *scan pass* — every chunk scans again, starting from its true incoming state, and writes
     ``x``.

  This "reduce, then scan" order reads ``b`` twice and writes ``x`` once (24 bytes per
  complex64 element) instead of writing and re-reading ``x`` for a separate fix-up (32 bytes).
  With enough parallelism (``C = 1``) only the scan pass runs, starting from zero: 16 bytes.

The same kernel functions run everywhere: on a GPU ``pallas_call`` compiles them with Triton,
elsewhere it runs them in interpret mode (``interpret=True``), which is how CI tests them.
Gradients come from the custom VJP in ``lrnn.scan``: the backward pass is this kernel run in
the opposite direction, plus ``da`` from one elementwise product.
"""
from __future__ import annotations

import math

import jax
import jax.numpy as jnp
from jax import lax
from jax.experimental import pallas as pl

from .._validate import fail

#: Aim for at least this many programs (sequences × channel blocks × time chunks). Each step of
#: a program waits for one row load, so the GPU hides memory latency only with many programs
#: in flight (an H100 holds ~2000 of 128 threads). Fewer than that from batch × channels alone
#: switches on the two-pass split over time. A first guess, to be tuned on a GPU.
TARGET_PROGRAMS = 1024
#: The shortest time chunk of the two-pass split: shorter chunks make the combine step and the
#: per-program overhead dominate.
MIN_CHUNK = 256
#: Channels per program: one float32 lane per GPU thread, one warp per 32 channels.
MAX_BLOCK_N = 128


def _next_pow2(n: int) -> int:
    return 1 << max(0, (int(n) - 1).bit_length())


def on_gpu() -> bool:
    return jax.default_backend() == "gpu"


# ----------------------------------------------------------------------------------------
# Complex arithmetic on (real, imaginary) planes. A real number is the 1-tuple (re,).
# ----------------------------------------------------------------------------------------

def _mul(a, x):
    if len(a) == 1:
        return tuple(a[0] * v for v in x)
    (ar, ai), (xr, xi) = a, x
    return ar * xr - ai * xi, ar * xi + ai * xr


def _add(x, y):
    return tuple(u + v for u, v in zip(x, y))


# ----------------------------------------------------------------------------------------
# The kernel. Refs arrive grouped in planes: 1 (real) or 2 (real, imaginary) refs each;
# ka planes for a, k planes for b, x and the states.
#   a:  (1, block_n)             time-invariant  |  (T, block_n) time-varying
#   b:  (T, block_n)
#   h0: (1, block_n)             state entering this chunk (scan pass only)
# Outputs: x (T, block_n) in the scan pass; the chunk's final state (1, block_n) and, for
# time-varying a, its gain (1, block_n) in the summary pass.
# ----------------------------------------------------------------------------------------

def _chunk_kernel(*refs, ka, k, varying, reverse, length, summary):
    it = iter(refs)
    take = lambda n: tuple(next(it) for _ in range(n))          # noqa: E731
    a_refs = take(ka)
    b_refs = take(k)
    h0_refs = () if summary else take(k)
    out_refs = take(k)                      # x (scan pass) or the chunk's end state (summary)
    gain_refs = take(ka) if (summary and varying) else ()

    def row(refs_, t):                      # one time step of one block of channels, as float32
        return tuple(r[pl.ds(t, 1), :].astype(jnp.float32) for r in refs_)

    a_fixed = None if varying else tuple(r[...].astype(jnp.float32) for r in a_refs)

    def step(i, carry):
        x, gain = carry
        t = length - 1 - i if reverse else i
        a = row(a_refs, t) if varying else a_fixed
        x = _add(_mul(a, x), row(b_refs, t))            # x_t = a_t x_{t-1} + b_t, in registers
        if summary:
            gain = _mul(gain, a) if varying else gain
        else:
            for r, v in zip(out_refs, x):
                r[pl.ds(t, 1), :] = v.astype(r.dtype)
        return x, gain

    shape = (1, b_refs[0].shape[-1])
    zero = tuple(jnp.zeros(shape, jnp.float32) for _ in range(k))
    x0 = zero if summary else tuple(r[...].astype(jnp.float32) for r in h0_refs)
    one = (jnp.ones(shape, jnp.float32),) + (jnp.zeros(shape, jnp.float32),) * (ka - 1)
    x, gain = lax.fori_loop(0, length, step, (x0, one))
    if summary:
        for r, v in zip(out_refs, x):
            r[...] = v
        for r, v in zip(gain_refs, gain):
            r[...] = v


def _call(kernel_kwargs, inputs, in_specs, out_shapes, out_specs, grid, interpret):
    """``pallas_call`` with everything but ``interpret`` identical on every backend."""
    compiler_params = None
    if not interpret:
        from jax.experimental.pallas import triton as plgpu
        # Named TritonCompilerParams before JAX 0.6.
        params_cls = getattr(plgpu, "CompilerParams", None) or plgpu.TritonCompilerParams
        compiler_params = params_cls(num_warps=max(1, kernel_kwargs["block_n"] // 32),
                                     num_stages=1)
    kw = {k: v for k, v in kernel_kwargs.items() if k != "block_n"}
    kernel = lambda *refs: _chunk_kernel(*refs, **kw)   # noqa: E731
    return pl.pallas_call(kernel, out_shape=out_shapes, grid=grid, in_specs=in_specs,
                          out_specs=out_specs, interpret=interpret,
                          compiler_params=compiler_params, name="lrnn_linear_scan")(*inputs)


# ----------------------------------------------------------------------------------------
# Planning: how to cut (G, L, N) into programs.
# ----------------------------------------------------------------------------------------

def plan(g: int, length: int, n: int, *, block_n=None, chunk=None):
    """Return ``(block_n, chunk, n_chunks)`` for ``G`` sequences of ``L`` steps and ``N``
    channels. ``n_chunks == 1`` means the single-pass scan (``chunk == L``)."""
    block_n = block_n or min(MAX_BLOCK_N, _next_pow2(n))
    if block_n & (block_n - 1):
        fail("block_n", block_n, "a power of two (GPU vector width)")
    if chunk is None:
        programs = g * -(-n // block_n)
        wanted = -(-TARGET_PROGRAMS // programs)
        n_chunks = max(1, min(wanted, length // MIN_CHUNK))
        if n_chunks == 1:
            return block_n, length, 1
        chunk = -(-length // n_chunks)
    if chunk >= length:
        return block_n, length, 1
    return block_n, chunk, -(-length // chunk)


# ----------------------------------------------------------------------------------------
# The scan on planes.
# ----------------------------------------------------------------------------------------

def scan_planes(a, b, *, reverse=False, block_n=None, chunk=None, interpret=None):
    """Scan given as planes: ``a`` is a tuple of 1 (real) or 2 (re, im) arrays, each ``(N,)``
    (time-invariant) or ``(G, L, N)`` (time-varying), ``b`` a tuple of 1 or 2 ``(G, L, N)``
    arrays (at least as many as ``a``). Returns the planes of ``x`` in ``b``'s dtype (float32 or bfloat16
    I/O; the recurrence always accumulates in float32)."""
    if interpret is None:
        interpret = not on_gpu()
    ka, k = len(a), len(b)
    varying = a[0].ndim == 3
    g, length, n = b[0].shape
    block_n, chunk, n_chunks = plan(g, length, n, block_n=block_n, chunk=chunk)
    n_pad = -(-n // block_n) * block_n
    l_pad = n_chunks * chunk
    io = b[0].dtype

    def pad_blc(v, fill):              # pad time with zeros (b) / ones (a) at the end, channels with 0
        return jnp.pad(v, ((0, 0), (0, l_pad - length), (0, n_pad - n)), constant_values=fill) \
            if (l_pad, n_pad) != (length, n) else v

    b_p = tuple(pad_blc(v, 0) for v in b)
    if varying:
        a_p = (pad_blc(a[0], 1),) + tuple(pad_blc(v, 0) for v in a[1:])
        a_spec = pl.BlockSpec((None, chunk, block_n), lambda i, j, c: (i, c, j))
    else:
        a_p = tuple(jnp.pad(v.astype(jnp.float32), (0, n_pad - n))[None] for v in a)
        a_spec = pl.BlockSpec((1, block_n), lambda i, j, c: (0, j))
    grid = (g, n_pad // block_n, n_chunks)
    b_spec = pl.BlockSpec((None, chunk, block_n), lambda i, j, c: (i, c, j))
    s_spec = pl.BlockSpec((None, 1, block_n), lambda i, j, c: (i, c, j))   # one row per chunk
    s_shape = jax.ShapeDtypeStruct((g, n_chunks, n_pad), jnp.float32)
    common = dict(ka=ka, k=k, varying=varying, reverse=reverse, length=chunk, block_n=block_n)
    a_specs = [a_spec] * len(a_p)

    if n_chunks == 1:
        h0 = tuple(jnp.zeros((g, 1, n_pad), jnp.float32) for _ in range(k))
    else:
        n_out = k + (ka if varying else 0)
        summary = _call(dict(common, summary=True), (*a_p, *b_p), a_specs + [b_spec] * k,
                        [s_shape] * n_out, [s_spec] * n_out, grid, interpret)
        ends = tuple(summary[:k])
        if varying:
            gains = tuple(summary[k:])
        else:                           # a^T per channel, the same for every chunk
            gains = tuple(jnp.broadcast_to(v, (g, n_chunks, n_pad)) for v in _power(a_p, chunk))
        h0 = _combine(gains, ends, reverse)

    x = _call(dict(common, summary=False), (*a_p, *b_p, *h0),
              a_specs + [b_spec] * k + [s_spec] * k,
              [jax.ShapeDtypeStruct((g, l_pad, n_pad), io)] * k, [b_spec] * k, grid, interpret)
    return tuple(v[:, :length, :n] for v in x)


def _power(a, p: int):
    """``a**p`` on planes by repeated squaring (exact integer power, no log/exp)."""
    result, base = None, tuple(v[0] for v in a)
    while p:
        if p & 1:
            result = base if result is None else _mul(result, base)
        base = _mul(base, base)
        p >>= 1
    return result


def _combine(gains, ends, reverse):
    """The state entering each chunk: ``h_c = gain_c h_{c-1} + end_c`` along the chunk axis
    (axis 1 of ``(G, C, N)`` planes), shifted by one chunk so chunk ``c`` gets ``h_{c-1}``."""
    def step(h, ge):
        gain, end = ge
        return _add(_mul(gain, h), end), h
    move = lambda planes: tuple(jnp.moveaxis(v, 1, 0) for v in planes)   # noqa: E731
    zero = tuple(jnp.zeros_like(v[:, 0]) for v in ends)
    _, h_in = lax.scan(step, zero, (move(gains), move(ends)), reverse=reverse)
    return tuple(jnp.moveaxis(v, 0, 1) for v in h_in)


# ----------------------------------------------------------------------------------------
# The backend behind method="pallas".
# ----------------------------------------------------------------------------------------

def pallas_scan(a, b, reverse=False, *, block_n=None, chunk=None, interpret=None):
    """``x_t = a_t x_{t-1} + b_t`` along axis -2 with the Pallas kernel.

    Args:
      a: ``(N,)`` time-invariant or broadcastable to ``b.shape`` (time-varying); real or
        complex.
      b: ``(..., L, N)``: float32, complex64, or bfloat16 (bfloat16 in and out, float32
        accumulation).
      reverse: scan from the end.
      block_n, chunk: override the plan (channels per program, time steps per chunk); a
        ``chunk`` shorter than ``L`` forces the two-pass scan.
      interpret: default ``True`` off-GPU.

    Returns:
      ``x`` with ``b``'s shape and dtype.
    """
    a, b = jnp.asarray(a), jnp.asarray(b)
    if b.dtype not in (jnp.float32, jnp.complex64, jnp.bfloat16):
        fail("b", b, "float32, complex64 or bfloat16 (the kernel accumulates in float32)")
    lead, (length, n) = b.shape[:-2], b.shape[-2:]
    g = math.prod(lead)
    varying = a.ndim != 1
    if varying:
        a = jnp.broadcast_to(a, b.shape).reshape(g, length, n)
    planes = lambda v: ((jnp.real(v), jnp.imag(v)) if jnp.iscomplexobj(v) else (v,))  # noqa: E731
    a_planes = planes(a)
    b_planes = tuple(v.reshape(g, length, n) for v in planes(b))
    if len(a_planes) > len(b_planes):                 # complex a, real b: b's imaginary part is 0
        b_planes = (b_planes[0], jnp.zeros_like(b_planes[0]))
    x = scan_planes(a_planes, b_planes, reverse=reverse, block_n=block_n, chunk=chunk,
                    interpret=interpret)
    x = lax.complex(*x) if len(x) == 2 else x[0]
    return x.reshape(b.shape)


def forward(a, b, reverse):
    """The forward pass behind ``method="pallas"`` in ``lrnn.scan``.

    ``a`` is ``(N,)`` or ``b.shape``."""
    return pallas_scan(a, b, reverse)


def auto_ok(backend: str | None = None) -> tuple[bool, str]:
    """Whether ``method="auto"`` should use the kernel here, and why (for ``describe``)."""
    backend = backend or jax.default_backend()
    if backend != "gpu":
        return False, (f"the Pallas kernel only runs in interpret mode on backend {backend!r} "
                       "(slow, for testing)")
    dev = jax.devices()[0]
    cc = getattr(dev, "compute_capability", None)
    try:
        major_minor = float(cc)
    except (TypeError, ValueError):
        return False, f"the GPU {dev.device_kind!r} reports no CUDA compute capability ({cc!r})"
    if major_minor < 8.0:
        return False, (f"the GPU {dev.device_kind!r} has compute capability {cc} < 8.0 (e.g. "
                       "Colab's T4), where the kernel is not the fastest choice")
    return True, (f"the GPU {dev.device_kind!r} has compute capability {cc} >= 8.0: the Pallas "
                  "kernel reads b and writes x once, at the memory-bandwidth floor")
