#!/usr/bin/env bash
# CI's nbgrader lane: the course as an nbgrader course, with nbgrader itself.
#
# nbgrader lives in a virtual environment of its own (never in requirements.txt); the
# notebooks run in the course's kernel (the "python3" kernel of $LRNN_PYTHON's environment,
# found through JUPYTER_PATH), with LRNN_GRADING=1 so that a failed check() raises and
# nbgrader marks its test cell failed. Chapter 1 only, to stay within a few minutes:
#   1. every built exercise notebook passes nbgrader's metadata validation;
#   2. `lrnn grade nbgrader` exports chapter 1, `nbgrader generate_assignment` releases it;
#   3. `nbgrader autograde` scores the solution 15, the released blank 0, a partial answer 13;
#   4. `nbgrader validate` reads the exercise without a metadata error (its tests fail: it
#      is blank). The solution's own run is step 3's "honest" autograde.
set -euo pipefail
cd "$(dirname "$0")/.."
PY="${LRNN_PYTHON:-python3}"
STEM=01_linear_recurrence
work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT
start=$SECONDS

# LRNN_NBGRADER_VENV: an environment that already holds nbgrader (else one is made here).
nbvenv="${LRNN_NBGRADER_VENV:-$work/nbgrader-venv}"
if [ ! -x "$nbvenv/bin/nbgrader" ]; then
  python3 -m venv "$nbvenv"
  "$nbvenv/bin/python" -m pip install --quiet --disable-pip-version-check nbgrader
fi
if [ "${1:-}" = "--prepare" ]; then   # LRNN_NBGRADER_VENV=dir .ci/nbgrader_lane.sh --prepare
  echo "nbgrader lane: nbgrader prepared in $nbvenv ($(( SECONDS - start )) s)"; exit 0
fi
nbg() { PATH="$nbvenv/bin:$PATH" "$nbvenv/bin/nbgrader" "$@"; }   # it runs its own alembic
prefix="$("$PY" -c 'import sys; print(sys.prefix)')"
if [ ! -d "$prefix/share/jupyter/kernels/python3" ]; then
  "$PY" -m ipykernel install --sys-prefix --name python3 >/dev/null
fi
export JUPYTER_PATH="$prefix/share/jupyter" LRNN_GRADING=1 JAX_PLATFORMS=cpu

echo "nbgrader lane: metadata of every exercise notebook"
"$nbvenv/bin/python" - exercises/[0-9][0-9]_*.ipynb <<'EOF'
import sys
import nbformat
from nbgrader.nbgraderformat import MetadataValidator
v = MetadataValidator()
for path in sys.argv[1:]:
    v.validate_nb(nbformat.read(path, as_version=nbformat.NO_CONVERT))
    print("  valid:", path)
EOF

course="$work/course"
mkdir -p "$course"
cat >"$course/nbgrader_config.py" <<EOF
c = get_config()
c.CourseDirectory.root = "$course"
c.ExecutePreprocessor.timeout = 300
EOF
"$PY" -m lrnn grade nbgrader --chapter 01 --out "$course/source"
(cd "$course" && nbg generate_assignment "$STEM" --force)
released="$course/release/$STEM/$STEM.ipynb"
if grep -q "BEGIN HIDDEN TESTS\|BEGIN SOLUTION" "$released"; then
  echo "nbgrader lane: the released notebook holds solutions or hidden tests" >&2
  exit 1
fi

for student in honest blank partial; do mkdir -p "$course/submitted/$student/$STEM"; done
cp "$course/source/$STEM/$STEM.ipynb" "$course/submitted/honest/$STEM/$STEM.ipynb"
cp "$released" "$course/submitted/blank/$STEM/$STEM.ipynb"
"$PY" - "$released" "solutions/$STEM.ipynb" "$course/submitted/partial/$STEM/$STEM.ipynb" <<'EOF'
import sys
import nbformat
released, solution, out = sys.argv[1:]
sol = {c.metadata.get("nbgrader", {}).get("grade_id", "").replace(".", "_"): c.source
       for c in nbformat.read(solution, as_version=4).cells}
nb = nbformat.read(released, as_version=4)
for cell in nb.cells:
    gid = cell.metadata.get("nbgrader", {}).get("grade_id", "")
    if gid.endswith("-solution") and gid in sol:
        cell.source = sol[gid]
        if gid == "ex1_5-solution":          # a wrong answer: the 2-norm, not the spectrum
            cell.source = "def spectral_radius(A):\n    return float(np.linalg.norm(A, 2))"
nbformat.write(nb, out)
EOF
(cd "$course" && nbg autograde "$STEM" --force)
(cd "$course" && nbg export --to "$work/grades.csv")
"$PY" - "$work/grades.csv" <<'EOF'
import csv
import sys
rows = {r["student_id"]: float(r["raw_score"]) for r in csv.DictReader(open(sys.argv[1]))}
want = {"honest": 15.0, "blank": 0.0, "partial": 13.0}
print("nbgrader lane: autograde scores", rows)
if rows != want:
    sys.exit(f"nbgrader lane: expected {want}")
EOF

check_validate() {   # file, expected phrase
  out="$(cd "$course" && nbg validate "$1" 2>&1)" || true
  if grep -q "fatal error\|metadata may be corrupted" <<<"$out" || ! grep -q "$2" <<<"$out"; then
    echo "$out" | tail -40 >&2
    echo "nbgrader lane: validate $1: expected '$2'" >&2
    return 1
  fi
  echo "nbgrader lane: validate $(basename "$(dirname "$1")")/$(basename "$1"): $2"
}
cp "exercises/$STEM.ipynb" "$work/exercise.ipynb"
check_validate "$work/exercise.ipynb" "VALIDATION FAILED"
echo "nbgrader lane: passed in $((SECONDS - start)) s"
