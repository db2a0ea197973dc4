#!/usr/bin/env bash
# Everything the course still has to measure on a GPU, in steps of under 10 minutes each, for a
# lent machine (a fresh image, no network, no .git, only $OUT comes back). GPU.md says how to
# call it. Each step writes into the results folder:
#   STEP.log        its output          STEP.meta.json   device, JAX, commit, command, rc, seconds
#   its results     (JSON, Markdown)    STEP.done        only when it succeeded: the step is skipped
# and, when $OUT is set, the whole folder is packed after every step into $OUT/gpu-results.tgz.
#
#     LRNN_COMMIT=<sha> bash scripts/gpu_run.sh [--results DIR] [--dry-run] [STEP ...]
#
# STEP: env scan plans plans-tv layer targets doctor-library doctor-grading doctor-notebooks train
# train-targets
# (default: all, in this order).
# --dry-run: every step on this CPU at the smallest sizes (JAX_PLATFORMS=cpu), to check that each
# one starts and writes where it should. A .gpu-results.tgz in the tree (carried) is unpacked
# into an empty results folder first, to resume on a fresh machine.
set -uo pipefail
cd "$(dirname "$0")/.."
root=$PWD
dry=0 results="" steps=()
while [ $# -gt 0 ]; do
  case "$1" in
    --dry-run) dry=1 ;;
    --results) [ $# -ge 2 ] || { echo "gpu_run.sh: --results needs a folder" >&2; exit 2; }
               results=$2; shift ;;
    -h|--help) sed -n '2,17p' "$0"; exit 0 ;;
    -*) echo "gpu_run.sh: unknown option $1" >&2; exit 2 ;;
    *) steps+=("$1") ;;
  esac
  shift
done
all=(env scan plans plans-tv layer targets doctor-library doctor-grading doctor-notebooks train train-targets)
[ ${#steps[@]} -eq 0 ] && steps=("${all[@]}")
for s in "${steps[@]}"; do
  case " ${all[*]} " in *" $s "*) ;; *) echo "gpu_run.sh: unknown step '$s' (one of: ${all[*]})" >&2; exit 2 ;; esac
done
if [ -z "$results" ]; then
  if [ -n "${OUT:-}" ]; then results=/tmp/lrnn-gpu-results; else results=$root/.gpu-results; fi
fi
mkdir -p "$results" || { echo "gpu_run.sh: cannot create the results folder $results" >&2; exit 2; }
[ -w "$results" ] || { echo "gpu_run.sh: the results folder $results is not writable" >&2; exit 2; }
if [ -f "$root/.gpu-results.tgz" ] && [ -z "$(ls -A "$results")" ]; then
  tar xzf "$root/.gpu-results.tgz" -C "$results" && echo "resumed from .gpu-results.tgz"
fi
commit=${LRNN_COMMIT:-$(git -C "$root" rev-parse HEAD 2>/dev/null || echo unknown)}
step_limit=${STEP_LIMIT_S:-540}                 # each command may run 600 s: leave room to pack

# The environment: the tree's src/, and the carried wheels (.whl/) the image lacks.
py=${PYTHON:-python3}
site=${LRNN_SITE:-/tmp/lrnn-site}
export PYTHONPATH="$root/src${PYTHONPATH:+:$PYTHONPATH}" PYTHONUNBUFFERED=1 MPLBACKEND=Agg
if [ $dry = 1 ]; then
  echo "dry run: the carried wheels (Python 3.12) are not installed; $py's own packages are used"
elif compgen -G "$root/.whl/*.whl" > /dev/null; then
  if [ ! -f "$site/.installed" ]; then
    "$py" -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade \
        --target "$site" "$root"/.whl/*.whl && touch "$site/.installed" \
      || echo "warning: the carried wheels did not install" >&2
  fi
  export PYTHONPATH="$PYTHONPATH:$site" JUPYTER_PATH="$site/share/jupyter"
fi
if [ $dry = 1 ]; then
  export JAX_PLATFORMS=cpu
  dev=cpu scan_args="--shapes 1x64x16 --tv-shapes 1x64x16 --repeats 1 --pallas yes"
  layer_args="--d-model 8 --d-state 16 --heads 2 --batch 1 --length 32 --models none --repeats 1"
  doctor_args="--quick"
  train_args="smoke"
  plans_args="--interpret --max-tiles 1 --repeats 1 --copy-bytes 65536 --xla-methods associative"
  plans_ti="--shapes 1x64x16" plans_tv="--shapes 1x64x16"
else
  dev=gpu scan_args="--repeats 20" layer_args="--construction" doctor_args="" train_args="gpu-targets"
  # the tuning sweep (measured tiles and the time-parallel design), one kind per step
  plans_args="--budget-s 420"
  plans_ti="--shapes 16x16384x256,64x4096x256,32x1024x512,1x65536x64"
  plans_tv="--shapes 8x4096x1024,16x16384x256,1x65536x1024"
fi

meta() {  # step rc seconds command...
  local step=$1 rc=$2 secs=$3; shift 3
  "$py" - "$results/$step.meta.json" "$step" "$rc" "$secs" "$commit" "$*" <<'PY'
import json, os, platform, sys
path, step, rc, secs, commit, command = sys.argv[1:]
info = {"step": step, "rc": int(rc), "seconds": float(secs), "commit": commit,
        "command": command, "host": platform.node(), "python": platform.python_version()}
try:
    import jax
    info["jax"] = jax.__version__
    info["device"] = [d.device_kind for d in jax.devices()]
except Exception as err:                                   # the step's own log has the cause
    info["jax_error"] = f"{type(err).__name__}: {err}"
tmp = path + ".tmp"
with open(tmp, "w") as f:
    json.dump(info, f, indent=1)
os.replace(tmp, path)
PY
}

pack() {
  [ -n "${OUT:-}" ] || return 0
  local tmp="$OUT/.gpu-results.tgz.tmp"
  tar czf "$tmp" -C "$results" . || return 1
  if [ "$(stat -c %s "$tmp")" -gt $((15 * 1048576)) ]; then   # $OUT returns files up to 16 MiB
    echo "note: results with checkpoints exceed 15 MiB; packed without checkpoints/"
    tar czf "$tmp" --exclude=./checkpoints -C "$results" . || return 1
  fi
  mv "$tmp" "$OUT/gpu-results.tgz"
}

status=0
step() {  # name command...
  local name=$1; shift
  if [ -f "$results/$name.done" ]; then echo "= $name: done before, skipped"; return 0; fi
  echo "+ $name: $*"
  local t0=$SECONDS rc
  timeout "$step_limit" "$@" > "$results/$name.log" 2>&1; rc=$?
  meta "$name" "$rc" "$((SECONDS - t0))" "$@"
  if [ $rc = 0 ]; then touch "$results/$name.done"; else
    status=1; local why=""; [ $rc = 124 ] && why=", stopped at ${step_limit} s"
    echo "! $name failed (rc $rc$why); tail of $results/$name.log:"
    tail -5 "$results/$name.log"
  fi
  pack
}

R=$results
for s in "${steps[@]}"; do
  case $s in
    env) step env "$py" -c "import lrnn, jax, nbclient, ipykernel, mlxtend; print(jax.__version__, jax.devices()); import lrnn.scan.pallas as p; print(p.kernel_status())" ;;
    scan) step scan "$py" -m lrnn bench scan --device $dev $scan_args --out "$R/bench_scan_$dev.json" --targets-md "$R/scan_targets_$dev.md" ;;
    plans) step plans "$py" -m lrnn bench plans --device $dev $plans_args $plans_ti --kinds ti-complex --out "$R/plans_ti_$dev.jsonl" ;;
    plans-tv) step plans-tv "$py" -m lrnn bench plans --device $dev $plans_args $plans_tv --kinds tv-real --out "$R/plans_tv_$dev.jsonl" ;;
    layer) step layer "$py" -m lrnn bench layer --device $dev $layer_args --out "$R/bench_layer_$dev.json" ;;
    targets) step targets "$py" -m lrnn bench targets --scan "$R/bench_scan_$dev.json" --layer "$R/bench_layer_$dev.json" --out "$R/targets_$dev.md" ;;
    # the doctor in three parts, each under the step limit, each with its own report folder
    doctor-library) mkdir -p "$R/$s" && step $s "$py" -m lrnn doctor $doctor_args --skip grading notebooks --out-dir "$R/$s" ;;
    doctor-grading) mkdir -p "$R/$s" && step $s "$py" -m lrnn doctor $doctor_args --skip library notebooks gpu --out-dir "$R/$s" ;;
    doctor-notebooks) mkdir -p "$R/$s" && step $s "$py" -m lrnn doctor $doctor_args --skip library grading gpu --out-dir "$R/$s" ;;
    train) step train "$py" -m lrnn experiments run $train_args --out "$R/results" --checkpoint-dir "$R/checkpoints" --no-progress ;;
    train-targets) step train-targets "$py" -m lrnn experiments targets --dir "$R/results" ;;
  esac
done
echo "results: $results${OUT:+ (packed into $OUT/gpu-results.tgz)}"
exit "$status"
