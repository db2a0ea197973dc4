"""Every chapter and solution notebook runs within the CPU time budget (3 min top to bottom on
2 cores, no cell over 60 s), read from the cell times nbclient records when the notebook is
executed (``metadata.execution``) and that are committed with its outputs.

Executing a notebook with ``python -m lrnn doctor execute PATH`` (or nbclient, whose
``record_timing`` is on by default) keeps those times; ``python -m lrnn doctor slowest`` lists
the slowest cells. A code cell without a recorded time fails here: its time is unknown.
``exercises/`` is not checked: ``python -m lrnn exercises build`` generates those notebooks from
``solutions/`` and drops their execution metadata, and they run the solutions' cells minus the
solution code. (The times are those of the machine that executed the notebook; commit notebooks
executed on the 2-core CPU the budget is for.)
"""
from pathlib import Path

import nbformat
import pytest

from lrnn.course import doctor

from _rules import assert_every

REPO = Path(__file__).resolve().parents[1]
NOTEBOOKS = doctor.notebook_paths(repo=REPO, dirs=doctor.BUDGETED_DIRS)


def test_there_are_notebooks_to_check():
    assert len(NOTEBOOKS) >= 10, NOTEBOOKS


def check_recorded_cell_times_are_within_the_cpu_budget(path):
    nb = nbformat.read(path, as_version=4)
    problems = doctor.budget_problems(str(path.relative_to(REPO)), nb, doctor.BUDGETS["cpu"])
    assert not problems, "\n".join(problems)


def test_recorded_cell_times_are_within_the_cpu_budget():
    assert_every(NOTEBOOKS, check_recorded_cell_times_are_within_the_cpu_budget,
                 name=lambda p: f"{p.parent.name}/{p.name}")
