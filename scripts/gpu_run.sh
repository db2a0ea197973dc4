#!/usr/bin/env bash
# Every GPU measurement of the course in one time budget: `python -m lrnn bench gpu` (GPU.md),
# run from this checkout's src/, with the wheels in .whl/ installed first when that folder holds
# any (a GPU machine without network; scripts/gpu_wheels.sh downloads them).
#
#     bash scripts/gpu_run.sh --budget-s 420 [--out DIR] [--pack FILE.tgz] [--dry-run]
#
# Every option goes to `lrnn bench gpu`; DIR defaults to .gpu-results/ at the repository root
# (git-ignored). PYTHON names the interpreter (default python3); LRNN_COMMIT the commit, for a
# copy of the tree without .git.
set -euo pipefail
cd "$(dirname "$0")/.."
root=$PWD
py=${PYTHON:-python3}
out=0 dry=0
for a in "$@"; do
  case "$a" in
    --out|--out=*) out=1 ;;
    --dry-run) dry=1 ;;
    -h|--help) sed -n '2,10p' "$0"; exec "$py" -m lrnn bench gpu --help ;;
  esac
done
args=("$@")
[ $out = 1 ] || args+=(--out "$root/.gpu-results")
export PYTHONPATH="$root/src${PYTHONPATH:+:$PYTHONPATH}" PYTHONUNBUFFERED=1 MPLBACKEND=Agg
if [ $dry = 0 ] && compgen -G "$root/.whl/*.whl" > /dev/null; then
  site=$(mktemp -d)
  if "$py" -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --target "$site" \
      "$root"/.whl/*.whl; then
    export PYTHONPATH="$PYTHONPATH:$site" JUPYTER_PATH="$site/share/jupyter"
  else
    echo "gpu_run.sh: warning: the wheels in .whl/ did not install; the parts that need them fail" >&2
  fi
fi
exec "$py" -m lrnn bench gpu "${args[@]}"
