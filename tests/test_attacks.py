"""Attacks on the grader, graded with the sandbox active (tests/attacks/README.md).

Every attack in tests/attacks/ is inserted into the blank chapter-1 exercise notebook and
graded in one run (two workers) beside two classmates, a blank and a solved notebook. The
attacks know where everything is (targets.json beside the submissions). The test checks that
no attack scores more than the blank notebook, that the classmates' files, rows and feedback
are byte-identical to a run without the attacks (also a few seconds later, when a detached
process would strike), that nothing outside the sandbox changed or was reached, that no
sandboxed process survives, that each notebook took at most its time limit plus a margin, and
that no hidden test reaches any feedback.

The sandbox must be bubblewrap: with ``LRNN_REQUIRE_SANDBOX=1`` (set by .ci/run) a machine
without it fails the test; elsewhere the test is skipped (the attacks are never run without
the sandbox)."""
import hashlib
import json
import os
import re
import shutil
import socket
import threading
import time
from pathlib import Path

import nbformat
import pytest

from lrnn.course import grading as g
from lrnn.course.exercises import canonical_grade_id
from lrnn.course.grading import remote
from lrnn.course.grading import sandbox as sb

pytestmark = [pytest.mark.notebook, pytest.mark.slow]

ROOT = Path(__file__).resolve().parents[1]
SOLUTIONS = ROOT / "solutions"
ATTACKS = Path(__file__).resolve().parent / "attacks"
STEM = "01_linear_recurrence"
TIMEOUT = 90                  # per notebook
CELL_TIMEOUT = 6              # per cell or test; honest ones take about a second
#: What grading every attack at once may add to the grader's resident memory, in MB.
GRADER_GROWTH_MB = 1024
MARGIN = 15                   # seconds past the notebook limit: killing and restarting
GRADED = ["ex1.1", "ex1.2", "ex1.3", "ex1.4", "ex1.5"]


def bwrap_sandbox(**limits):
    try:
        box = sb.choose("bwrap", **limits)
    except sb.SandboxError as e:
        if os.environ.get("LRNN_REQUIRE_SANDBOX") == "1":
            pytest.fail(f"the sandbox is required here (LRNN_REQUIRE_SANDBOX=1): {e}")
        pytest.skip(f"no bubblewrap sandbox here: {e}")
    return box


def slim(path):
    """The imports, the exercise cells and the test cells of a chapter-1 notebook."""
    nb = nbformat.read(path, as_version=4)
    nb.cells = [c for c in nb.cells if c.metadata.get("nbgrader") or
                (c.cell_type == "code" and "from lrnn.course.check import check" in c.source)]
    return nb


def attack_cells(path):
    text = path.read_text(encoding="utf-8")
    parts = text.split("\n# %%\n")
    assert len(parts) >= 2 and parts[0].lstrip().startswith('"""'), path
    return [p.strip("\n") for p in parts[1:]]


def with_cells(nb, cells):
    """The cells go before the first test cell; a cell starting ``# replaces GRADE_ID``
    replaces that solution cell instead."""
    nb = nbformat.from_dict(nb)
    inserted = []
    for src in cells:
        first = src.splitlines()[0]
        if first.startswith("# replaces "):
            gid = first.split()[-1]
            cell = next(c for c in nb.cells if canonical_grade_id(
                c.metadata.get("nbgrader", {}).get("grade_id")) == gid)
            cell.source = src
        else:
            inserted.append(src)
    first_test = next(i for i, c in enumerate(nb.cells)
                      if c.metadata.get("nbgrader", {}).get("grade"))
    for k, src in enumerate(inserted):
        nb.cells.insert(first_test + k, nbformat.v4.new_code_cell(src))
    return nb


def outside_fences(markdown: str) -> str:
    """The Markdown of a feedback file without its fenced blocks (what renders as Markdown)."""
    out, fence = [], None
    for line in markdown.splitlines():
        stripped = line.strip()
        if fence is None and stripped.startswith("```"):
            fence = stripped[:len(stripped) - len(stripped.lstrip("`"))]
        elif fence is not None and stripped == fence:
            fence = None
        elif fence is None:
            out.append(line)
    return "\n".join(out)


def _status_mb(field: str) -> float:
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith(f"{field}:"):
            return int(line.split()[1]) / 1024
    raise AssertionError(f"no {field} in /proc/self/status")


def reset_peak_rss() -> float:
    """Set this process's peak resident size (``VmHWM``) to its current size (Linux resets it
    when a process writes 5 to its own ``clear_refs``); returns that size in MB."""
    Path("/proc/self/clear_refs").write_text("5")
    return _status_mb("VmRSS")


def peak_rss_mb() -> float:
    return _status_mb("VmHWM")


def test_the_peak_rss_can_be_reset_and_then_measures_what_follows():
    reset_peak_rss()
    before = peak_rss_mb()
    ballast = bytearray(300 * 2 ** 20)
    ballast[::4096] = b"x" * len(ballast[::4096])          # touch every page
    grown = peak_rss_mb()
    del ballast
    reset_peak_rss()
    assert grown - before > 250 and peak_rss_mb() < grown - 250


def tree_digest(folder):
    h = hashlib.sha256()
    for p in sorted(Path(folder).rglob("*")):
        if p.is_file() and "__pycache__" not in p.parts:
            h.update(str(p.relative_to(folder)).encode())
            h.update(p.read_bytes())
    return h.hexdigest()


def sandbox_processes(grader_pid=None):
    """Processes running under a user id of the sandboxes of the grader process
    ``grader_pid`` (default: this one). As root every sandbox has its own user id, drawn from
    its grader's range, so another grader's kernels (another test process's) do not count."""
    mine = sb.grader_uids(os.getpid() if grader_pid is None else grader_pid)
    found = []
    for status in Path("/proc").glob("[0-9]*/status"):
        try:
            for line in status.read_text().splitlines():
                if line.startswith("Uid:"):
                    if int(line.split()[1]) in mine:
                        found.append(int(status.parent.name))
                    break
        except (OSError, ValueError):
            continue
    return found


class Listener:
    """A TCP listener on 127.0.0.1 and a Unix socket: any connection is recorded."""

    def __init__(self, folder):
        self.hits = []
        self.tcp = socket.socket()
        self.tcp.bind(("127.0.0.1", 0))
        self.tcp.listen()
        self.port = self.tcp.getsockname()[1]
        self.path = str(folder / "grader.sock")
        self.unix = socket.socket(socket.AF_UNIX)
        self.unix.bind(self.path)
        self.unix.listen()
        for s in (self.tcp, self.unix):
            threading.Thread(target=self._accept, args=(s,), daemon=True).start()

    def _accept(self, s):
        while True:
            try:
                conn, _ = s.accept()
            except OSError:
                return
            self.hits.append(conn.recv(100))
            conn.close()

    def close(self):
        self.tcp.close()
        self.unix.close()


def test_sandbox_is_what_the_attacks_assume():
    """Before running attacks at all: a sandboxed kernel has its own PID namespace, is not
    root, sees neither the solutions nor this repository, and cannot write the package."""
    box = bwrap_sandbox()
    kernel = remote.Kernel(box, files={"a.txt": b"beside"}, deadline=time.monotonic() + 120)
    try:
        probe = f"""
import os, lrnn
assert os.getpid() < 10, os.getpid()
assert os.getuid() != 0 or {os.geteuid() != 0}
assert open("a.txt").read() == "beside"
assert not os.path.exists({str(SOLUTIONS)!r})
assert not os.path.exists({str(ROOT / 'tests')!r})
assert sorted(os.listdir(os.path.dirname(os.path.dirname(lrnn.__file__)))) == ["lrnn"]
try:
    open(lrnn.__file__, "a")
    raise AssertionError("the package is writable")
except OSError:
    pass
"""
        out = kernel.run_cell(probe, time.monotonic() + 60)
        assert out["status"] == "ok", out
    finally:
        kernel.kill()


def test_attacks(tmp_path):
    box = bwrap_sandbox(memory_mb=2048, processes=256, tmp_mb=256,
                        hidden=(str(SOLUTIONS), str(tmp_path)))
    test_sandbox_is_what_the_attacks_assume()
    subs = tmp_path / "submissions"
    subs.mkdir()
    blank = slim(ROOT / "exercises" / f"{STEM}.ipynb")
    solved = slim(SOLUTIONS / f"{STEM}.ipynb")
    classmates = {f"classmate_blank_{STEM}.ipynb": blank,
                  f"classmate_solved_{STEM}.ipynb": solved}
    for name, nb in classmates.items():
        nbformat.write(nb, subs / name)
    attacks = sorted(ATTACKS.glob("*.py"))
    assert len(attacks) >= 15
    for path in attacks:
        nbformat.write(with_cells(blank, attack_cells(path)),
                       subs / f"attack_{path.stem}_{STEM}.ipynb")
    # Attacks made of files rather than code.
    (subs / "bob_helpers.py").write_text("BOB_SECRET_7d1f = 1\n", encoding="utf-8")
    (subs / "matplotlib.py").write_text("get_ipython().events.register('pre_run_cell', "
                                        "lambda *a: exec('raise SystemExit'))\n",
                                        encoding="utf-8")
    os.mkfifo(subs / f"attack_fifo_{STEM}.ipynb")                          # attack 6
    nbformat.write(blank, subs / f"attack_bad\\xff_name_{STEM}.ipynb")    # attack 5's twin
    tiny = {"cells": [{"cell_type": "raw", "metadata": {}, "source": ""}] * 600_000,
            "metadata": {}, "nbformat": 4, "nbformat_minor": 5}                # attack 9
    (subs / f"attack_tiny_cells_{STEM}.ipynb").write_text(json.dumps(tiny), encoding="utf-8")
    wrong = slim(SOLUTIONS / "02_lru.ipynb")                                   # attack 11
    nbformat.write(wrong, subs / f"attack_wrong_chapter_{STEM}.ipynb")
    malformed = nbformat.from_dict(blank)                                      # attack 13
    next(c for c in malformed.cells if canonical_grade_id(
        c.metadata.get("nbgrader", {}).get("grade_id")) == "ex1.2"
         ).metadata["nbgrader"]["grade_id"] = ["ex1.2"]
    malformed.cells[1].metadata["nbgrader"] = "ex1.1"
    nbformat.write(malformed, subs / f"attack_metadata_{STEM}.ipynb")
    os.symlink(SOLUTIONS / f"{STEM}.ipynb", subs / f"attack_symlink_{STEM}.ipynb")
    os.symlink(SOLUTIONS / f"{STEM}.ipynb", subs / "solution_link.txt")
    os.symlink(SOLUTIONS, subs / "linked_folder")            # not followed: no rows from it
    nbformat.write(blank, subs / os.fsdecode(b"attack_bad\xff_name_" + STEM.encode() + b".ipynb"))
    with open(subs / f"attack_huge_{STEM}.ipynb", "w") as f:
        f.write('{"cells": []' + " " * (g.MAX_SUBMISSION_BYTES + 10) + ', "nbformat": 4}')
    out, feedback = tmp_path / "results" / "gradebook.csv", tmp_path / "results" / "feedback"
    listener = Listener(tmp_path)
    (subs / "targets.json").write_text(json.dumps({
        "classmates": [str(subs / n) for n in classmates], "gradebook": str(out),
        "feedback": str(feedback), "solutions": str(SOLUTIONS),
        "grader_pid": os.getpid(), "tcp_port": listener.port,
        "unix_socket": listener.path}), encoding="utf-8")

    # The classmates alone: the reference.
    ref_out, ref_fb = tmp_path / "ref" / "gradebook.csv", tmp_path / "ref" / "feedback"
    ref = g.grade([subs / n for n in classmates], ref_out, feedback_dir=ref_fb, sandbox=box,
                  timeout=TIMEOUT, cell_timeout=CELL_TIMEOUT, solutions=SOLUTIONS,
                  log=lambda *a: None)
    ref_rows = {Path(r["submission"]).name: r for r in ref}
    assert float(ref_rows[f"classmate_blank_{STEM}.ipynb"]["total"]) == 0
    assert float(ref_rows[f"classmate_solved_{STEM}.ipynb"]["total"]) == 15
    files_before = {p.name: p.read_bytes() for p in subs.iterdir() if p.is_file() and
                    not p.is_symlink()}
    package = Path(g.__file__).resolve().parents[1]
    digests = {"lrnn": tree_digest(package), "solutions": tree_digest(SOLUTIONS),
               "attacks": tree_digest(ATTACKS)}

    # Everything at once.
    # What grading the attacks adds to this process's resident memory, however much earlier
    # tests left in it (pytest-xdist runs many files in one process).
    logs = []
    baseline_mb = reset_peak_rss()
    start = time.monotonic()
    rows = g.grade([subs], out, feedback_dir=feedback, sandbox=box, timeout=TIMEOUT,
                   cell_timeout=CELL_TIMEOUT, workers=2, solutions=SOLUTIONS,
                   log=logs.append)
    elapsed = time.monotonic() - start
    grown_mb = peak_rss_mb() - baseline_mb
    print(f"attack run: {len(rows)} notebooks in {elapsed:.1f} s, grader resident memory "
          f"{baseline_mb:.0f} MB before, at most {grown_mb:.0f} MB more while grading")
    assert grown_mb < GRADER_GROWTH_MB, grown_mb
    time.sleep(6)                                   # a detached process would strike now
    gradebook = out.read_bytes()
    by_name = {Path(r["submission"]).name: r for r in rows}
    assert len(by_name) == len(attacks) + 2 + 8

    # 1. No attack scores more than the blank notebook.
    blank_total = float(ref_rows[f"classmate_blank_{STEM}.ipynb"]["total"])
    for name, row in by_name.items():
        if name.startswith("attack_"):
            assert float(row["total"]) <= blank_total, (name, row)
            assert all(float(row[ex]) == 0 for ex in GRADED), (name, row)

    # 2. Classmates: rows and feedback as without the attacks; their files untouched.
    for name in classmates:
        key = g.display_key(subs / name)
        assert by_name[name] == ref_rows[name], name
        assert (feedback / g.feedback_name(key)).read_bytes() == \
            (ref_fb / g.feedback_name(key)).read_bytes(), name
    for name, data in files_before.items():
        assert (subs / name).read_bytes() == data, name
    assert {p.name for p in feedback.iterdir()} == {g.feedback_name(r["submission"])
                                                   for r in rows}

    # 3. Nothing outside the sandbox changed or was reached; nothing survives.
    assert tree_digest(package) == digests["lrnn"]
    assert tree_digest(SOLUTIONS) == digests["solutions"]
    assert tree_digest(ATTACKS) == digests["attacks"]
    assert listener.hits == []
    listener.close()
    assert sandbox_processes() == []
    assert not list(Path("/tmp").glob(f"lrnn-kernel-{os.getpid()}-*"))
    for _, parent in sb._cgroup_parents():
        assert not list(Path(parent).glob(f"lrnn-kernel-{os.getpid()}-*"))
    time.sleep(2)
    assert out.read_bytes() == gradebook

    # 4. Time: every notebook within its limit plus a margin.
    times = [float(m.rsplit("(", 1)[1].split(" s)")[0]) for m in logs if m.endswith(" s)")]
    assert len(times) == len(by_name) and max(times) <= TIMEOUT + MARGIN, logs
    assert elapsed <= sum(times) + MARGIN

    # 5. No hidden test, and no solution, in any feedback; feedback stays small.
    sol = nbformat.read(SOLUTIONS / f"{STEM}.ipynb", as_version=4)
    secret = []
    for cell in sol.cells:
        for marker, end in (("### BEGIN HIDDEN TESTS", "### END HIDDEN"),
                            ("### BEGIN SOLUTION", "### END SOLUTION")):
            if marker in cell.source and cell.cell_type == "code":
                part = cell.source.split(marker)[1].split(end)[0]
                secret += [ln.strip() for ln in part.splitlines() if len(ln.strip()) > 15]
    assert len(secret) > 15
    for md in feedback.iterdir():
        text = md.read_text(encoding="utf-8")
        assert len(text) < 60_000, md.name
        assert "LEAKED-REQUEST" not in text, md.name                  # attack 10
        assert not re.search(r"printed [\d,]+ bytes", text), md.name  # byte_count_leak
        assert "BOB_SECRET" not in text and "bob_helpers" not in text, md.name   # 2, 3
        rendered = outside_fences(text)                                # attack 12
        assert "FORGED" not in rendered and "<!--" not in rendered, md.name
        assert "HIDDEN TESTS" not in text, md.name
        for line in secret:
            assert line not in text, (md.name, line)

    # 6. Statuses say what happened, and a rerun without --force retries only the rest.
    assert by_name[f"attack_symlink_{STEM}.ipynb"]["status"] == "cannot be parsed"
    assert by_name[f"attack_huge_{STEM}.ipynb"]["status"] == "cannot be parsed"
    assert by_name["attack_bad\\xff_name_" + STEM + ".ipynb"]["status"] == "graded"
    assert by_name["attack_bad\\\\xff_name_" + STEM + ".ipynb"]["status"] == "graded"  # 5
    assert by_name[f"attack_fifo_{STEM}.ipynb"]["status"] == "cannot be parsed"      # 6
    assert by_name[f"attack_tiny_cells_{STEM}.ipynb"]["status"] == "cannot be parsed"
    wrong_row = by_name[f"attack_wrong_chapter_{STEM}.ipynb"]                        # 11
    assert wrong_row["status"] == "wrong assignment" and wrong_row["assignment"] == STEM
    assert float(wrong_row["max_total"]) == 15
    meta_row = by_name[f"attack_metadata_{STEM}.ipynb"]                             # 13
    assert meta_row["status"] == "graded"
    meta_text = (feedback / g.feedback_name(meta_row["submission"])).read_text("utf-8")
    assert "nbgrader metadata is a str" in meta_text and "grade_id is a list" in meta_text
    for name in ("keyring_reader", "keyring_writer", "structural_bound_names",
                 "structural_other_paths", "structural_noop_checks", "json_bomb",
                 "broadcast_bomb"):
        assert float(by_name[f"attack_{name}_{STEM}.ipynb"]["total"]) == 0, name
    assert by_name[f"attack_hang_{STEM}.ipynb"]["status"] == "kernel died"
    assert {r["sandbox"] for r in rows} == {"bwrap"}
    graded = sum(r["status"] == "graded" for r in rows)
    logs.clear()
    g.grade([subs / n for n in classmates], out, feedback_dir=feedback, sandbox=box,
            solutions=SOLUTIONS, log=logs.append)
    assert len([m for m in logs if m.startswith("skip")]) == 2
    assert graded >= len(attacks) - 6
