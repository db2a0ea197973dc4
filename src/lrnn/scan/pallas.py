"""``method="pallas"``: the GPU kernel for ``x_t = a_t x_{t-1} + b_t`` (kernel in
``pallas_triton``, tiles in ``pallas_tuning``, measurements in ``TUNING.md``).

The scan is memory-bound: one multiply-add per element against reading ``b_t`` and writing
``x_t``. Its floor is one read and one write, 16 bytes per complex64 element (12 per float32
element with a time-varying ``a``). The plan:

* ``b`` of shape ``(..., L, N)`` becomes planes ``(G, L, N)`` (``G`` = product of the batch
  dims; a complex array is split into real and imaginary planes: GPU registers are real);
* **wide** problems (batch × channels fill the GPU): one pass, one program per sequence and
  block of channels, walking time with an unrolled loop;
* **narrow** problems (few sequences and channels, long ``L``): time is cut into ``C`` chunks.
  Pass 1 (*reduce*) scans chunks ``0 … C-2`` from zero and keeps only their end states and
  gains; a tiny scan over those ``C - 1`` rows (``chunk_carries``) gives each chunk its true
  incoming state; pass 2 (*scan*) starts each chunk from its row of it and writes ``x``. That
  reads ``b`` ``(2C-1)/C`` times and writes ``x`` once: fewer bytes than writing ``x`` and
  re-reading it for a separate fix-up;
* **time in parallel inside a program** (``Tiles(time_warps=W)``, the design planned inside
  ``pallas_tuning.design("time-parallel")``): W warps scan W sub-blocks of U rows at once and
  combine their end states in registers before one fix-up and one store (``pallas_triton``).

Gradients (``backward``): the adjoint is the same kernel in the opposite direction on the
cotangent, reading the forward states one row ahead to form ``da`` in the same pass.

Off-GPU the very same kernel runs in Pallas interpret mode (``interpret=True``), which is how CI
tests every path.
"""
from __future__ import annotations

import concurrent.futures
import contextlib
import dataclasses
import functools
import math

import jax
import jax.numpy as jnp
from jax import lax

from .._validate import fail
from . import pallas_tuning
from .pallas_triton import KernelSpec, Tiles, _power_planes, quiet_triton_deprecation, run_pass

#: dtypes the kernel reads and writes (it accumulates in float32 whatever the I/O dtype).
IO_DTYPES = ("float32", "complex64", "bfloat16")
#: The kernel compiles with Triton only from this CUDA compute capability on (Ampere).
MIN_CAPABILITY = 8.0


def on_gpu() -> bool:
    return jax.default_backend() == "gpu"


def _next_pow2(n: int) -> int:
    return 1 << max(0, (int(n) - 1).bit_length())


def device_capability():
    """Compute capability of the first device (a string such as ``"9.0"``), or ``None``."""
    try:
        dev = jax.devices()[0]
    except RuntimeError:
        return None
    return getattr(dev, "compute_capability", None)


def capability_ok(cc) -> tuple[bool, str]:
    """Whether a GPU of CUDA compute capability ``cc`` can compile the kernel, and why not."""
    try:
        if float(cc) >= MIN_CAPABILITY:
            return True, f"compute capability {cc}"
    except (TypeError, ValueError):
        return False, f"no CUDA compute capability reported ({cc!r})"
    return False, (f"compute capability {cc} < {MIN_CAPABILITY} (e.g. Colab's T4), where "
                   "Pallas-Triton does not compile")


# ----------------------------------------------------------------------------------------
# Planning
# ----------------------------------------------------------------------------------------

@dataclasses.dataclass(frozen=True)
class Plan:
    tiles: Tiles
    chunk: int           # rows per chunk (== L for a single pass)
    n_chunks: int
    n_pad: int           # channels after padding to a multiple of tiles.block_n
    source: str          # where the tiles came from (the tuning table's entry)


def plan(g: int, length: int, n: int, *, kind: str = "ti-complex", capability=None,
         tiles: Tiles | None = None, chunk: int | None = None, adjoint: bool = False) -> Plan:
    """How to cut ``G`` sequences of ``L`` steps and ``N`` channels into programs.

    ``tiles`` and ``chunk`` override the table (``chunk >= L`` means one pass). The table's
    tiles are shrunk to the register budget (``pallas_tuning.fit_registers``); given tiles are
    kept as they are, so that a sweep can measure what spills."""
    if capability is None and on_gpu():
        capability = device_capability()
    table_tiles, gen = pallas_tuning.lookup(capability, kind, g * n)
    tiles = tiles or pallas_tuning.fit_registers(table_tiles, kind, adjoint)
    bn = min(tiles.block_n, _next_pow2(n))
    if bn & (bn - 1):
        fail("block_n", tiles.block_n, "a power of two (GPU vector width)")
    if bn != tiles.block_n:
        tiles = dataclasses.replace(tiles, block_n=bn, warps=max(1, min(tiles.warps, bn // 32)))
    w = tiles.time_warps
    if w < 1 or w & (w - 1):
        fail("tiles.time_warps", w, "a power of two (1: one warp walks time alone)")
    if w > 1 and tiles.prefetch:
        fail("tiles.prefetch", True, "False with time_warps > 1 (the W sub-blocks already put "
                                     "W·U rows in flight)")
    n_pad = -(-n // bn) * bn
    if chunk is None:
        wanted = -(-gen.target_lanes // (g * n * w))
        n_chunks = max(1, min(wanted, length // gen.min_chunk))
        chunk = -(-length // n_chunks)
        rows = tiles.unroll * w                      # whole (super-)blocks per chunk
        chunk = -(-chunk // rows) * rows
    chunk = max(1, min(int(chunk), length))
    return Plan(tiles, chunk, -(-length // chunk), n_pad, gen.name)


#: the kernel addresses a plane with 32-bit offsets (Pallas-Triton's index arithmetic)
MAX_PLANE_ELEMENTS = 2**31 - 1


def check_plane_size(shape) -> None:
    """A clear error, before any tracing, for a plane the kernel's int32 offsets cannot reach.
    ``shape`` is the padded plane ``(G, L, N_pad)``; only the shape is read."""
    size = math.prod(int(d) for d in shape)
    if size > MAX_PLANE_ELEMENTS:
        fail("b", f"planes of shape {tuple(int(d) for d in shape)} ({size} elements with N "
                  f"padded)", f"at most 2**31 - 1 = {MAX_PLANE_ELEMENTS} elements per plane for "
             "method='pallas' (the kernel's offsets are 32-bit); split the batch into calls, or "
             "use method='associative'")


# ----------------------------------------------------------------------------------------
# Planes
# ----------------------------------------------------------------------------------------

def to_planes(v):
    return (jnp.real(v), jnp.imag(v)) if jnp.iscomplexobj(v) else (v,)


def from_planes(planes):
    return lax.complex(*planes) if len(planes) == 2 else planes[0]


def _chunk_lengths(length, chunk, n_chunks, reverse):
    """Lengths of the chunks in the order the scan processes them."""
    lengths = [min(chunk, length - c * chunk) for c in range(n_chunks)]
    return lengths[::-1] if reverse else lengths


def chunk_carries(gains, ends):
    """The state entering each chunk, from the reduce pass's summaries: a tiny scan over the
    chunk ends instead of a serial fold in every program.

    ``gains`` (planes, ``(G, C-1, Np)`` or ``(1, C-1, Np)``) and ``ends`` (planes, ``(G, C-1,
    Np)``) are chunk ``r``'s product of ``a`` and end state from zero, in processing order.
    Returns planes ``(G, C, Np)``: zero for the first chunk, then ``h_{r+1} = gain_r h_r +
    end_r`` (a parallel scan over the ``C - 1`` rows; ``C`` is at most a few hundred)."""
    from .pallas_triton import _fma, _mul
    gains = tuple(jnp.broadcast_to(v, ends[0].shape) for v in gains)

    def compose(earlier, later):
        (g1, e1), (g2, e2) = earlier, later
        return _mul(g2, g1), _fma(g2, e1, e2)
    _, through = lax.associative_scan(compose, (gains, ends), axis=1)
    return tuple(jnp.concatenate([jnp.zeros_like(v[:, :1]), v], axis=1) for v in through)


def scan_planes(a, b, *, reverse=False, x=None, tiles=None, chunk=None, interpret=None,
                capability=None):
    """The scan on planes.

    Args:
      a: tuple of 1 (real) or 2 (re, im) arrays, each ``(N,)`` (time-invariant) or
        ``(G, L, N)`` (time-varying).
      b: tuple of 1 or 2 arrays ``(G, L, N)``, float32 or bfloat16 (the I/O dtype).
      reverse: scan from the end.
      x: ``None`` for the scan; for the adjoint, the planes of the forward states (and ``b`` is
        the cotangent, ``reverse`` the adjoint's direction).
      tiles, chunk: override the tuning table.

    Returns:
      the planes of ``x`` (``b``'s dtype); with ``x`` given, ``(planes of the adjoint,
      planes of da)`` where ``da`` is ``(N,)`` (time-invariant) or ``(G, L, N)``.
    """
    if interpret is None:
        interpret = not on_gpu()
    if not interpret:
        quiet_triton_deprecation()
    ka, k = len(a), len(b)
    varying = a[0].ndim == 3
    g, length, n = b[0].shape
    kind = pallas_tuning.kind(varying, max(ka, k) == 2)
    adjoint = x is not None
    p = plan(g, length, n, kind=kind, capability=capability, tiles=tiles, chunk=chunk,
             adjoint=adjoint)
    check_plane_size((g, length, p.n_pad))
    io = b[0].dtype

    def pad(v, fill=0.0):
        return v if p.n_pad == n else jnp.pad(v, [(0, 0)] * (v.ndim - 1) + [(0, p.n_pad - n)],
                                              constant_values=fill)

    b_p = tuple(pad(v) for v in b)
    x_p = tuple(pad(v) for v in x) if adjoint else ()
    if varying:
        a_p = tuple(pad(v, 1.0 if i == 0 else 0.0) for i, v in enumerate(a))
    else:
        a_p = tuple(pad(v.astype(jnp.float32))[None] for v in a)
    spec = dict(ka=ka, k=k, varying=varying, reverse=reverse, length=length, chunk=p.chunk,
                n_chunks=p.n_chunks, unroll=p.tiles.unroll, prefetch=p.tiles.prefetch,
                a_behind=adjoint and varying, time_warps=p.tiles.time_warps)
    run = functools.partial(run_pass, tiles=p.tiles, io_dtype=io, interpret=interpret)
    carries = ()
    if p.n_chunks > 1:
        summary = run(KernelSpec(mode="reduce", adjoint=False, **spec), a_p, b_p)
        ends = tuple(summary[:k])
        if varying:
            gains = tuple(summary[k:])
        else:                              # a ** (chunk length), per chunk in processing order
            lengths = _chunk_lengths(length, p.chunk, p.n_chunks, reverse)[:-1]
            powers = {m: _power_planes(tuple(v[0] for v in a_p), m) for m in set(lengths)}
            gains = tuple(jnp.stack([powers[m][i] for m in lengths])[None] for i in range(ka))
        carries = chunk_carries(gains, ends)
    outs = run(KernelSpec(mode="scan", adjoint=adjoint, **spec), a_p, b_p, x_p, carries)
    trim = lambda v: v if p.n_pad == n else v[..., :n]          # noqa: E731
    if not adjoint:
        return tuple(trim(v) for v in outs)
    lam, da = outs[:k], outs[k:]
    if varying:
        return tuple(trim(v) for v in lam), tuple(trim(v) for v in da)
    return tuple(trim(v) for v in lam), tuple(trim(v.sum(axis=(0, 1))) for v in da)


# ----------------------------------------------------------------------------------------
# Arrays in, arrays out
# ----------------------------------------------------------------------------------------

def _check_io(b):
    if b.dtype.name not in IO_DTYPES:
        fail("b", b, "float32, complex64 or bfloat16 for method='pallas' (the kernel "
                     "accumulates in float32); use another method for float64/complex128")


def _as_planes(a, b):
    """(a planes, b planes as (G, L, N)) with as many b planes as a has."""
    lead, (length, n) = b.shape[:-2], b.shape[-2:]
    g = math.prod(lead)
    if a.ndim != 1:
        a = jnp.broadcast_to(a, b.shape).reshape(g, length, n)
    a_planes = to_planes(a)
    b_planes = tuple(v.reshape(g, length, n) for v in to_planes(b))
    if len(a_planes) > len(b_planes):               # complex a, real b: b's imaginary part is 0
        b_planes = (b_planes[0], jnp.zeros_like(b_planes[0]))
    return a_planes, b_planes


def pallas_scan(a, b, reverse=False, *, tiles=None, chunk=None, interpret=None):
    """``x_t = a_t x_{t-1} + b_t`` along axis -2 with the Pallas kernel.

    Args:
      a: ``(N,)`` time-invariant or broadcastable to ``b.shape`` (time-varying); real or
        complex.
      b: ``(..., L, N)``: float32, complex64, or bfloat16 (bfloat16 in and out, float32
        accumulation).
      reverse: scan from the end.
      tiles, chunk: override the tuning table (``chunk < L`` forces the two-pass scan).
      interpret: default ``True`` off-GPU.

    Returns:
      ``x`` with ``b``'s shape and dtype (complex if ``a`` or ``b`` is).
    """
    a, b = jnp.asarray(a), jnp.asarray(b)
    _check_io(b)
    a_planes, b_planes = _as_planes(a, b)
    x = scan_planes(a_planes, b_planes, reverse=reverse, tiles=tiles, chunk=chunk,
                    interpret=interpret)
    return from_planes(x).reshape(b.shape[:-2] + x[0].shape[-2:])


def forward(a, b, reverse):
    """The forward pass behind ``method="pallas"`` (``a`` is ``(N,)`` or ``b.shape``)."""
    return forward_with_residuals(a, b, reverse)[0]


def forward_with_residuals(a, b, reverse):
    """``x`` and what the backward pass keeps: the planes of ``x`` (no re-split later)."""
    _check_io(b)
    a_planes, b_planes = _as_planes(a, b)
    x = scan_planes(a_planes, b_planes, reverse=reverse)
    return from_planes(x).reshape(b.shape), x


def backward(a, x_planes, g, reverse):
    """``(da, db)`` for cotangent ``g``: one adjoint pass of the kernel (``db`` is the adjoint
    state λ; ``da`` is formed in the same pass). JAX transposes linear maps without
    conjugation, so the adjoint runs with ``a`` itself."""
    a_planes, g_planes = _as_planes(a, g.astype(jnp.result_type(g.dtype, a.dtype)))
    if len(x_planes) < len(g_planes):
        x_planes = (x_planes[0], jnp.zeros_like(x_planes[0]))
    lam, da = scan_planes(a_planes, g_planes, reverse=not reverse, x=x_planes)
    lam = from_planes(lam).reshape(g.shape)
    da = from_planes(da)
    da = da.reshape(a.shape) if a.ndim == 1 else da.reshape(g.shape)
    return da.astype(a.dtype), lam


# ----------------------------------------------------------------------------------------
# The kernel as built (what a stored GPU run measured)
# ----------------------------------------------------------------------------------------

#: the kernel's sources, beside this file: what a stored run measured, with the plans below
KERNEL_SOURCES = ("pallas.py", "pallas_triton.py")
#: (kind, shape) whose plans (forward and adjoint) enter the fingerprint: the benchmark shapes
FINGERPRINT_SHAPES = (("ti-complex", (16, 16384, 256)), ("ti-complex", (64, 4096, 256)),
                      ("ti-complex", (32, 1024, 512)), ("ti-complex", (1, 65536, 64)),
                      ("tv-real", (8, 4096, 1024)), ("tv-real", (16, 16384, 256)),
                      ("tv-real", (1, 65536, 1024)), ("ti-real", (8, 4096, 1024)),
                      ("tv-complex", (8, 4096, 256)))


def kernel_fingerprint(compute_capability=None) -> str:
    """A short hash of the kernel as built for this compute capability: the sources of
    ``KERNEL_SOURCES`` (line endings normalised) and the plans of the default design (tiles,
    chunks) at ``FINGERPRINT_SHAPES``, forward and adjoint. Any change to the kernel, to the
    tiles or to how they are fitted changes it; the ``auto`` thresholds and the notes of
    ``pallas_tuning.TABLE`` do not. Needs no git history and no GPU."""
    import hashlib
    import pathlib
    h = hashlib.sha256()
    here = pathlib.Path(__file__).resolve().parent
    for name in KERNEL_SOURCES:
        h.update(name.encode() + b"\0")
        h.update((here / name).read_bytes().replace(b"\r\n", b"\n") + b"\0")
    cc = None if compute_capability is None else str(compute_capability)
    with pallas_tuning.design(pallas_tuning.DEFAULT_DESIGN):
        for kind_, (g, length, n) in FINGERPRINT_SHAPES:
            for adjoint in (False, True):
                p = plan(g, length, n, kind=kind_, capability=cc, adjoint=adjoint)
                h.update(repr((kind_, g, length, n, adjoint, dataclasses.astuple(p.tiles),
                               p.chunk, p.n_chunks, p.n_pad)).encode())
    return h.hexdigest()[:16]


# ----------------------------------------------------------------------------------------
# Can the kernel run here? (for method="auto" and describe)
# ----------------------------------------------------------------------------------------

LOWERING_TARGET = "NVIDIA H100 80GB HBM3"


def cuda_lowering_target(device_kind: str = LOWERING_TARGET):
    """A context in which ``.lower(lowering_platforms=("cuda",))`` needs no GPU.

    From JAX 0.11 the Pallas-Triton lowering reads the GPU's kind (for its compute capability)
    from the abstract mesh's device, else from the default device, and raises "No supported
    GPU devices found" off a GPU; earlier versions fall back to sm_90 by themselves. An
    abstract mesh of one GPU of this kind serves both. Trace and lower inside it: the trace
    records the abstract mesh, and the lowering reads it from there."""
    sharding = jax.sharding
    if not (hasattr(sharding, "AbstractDevice") and hasattr(sharding, "use_abstract_mesh")):
        return contextlib.nullcontext()
    try:
        device = sharding.AbstractDevice(device_kind=device_kind, num_cores=None,
                                         platform="gpu")
    except TypeError:                  # JAX < 0.8: no platform, and no GPU lookup to satisfy
        return contextlib.nullcontext()
    mesh = sharding.AbstractMesh((1,), ("lowering",), abstract_device=device)
    return sharding.use_abstract_mesh(mesh)


def _probe_lowering():
    """Lower a tiny scan (both passes, forward and adjoint) for CUDA through Pallas-Triton.
    Raises whatever the import or the lowering raises. Needs no GPU."""
    import jax.experimental.pallas.triton                   # noqa: F401  (the import itself)
    a = jnp.full((16,), 0.9 + 0.1j, jnp.complex64)
    b = jax.ShapeDtypeStruct((1, 64, 16), jnp.complex64)

    def fwd_adj(a, b):
        ap, bp = _as_planes(a, b)
        x = scan_planes(ap, bp, chunk=32, interpret=False)
        return scan_planes(ap, bp, reverse=True, x=x, chunk=32, interpret=False)
    # On a GPU the device itself says what to lower for; off one, an abstract H100.
    target = contextlib.nullcontext() if on_gpu() else cuda_lowering_target()
    with target:
        jax.jit(fwd_adj).trace(a, b).lower(lowering_platforms=("cuda",))


def _probe_run(interpret: bool = False):
    """Compile and run the tiny scan on the GPU, against a plain loop. Raises on mismatch.

    It runs in a thread of its own: JAX keeps its tracing state per thread, so the probe
    compiles and runs for real even when ``method="auto"`` asks while a function is being
    traced (``jax.ensure_compile_time_eval`` would instead evaluate the kernel's body
    primitive by primitive, which Pallas cannot do). ``interpret``: for tests off a GPU."""
    import numpy as np
    rng = np.random.default_rng(0)
    b = rng.standard_normal((2, 40, 16)).astype(np.float32)
    a = np.linspace(0.5, 0.99, 16, dtype=np.float32)
    ref = np.zeros_like(b)
    for t in range(b.shape[1]):
        ref[:, t] = (a * ref[:, t - 1] if t else 0) + b[:, t]

    def compile_and_run():
        for chunk in (None, 16):
            scan = jax.jit(lambda a, b: pallas_scan(a, b, chunk=chunk, interpret=interpret))
            x = np.asarray(scan(a, b))
            if not np.allclose(x, ref, atol=1e-4, rtol=1e-4):
                raise RuntimeError("the compiled kernel disagrees with a NumPy loop on a tiny "
                                   "problem")

    with concurrent.futures.ThreadPoolExecutor(1, thread_name_prefix="lrnn-probe") as pool:
        pool.submit(compile_and_run).result()


@functools.cache
def _kernel_status(run_on_device: bool) -> tuple[bool, str]:
    try:
        _probe_lowering()
    except Exception as err:                                   # noqa: BLE001
        return False, (f"the Pallas-Triton kernel does not lower with JAX {jax.__version__} "
                       f"({type(err).__name__}: {str(err).splitlines()[0][:120] if str(err) else ''})")
    if run_on_device:
        try:
            _probe_run()
        except Exception as err:                               # noqa: BLE001
            return False, (f"the Pallas-Triton kernel does not compile or run on this GPU "
                           f"({type(err).__name__}: {str(err).splitlines()[0][:120] if str(err) else ''})")
    return True, "it imports, lowers" + (" and runs here" if run_on_device else " for CUDA")


def kernel_status(backend: str | None = None) -> tuple[bool, str]:
    """Whether Pallas imports and the kernel lowers (and, on a real GPU, compiles and runs),
    cached per process. ``backend="gpu"`` off a GPU checks the import and the lowering only."""
    backend = backend or jax.default_backend()
    return _kernel_status(backend == "gpu" and on_gpu())


def auto_ok(backend: str | None = None, *, dtype=jnp.complex64, shape=None,
            time_varying: bool = False) -> tuple[bool, str]:
    """Whether ``method="auto"`` should run the kernel here, and why (one clause)."""
    backend = backend or jax.default_backend()
    if backend != "gpu":
        return False, (f"the Pallas kernel would only run in interpret mode on backend "
                       f"{backend!r} (slow, for testing)")
    dtype = jnp.dtype(dtype)
    if dtype.name not in IO_DTYPES:
        return False, f"the kernel reads float32, complex64 or bfloat16, not {dtype.name}"
    dev = jax.devices()[0]
    cc = getattr(dev, "compute_capability", None)
    ok, why = capability_ok(cc)
    if not ok:
        return False, f"the GPU {dev.device_kind!r}: {why}"
    if str(cc) not in pallas_tuning.TABLE:
        return False, (f"the kernel is not measured on compute capability {cc} "
                       f"({dev.device_kind!r}); the tuned XLA method is the safer bet")
    reason = None
    if shape is not None:           # a stored run first: no probe compile where none is stored
        wins, reason = pallas_tuning.pallas_wins(str(cc), dtype, tuple(shape), time_varying,
                                                 kernel=kernel_fingerprint(cc))
        if not wins:
            return False, reason
    ok, why = kernel_status(backend)
    if not ok:
        return False, why
    where = (f"the GPU {dev.device_kind!r} (compute capability {cc}) runs the tuned kernel "
             f"({why})")
    return True, where + (f"; {reason}" if reason else "")
