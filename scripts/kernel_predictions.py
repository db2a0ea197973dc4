"""The scan kernel's predicted fraction of copy on an H100, per benchmark shape and design.

Prints the table of TUNING.md ("The time-parallel design") from the plans of this commit
(``pallas.plan(..., capability="9.0")`` in each design), the registers a thread needs
(``pallas_tuning.registers``: ptxas's count where measured, else the fitted bound) and the
fit of the H100 probe: f(M) = 1.07 M / (M + 1.94 MiB) of copy, capped at 90 %, where M is the
memory in flight, counted only for the programs an SM can hold at once.

    python scripts/kernel_predictions.py

These are predictions, written before a GPU ran the time-parallel design; the GPU run
(GPU.md) confirms or refutes them.
"""
from __future__ import annotations

import math

from lrnn.scan import pallas, pallas_tuning

#: NVIDIA H100 80GB HBM3 (SXM): SMs, and what one SM holds at once (cc 9.0)
SMS = 132
COPY_BYTES_PER_S = 2.21e12                  # JAX's copy on the H100 (TUNING.md "two floors")
MIB = 2 ** 20
#: the probe's shape at L = 1024 ran at 0.64 of the fit (46 % where 72 % was predicted): short
#: sequences leave each program too few blocks to reach its steady state
SHORT_SEQUENCE_FACTOR = {1024: 0.64}
SHAPES = [((16, 16384, 256), "ti-complex"), ((64, 4096, 256), "ti-complex"),
          ((32, 1024, 512), "ti-complex"), ((1, 65536, 64), "ti-complex"),
          ((8, 4096, 1024), "tv-real"), ((16, 16384, 256), "tv-real"),
          ((1, 65536, 1024), "tv-real")]


def thread_registers(tiles, kind: str, adjoint: bool) -> tuple[int, str]:
    measured = pallas_tuning.measured_registers(tiles, kind, adjoint)
    source = "estimate" if measured is None else "ptxas"
    return pallas_tuning.registers(tiles, kind, adjoint), source


def predict(shape, kind: str, design: str, adjoint: bool = False) -> dict:
    g, length, n = shape
    with pallas_tuning.design(design):
        plan = pallas.plan(g, length, n, kind=kind, capability="9.0", adjoint=adjoint)
    tiles = plan.tiles
    registers, source = thread_registers(tiles, kind, adjoint)
    programs = g * math.ceil(n / tiles.block_n) * plan.n_chunks
    at_once = min(programs, SMS * pallas_tuning.programs_per_sm(tiles, registers))
    channels = max(1, tiles.block_n // (32 * tiles.warps))
    planes = 2 if kind.endswith("complex") else 1
    # bytes per element of one pass: b (and a(t)) read, x written; the adjoint reads x too,
    # and writes da(t) for a time-varying a
    varying = kind.startswith("tv")
    per_element = 4 * planes * (2 + varying + adjoint + (adjoint and varying))
    in_flight = at_once * 32 * tiles.warps * tiles.time_warps * tiles.unroll * channels \
        * per_element
    fit = min(0.9, 1.07 * (in_flight / MIB) / (in_flight / MIB + 1.94))
    # a chunked plan's reduce pass reads b (and a(t)) once more
    reread = 4 * planes * (1 + varying) if plan.n_chunks > 1 else 0
    fraction = fit * per_element / (per_element + reread) * SHORT_SEQUENCE_FACTOR.get(length, 1)
    return {"tiles": tiles, "chunks": plan.n_chunks, "registers": registers, "source": source,
            "programs": programs, "at_once": at_once, "in_flight_mib": in_flight / MIB,
            "fraction": fraction,
            "ms": per_element * g * length * n / (fraction * COPY_BYTES_PER_S) * 1e3}


def main() -> None:
    print("| shape (B, L, N) | kind | design | pass | plan | registers | programs (at once) "
          "| in flight | predicted | ms |")
    print("|---|---|---|---|---|---|---|---|---|---|")
    for shape, kind in SHAPES:
        for design in ("measured", "time-parallel"):
            for adjoint in (False, True):
                r = predict(shape, kind, design, adjoint)
                t = r["tiles"]
                print(f"| {', '.join(map(str, shape))} | {kind} | {design} | "
                      f"{'adjoint' if adjoint else 'forward'} | W = {t.time_warps}, "
                      f"U = {t.unroll}, C = {r['chunks']} | {r['registers']} ({r['source']}) | "
                      f"{r['programs']} ({r['at_once']}) | {r['in_flight_mib']:.1f} MiB | "
                      f"{100 * r['fraction']:.0f} % | {r['ms']:.3f} |")


if __name__ == "__main__":
    main()
