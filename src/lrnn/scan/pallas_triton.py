"""The Pallas kernel of ``method="pallas"`` and the two ``pallas_call`` passes built from it.

One kernel function serves every case; static flags select the variant:

* ``a``: time-invariant ``(1, block_n)`` planes, or time-varying ``(L, block_n)`` planes;
  real (1 plane) or complex (2 planes: real and imaginary, since GPU registers are real).
* direction: forward, or ``reverse`` (rows walked from the end of each chunk).
* ``mode="scan"`` writes ``x``; ``mode="reduce"`` only keeps the chunk's end state and, for a
  time-varying ``a``, its gain (the product of its ``a``).
* ``adjoint``: the backward pass. The recurrence is the same; the kernel also reads the forward
  states ``x`` one row ahead and forms ``da`` in registers (summed over the program's rows for
  a time-invariant ``a``, one row per step for a time-varying one), so that the gradient of
  ``a`` costs no extra pass over memory. For a time-varying ``a`` the adjoint uses the ``a``
  of the row processed just before (``a_{t+1}`` for a forward scan), read one row behind.

**Unrolled time loop.** A program owns ``block_n`` channels of one sequence (one float32 lane
per GPU thread) and walks its rows in blocks of ``unroll`` = U: the U row loads of a block are
issued before the U dependent multiply-adds, so U loads per thread are in flight at once
instead of one (Little's law: bytes in flight = bandwidth × latency). ``prefetch`` issues the
loads of the next block before the arithmetic of the current one (2U rows in flight). The loop
is unrolled by hand in Python: Pallas-Triton rejects ``fori_loop(unroll=...)``.

**Time in parallel inside a program** (``time_warps`` = W > 1; the design of TUNING.md "Next
design"). The program walks its rows in super-blocks of W·U rows. Sub-block ``w`` (rows
``w·U … w·U + U - 1`` of the super-block, in processing order) is row ``w`` of every ``(W,
block_n)`` tile, so each of the W warps scans its own U rows from zero, with W·U rows in
flight per program instead of U. Their end states ``E_w`` and gains ``G_w`` (the product of
the sub-block's ``a``) are then combined across the W rows in registers: an inclusive scan of
the pairs ``(G, E)`` under ``(G, E) ∘ (G', E') = (G'G, G'E + E')`` in log2(W) rounds
(Hillis-Steele), each shifting a tile by ``d`` rows as a masked sum over a ``(W, W, block_n)``
broadcast (no slicing of register tensors, which Triton cannot do). Each sub-block's true
incoming state ``h_w`` follows from the state entering the super-block, and every row is fixed
up once, ``x_{w,u} = local_{w,u} + (a_{w,1} … a_{w,u}) h_w``, and stored once: one read of
``b`` and one write of ``x``. Rows left over (fewer than W·U) take the one-warp loop below.

**Chunks.** Every ref that spans time is the whole ``(L, block_n)`` column of its sequence and
channel block; grid axis 2 picks a chunk of ``chunk`` rows inside it. With one chunk the scan
pass starts from zero. With several, the reduce pass (one program per chunk, the last in
processing order excepted: nobody needs its end state) writes end states and gains; a tiny
scan over those ``n_chunks - 1`` rows (``pallas.chunk_carries``, outside the kernel) gives every
chunk its incoming state, and each scan-pass program reads its one row of it.
"""
from __future__ import annotations

import dataclasses
import functools
import warnings

import jax
import jax.numpy as jnp
from jax import lax
from jax.experimental import pallas as pl

#: The text of the deprecation warning that JAX >= 0.11 raises when it lowers a Pallas call
#: to Triton. It is raised when the surrounding ``jit`` is lowered (after our functions have
#: returned), so it is filtered process-wide, by this exact text and category only, whenever
#: the kernel is built for a GPU (again each time: ``warnings.catch_warnings`` blocks, pytest
#: among them, restore the filters they found).
TRITON_DEPRECATION = (r"The Pallas Triton backend is deprecated and will be removed in"
                      r" a future JAX version")


def quiet_triton_deprecation() -> None:
    warnings.filterwarnings("ignore", message=TRITON_DEPRECATION, category=DeprecationWarning)


@dataclasses.dataclass(frozen=True)
class Tiles:
    """How one program is laid out: ``block_n`` channels (a power of two), ``unroll`` rows per
    block of the time loop, Triton's ``warps`` and ``stages``, and software ``prefetch``."""
    block_n: int = 32
    unroll: int = 16
    warps: int = 1
    stages: int = 1
    prefetch: bool = False
    #: W: sub-blocks of ``unroll`` rows scanned at once, one warp each, combined in registers
    #: (1: today's kernel, time sequential per thread). A power of two; no ``prefetch`` with it.
    time_warps: int = 1


# ----------------------------------------------------------------------------------------
# Complex arithmetic on planes: a number is a tuple (re,) or (re, im) of (1, block_n) arrays.
# ----------------------------------------------------------------------------------------

def _mul(a, x):
    if len(a) == 1:
        return tuple(a[0] * v for v in x)
    if len(x) == 1:
        return tuple(v * x[0] for v in a)
    (ar, ai), (xr, xi) = a, x
    return ar * xr - ai * xi, ar * xi + ai * xr


def _add(x, y):
    return tuple(u + v for u, v in zip(x, y))


def _fma(a, x, b):
    """``a * x + b`` on planes."""
    return _add(_mul(a, x), b)


# ----------------------------------------------------------------------------------------
# The kernel.
# ----------------------------------------------------------------------------------------

@dataclasses.dataclass(frozen=True)
class KernelSpec:
    """Everything static about one pass (hashable, so it can key caches)."""
    ka: int                  # planes of a: 1 real, 2 complex
    k: int                   # planes of b / x
    varying: bool            # a has shape (L, block_n) per program
    reverse: bool
    length: int              # L
    chunk: int               # rows per chunk
    n_chunks: int
    mode: str                # "scan" or "reduce"
    adjoint: bool            # read x one row ahead, write da
    a_behind: bool           # time-varying a read one row behind (the adjoint's a_{t+1})
    unroll: int
    prefetch: bool
    time_warps: int = 1      # W (see "Time in parallel inside a program")


def _chunk_rows(spec: KernelSpec, q):
    """(first row, step, number of rows) of the chunk processed ``q``-th."""
    c = (spec.n_chunks - 1 - q) if spec.reverse else q
    start = c * spec.chunk
    if spec.length % spec.chunk == 0:
        n = spec.chunk
    else:
        n = jnp.minimum(spec.chunk, spec.length - start)
    if spec.reverse:
        return start + n - 1, -1, n
    return start, 1, n


def _kernel(*refs, spec: KernelSpec):
    it = iter(refs)
    take = lambda n: tuple(next(it) for _ in range(n))          # noqa: E731
    ka, k = spec.ka, spec.k
    a_refs = take(ka)
    b_refs = take(k)
    x_refs = take(k) if spec.adjoint else ()
    carry_in = spec.mode == "scan" and spec.n_chunks > 1
    carry_refs = take(k) if carry_in else ()
    out_refs = take(k)                  # x (scan) or the chunk's end state (reduce)
    if spec.mode == "reduce":
        gain_out = take(ka) if spec.varying else ()
        da_refs = ()
    else:
        gain_out = ()
        da_refs = take(k) if spec.adjoint else ()

    f32 = jnp.float32
    length = spec.length
    q = pl.program_id(2)
    first, step, n = _chunk_rows(spec, q)
    shape = (1, b_refs[0].shape[-1])
    zero = tuple(jnp.zeros(shape, f32) for _ in range(k))

    def load(refs_, row):
        return tuple(r[pl.ds(row, 1), :].astype(f32) for r in refs_)

    def load_masked(refs_, row):
        """Row ``row`` of ``refs_``, or zeros when it lies outside ``[0, L)``."""
        inside = jnp.logical_and(row >= 0, row < length)
        clamped = jnp.minimum(jnp.maximum(row, 0), length - 1)
        return tuple(jnp.where(inside, v, 0.0) for v in load(refs_, clamped))

    a_fixed = None if spec.varying else tuple(r[...].astype(f32) for r in a_refs)

    def load_step(p):
        """Everything step ``p`` of this chunk reads: (a, b, x_ahead)."""
        row = first + step * p
        if not spec.varying:
            a = a_fixed
        elif spec.a_behind:                # a of the row processed one step earlier
            a = load_masked(a_refs, row - step)
        else:
            a = load(a_refs, row)
        x_ahead = load_masked(x_refs, row + step) if spec.adjoint else None
        return a, load(b_refs, row), x_ahead

    # The state entering this chunk: its row of the carries (a tiny scan over chunk ends).
    h0 = tuple(r[...].astype(f32) for r in carry_refs) if carry_in else zero
    one = (jnp.ones(shape, f32),) + (jnp.zeros(shape, f32),) * (ka - 1)
    da0 = zero if (spec.adjoint and not spec.varying) else ()
    gain0 = one if (spec.mode == "reduce" and spec.varying) else ()

    def advance(loaded, p0, state):
        """The dependent part: U (or fewer) steps on rows already in registers."""
        h, gain, da = state
        outs = []
        for u, (a, b, x_ahead) in enumerate(loaded):
            h = _fma(a, h, b)                            # x_t = a_t x_{t-1} + b_t
            if spec.mode == "reduce":
                if spec.varying:
                    gain = _mul(gain, a)
            else:
                outs.append(h)
                if spec.adjoint:
                    term = _mul(h, x_ahead)
                    if spec.varying:
                        for r, v in zip(da_refs, term):
                            r[pl.ds(first + step * (p0 + u), 1), :] = v.astype(r.dtype)
                    else:
                        da = _add(da, term)
        for u, h_u in enumerate(outs):
            row = first + step * (p0 + u)
            for r, v in zip(out_refs, h_u):
                r[pl.ds(row, 1), :] = v.astype(r.dtype)
        return h, gain, da

    U, W = spec.unroll, spec.time_warps
    state = (h0, gain0, da0)
    done = 0                                   # rows of this chunk already scanned
    if W > 1:
        superblock = _superblocks(spec, refs=(a_refs, b_refs, x_refs, out_refs, da_refs),
                                  first=first, step=step, a_fixed=a_fixed, width=shape[1])
        n_super = n // (W * U)
        state = lax.fori_loop(0, n_super, superblock, state)
        done = n_super * (W * U)

    n_blocks = (n - done) // U

    def block(i, state):
        p0 = done + i * U
        loaded = [load_step(p0 + u) for u in range(U)]
        return advance(loaded, p0, state)

    if spec.prefetch and U > 1 and W == 1:
        def block_prefetch(i, carry):
            state, loaded = carry
            p0 = i * U
            # The next block's rows, clamped into this chunk (re-read, unused, on the last).
            nxt = [load_step(jnp.minimum(p0 + U + u, n - 1)) for u in range(U)]
            return advance(loaded, p0, state), nxt

        first_block = [load_step(jnp.minimum(u, n - 1)) for u in range(U)]
        state, _ = lax.fori_loop(0, n_blocks, block_prefetch, (state, first_block))
    else:
        state = lax.fori_loop(0, n_blocks, block, state)
    # The tail: the last (n - done) % U steps, one at a time.
    tail_start = done + n_blocks * U
    if isinstance(n, int) and isinstance(tail_start, int):
        loaded = [load_step(tail_start + u) for u in range(n - tail_start)]
        state = advance(loaded, tail_start, state) if loaded else state
    else:
        state = lax.fori_loop(
            0, n - tail_start,
            lambda i, s: advance([load_step(tail_start + i)], tail_start + i, s), state)

    h, gain, da = state
    if spec.mode == "reduce":
        for r, v in zip(out_refs, h):
            r[...] = v
        for r, v in zip(gain_out, gain):
            r[...] = v
    elif spec.adjoint and not spec.varying:
        for r, v in zip(da_refs, da):
            r[...] = v


def _superblocks(spec: KernelSpec, *, refs, first, step, a_fixed, width):
    """The body of the loop over super-blocks of W·U rows (``time_warps`` = W > 1): see "Time
    in parallel inside a program" above. Returns ``body(i, (h, gain, da)) -> (h, gain, da)``
    with the same ``(1, block_n)`` state as the one-warp loop."""
    a_refs, b_refs, x_refs, out_refs, da_refs = refs
    f32 = jnp.float32
    U, W, length = spec.unroll, spec.time_warps, spec.length
    tile = (W, width)
    sub_w = lax.broadcasted_iota(jnp.int32, (W,), 0)        # sub-block of each tile row
    sub_col = lax.broadcasted_iota(jnp.int32, (W, 1), 0)    # the same, as a column (masks)
    ones = (jnp.ones(tile, f32),) + (jnp.zeros(tile, f32),) * (spec.ka - 1)
    zeros = tuple(jnp.zeros(tile, f32) for _ in range(spec.k))

    def load(refs_, rows):
        return tuple(r[rows, :].astype(f32) for r in refs_)

    def load_masked(refs_, rows, rows_col):
        inside = jnp.logical_and(rows_col >= 0, rows_col < length)
        clamped = jnp.minimum(jnp.maximum(rows, 0), length - 1)
        return tuple(jnp.where(inside, v, 0.0) for v in load(refs_, clamped))

    def shift(planes, d, fill=None):
        """Tile rows moved down by ``d``: row w gets row w - d; rows w < d get ``fill`` (or 0)."""
        picks = (lax.broadcasted_iota(jnp.int32, (W, W, 1), 1)
                 == lax.broadcasted_iota(jnp.int32, (W, W, 1), 0) - d)
        moved = tuple(jnp.sum(jnp.where(picks, v[None], 0.0), axis=1) for v in planes)
        if fill is None:
            return moved
        return tuple(jnp.where(sub_col >= d, m, f) for m, f in zip(moved, fill))

    def last_row(planes):
        return tuple(jnp.sum(jnp.where(sub_col == W - 1, v, 0.0), axis=0, keepdims=True)
                     for v in planes)

    def inclusive_scan(gains, ends):
        """Row w becomes the composition of sub-blocks 0 … w (Hillis-Steele, log2 W rounds)."""
        d = 1
        while d < W:
            earlier_ends, earlier_gains = shift(ends, d), shift(gains, d, ones)
            ends = _fma(gains, earlier_ends, ends)
            gains = _mul(gains, earlier_gains)
            d *= 2
        return gains, ends

    a_power_u = None if spec.varying else tuple(
        jnp.broadcast_to(v, tile) for v in _power_planes(a_fixed, U))

    # Reversed, rows are counted up from the super-block's lowest row: row u is then row 0 plus
    # a constant, where an index falling with u kept an address per row alive (ptxas, sm_90:
    # twice the registers, and spills in the adjoint from U = 16).
    up_w, up_col = (sub_w, sub_col) if step == 1 else ((W - 1) - sub_w, (W - 1) - sub_col)

    def rows_of(p0, u):
        """Rows of step u of every sub-block, as a vector (to index) and a column (to mask)."""
        if step == 1:
            lowest, offset = first + p0, u
        else:
            lowest, offset = first - p0 - (W * U - 1), U - 1 - u
        return lowest + (up_w * U + offset), lowest + (up_col * U + offset)

    def body(i, state):
        h, gain, da = state
        p0 = i * (W * U)
        steps = []
        for u in range(U):                     # every load of the super-block first
            rows, rows_col = rows_of(p0, u)
            if not spec.varying:
                a = a_fixed
            elif spec.a_behind:
                a = load_masked(a_refs, rows - step, rows_col - step)
            else:
                a = load(a_refs, rows)
            x_ahead = load_masked(x_refs, rows + step, rows_col + step) if spec.adjoint else None
            steps.append((rows, a, load(b_refs, rows), x_ahead))
        local, prefix, locals_, prefixes = zeros, ones, [], []
        for _, a, b, _ in steps:               # each sub-block from zero: x = a x + b
            local = _fma(a, local, b)
            locals_.append(local)
            if spec.varying:
                prefix = _mul(prefix, a)
                prefixes.append(prefix)
        gains, ends = inclusive_scan(prefix if spec.varying else a_power_u, local)
        through = _fma(gains, h, ends)         # the true state at the end of each sub-block
        entering = tuple(jnp.where(sub_col == 0, v0, v)
                         for v0, v in zip(h, shift(through, 1)))
        h_next = last_row(through)
        if spec.mode == "reduce":
            return h_next, (_mul(gain, last_row(gains)) if spec.varying else gain), da
        power = a_fixed
        da_rows = None
        for u, (rows, _, _, x_ahead) in enumerate(steps):
            x = _fma(prefixes[u] if spec.varying else power, entering, locals_[u])
            for r, v in zip(out_refs, x):
                r[rows, :] = v.astype(r.dtype)
            if spec.adjoint:
                term = _mul(x, x_ahead)
                if spec.varying:
                    for r, v in zip(da_refs, term):
                        r[rows, :] = v.astype(r.dtype)
                else:
                    da_rows = term if da_rows is None else _add(da_rows, term)
            if not spec.varying:
                power = _mul(power, a_fixed)
        if da_rows is not None:
            da = _add(da, tuple(jnp.sum(v, axis=0, keepdims=True) for v in da_rows))
        return h_next, gain, da

    return body


def _power_planes(a, p: int):
    """``a ** p`` on planes, by repeated squaring (exact integer power, no log/exp)."""
    result, base = None, a
    while p:
        if p & 1:
            result = base if result is None else _mul(result, base)
        base = _mul(base, base)
        p >>= 1
    return result


# ----------------------------------------------------------------------------------------
# The passes.
# ----------------------------------------------------------------------------------------

def _compiler_params(tiles: Tiles, interpret: bool):
    if interpret:
        return None
    from jax.experimental.pallas import triton as plgpu
    quiet_triton_deprecation()
    # Named TritonCompilerParams before JAX 0.6 (and deprecated under that name after).
    params_cls = getattr(plgpu, "CompilerParams", None) or plgpu.TritonCompilerParams
    return params_cls(num_warps=tiles.warps * tiles.time_warps, num_stages=tiles.stages)


def run_pass(spec: KernelSpec, a, b, x=(), carries=(), *, tiles: Tiles, io_dtype,
             interpret: bool):
    """One ``pallas_call``. Arrays are planes: ``a`` ``(1, Np)`` each (time-invariant) or
    ``(G, L, Np)`` (time-varying); ``b`` and ``x`` ``(G, L, Np)``; ``carries`` ``(G, C, Np)``,
    the state entering each chunk in processing order. ``Np`` is a multiple of
    ``tiles.block_n``. Returns the tuple of outputs listed in ``_kernel``."""
    g, length, n_pad = b[0].shape
    bn = tiles.block_n
    programs_in_time = spec.n_chunks - 1 if spec.mode == "reduce" else spec.n_chunks
    grid = (g, n_pad // bn, programs_in_time)
    column = pl.BlockSpec((None, length, bn), lambda i, j, q: (i, 0, j))
    row_of = pl.BlockSpec((None, 1, bn), lambda i, j, q: (i, q, j))
    a_spec = column if spec.varying else pl.BlockSpec((1, bn), lambda i, j, q: (0, j))
    in_specs = [a_spec] * len(a) + [column] * len(b) + [column] * len(x)
    in_specs += [row_of] * len(carries)
    summary = jax.ShapeDtypeStruct((g, programs_in_time, n_pad), jnp.float32)
    if spec.mode == "reduce":
        n_out = spec.k + (spec.ka if spec.varying else 0)
        out_shape, out_specs = [summary] * n_out, [row_of] * n_out
    else:
        full = jax.ShapeDtypeStruct((g, length, n_pad), io_dtype)
        out_shape, out_specs = [full] * spec.k, [column] * spec.k
        if spec.adjoint:
            out_shape += [full if spec.varying else summary] * spec.k
            out_specs += [column if spec.varying else row_of] * spec.k
    return pl.pallas_call(
        functools.partial(_kernel, spec=spec), out_shape=out_shape, grid=grid,
        in_specs=in_specs, out_specs=out_specs, interpret=interpret,
        compiler_params=_compiler_params(tiles, interpret),
        name=f"lrnn_scan_{spec.mode}{'_adjoint' if spec.adjoint else ''}",
    )(*a, *b, *x, *carries)
