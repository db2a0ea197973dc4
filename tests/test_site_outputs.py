"""The committed outputs that the website shows: no warning under any setup cell (the setup cell
prints two plain lines), no warning printed anywhere else, and no temporary kernel path
(``/tmp/ipykernel_…``, the file name IPython gives a cell) anywhere in book/, solutions/ and
exercises/. Re-execute a notebook after changing what it prints (``python -m lrnn doctor
execute PATH``)."""
from pathlib import Path

import nbformat
import pytest

from lrnn.course import doctor

from _rules import assert_every

REPO = Path(__file__).resolve().parents[1]
NOTEBOOKS = doctor.notebook_paths(repo=REPO)
IDS = [f"{p.parent.name}/{p.name}" for p in NOTEBOOKS]


def _read(path):
    return nbformat.read(path, as_version=4)


def _describe(path, found):
    return "\n".join(f"{path.relative_to(REPO)} cell {i}: {what}: {text}" for i, what, text in found)


def check_no_temporary_kernel_path_in_outputs(path):
    found = [f for f in doctor.output_problems(_read(path), warnings=False)]
    assert not found, _describe(path, found)


def test_no_temporary_kernel_path_in_outputs():
    assert_every(NOTEBOOKS, check_no_temporary_kernel_path_in_outputs)


def check_setup_cell_prints_plain_lines_only(path):
    nb = _read(path)
    cells = doctor.setup_cells(nb)
    assert cells, f"{path.relative_to(REPO)} has no setup cell calling lrnn.course.setup.environment()"
    for i in cells:
        streams = [o for o in nb.cells[i].get("outputs", []) if o.get("output_type") == "stream"]
        stderr = [o["text"] for o in streams if o.get("name") == "stderr"]
        assert not stderr, f"{path.relative_to(REPO)} setup cell {i} writes to stderr: {stderr}"
        if nb.cells[i].get("execution_count") is not None:
            stdout = "".join(o["text"] for o in streams if o.get("name") == "stdout")
            assert stdout.startswith("JAX "), f"{path.relative_to(REPO)} setup cell {i}: {stdout!r}"


def test_setup_cell_prints_plain_lines_only():
    assert_every(NOTEBOOKS, check_setup_cell_prints_plain_lines_only)


def check_no_warning_in_outputs(path):
    found = [f for f in doctor.output_problems(_read(path)) if f[1] == "warning"]
    assert not found, _describe(path, found)


def test_no_warning_in_outputs():
    assert_every(NOTEBOOKS, check_no_warning_in_outputs)


def test_the_checks_catch_the_old_setup_warning():
    nb = nbformat.v4.new_notebook()
    cell = nbformat.v4.new_code_cell("import lrnn\nenv = lrnn.course.setup.environment()", execution_count=1)
    cell.outputs = [nbformat.v4.new_output("stream", name="stdout", text="JAX 0.10.2 | backend: cpu\n"),
                    nbformat.v4.new_output("stream", name="stderr", text=(
                        "/tmp/ipykernel_2367/3416337952.py:7: UserWarning: No GPU found: this "
                        "notebook runs on the CPU\n  env = lrnn.course.setup.environment()\n"))]
    nb.cells.append(cell)
    kinds = [what for _, what, _ in doctor.output_problems(nb)]
    assert kinds == ["temporary kernel path", "warning"]
