#!/usr/bin/env bash
# Download here, into .whl/ (git-ignored), the wheels that a GPU machine without network lacks,
# for Python 3.12 on manylinux x86_64, at the versions installed for $PYTHON (the environment
# the course was tested in). It assumes the machine has JAX with CUDA, numpy, scipy, matplotlib,
# optax, tqdm, torch, triton, einops, pytest and hypothesis; `lrnn bench gpu`'s grading and
# notebook parts and the peers also need these. scripts/gpu_run.sh installs them there.
#
#     PYTHON=path/to/python bash scripts/gpu_wheels.sh [--no-peers]
#
# Prints each wheel's size and the total with the tree; refuses to leave more than the budget.
set -euo pipefail
cd "$(dirname "$0")/.."
py=${PYTHON:-python3}
budget_mib=${BUDGET_MIB:-64}     # the most the wheels and the tree may weigh together, MiB
# mlxtend (solutions), the notebook runner (nbformat, nbclient, ipykernel and what they import),
# ipywidgets (chapter widgets).
names="mlxtend nbformat nbclient ipykernel jupyter_client jupyter_core traitlets fastjsonschema
jsonschema jsonschema-specifications referencing rpds-py tornado pyzmq comm debugpy ipython
ipython-pygments-lexers jedi parso matplotlib-inline prompt_toolkit wcwidth pexpect ptyprocess
decorator stack-data asttokens executing pure_eval nest-asyncio platformdirs ipywidgets
widgetsnbextension jupyterlab_widgets"
peers="accelerated-scan fla-core"
[ "${1:-}" = "--no-peers" ] && peers=""

pins=$("$py" - $names <<'PY'
import sys
from importlib import metadata
for name in sys.argv[1:]:
    try:
        print(f"{name}=={metadata.version(name)}")
    except metadata.PackageNotFoundError:
        print(f"# {name}: not installed in {sys.executable}; not carried", file=sys.stderr)
PY
)
tmp=$(mktemp -d .whl.tmp.XXXXXX)
trap 'rm -rf "$tmp"' EXIT
plat="--platform manylinux_2_28_x86_64 --platform manylinux_2_27_x86_64 --platform manylinux_2_17_x86_64
--platform manylinux2014_x86_64 --platform manylinux1_x86_64 --platform manylinux_2_24_x86_64
--platform manylinux_2_31_x86_64 --platform manylinux_2_34_x86_64 --platform manylinux_2_35_x86_64"
get() { "$py" -m pip download -q --no-deps --only-binary=:all: --python-version 3.12 \
          --implementation cp $plat -d "$tmp" "$@"; }
get $pins
for p in $peers; do                      # newest wheel; a peer that has none is said, not fatal
  get "$p" || echo "# peer $p: no wheel for Python 3.12 manylinux x86_64; not carried" >&2
done
rm -rf .whl && mv "$tmp" .whl && trap - EXIT
du -b .whl/*.whl | sort -n | awk '{printf "%8.2f MiB  %s\n", $1/1048576, $2}'
whl=$(du -sb .whl | cut -f1)
tree=$(git ls-files -co --exclude-standard -z | xargs -0 du -cb 2>/dev/null | tail -1 | cut -f1)
awk -v w="$whl" -v t="$tree" -v b="$budget_mib" 'BEGIN {
  printf "wheels %.2f MiB + tree %.2f MiB = %.2f MiB (budget %d MiB)\n", w/2^20, t/2^20, (w+t)/2^20, b
  exit ((w + t) / 2^20 < b ? 0 : 1) }' || { echo "over the budget: drop the peers (--no-peers)" >&2; exit 1; }
