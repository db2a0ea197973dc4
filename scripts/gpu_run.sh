#!/usr/bin/env bash
# One command for a GPU session: everything the course still has to measure on a GPU, most
# valuable first, each result stored in book/data/ with the device, JAX version and commit.
#
#     bash scripts/gpu_run.sh            # about 25 minutes on one H100 (training last)
#     bash scripts/gpu_run.sh --no-train # benchmarks and the doctor only (about 10 minutes)
#
# Optional peers for the scan table: pip install -e ".[peers]" (skipped with a notice if absent).
set -uo pipefail
cd "$(dirname "$0")/.."
status=0
run() { echo "+ $*"; "$@" || status=1; }

run python -m lrnn bench scan --device gpu --repeats 20 \
    --out book/data/bench_scan_gpu.json --targets-md book/data/scan_targets_gpu.md
run python -m lrnn bench layer --device gpu --construction --out book/data/bench_layer_gpu.json
run python -m lrnn bench targets --scan book/data/bench_scan_gpu.json \
    --layer book/data/bench_layer_gpu.json --out book/data/targets_gpu.md
# library vs float64, every solution graded, every notebook timed, the scan targets
run python -m lrnn doctor --out-dir book/data
if [ "${1:-}" != "--no-train" ]; then
  # resumable: run again in a later session to finish what a time limit cut short
  run python -m lrnn experiments run gpu-targets --out book/data/results --checkpoint-dir .gpu/checkpoints
  run python -m lrnn experiments targets
fi
exit "$status"
