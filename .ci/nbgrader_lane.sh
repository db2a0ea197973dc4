#!/usr/bin/env bash
# CI's nbgrader lane: the course as an nbgrader course, with nbgrader itself.
#
# nbgrader lives in a virtual environment of its own (never in requirements.txt); the
# notebooks run in the course's kernel (the "python3" kernel of $LRNN_PYTHON's environment,
# found through JUPYTER_PATH), with LRNN_GRADING=1 so that a failed check() raises and
# nbgrader marks its test cell failed.
#   1. every built exercise notebook passes nbgrader's metadata validation;
#   2. `lrnn grade nbgrader` exports every chapter and `nbgrader generate_assignment` releases
#      each: no released notebook holds a solution or a hidden test, and each keeps the points
#      of its chapter's automatic tests;
#   3. chapter 1 (executing every chapter would take minutes; the other entry points grade
#      them, tests/test_submissions.py): `nbgrader autograde` scores the released notebook
#      filled with the model solution as a student hands it in 15, the released blank 0, and a
#      partial answer 13;
#   4. `nbgrader validate` reads the exercise without a metadata error (its tests fail: it
#      is blank).
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
"$PY" -m lrnn grade nbgrader --out "$course/source"
# nbgrader's own API, in one process: the same GenerateAssignment as the command, without an
# interpreter and nbgrader's imports per chapter.
(cd "$course" && PATH="$nbvenv/bin:$PATH" "$nbvenv/bin/python" - >"$work/generate.log" 2>&1 <<'EOF'
import sys
from pathlib import Path
from traitlets.config import Config
from nbgrader.apps.api import NbGraderAPI
from nbgrader.coursedir import CourseDirectory
config = Config()
config.CourseDirectory.root = str(Path.cwd())
api = NbGraderAPI(coursedir=CourseDirectory(config=config), config=config)
for stem in sorted(p.name for p in Path("source").iterdir() if p.is_dir()):
    result = api.generate_assignment(stem, force=True)
    if not result["success"]:
        sys.exit(f"cannot release {stem}:\n{result.get('error', '')}\n{result.get('log', '')}")
EOF
) || { tail -30 "$work/generate.log" >&2; echo "nbgrader lane: generate_assignment failed" >&2; exit 1; }
"$PY" - "$course" <<'EOF'
import sys
from pathlib import Path
import nbformat
course = Path(sys.argv[1])
sources = sorted(course.glob("source/*/*.ipynb"))
if len(sources) != 8:
    sys.exit(f"nbgrader lane: {len(sources)} chapters exported, expected 8")
def auto_points(nb):
    return sum(float(c.metadata["nbgrader"].get("points", 0)) for c in nb.cells
               if c.metadata.get("nbgrader", {}).get("grade") and c.cell_type == "code")
for source in sources:
    released = course / "release" / source.parent.name / source.name
    text = released.read_text(encoding="utf-8")
    if "BEGIN HIDDEN TESTS" in text or "BEGIN SOLUTION" in text:
        sys.exit(f"nbgrader lane: {released.name} holds solutions or hidden tests")
    want, got = (auto_points(nbformat.read(p, as_version=4)) for p in (source, released))
    if want <= 0 or got != want:
        sys.exit(f"nbgrader lane: {released.name} keeps {got} automatic points of {want}")
    print(f"nbgrader lane: released {source.parent.name}: {got:g} automatic points")
EOF
released="$course/release/$STEM/$STEM.ipynb"

for student in honest blank partial; do mkdir -p "$course/submitted/$student/$STEM"; done
cp "$released" "$course/submitted/blank/$STEM/$STEM.ipynb"
# The released notebook with each answer cell filled as a student fills it: the model solution
# without its markers (honest), and the same with one wrong answer (partial).
"$PY" - "$released" "solutions/$STEM.ipynb" "$course/submitted" "$STEM" <<'EOF'
import sys
import nbformat
released, solution, submitted, stem = sys.argv[1:]
sol = {c.metadata.get("nbgrader", {}).get("grade_id", "").replace(".", "_"): c.source
       for c in nbformat.read(solution, as_version=4).cells}
wrong_answer = {   # the 2-norm, not the spectrum
    "ex1_5-solution": "def spectral_radius(A):\n    return float(np.linalg.norm(A, 2))"}
for student, wrong in (("honest", {}), ("partial", wrong_answer)):
    nb = nbformat.read(released, as_version=4)
    filled = 0
    for cell in nb.cells:
        gid = cell.metadata.get("nbgrader", {}).get("grade_id", "")
        if gid.endswith("-solution") and gid in sol:
            lines = [line for line in sol[gid].splitlines()
                     if line.strip() not in ("### BEGIN SOLUTION", "### END SOLUTION")]
            cell.source = wrong.get(gid, "\n".join(lines))
            filled += 1
    if not filled:
        sys.exit("nbgrader lane: no answer cell to fill in the released notebook")
    nbformat.write(nb, f"{submitted}/{student}/{stem}/{stem}.ipynb")
EOF
(cd "$course" && nbg autograde "$STEM" --force)
(cd "$course" && nbg export --to "$work/grades.csv")
"$PY" - "$work/grades.csv" "$STEM" <<'EOF'
import csv
import sys
rows = {r["student_id"]: float(r["raw_score"]) for r in csv.DictReader(open(sys.argv[1]))
        if r["assignment"] == sys.argv[2]}
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
