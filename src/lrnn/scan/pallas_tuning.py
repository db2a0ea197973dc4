"""The tuning table of the Pallas scan: tiles and chunking per GPU generation and shape bucket.

``TUNING.md`` beside this file holds the runs, the predictions and the outcomes; ``python -m
lrnn bench plans --device gpu`` is the sweep that refines the tiles. Nothing is tuned at call
time: ``lookup`` is a dictionary read. A GPU whose compute capability is not in the table gets
``GENERIC``, a conservative choice (a shorter unroll, fewer registers).

``method="auto"`` trusts only measurements of the kernel as built: a generation's
``auto_real_min_lanes`` holds only with a stored ``lrnn bench gpu`` run named in its
``measurement`` (a file of ``book/data/``) whose kernel fingerprint (``pallas.kernel_fingerprint``)
is that of the kernel here (``measured_kernel``). Until then ``auto`` runs ``"associative"`` on every GPU.

Keys:

* compute capability, as JAX reports it (``"9.0"`` for an H100);
* kind: ``"ti"`` (time-invariant ``a``) or ``"tv"`` (time-varying), and ``"real"`` or
  ``"complex"`` (planes of ``b``);
* bucket: ``"wide"`` when batch × channels alone give at least ``target_lanes`` GPU threads
  (one pass over time), ``"narrow"`` when time must be cut into chunks as well.
"""
from __future__ import annotations

import contextlib
import contextvars
import dataclasses

from .._validate import fail
from .pallas_triton import Tiles


#: every (kind, bucket) key a generation's ``tiles`` holds
KEYS = tuple((k, b) for k in ("ti-real", "ti-complex", "tv-real", "tv-complex")
             for b in ("wide", "narrow"))


@dataclasses.dataclass(frozen=True)
class Generation:
    name: str
    #: batch × channels × chunks to aim for: enough threads, each with ``unroll`` loads in
    #: flight, to cover the memory latency (Little's law).
    target_lanes: int
    #: the shortest chunk worth a program (each chunk costs a row of the reduce pass and of the
    #: tiny scan over chunk ends, and a program start).
    min_chunk: int
    tiles: dict          # (kind, bucket) -> Tiles
    #: ``method="auto"``: the kernel is picked for real inputs with at least this many
    #: sequences × channels, never for complex ones (``None``: never), and why. Read only with
    #: a ``measurement`` of the kernel as built.
    auto_real_min_lanes: int | None = None
    evidence: str = "not measured on this GPU generation"
    #: the stored ``lrnn bench gpu`` run (``bench_gpu.json``, copied into ``book/data/`` under
    #: this name) that ``auto_real_min_lanes`` comes from, and the ``kernel_fingerprint`` it
    #: recorded; ``None``: no run of this kernel on this generation is stored.
    measurement: str | None = None
    measured_kernel: str | None = None


GENERIC = Generation(
    name="untuned GPU (safe default)",
    target_lanes=16384,
    min_chunk=256,
    tiles={key: Tiles(block_n=32, unroll=8, warps=1, stages=1, prefetch=False)
           for key in KEYS},
)

TABLE: dict[str, Generation] = {
    # The tiles come from the H100 probe of 2026-11-23 (book/data/bench_scan_h100_probe.json):
    # single-pass prototypes with the same unrolled loop, where U = 16 rows in flight was the
    # best or within 5% of it at every shape; one pass reached 72% of copy with 16384 lanes,
    # 46% with 8192 and 32-35% with 4096, hence chunking below 8192 lanes. The kernel as built
    # was then run on an NVIDIA H200 (same compute capability; JAX 0.11.2, 2026-11-27,
    # book/data/bench_gpu_h200_2026-11-27.json): it matched the float64 reference at every
    # shape, and it won forward at every shape but lost forward+backward at three of four, so
    # ``auto`` does not pick it (it cannot know at trace time whether a VJP follows). See
    # TUNING.md.
    "9.0": Generation(
        name="Hopper (cc 9.0): tiles from the H100 probe, kernel measured on an H200",
        target_lanes=8192,
        min_chunk=256,
        tiles={key: Tiles(block_n=32, unroll=16, warps=1, stages=1, prefetch=False)
               for key in KEYS},
        auto_real_min_lanes=None,
        evidence=("on an H200 (JAX 0.11.2) the kernel as built ran forward at 1.03-2.15x "
                  "the speed of 'associative' but forward+backward at 0.32-1.47x: slower at "
                  "(16, 16384, 256) and (1, 65536, 64) complex64 and at (8, 4096, 1024) "
                  "float32 a(t), faster only at (64, 4096, 256); a training step pays the "
                  "backward pass"),
        measurement="bench_gpu_h200_2026-11-27.json",
        measured_kernel="82f02d0b290087d7",
    ),
}


#: The next design of TUNING.md, built and tested in interpret mode but **not yet measured**:
#: time in parallel inside a program (W = 8 sub-blocks per program, combined in registers), U =
#: 32 where the register budget allows (``fit_registers`` halves it where not, and while an SM
#: keeps as many rows in flight: the complex forward gets 16, the adjoints 8 to 32), and chunks only
#: where batch × channels × W stays under 32K lanes, each chunk's carry from a tiny scan over the
#: chunk ends. ``design("time-parallel")`` plans with it; ``lrnn bench scan`` and ``bench plans``
#: time it beside the measured table, so that one GPU run confirms or refutes TUNING.md's
#: predictions before it becomes the default.
NEXT_TABLE: dict[str, Generation] = {
    "9.0": Generation(
        name="Hopper (cc 9.0), time-parallel design (predicted, not measured)",
        target_lanes=32768,
        min_chunk=256,
        tiles={**{(k, "wide"): Tiles(block_n=32, unroll=32, warps=1, stages=1, time_warps=8)
                  for k in ("ti-real", "ti-complex", "tv-real", "tv-complex")},
               **{(k, "narrow"): Tiles(block_n=32, unroll=16, warps=1, stages=1, time_warps=8)
                  for k in ("ti-real", "ti-complex", "tv-real", "tv-complex")}},
    ),
}

#: the designs ``design()`` selects: the measured table (the default) and the next one
DESIGNS = {"measured": TABLE, "time-parallel": NEXT_TABLE}
#: the design ``method="pallas"`` (and ``auto``, once measured) plans with outside ``design()``
DEFAULT_DESIGN = "measured"
_DESIGN = contextvars.ContextVar("lrnn_pallas_design", default=DEFAULT_DESIGN)


@contextlib.contextmanager
def design(name: str):
    """Plan the kernel with the tiles of design ``name`` (``"measured"`` or ``"time-parallel"``)
    inside the block. Read when a function is traced: trace (``jit``) inside the block."""
    if name not in DESIGNS:
        fail("design", name, f"one of {sorted(DESIGNS)}")
    token = _DESIGN.set(name)
    try:
        yield
    finally:
        _DESIGN.reset(token)


def current_design() -> str:
    return _DESIGN.get()


def generation(compute_capability) -> Generation:
    return DESIGNS[_DESIGN.get()].get(str(compute_capability), GENERIC)


def kind(time_varying: bool, complex_: bool) -> str:
    return f"{'tv' if time_varying else 'ti'}-{'complex' if complex_ else 'real'}"


def lookup(compute_capability, kind_: str, lanes: int) -> tuple[Tiles, Generation]:
    """Tiles for ``kind_`` with ``lanes`` = batch × channels, and the generation's entry (of
    the current ``design``). "Wide" when one pass fills ``target_lanes`` (counting the W
    sub-blocks of the time-parallel tiles), else "narrow" (time is cut into chunks too)."""
    gen = generation(compute_capability)
    wide = gen.tiles.get((kind_, "wide"), GENERIC.tiles[(kind_, "wide")])
    bucket = "wide" if lanes * wide.time_warps >= gen.target_lanes else "narrow"
    return gen.tiles.get((kind_, bucket), GENERIC.tiles[(kind_, bucket)]), gen


def pallas_wins(compute_capability: str, dtype, shape, time_varying: bool,
                kernel: str | None = None) -> tuple[bool, str]:
    """Whether a stored run of the kernel as built shows it beating the best XLA method on
    this GPU generation for problems like this one, and why (one clause). Without such a run
    (``Generation.measurement``, whose ``measured_kernel`` must be ``kernel``, the fingerprint
    of the kernel here: ``pallas.kernel_fingerprint``): never."""
    import numpy as np
    cc = str(compute_capability)
    gen = TABLE.get(cc)
    if gen is None:
        return False, f"the kernel is not measured on compute capability {cc}"
    if gen.measurement is None:
        return False, (f"no GPU run of the kernel as built is stored for compute capability "
                       f"{cc} (pallas_tuning.TABLE[{cc!r}].measurement is None: {gen.evidence}); "
                       "'auto' trusts only measurements")
    if kernel is None or gen.measured_kernel != kernel:
        return False, (f"the kernel changed since its stored run ({gen.measurement}, kernel "
                       f"{gen.measured_kernel}; here {kernel}): 'auto' waits for a run of this "
                       "kernel")
    if gen.auto_real_min_lanes is None:
        return False, f"the stored run ({gen.measurement}) did not show the kernel winning"
    if np.issubdtype(np.dtype(dtype), np.complexfloating):
        return False, ("on complex64 arrays XLA must split b into real and imaginary planes "
                       "and join x again (two extra passes over memory); the kernel is picked "
                       "for complex inputs only once a stored run shows it winning there")
    lanes = int(np.prod(shape[:-2], dtype=np.int64)) * shape[-1]
    if lanes < gen.auto_real_min_lanes:
        return False, (f"{lanes} sequences × channels < {gen.auto_real_min_lanes}: too few for "
                       f"the kernel to win in the stored run ({gen.measurement})")
    return True, f"{gen.evidence} ({gen.measurement})"


# ----------------------------------------------------------------------------------------
# The predictions the first GPU run of the kernel checks
# ----------------------------------------------------------------------------------------

@dataclasses.dataclass(frozen=True)
class Prediction:
    """What the first GPU run of the kernel (default design, forward) is predicted to show at
    one shape, written before the run: TUNING.md, "Predictions for the next GPU run"."""
    shape: tuple
    kind: str               # "ti-complex" (complex64, on planes) or "tv-real" (float32, a(t))
    copy_fraction: float    # of the run's copy bandwidth
    vs_associative: float   # 'associative' forward time / the kernel's (> 1: the kernel wins)


#: the shapes of ``lrnn bench gpu``'s scan part, predicted (TUNING.md holds the same table)
PREDICTIONS = (
    Prediction((16, 16384, 256), "ti-complex", 0.36, 1.27),
    Prediction((64, 4096, 256), "ti-complex", 0.72, 2.2),
    Prediction((1, 65536, 64), "ti-complex", 0.36, 2.8),
    Prediction((8, 4096, 1024), "tv-real", 0.47, 1.53),
)


# ----------------------------------------------------------------------------------------
# Register budget per tile
# ----------------------------------------------------------------------------------------

#: registers a thread may hold before spilling (NVIDIA: 255 per thread since Kepler)
MAX_REGISTERS = 255
#: registers of one SM, which also bound one program's threads × registers (cc 7.0 to 9.0)
REGISTERS_PER_SM = 65536
#: addresses, carries, loop counters and masks: what a thread holds besides the unrolled rows.
#: Calibrated with the one early ptxas figure (sm_90, the adjoint with prefetch: 226-235
#: registers at U = 16), read as the heaviest kind: time-varying complex, 6 values a row.
BASE_REGISTERS = 38
#: The time-parallel design (W > 1): registers per thread, per (kind, adjoint), as
#: ``base + U × channels × per_row``, the line at or above every count of ``PTXAS_SM90`` (the
#: forward's covers the forward and the reverse scans). Its adjoint holds more than its loads.
TIME_PARALLEL_FIT = {("ti-real", False): (48, 3), ("ti-real", True): (56, 4),
                     ("ti-complex", False): (52, 7), ("ti-complex", True): (72, 8),
                     ("tv-real", False): (56, 3), ("tv-real", True): (64, 4),
                     ("tv-complex", False): (64, 5), ("tv-complex", True): (88, 7)}

#: ``ptxas -v`` for sm_90a (CUDA 13.4's, bundled with Triton 3.9.0) on the Triton IR that JAX
#: 0.10.2 lowers each pass to, at (64, 4096, 256) in one pass, block_n = 32, one warp across
#: channels, compiled by Triton 3.9.0 with num_warps = W (TUNING.md "Registers from ptxas").
#: Measured without a GPU, on the kernel of 2026-11-26 (reversed rows counted upwards); no pass
#: spilled. (kind, pass, W, U) -> registers per thread; pass: "forward", "reverse" (a reverse
#: scan without x) or "adjoint".
PTXAS_SM90 = {
    ("ti-real", "forward", 8, 8): 61, ("ti-real", "forward", 8, 16): 64,
    ("ti-real", "forward", 8, 32): 80,
    ("ti-real", "reverse", 8, 8): 64, ("ti-real", "reverse", 8, 16): 64,
    ("ti-real", "reverse", 8, 32): 128,
    ("ti-real", "adjoint", 8, 8): 79, ("ti-real", "adjoint", 8, 16): 116,
    ("ti-real", "adjoint", 8, 32): 127,
    ("ti-complex", "forward", 8, 4): 64, ("ti-complex", "forward", 8, 8): 80,
    ("ti-complex", "forward", 8, 16): 128, ("ti-complex", "forward", 4, 8): 64,
    ("ti-complex", "forward", 4, 16): 96, ("ti-complex", "forward", 2, 16): 72,
    ("ti-complex", "forward", 16, 8): 103,
    ("ti-complex", "reverse", 8, 4): 80, ("ti-complex", "reverse", 8, 8): 102,
    ("ti-complex", "reverse", 8, 16): 128,
    ("ti-complex", "adjoint", 8, 4): 103, ("ti-complex", "adjoint", 8, 8): 126,
    ("ti-complex", "adjoint", 8, 16): 188, ("ti-complex", "adjoint", 4, 8): 124,
    ("ti-complex", "adjoint", 4, 16): 128, ("ti-complex", "adjoint", 2, 16): 128,
    ("ti-complex", "adjoint", 16, 8): 128,
    ("tv-real", "forward", 8, 4): 48, ("tv-real", "forward", 8, 8): 63,
    ("tv-real", "forward", 8, 16): 79, ("tv-real", "forward", 8, 32): 116,
    ("tv-real", "reverse", 8, 4): 64, ("tv-real", "reverse", 8, 8): 64,
    ("tv-real", "reverse", 8, 16): 80, ("tv-real", "reverse", 8, 32): 124,
    ("tv-real", "adjoint", 8, 4): 80, ("tv-real", "adjoint", 8, 8): 80,
    ("tv-real", "adjoint", 8, 16): 118, ("tv-real", "adjoint", 8, 32): 171,
    ("tv-complex", "forward", 8, 4): 80, ("tv-complex", "forward", 8, 8): 99,
    ("tv-complex", "forward", 8, 16): 128,
    ("tv-complex", "reverse", 8, 4): 80, ("tv-complex", "reverse", 8, 8): 104,
    ("tv-complex", "reverse", 8, 16): 128,
    ("tv-complex", "adjoint", 8, 4): 108, ("tv-complex", "adjoint", 8, 8): 128,
    ("tv-complex", "adjoint", 8, 16): 192,
}


def values_per_row(kind_: str, adjoint: bool) -> int:
    """Float32 values one row brings into registers per channel: the planes of b (or of the
    cotangent and of x for the adjoint) and, for a time-varying a, the planes of a."""
    planes = 2 if kind_.endswith("complex") else 1
    return planes * (2 if adjoint else 1) + (planes if kind_.startswith("tv") else 0)


def measured_registers(tiles: Tiles, kind_: str, adjoint: bool) -> int | None:
    """The most ptxas gave the passes these tiles serve (the adjoint; or the forward and the
    reverse scan), or None unless all of them were measured with these tiles."""
    if (tiles.block_n, tiles.warps, tiles.prefetch) != (32, 1, False):
        return None
    passes = ("adjoint",) if adjoint else ("forward", "reverse")
    counts = [PTXAS_SM90.get((kind_, p, tiles.time_warps, tiles.unroll)) for p in passes]
    return None if None in counts else max(counts)


def register_budget(tiles: Tiles) -> int:
    """Registers a thread of this program may use: 255, and no more than one SM's registers
    shared by the program's ``32 × warps × time_warps`` threads (128 at 16 warps: a program
    asking for more does not launch)."""
    threads = 32 * tiles.warps * tiles.time_warps
    return min(MAX_REGISTERS, REGISTERS_PER_SM // threads)


def registers(tiles: Tiles, kind_: str, adjoint: bool) -> int:
    """Estimated registers per thread. One warp in time (``time_warps`` = 1): the unrolled rows
    in flight (twice with prefetch: the block in use and the next one), per channel a thread
    owns, plus the fixed part. Time in parallel (W > 1): ptxas's count where every pass these
    tiles serve was measured (``PTXAS_SM90``), else the line fitted above those counts
    (``TIME_PARALLEL_FIT``)."""
    channels = max(1, tiles.block_n // (32 * tiles.warps))
    if tiles.time_warps > 1:
        measured = measured_registers(tiles, kind_, adjoint)
        if measured is not None:
            return measured
        base, per_row = TIME_PARALLEL_FIT[(kind_, adjoint)]
        return base + tiles.unroll * channels * per_row
    rows = tiles.unroll * (2 if tiles.prefetch else 1)
    return BASE_REGISTERS + rows * channels * values_per_row(kind_, adjoint)


def programs_per_sm(tiles: Tiles, registers_: int) -> int:
    """Programs of these tiles one SM holds at once (cc 8.0 to 9.0): limited by its registers
    (allocated in 8s per thread), its 64 warps and its 32 program slots."""
    warps = tiles.warps * tiles.time_warps
    return min(32, 64 // warps, REGISTERS_PER_SM // (-(-registers_ // 8) * 8 * 32 * warps))


def rows_in_flight_per_sm(tiles: Tiles, kind_: str, adjoint: bool) -> int:
    """Rows an SM has loads in flight for: programs at once × threads × U."""
    held = programs_per_sm(tiles, registers(tiles, kind_, adjoint))
    return held * 32 * tiles.warps * tiles.time_warps * tiles.unroll


def fit_registers(tiles: Tiles, kind_: str, adjoint: bool) -> Tiles:
    """``tiles`` with the unroll halved (then prefetch dropped) until it fits the budget. With
    time in parallel (W > 1), halved further while an SM still holds as many rows in flight
    (more programs at once make up for fewer rows each): Triton's compile of the super-block
    grows faster than U (TUNING.md: about 20 s at U = 8 against 110 s at U = 16 for a complex
    adjoint), so a larger U must buy memory in flight."""
    while registers(tiles, kind_, adjoint) > register_budget(tiles):
        if tiles.unroll > 1:
            tiles = dataclasses.replace(tiles, unroll=tiles.unroll // 2)
        elif tiles.prefetch:
            tiles = dataclasses.replace(tiles, prefetch=False)
        else:
            break                              # one row of one channel: nothing left to shrink
    while tiles.time_warps > 1 and tiles.unroll > 1:
        half = dataclasses.replace(tiles, unroll=tiles.unroll // 2)
        if rows_in_flight_per_sm(half, kind_, adjoint) < \
                rows_in_flight_per_sm(tiles, kind_, adjoint):
            break
        tiles = half
    return tiles
