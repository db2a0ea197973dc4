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
#   3. every chapter: nbgrader's autograde gives the released notebook filled with the model
#      solution as a student hands it in all its automatic points, the released blank 0, and
#      chapter 1 with one wrong answer all but that answer's points;
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
# Every chapter as students hand it in: the released notebook with each answer cell filled with
# the model solution without its markers (honest) gets all its automatic points, the released
# blank none, and chapter 1 with one wrong answer (partial) all but that answer's 2 points.
for released in "$course"/release/*/*.ipynb; do
  stem="$(basename "$(dirname "$released")")"
  for student in honest blank; do mkdir -p "$course/submitted/$student/$stem"; done
  cp "$released" "$course/submitted/blank/$stem/$stem.ipynb"
done
mkdir -p "$course/submitted/partial/$STEM"
"$PY" - "$course" "$STEM" <<'EOF'
import sys
from pathlib import Path
import nbformat
course, first = Path(sys.argv[1]), sys.argv[2]
wrong_answer = {   # the 2-norm, not the spectrum
    "ex1_5-solution": "def spectral_radius(A):\n    return float(np.linalg.norm(A, 2))"}
for released in sorted(course.glob("release/*/*.ipynb")):
    stem = released.parent.name
    sol = {c.metadata.get("nbgrader", {}).get("grade_id", "").replace(".", "_"): c.source
           for c in nbformat.read(f"solutions/{stem}.ipynb", as_version=4).cells}
    students = [("honest", {})] + ([("partial", wrong_answer)] if stem == first else [])
    for student, wrong in students:
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
            sys.exit(f"nbgrader lane: no answer cell to fill in {released}")
        nbformat.write(nb, course / "submitted" / student / stem / f"{stem}.ipynb")
EOF
# nbgrader's own API in one process, as for the release: the command's Autograde, per student.
(cd "$course" && PATH="$nbvenv/bin:$PATH" "$nbvenv/bin/python" - >"$work/autograde.log" 2>&1 <<'EOF'
import sys
import time
from pathlib import Path
from traitlets.config import Config
from nbgrader.apps.api import NbGraderAPI
from nbgrader.coursedir import CourseDirectory
config = Config()
config.CourseDirectory.root = str(Path.cwd())
config.ExecutePreprocessor.timeout = 300
api = NbGraderAPI(coursedir=CourseDirectory(config=config), config=config)
for folder in sorted(Path("submitted").glob("*/*")):
    student, stem = folder.parent.name, folder.name
    start = time.monotonic()
    result = api.autograde(stem, student, force=True)
    if not result["success"]:
        sys.exit(f"cannot autograde {student}/{stem}:\n{result.get('error', '')}\n"
                 f"{result.get('log', '')}")
    print(f"autograded {student}/{stem} in {time.monotonic() - start:.0f} s", flush=True)
EOF
) || { tail -30 "$work/autograde.log" >&2; echo "nbgrader lane: autograde failed" >&2; exit 1; }
grep "^autograded" "$work/autograde.log" | sed 's/^/nbgrader lane: /'
(cd "$course" && nbg export --to "$work/grades.csv")
"$PY" - "$course" "$work/grades.csv" "$STEM" <<'EOF'
import csv
import sys
from pathlib import Path
import nbformat
course, grades, first = Path(sys.argv[1]), sys.argv[2], sys.argv[3]
def auto_points(nb):
    return sum(float(c.metadata["nbgrader"].get("points", 0)) for c in nb.cells
               if c.metadata.get("nbgrader", {}).get("grade") and c.cell_type == "code")
want = {}
for released in sorted(course.glob("release/*/*.ipynb")):
    stem = released.parent.name
    want[("honest", stem)] = auto_points(nbformat.read(released, as_version=4))
    want[("blank", stem)] = 0.0
want[("partial", first)] = want[("honest", first)] - 2.0
got = {(r["student_id"], r["assignment"]): float(r["raw_score"])
       for r in csv.DictReader(open(grades)) if (r["student_id"], r["assignment"]) in want}
for key in sorted(want):
    print(f"nbgrader lane: autograde {key[0]} {key[1]}: {got.get(key)} (expected {want[key]:g})")
if got != want:
    sys.exit("nbgrader lane: autograde scores differ from the points each submission earned")
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
