#!/usr/bin/env bash
# CI's Colab lane: the course in Colab's own package set (.ci/colab-pins.txt, made by
# scripts/colab_pins.py from Colab's published freeze), run as a student runs it.
#   1. a virtual environment on Python 3.13 (Colab's minor version; python3 if none is found)
#      with the pinned packages only;
#   2. chapter 1's own setup cell, run in a kernel with LRNN_INSTALL_SOURCE pointed at this
#      checkout; `pip freeze` of every preinstalled package must be unchanged afterwards;
#   3. at once, as two cores allow:
#      - every chapter (book/*.ipynb) under nbval in that environment: every cell must run, and
#        the cells tagged nbval-check-output must reproduce their committed output (the book is
#        executed here, where students run it, and not a second time in the main lane:
#        `python -m pytest book` runs it in any other environment);
#      - every chapter's exercise notebook completed with the model solution, as a student
#        hands it in (tests/submissions/build.py), graded there (`python -m lrnn grade`,
#        bubblewrap sandbox) with float32 products rounded to TF32 as an A100, L4 or H100 runs
#        them (LRNN_EMULATE_TF32=1, in the kernels and the grader): full marks (the grader
#        executes each to the end in a kernel of this environment; tests/test_submissions.py
#        grades the other notebooks students hand in);
#   4. tests/test_widgets.py on Colab's ipywidgets (7.7.1; CI's main lane tests 8).
# pytest comes with Colab; nbval and coverage (its one requirement that Colab lacks) are
# installed beside the venv, in $venv/test-tools, on the test runner's path (its kernels inherit
# it): neither is a package the course imports or Colab has, so the course runs on Colab's.
# Usage: .ci/colab_lane.sh            (COLAB_VENV=dir reuses a venv built before, for local work)
#        COLAB_VENV=dir .ci/colab_lane.sh --prepare
#                                     builds step 1's venv in dir and stops (.ci/run does this
#                                     while the tests run: it waits on the network, not the CPU)
set -uo pipefail
cd "$(dirname "$0")/.."
repo="$PWD"
tmp="$(mktemp -d)"
lane_start=$SECONDS
step_start=$SECONDS
fail() {
  echo "colab lane: $*" >&2; echo "colab lane: kept $tmp (executed notebooks, freezes, grade log)"
  echo "COLAB LANE: FAIL ($(( SECONDS - lane_start )) s)"; exit 1
}
step() { echo "colab lane: $1 ($(( SECONDS - step_start )) s)"; step_start=$SECONDS; }

python=""
for candidate in "${COLAB_PYTHON:-}" "${PYENV_ROOT:-$HOME/.pyenv}/versions/3.13.0/bin/python3.13" "$(command -v python3.13 || true)"; do
  if [ -n "$candidate" ] && [ -x "$candidate" ]; then python="$candidate"; break; fi
done
if [ -z "$python" ]; then
  python="$(command -v python3)"
  echo "colab lane: NOTE no Python 3.13 here (Colab runs 3.13); using $python ($("$python" -V 2>&1))"
fi

if [ "${1:-}" = "--prepare" ] && [ -z "${COLAB_VENV:-}" ]; then
  fail "--prepare needs COLAB_VENV (where to build the venv)"
fi
venv="${COLAB_VENV:-$tmp/venv}"
if [ -x "$venv/bin/python" ]; then
  echo "colab lane: reusing $venv (lrnn, if a former run installed it, is removed)"
  "$venv/bin/python" -m pip uninstall --quiet --yes lrnn >/dev/null 2>&1 || true
else
  "$python" -m venv "$venv" || fail "cannot make a venv with $python"
  "$venv/bin/python" -m pip install --quiet --no-deps -r .ci/colab-pins.txt >"$tmp/pip.log" 2>&1 \
    || { grep -v "^WARNING: Location" "$tmp/pip.log" | tail -20; fail "cannot install the pins"; }
fi
vpy="$venv/bin/python"
tools="$venv/test-tools"
if [ ! -d "$tools/nbval" ]; then
  "$vpy" -m pip install --quiet --no-deps --target "$tools" "nbval==0.11.0" "coverage==7.17.5" \
    >"$tmp/pip-tools.log" 2>&1 \
    || { grep -v "^WARNING: Location" "$tmp/pip-tools.log" | tail -20; fail "cannot install nbval"; }
fi
if [ "${1:-}" = "--prepare" ]; then
  echo "colab lane: venv with Colab's pins prepared in $venv ($(( SECONDS - lane_start )) s)"
  rm -rf "$tmp"; exit 0
fi
"$vpy" -m pip check >/dev/null || { "$vpy" -m pip check; fail "the pinned set is inconsistent"; }
"$vpy" -c 'import jax, IPython, ipywidgets, sys; print(f"colab lane: Python {sys.version.split()[0]}, jax {jax.__version__}, IPython {IPython.__version__}, ipywidgets {ipywidgets.__version__}")' \
  || fail "the pinned venv does not import"
"$vpy" -m pip show lrnn >/dev/null 2>&1 && fail "lrnn is already installed in $venv: the setup cell must install it"
step "1/4 venv with Colab's pins"

export JAX_PLATFORMS=cpu
# ipykernel 6.17 on Python 3.13 prints a debugger note on every kernel start: not the course's.
export PYDEVD_DISABLE_FILE_VALIDATION=1
# pip's own version line is left out: Colab's pip may upgrade itself, the course must not care.
"$vpy" -m pip freeze --all | sort >"$tmp/freeze-before.txt"
export LRNN_INSTALL_SOURCE="lrnn @ file://$repo"
# pip keeps wheels it built from a folder: without this, a wheel of an older checkout at the
# same path could be installed instead of this one.
export PIP_NO_CACHE_DIR=1
"$vpy" - "$repo/book/01_linear_recurrence.ipynb" "$tmp" <<'EOF' || fail "chapter 1's setup cell failed"
import sys, nbformat
from nbclient import NotebookClient
path, tmp = sys.argv[1], sys.argv[2]
nb = nbformat.read(path, as_version=4)
setup = [c for c in nb.cells if c.cell_type == "code" and "find_spec(\"lrnn\")" in c.source]
assert setup, f"{path}: no setup cell (one that installs lrnn when it is missing)"
cell = setup[0]
assert "LRNN_INSTALL_SOURCE" in cell.source, \
    f"{path}: the setup cell ignores LRNN_INSTALL_SOURCE (run python scripts/sync_headers.py)"
one = nbformat.v4.new_notebook(cells=[nbformat.v4.new_code_cell(cell.source)])
NotebookClient(one, timeout=600, kernel_name="python3",
               resources={"metadata": {"path": tmp}}).execute()
for out in one.cells[0].outputs:
    print("  setup cell:", (out.get("text") or str(out.get("data", {}).get("text/plain", ""))).strip())
EOF
"$vpy" -m pip freeze --all | sort >"$tmp/freeze-after.txt"
changed="$(comm -23 "$tmp/freeze-before.txt" "$tmp/freeze-after.txt")"
added="$(comm -13 "$tmp/freeze-before.txt" "$tmp/freeze-after.txt" | tr '\n' ' ')"
echo "colab lane: the setup cell added: ${added:-nothing}"
if [ -n "$changed" ]; then
  echo "colab lane: preinstalled packages changed or removed by the setup cell:"; echo "$changed"
  fail "the setup cell changed Colab's packages"
fi
echo "colab lane: $(wc -l <"$tmp/freeze-before.txt") preinstalled packages unchanged"
step "2/4 setup cell as a student runs it"

# Three jobs at once on CI's two cores: chapter 7 (the longest to run), the other chapters, and
# the grading of the model solutions; each waits on its own kernels, so together they keep both
# busy. The book's kernels share one JAX compilation cache (a program compiled by one chapter is
# read back by the next that compiles it; the results are the same); the grader's kernels keep
# their own, each.
nbval() {   # nbval LOG NOTEBOOK...
  local log="$1"; shift
  PYTHONPATH="$tools" JAX_COMPILATION_CACHE_DIR="$tmp/jax-cache" \
    JAX_PERSISTENT_CACHE_MIN_COMPILE_TIME_SECS=0 JAX_PERSISTENT_CACHE_MIN_ENTRY_SIZE_BYTES=0 \
    "$vpy" -m pytest -q -p no:cacheprovider -o addopts="" "$@" >"$log" 2>&1
}
nbval "$tmp/book-07.log" book/07_*.ipynb & long=$!
# shellcheck disable=SC2046
nbval "$tmp/book-rest.log" $(ls book/*.ipynb | grep -v '^book/07_') & rest=$!
"$vpy" - "$tmp/handed-in" <<'EOF' || fail "the exercise notebooks could not be completed"
import sys
sys.path.insert(0, "tests")
from submissions import build
for chapter in build.CHAPTERS:
    build.write(build.solution(chapter), sys.argv[1], "solution", chapter)
EOF
LRNN_EMULATE_TF32=1 "$vpy" -m lrnn grade "$tmp/handed-in" --out "$tmp/gradebook.csv" \
  --sandbox bwrap --workers 1 --feedback-dir "$tmp/feedback" >"$tmp/grade.log" 2>&1 & grade=$!
book=0
for job in "$long:$tmp/book-07.log" "$rest:$tmp/book-rest.log"; do
  if wait "${job%%:*}"; then tail -1 "${job#*:}"; else tail -60 "${job#*:}"; book=1; fi
done
graded=0; wait "$grade" || { tail -30 "$tmp/grade.log"; graded=1; }
[ "$book" -eq 0 ] || fail "a chapter failed under nbval in Colab's package set"
[ "$graded" -eq 0 ] || fail "grading failed"
"$vpy" - "$tmp/gradebook.csv" "$tmp"/handed-in/*.ipynb <<'EOF' || fail "the model solutions did not get full marks"
import csv, sys
rows = list(csv.DictReader(open(sys.argv[1], newline="", encoding="utf-8")))
short = [r for r in rows if float(r["total"]) != float(r["max_total"]) or float(r["max_total"]) <= 0]
for r in rows:
    print(f"  {r.get('submission', '?')}: {r['total']}/{r['max_total']}")
if len(rows) != len(sys.argv) - 2:
    sys.exit(f"{len(rows)} rows in the gradebook for {len(sys.argv) - 2} notebooks")
sys.exit(1 if short else 0)
EOF
step "3/4 every chapter under nbval, and the model solutions graded under emulated TF32"

"$vpy" -m pytest -q -p no:cacheprovider -o addopts="" tests/test_widgets.py 2>&1 | tail -3
[ "${PIPESTATUS[0]}" -eq 0 ] || fail "tests/test_widgets.py failed on Colab's ipywidgets"
step "4/4 widget tests on Colab's ipywidgets"
echo "COLAB LANE: PASS ($(( SECONDS - lane_start )) s; Python $("$vpy" -c 'import sys; print(sys.version.split()[0])'), pins of $(sed -n 's/^# source: .*date //p' .ci/colab-pins.txt))"
rm -rf "$tmp"
