"""Registers and compile time of the scan kernel's passes on sm_90, without a GPU.

Lowers each pass of the Pallas kernel (forward, reverse scan, adjoint) to Triton IR for an
abstract H100, as JAX does on a GPU, then compiles it with Triton's own pipeline and reads
``ptxas -v``: the counts behind ``pallas_tuning.PTXAS_SM90`` (TUNING.md "Registers from
ptxas"). The compile step needs ``pip install triton`` (3.9.0 was used; its ``ptxas`` is too
old for the PTX it emits, so ``ptxas-blackwell``, bundled beside it, reads the result).

    python scripts/ptxas_registers.py --out /tmp/ptxas ti-complex:8:16 tv-real:8:32
    python scripts/ptxas_registers.py --out /tmp/ptxas --dump-only ti-complex:8:16

Each argument is KIND:W:U (``Tiles(block_n=32, unroll=U, time_warps=W)``) at (64, 4096, 256)
in one pass. Prints one JSON line per pass; ``--dump-only`` writes the Triton IR and stops.
"""
from __future__ import annotations

import argparse
import inspect
import json
import os
import pathlib
import re
import subprocess
import sys
import time

os.environ.setdefault("JAX_PLATFORMS", "cpu")
os.environ.setdefault("TRITON_ALWAYS_COMPILE", "1")       # time the compile, not the cache
os.environ.setdefault("TRITON_DEFAULT_FP_FUSION", "1")    # Triton 3.9's default, said aloud

from lrnn._io import atomic_write_text  # noqa: E402 - after the environment it reads

SHAPE = (64, 4096, 256)
PASSES = ("forward", "reverse", "adjoint")     # the adjoint is a reverse scan that reads x


def parse_case(text: str):
    try:
        kind, w, u = text.split(":")
        w, u = int(w), int(u)
    except ValueError:
        raise SystemExit(f"case: got {text!r}, expected KIND:W:U such as ti-complex:8:16")
    if kind not in ("ti-real", "ti-complex", "tv-real", "tv-complex") or w < 1 or u < 1:
        raise SystemExit(f"case: got {text!r}, expected KIND in ti-real, ti-complex, tv-real, "
                         "tv-complex and positive W and U")
    return kind, w, u


def dump(kind: str, w: int, u: int, pass_: str) -> tuple[str, int]:
    """The Triton IR of one pass, and the num_warps JAX asks for."""
    import jax
    import jax.numpy as jnp
    from jax._src.pallas.triton import lowering
    from lrnn.scan import pallas
    from lrnn.scan.pallas_triton import Tiles

    tiles = Tiles(block_n=32, unroll=u, warps=1, stages=1, time_warps=w)
    dtype = jnp.complex64 if kind.endswith("complex") else jnp.float32
    b = jax.ShapeDtypeStruct(SHAPE, dtype)
    a = jax.ShapeDtypeStruct(SHAPE[-1:], dtype) if kind.startswith("ti") else b
    captured = []
    real = lowering.lower_jaxpr_to_triton_module

    def capture(*args, **kwargs):
        result = real(*args, **kwargs)
        caller = inspect.currentframe().f_back.f_locals          # pallas_call_lowering's
        captured.append((result.module.operation.get_asm(enable_debug_info=False),
                         caller["num_warps"]))
        return result

    def scan(a, b):
        ap, bp = pallas._as_planes(a, b)
        run = dict(tiles=tiles, chunk=SHAPE[1], interpret=False)
        x = bp if pass_ == "adjoint" else None
        return pallas.scan_planes(ap, bp, reverse=pass_ != "forward", x=x, **run)

    lowering.lower_jaxpr_to_triton_module = capture
    try:
        with pallas.cuda_lowering_target():
            jax.jit(scan).trace(a, b).lower(lowering_platforms=("cuda",))
    finally:
        lowering.lower_jaxpr_to_triton_module = real
    if len(captured) != 1:
        raise RuntimeError(f"expected one pallas_call for {kind}:{w}:{u} {pass_}, "
                           f"lowered {len(captured)}")
    return captured[0]


def compile_and_count(path: pathlib.Path, num_warps: int) -> dict:
    import triton
    from triton.backends.compiler import GPUTarget

    start = time.perf_counter()
    kernel = triton.compile(str(path), target=GPUTarget("cuda", 90, 32),
                            options={"num_warps": num_warps, "num_stages": 1})
    seconds = time.perf_counter() - start
    ptx = path.with_suffix(".ptx")
    atomic_write_text(ptx, kernel.asm["ptx"])
    ptxas = pathlib.Path(triton.__file__).parent / "backends/nvidia/bin/ptxas-blackwell"
    report = subprocess.run([str(ptxas), "-v", "--gpu-name", "sm_90a", "-o", os.devnull,
                             str(ptx)], capture_output=True, text=True).stderr
    used = re.search(r"Used (\d+) registers", report)
    spill = re.search(r"(\d+) bytes spill stores, (\d+) bytes spill loads", report)
    return {"registers": int(used.group(1)) if used else None,
            "spill_store_bytes": int(spill.group(1)) if spill else None,
            "compile_s": round(seconds, 1), "ptxas": report.strip().splitlines()[-3:]}


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("cases", nargs="+", help="KIND:W:U, e.g. ti-complex:8:16")
    parser.add_argument("--out", required=True, help="folder for the .ttir and .ptx files")
    parser.add_argument("--passes", default="forward,reverse,adjoint")
    parser.add_argument("--dump-only", action="store_true")
    args = parser.parse_args(argv)
    cases = [parse_case(c) for c in args.cases]
    passes = [p.strip() for p in args.passes.split(",")]
    if not passes or any(p not in PASSES for p in passes):
        raise SystemExit(f"--passes: got {args.passes!r}, expected a comma-separated subset "
                         f"of {', '.join(PASSES)}")
    out = pathlib.Path(args.out)
    if out.exists() and not out.is_dir():
        raise SystemExit(f"--out: got {args.out!r}, which is a file; expected a folder")
    out.mkdir(parents=True, exist_ok=True)
    for kind, w, u in cases:
        for pass_ in passes:
            ir, num_warps = dump(kind, w, u, pass_)
            path = out / f"{kind}_W{w}_U{u}_{pass_}.ttir"
            atomic_write_text(path, ir)
            row = {"kind": kind, "pass": pass_, "W": w, "U": u, "num_warps": num_warps,
                   "ttir": str(path)}
            if not args.dump_only:
                row.update(compile_and_count(path, num_warps))
            print(json.dumps(row), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
