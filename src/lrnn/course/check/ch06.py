"""Checks for Exercises 6 · Scans on the GPU (solutions/06_gpu_scans.ipynb): the bytes a scan
and its backward pass must move, the combines and levels of the odd–even scan, the backward
scan, the most passes over memory that a measured scan can have made, and the fewest chunks
that fill an H100."""
from __future__ import annotations

import functools
import math

import numpy as np

from ._core import (alternative, call, crandn, exercise, expect, expect_close, expect_prediction,
                    randn, reference_scan, unit_disk, when)


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
          stronger_hint="list what one step of the backward recurrence reads: the cotangent x̄ "
                        "and, when it varies in time, a; every pass reads those. The forward "
                        "states x enter only the gradient of a, so they are read once, in the last "
                        "pass, which also writes b̄ and, for a time-varying a, one ā per step (an "
                        "array as large as b).")
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


#: (sequences, steps, channels) that every input of Exercise 6.3's check is padded to, so that
#: JAX compiles the reference once: zeros after the last step (a = b = x̄ = 0) and in the extra
#: sequences and channels change none of the values that are kept.
VJP_PAD = (8, 12, 8)


@functools.lru_cache(maxsize=1)
def _compiled_vjp():
    """The states and JAX's VJP of the recurrence written as a loop over the steps."""
    import jax
    import jax.numpy as jnp

    def loop(a, b, h):
        def step(state, a_and_b):
            state = a_and_b[0] * state + a_and_b[1]
            return state, state
        return jnp.swapaxes(jax.lax.scan(step, h, (jnp.swapaxes(a, 0, 1),
                                                   jnp.swapaxes(b, 0, 1)))[1], 0, 1)

    def states_and_cotangents(a, b, h, g):
        x, pullback = jax.vjp(loop, a, b, h)
        return x, pullback(g)
    return jax.jit(states_and_cotangents)


def reference_vjp(a, x_init, b, x_bar):
    """``(x, (ā, b̄, x̄_init))`` for ``x_t = a_t x_{t-1} + b_t`` from ``x_{-1} = x_init`` (``a``,
    ``b``, ``x_bar``: ``(..., L, N)``; ``x_init``: ``(..., N)``): JAX's own autodiff
    (``jax.vjp``) of the recurrence as a ``lax.scan`` loop, in complex128 (the real part
    when every input is real), padded to :data:`VJP_PAD`. JAX's convention for complex numbers:
    the transpose of the linear map, no conjugate."""
    import jax
    *lead, L, N = np.shape(b)
    G = math.prod(lead)
    assert G <= VJP_PAD[0] and L <= VJP_PAD[1] and N <= VJP_PAD[2], np.shape(b)
    padded = []
    for v in (a, b, x_init, x_bar):
        per_step = np.ndim(v) == len(lead) + 2
        block = np.zeros(VJP_PAD if per_step else VJP_PAD[::2], np.complex128)
        if per_step:
            block[:G, :L, :N] = np.reshape(v, (G, L, N))
        else:
            block[:G, :N] = np.reshape(v, (G, N))
        padded.append(block)
    enable_x64 = getattr(jax, "enable_x64", None)
    if enable_x64 is None:                       # JAX before 0.8 (Colab's 0.7.2)
        from jax.experimental import enable_x64
    with enable_x64(True):
        x, (da, db, dh) = jax.device_get(_compiled_vjp()(*padded))
    complex_ = any(np.iscomplexobj(v) for v in (a, b, x_init, x_bar))
    keep = (lambda v: v) if complex_ else (lambda v: v.real)
    unpad = lambda v: keep(v[:G, :L, :N]).reshape(np.shape(b))           # noqa: E731
    return unpad(x), (unpad(da), unpad(db), keep(dh[:G, :N]).reshape(np.shape(x_init)))


def _accumulate_backwards(coef, g):
    """``y_t = g_t + coef_t y_{t+1}`` from ``y_L = 0`` (``coef``, ``g``: ``(..., L, N)``), float64:
    the shape of the mistakes the hints of Exercise 6.3 name."""
    coef, g = np.asarray(coef, np.complex128), np.asarray(g, np.complex128)
    rows, y = [], 0
    for coef_t, g_t in zip(np.moveaxis(coef, -2, 0)[::-1], np.moveaxis(g, -2, 0)[::-1]):
        y = g_t + coef_t * y
        rows.append(y)
    return np.stack(rows[::-1], axis=-2)


def _per_step_hints(*, reversed_, late, early, only_edge, partial, backward=False):
    """A hint on a per-step cotangent of Exercise 6.3 (time axis −2) moved in time: reversed,
    one step late or early, wrong only at the step where it starts (the last for
    ``backward``), or right from there up to one step (``partial``, formatted with ``step``,
    ``before``, ``after``). ``expect_close``'s generic time hints speak of a forward scan
    from x_(−1) = 0, which is not this one."""
    def hint(received, expected, close):
        r, e = np.moveaxis(received, -2, 0), np.moveaxis(expected, -2, 0)
        if len(e) < 2:
            return None
        if close(r, e[::-1]):
            return reversed_
        if len(e) >= 3 and close(r[1:], e[:-1]):
            return late
        if len(e) >= 3 and close(r[:-1], e[1:]):
            return early
        wrong = np.array([not close(r[t], e[t]) for t in range(len(e))])
        order = wrong[::-1] if backward else wrong      # from the step where it starts
        if order[0] and not order[1:].any():
            return only_edge
        if not order[0] and order.any():
            k = int(np.argmax(order))
            step = len(e) - 1 - k if backward else k
            return partial.format(step=step, before=step - 1, after=step + 1)
        return None
    return hint


_VJP_STRONGER = ("b_t enters x_t directly and every later state through x_t, which reaches "
                 "x_(t+1) multiplied by a_(t+1): so b̄ at the last step is x̄ there, and each "
                 "earlier b̄_t is x̄_t plus the next step's a times the next b̄. a_t acts at "
                 "step t only, on the state before it (x_init at t = 0): one ā_t per step and "
                 "sequence, nothing summed. x_init is that state before step 0: it reaches the "
                 "others only through a_0.")


@exercise("6.3", points=4, title="the backward scan of an input-dependent recurrence",
          reference="chapter 1, eq. (1.1) with a time-varying a_t; LRU eqs. (3)–(4), unrolled "
                    "from x_(−1) = x_init instead of 0; chapter 6, §6.7 (the backward pass)",
          stronger_hint=_VJP_STRONGER)
def _(fn, rng):
    """Long because each of the three cotangents has its own hints, computed from the same
    inputs and reference: apart, they would pass all of them around."""
    for lead, L, N, complex_ in [((), 6, 2, False), ((), 7, 3, True), ((2,), 9, 2, True),
                                 ((2, 3), 5, 4, False), ((3,), 4, 2, True), ((), 1, 3, True),
                                 ((), 1, 1, False)]:
        shape = (*lead, L, N)
        if complex_:
            a = unit_disk(rng, *shape, r_min=0.5, r_max=0.95)
            b, x_init, x_bar = crandn(rng, *shape), crandn(rng, *lead, N), crandn(rng, *shape)
        else:
            a = rng.uniform(-0.95, 0.95, shape).astype(np.float32)
            b, x_init, x_bar = randn(rng, *shape), randn(rng, *lead, N), randn(rng, *shape)
        x_wide, (a_bar, b_bar, h_bar) = reference_vjp(a, x_init, b, x_bar)
        x = x_wide.astype(b.dtype)
        inputs = {"a": a, "x_init": x_init, "x": x, "x_bar": x_bar}
        got = call(fn, inputs)
        expect(isinstance(got, (tuple, list)) and len(got) == 3,
               "the result must be the triple (a_bar, b_bar, x_init_bar).", inputs=inputs,
               hint="`return a_bar, b_bar, x_init_bar`: x_init is an input of the scan too.")
        a_next = np.concatenate([a[..., 1:, :], np.zeros_like(a[..., :1, :])], axis=-2)
        b_hints = [
            alternative(lambda: reference_scan(a, x_bar), "b̄ is x̄ scanned forwards (b̄_0 is "
                        "x̄_0 alone, the sums grow towards the end), yet x_t depends on b_s for "
                        "s ≤ t, so b̄_t collects the x̄_s of s ≥ t."),
            alternative(lambda: _accumulate_backwards(a, x_bar), "your b̄_t carries b̄_(t+1) "
                        "times a_t, the transition of step t: shifted by one step, since x_t "
                        "reaches x_(t+1) through the transition of step t+1."),
        ]
        if complex_:
            b_hints.append(alternative(lambda: _accumulate_backwards(np.conj(a_next), x_bar),
                                       "your b̄ carries conj(a) where JAX's vector-Jacobian "
                                       "product has no conjugate: it is the transpose of the "
                                       "linear map, not its adjoint."))
        b_hints.append(_per_step_hints(
            reversed_="b̄ comes back in reverse time order: b̄_t must sit at step t of the "
                      "input's time axis, as x̄_t does.",
            late="b̄ comes back one step late: index t holds the value of step t−1.",
            early="b̄ comes back one step early: index t holds the value of step t+1.",
            only_edge="only b̄ at the last step is wrong: the step where the backward recurrence "
                      "starts, with no later step feeding in.",
            partial="b̄ is right from step {after} to the end and wrong at step {step}: the "
                    "error enters where b̄ passes from one step to the one before.",
            backward=True))
        expect_close(got[1], b_bar, inputs=inputs, rtol=1e-4, atol=1e-5,
                     what="b̄ (second item)", hints=b_hints)
        summed = {(N,), (*lead, N), (L, N)} - {a.shape}
        expect(np.shape(got[0]) not in summed,
               f"ā (first item) has shape {np.shape(got[0])}, expected {a.shape}.",
               inputs=inputs, hint="ā is not summed: a_t is its own input at every step of every "
                                   "sequence, so ā has a's shape (..., L, N). The sum over time "
                                   "and batch belongs to a time-invariant a, shared by all.")
        x_now = x.astype(np.complex128)
        x_zero = np.concatenate([np.zeros_like(x_now[..., :1, :]), x_now[..., :-1, :]], axis=-2)
        x_prev = np.concatenate([np.asarray(x_init, np.complex128)[..., None, :],
                                 x_now[..., :-1, :]], axis=-2)
        a_hints = [
            alternative(b_bar * x_now, "your ā_t is b̄_t times x_t, the state step t produces, "
                                       "while a_t multiplies the state before it, not x_t."),
            alternative(b_bar * x_zero, "ā_0 comes out as for a zero state before step 0: that "
                                        "state is x_init here, not zero."),
        ]
        if complex_:
            a_hints += [alternative(v, "your ā carries a conjugate where JAX's vector-Jacobian "
                                       "product has no conjugate (the transpose of the linear "
                                       "map): ā_t is a product of b̄_t and a state.")
                        for v in (np.conj(b_bar) * x_prev, b_bar * np.conj(x_prev))]
        a_hints.append(_per_step_hints(
            reversed_="ā comes back in reverse time order: ā_t must sit at step t of a's "
                      "time axis.",
            late="ā comes back one step late: index t holds the value of step t−1, and index 0 "
                 "lacks ā_0, the one made with x_init.",
            early="ā comes back one step early: index t holds the value of step t+1, and ā_0, "
                  "the one made with x_init, is missing.",
            only_edge="only ā_0 is wrong: the one step whose previous state is x_init, not a "
                      "state of x.",
            partial="ā is right at steps 0 to {before} and wrong at step {step}: the state it "
                    "pairs with b̄ there is off."))
        expect_close(got[0], a_bar, inputs=inputs, rtol=1e-4, atol=1e-5,
                     what="ā (first item)", hints=a_hints)
        h_hints = [
            alternative(b_bar[..., 0, :], "x̄_init is b̄_0 without a_0: x_init enters only "
                                          "x_0 = a_0 x_init + b_0, through a_0."),
            alternative(a[..., 0, :] * np.asarray(x_bar)[..., 0, :],
                        "x̄_init is a_0 x̄_0: it counts x_0 only, yet x_init reaches every later "
                        "state through x_0."),
            alternative(np.zeros_like(h_bar), "x̄_init is zero: x_init enters x_0, and through "
                                              "it every later state."),
        ]
        if complex_:
            h_hints.append(alternative(np.conj(a[..., 0, :]) * b_bar[..., 0, :],
                                       "x̄_init carries conj(a_0): JAX's vector-Jacobian product "
                                       "has no conjugate (the transpose of the linear map)."))
        expect_close(got[2], h_bar, inputs=inputs, rtol=1e-4, atol=1e-5,
                     what="x̄_init (third item)", hints=h_hints)


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
