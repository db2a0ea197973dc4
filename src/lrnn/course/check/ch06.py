"""Checks for Exercises 6 · Scans on the GPU (solutions/06_gpu_scans.ipynb): the bytes a scan
and its backward pass must move, the combines and levels of the odd–even scan, the backward
scan, the most passes over memory that a measured scan can have made, and the fewest chunks
that fill an H100."""
from __future__ import annotations

import math

import numpy as np

from ._core import (alternative, call, crandn, exercise, expect, expect_close, expect_prediction,
                    randn, reference_scan, when)


def reference_bytes(shape, dtype="complex64", time_varying=False, passes=1, backward=False):
    """Bytes that a scan over an array of ``shape`` must move at least, counted array by array:
    forward, every pass reads b (and a, when it varies in time) and x is written once; backward
    (Exercise 6.3's VJP), every pass reads x̄ (and a), the last one also reads x and writes b̄
    (and ā, an array when a varies in time). A time-invariant a (and its ā) is ignored."""
    per_pass = ["a"] * bool(time_varying) + (["x_bar"] if backward else ["b"])
    once = (["x", "b_bar"] + ["a_bar"] * bool(time_varying)) if backward else ["x"]
    arrays = {}
    for _ in range(passes):
        for name in per_pass:
            arrays[name] = arrays.get(name, 0) + 1
    for name in once:
        arrays[name] = arrays.get(name, 0) + 1
    return np.dtype(dtype).itemsize * math.prod(shape) * sum(arrays.values())


@exercise("6.1", points=2, title="the bytes of the backward scan",
          reference="chapter 6, §6.3 (the floor: bytes / copy bandwidth) and §6.7 (the backward "
                    "pass); chapter 1, eq. (1.1)",
          stronger_hint="write the backward recurrence first: b̄_t = x̄_t + a_(t+1) b̄_(t+1), and "
                        "ā_t = b̄_t x_(t−1). What a pass needs is what that recurrence reads: x̄, "
                        "and a when it varies in time. x is needed only for ā, so it is read once, "
                        "in the last pass, which also writes b̄ and, for a time-varying a, one ā "
                        "per step (an array as large as b).")
def _(fn, rng):
    cases = [((16, 16384, 256), "complex64", False, 1, False),      # (shape, dtype, a(t), passes,
             ((4, 10, 2), "float16", False, 1, True),               #  backward)
             ((16, 16384, 256), "complex64", False, 1, True),
             ((8, 4096, 256), "float32", True, 1, True),
             ((1, 65536, 64), "complex64", False, 2, True),
             ((2, 3, 100, 8), "complex128", True, 2, True),
             ((8, 4096, 256), "float32", True, 1, False),
             ((1, 65536, 64), "complex64", False, 2, False)]
    shape = tuple(int(v) for v in rng.integers(1, 33, 3))
    cases.append((shape, str(rng.choice(["float32", "complex64"])), bool(rng.integers(2)),
                  int(rng.integers(1, 5)), True))
    for shape, dtype, tv, passes, backward in cases:
        inputs = {"shape": shape, "dtype": dtype, "time_varying": tv, "passes": passes,
                  "backward": backward}
        got = call(fn, inputs)
        want = reference_bytes(shape, dtype, tv, passes, backward)
        array = np.dtype(dtype).itemsize * math.prod(shape)
        reads = passes * (1 + tv)
        hints = [alternative(8 * want, "that is bits: a byte is 8 bits.")]
        if backward:
            hints.append(alternative(array * (reads + 1), "that is the forward count: the "
                                     "backward pass also needs the states x, for ā."))
            if passes > 1:
                hints.append(alternative(array * (passes * (2 + tv) + 1 + tv), "only the "
                                         "backward recurrence runs in every pass, and it does "
                                         "not read x: x is read once, for ā."))
            hints.append(alternative(array * (reads + 2), "a time-varying a has one ā per "
                                     "step: an array as large as b, written once.") if tv else
                         alternative(array * (reads + 3), "with a time-invariant a, ā is N "
                                     "numbers summed in registers: ignore it, as a itself."))
        else:
            hints += [
                alternative(array * reads, "the scan also writes x: one more array of the "
                            "same size."),
                alternative(array * (passes + 1), "a time-varying a is an array as large as b, "
                            "read with it in every pass."),
            ]
        hints.append(alternative(want / 2, "complex64 is 8 bytes per element (two float32), "
                                 "complex128 16.") if dtype.startswith("complex") else
                     alternative(2 * want, "float32 is 4 bytes per element, float16 2."))
        expect(np.ndim(got) == 0, "return one number of bytes.", inputs=inputs, received=got)
        expect_close(np.float64(got), np.float64(want), inputs=inputs, rtol=1e-9, atol=0.05,
                     what="the number of bytes", hints=hints)


def reference_work_depth(L):
    """(combines, depth) of ``jax.lax.associative_scan`` on L elements, measured rather than
    derived: the scan is traced with an operator that records how many pairs each call
    combines; depth counts the calls (they run one after another) that combine at least one."""
    if L < 2:
        return 0, 0
    import jax
    pairs_per_call = []

    def recording_operator(left, right):
        pairs_per_call.append(left.shape[0])
        return left + right
    jax.make_jaxpr(lambda x: jax.lax.associative_scan(recording_operator, x))(
        jax.ShapeDtypeStruct((L,), np.float32))
    return sum(pairs_per_call), sum(1 for n in pairs_per_call if n > 0)


@exercise("6.2", points=3, title="work and depth of the odd–even scan",
          reference="chapter 6, the associative scan (its work and depth), and chapter 1, "
                    "eq. (1.3): one combine applies the operator once",
          stronger_hint="follow one level of the odd–even scan at length n: it combines ⌊n/2⌋ "
                        "adjacent pairs (one level), scans that sequence of ⌊n/2⌋ recursively, "
                        "then fixes up the ⌈n/2⌉ − 1 even positions after the first (one more "
                        "level, when there are any). Work and depth obey a recursion in ⌊n/2⌋ "
                        "that stops at n < 2 with (0, 0); sum it for a closed form.")
def _(fn, rng):
    for L in [1, 2, 3, 4, 5, 8, 13, 64, 100, 1000, 1025, int(rng.integers(2000, 70000))]:
        inputs = {"L": L}
        got = call(fn, inputs)
        expect(isinstance(got, (tuple, list)) and len(got) == 2,
               "the result must be the pair (combines, depth).", inputs=inputs,
               received=None, hint="`return combines, depth`.")
        work, depth = reference_work_depth(L)
        log2 = math.ceil(math.log2(L)) if L > 1 else 0
        expect_close(np.float64(got[0]), np.float64(work), inputs=inputs, rtol=0, atol=0.05,
                     what="the number of combines (first item)", hints=[
            alternative(2 * L - 2 - math.log2(L) if L > 0 else -1,
                        "2L − 2 − log₂ L holds for powers of two only: at an odd length count "
                        "again the pairs combined and the positions skipped."),
            alternative(L * log2, "that is the Hillis–Steele count (every element in every "
                        "round); the odd–even scan halves the sequence at every level."),
            alternative(L // 2 + (L + 1) // 2 - 1 if L >= 2 else -1,
                        "the recursion goes on below the first level, down to one element."),
            when(lambda r, e: float(r) < L - 1, "no scan of L elements can use fewer than "
                 "L − 1 combines: each of x_1 … x_{L−1} needs at least one."),
        ])
        expect_close(np.float64(got[1]), np.float64(depth), inputs=inputs, rtol=0, atol=0.05,
                     what="the depth (second item)", hints=[
            alternative(log2, "that is the depth of Hillis–Steele: the odd–even scan needs two "
                        "levels per halving, one going down (pairs) and one coming back up "
                        "(the skipped positions)."),
            alternative(2 * log2, "close: but a level that combines nothing does not count "
                        "(at length 2 the way back up has no skipped position to fix)."),
        ])


def reference_vjp(a, x, x_bar):
    """(ā, b̄) of x = linear_scan(a, b) with a time-invariant a (N,): b̄_t = x̄_t + a b̄_{t+1},
    ā = Σ over batch and t of b̄_t x_{t-1}; float64/complex128 loops, JAX's convention (the
    transpose of the linear map, no complex conjugate)."""
    a = np.asarray(a).astype(np.result_type(a, np.float64))
    x = np.asarray(x).astype(np.result_type(x, a))
    g = np.asarray(x_bar).astype(np.result_type(x_bar, a))
    b_bar = np.zeros(np.broadcast_shapes(x.shape, g.shape), np.result_type(a, x, g))
    carry = np.zeros(b_bar.shape[:-2] + b_bar.shape[-1:], b_bar.dtype)
    for t in range(b_bar.shape[-2] - 1, -1, -1):
        carry = g[..., t, :] + a * carry
        b_bar[..., t, :] = carry
    x_prev = np.concatenate([np.zeros_like(x[..., :1, :]), x[..., :-1, :]], axis=-2)
    a_bar = np.sum((b_bar * x_prev).reshape(-1, x.shape[-1]), axis=0)
    return a_bar, b_bar


@exercise("6.3", points=4, title="the backward scan: ā and b̄ of a linear scan",
          reference="chapter 6, the backward pass of the associative scan (the adjoint of a "
                    "linear recurrence is the same recurrence run backwards); chapter 1, "
                    "eq. (1.1)",
          stronger_hint="the adjoint of x_t = a x_(t−1) + b_t runs the same recurrence backwards: "
                        "b̄ at the last step is x̄ there, and each earlier b̄_t is x̄_t plus a "
                        "times the next b̄. Each step's a multiplied the previous state, so ā adds "
                        "up b̄_t · x_(t−1) (with x before the first step = 0) over batch and time, "
                        "per channel.")
def _(fn, rng):
    for lead, L, N, complex_ in [((), 1, 1, False), ((), 6, 2, False), ((), 7, 3, True),
                                 ((2,), 9, 2, True), ((2, 3), 5, 4, False)]:
        if complex_:
            a = (rng.uniform(0.5, 0.95, N) * np.exp(1j * rng.uniform(0, np.pi, N)))
            a = a.astype(np.complex64)
            b, x_bar = crandn(rng, *lead, L, N), crandn(rng, *lead, L, N)
        else:
            a = rng.uniform(-0.95, 0.95, N).astype(np.float32)
            b, x_bar = randn(rng, *lead, L, N), randn(rng, *lead, L, N)
        x = reference_scan(np.broadcast_to(a, b.shape), b).astype(b.dtype)
        inputs = {"a": a, "x": x, "x_bar": x_bar}
        got = call(fn, inputs)
        expect(isinstance(got, (tuple, list)) and len(got) == 2,
               "the result must be the pair (a_bar, b_bar).", inputs=inputs,
               hint="`return a_bar, b_bar`.")
        a_bar, b_bar = reference_vjp(a, x, x_bar)
        forward = reference_scan(np.broadcast_to(a, b.shape), x_bar)
        expect_close(got[1], b_bar, inputs=inputs, rtol=1e-4, atol=1e-5, time_axis=-2,
                     what="b̄ (second item)", hints=[
            alternative(forward, "you scanned forwards: x_t depends on b_s for s ≤ t, so b̄_t "
                        "collects x̄_s for s ≥ t: run the recurrence from the end."),
            alternative(lambda: reference_vjp(np.conj(a), x, x_bar)[1],
                        "no conjugate: JAX's vector-Jacobian product of a complex function is "
                        "the transpose of its linear map, b̄_t = x̄_t + a b̄_{t+1}."),
        ])
        x_now = x.astype(np.result_type(x, np.float64))
        wrong_x = np.sum((b_bar * x_now).reshape(-1, N), axis=0)
        per_batch = (b_bar * np.concatenate([np.zeros_like(x_now[..., :1, :]),
                                             x_now[..., :-1, :]], axis=-2))
        hints = [alternative(wrong_x, "ā pairs b̄_t with the previous state x_{t−1} (the one "
                                      "that a multiplies at step t), not with x_t.")]
        if lead:
            hints.append(when(lambda r, e: np.shape(r) == per_batch.shape[:-2] + (N,),
                              "ā has the shape of a, (N,): sum over the batch axes too."))
        expect_close(got[0], a_bar, inputs=inputs, rtol=1e-4, atol=1e-5, what="ā (first item)",
                     hints=hints)


def reference_passes_at_most(shape, seconds, copy_GBps, dtype="complex64", time_varying=False):
    """The most passes p ≥ 0 whose bytes (reference_bytes) move within ``seconds`` at
    ``copy_GBps``: add passes one at a time while the next still fits."""
    budget = seconds * copy_GBps * 1e9
    passes = 0
    while reference_bytes(shape, dtype, time_varying, passes + 1) <= budget:
        passes += 1
    return passes


def _arrays_moved(shape, seconds, gbps, dtype):
    """How many arrays of ``shape`` a copy at ``gbps`` moves in ``seconds`` (a real number)."""
    return seconds * gbps * 1e9 / (np.dtype(dtype).itemsize * math.prod(shape))


@exercise("6.4", points=2, title="the most passes that fit in a measured time",
          reference="chapter 6, §6.3, the memory-bandwidth floor: t_min = bytes moved / copy "
                    "bandwidth (1 GB/s = 1e9 B/s), read backwards; Exercise 6.1",
          stronger_hint="in the measured time the device can move at most seconds × copy_GBps × "
                        "10⁹ bytes, that is, a certain number of arrays of the scan's shape. One "
                        "of them is the write of x; each pass reads b (and a, when it varies in "
                        "time). Count how many whole passes fit in the rest, never fewer than 0.")
def _(fn, rng):
    cases = [((1, 1000, 1), 41e-6, 1.0, "complex64", False),
             ((16, 16384, 256), 1.712e-3, 2941.0, "complex64", False),
             ((1, 65536, 64), 0.233e-3, 2941.0, "complex64", False),
             ((8, 4096, 1024), 0.163e-3, 2940.0, "float32", True),
             ((16, 16384, 256), 0.3e-3, 2941.0, "complex64", False),
             ((2, 3, 100, 8), 1e-4, 11.3, "complex128", True)]
    shape = tuple(int(v) for v in rng.integers(1, 65, 3) * (1, 256, 4))
    dtype, tv = str(rng.choice(["complex64", "float32"])), bool(rng.integers(2))
    seconds = float(rng.uniform(2, 40)) * np.dtype(dtype).itemsize * math.prod(shape) / 2e12
    while abs(_arrays_moved(shape, seconds, 2000.0, dtype) % 1) < 1e-4:
        seconds *= 1.01                              # keep the random case off a boundary
    cases.append((shape, seconds, 2000.0, dtype, tv))
    for shape, seconds, gbps, dtype, tv in cases:
        inputs = {"shape": shape, "seconds": seconds, "copy_GBps": gbps, "dtype": dtype,
                  "time_varying": tv}
        got = call(fn, inputs)
        want = reference_passes_at_most(shape, seconds, gbps, dtype, tv)
        arrays = _arrays_moved(shape, seconds, gbps, dtype)
        reads = 1 + int(tv)
        hints = []
        if tv:
            hints.append(alternative(max(0, math.floor(arrays - 1)), "a time-varying a is an "
                                     "array as large as b, read with it in every pass."))
        hints.append(alternative(max(0, math.floor((arrays * 2 ** 30 / 1e9 - 1) / reads)),
                                 "1 GB/s is 10⁹ bytes per second (not 2³⁰)."))
        if math.floor(arrays / reads) != want + 1:
            hints.append(alternative(math.floor(arrays / reads), "the scan also writes x once: "
                                     "that array is not a pass."))
        hints += [
            alternative(want + 1, "one pass too many: the passes and the one write of x must "
                        "all fit in the measured time, so round down."),
            when(lambda r, e: float(r) < 0, "when not even one pass fits, the answer is 0 "
                 "passes (the copy bandwidth given is then below the device's peak)."),
            when(lambda r, e: float(r) != int(float(r)), "a kernel makes a whole number of "
                 "passes: return the largest one that fits."),
        ]
        expect(np.ndim(got) == 0, "return one number, the passes.", inputs=inputs, received=got)
        expect_close(np.float64(got), np.float64(want), inputs=inputs, rtol=0, atol=1e-6,
                     what="the number of passes", hints=hints)


# ---------------------------------------------------------------------------------------------
# Predict, then run
# ---------------------------------------------------------------------------------------------

# The H100 of chapter 6: its fastest copy (the book's floor, 2.94 TB/s), the probe's latency of
# one dependent step, its multiprocessors and the registers of one thread; the kernel's fixed
# registers per thread (lrnn.scan.pallas_tuning.BASE_REGISTERS), two per complex64 row in
# flight, and its programs of 32 channels (one warp, one lane per thread).
FILL_SHAPE = (1, 65536, 96)
FILL_COPY_BPS, FILL_LATENCY_S, FILL_SMS = 2.94e12, 0.53e-6, 132
FILL_MAX_REGISTERS, FILL_BASE_REGISTERS, FILL_REGISTERS_PER_ROW = 255, 38, 2
FILL_LANES_PER_PROGRAM, FILL_BYTES_PER_ROW = 32, 16


def _fill_chunks(unroll=None, programs_per_chunk=None, lanes_per_chunk=None):
    """The fewest chunks C that fill the H100 for FILL_SHAPE: programs ≥ multiprocessors, and
    Little's law (lanes × U rows × 16 B ≥ bandwidth × latency), U the largest power of two whose
    rows fit a thread's registers. The arguments replace a step (for the hints)."""
    B, _, N = FILL_SHAPE
    if unroll is None:
        rows = (FILL_MAX_REGISTERS - FILL_BASE_REGISTERS) // FILL_REGISTERS_PER_ROW
        unroll = 1 << (rows.bit_length() - 1)
    if programs_per_chunk is None:
        programs_per_chunk = B * -(-N // FILL_LANES_PER_PROGRAM)
    lanes_per_chunk = B * N if lanes_per_chunk is None else lanes_per_chunk
    needed = FILL_COPY_BPS * FILL_LATENCY_S / (unroll * FILL_BYTES_PER_ROW)   # lanes
    return max(math.ceil(FILL_SMS / programs_per_chunk), math.ceil(needed / lanes_per_chunk))


@exercise("6.6", points=1, kind="value",
          title="predict: the fewest chunks that fill the H100",
          reference="chapter 6, the box on how a GPU holds its data (multiprocessors, warps, "
                    "registers), §6.4 (Little's law: bytes in flight = bandwidth × latency) and "
                    "§6.5–6.6 (programs, chunks)",
          stronger_hint="three numbers, then the larger of two bounds. U: 38 + 2U ≤ 255 and a "
                        "power of two. Little's law: each chunk adds B·N lanes with U rows of "
                        "16 B in flight, and 2.94 TB/s × 0.53 µs must be in flight. Programs: a "
                        "chunk of N channels is N/32 programs, and 132 multiprocessors need one "
                        "each. C is the smallest whole number meeting both.")
def _(value, rng):
    want = _fill_chunks()
    B, _, N = FILL_SHAPE
    expect_prediction(value, want, atol=0.5, what="the fewest chunks C", hints=[
        alternative(_fill_chunks(programs_per_chunk=math.inf),
                    "with that many chunks Little's law is met, but count the programs they "
                    "make: would every one of the 132 multiprocessors have one to run?"),
        alternative(_fill_chunks(unroll=16),
                    "that is what 16 rows per lane (the tuning table's U) would need: the "
                    "registers leave room for more rows in flight. Redo both conditions with "
                    "the U they allow."),
        alternative(_fill_chunks(unroll=1),
                    "each lane keeps U rows in flight, as many as its registers hold, not one."),
        alternative(_fill_chunks(programs_per_chunk=1),
                    "a chunk is not one program: each program takes 32 of its channels (one "
                    "warp)."),
        alternative(math.ceil(8192 / (B * N)),
                    "that is the tuning table's target of 8192 lanes (§6.6), not the fewest "
                    "chunks that meet the two conditions."),
        alternative(math.ceil(FILL_SMS * 2048 / (B * N)),
                    "that fills every thread slot of the chip (2048 per multiprocessor): the "
                    "two conditions ask for far fewer lanes."),
    ])
