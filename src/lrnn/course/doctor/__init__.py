"""``python -m lrnn doctor``: does the course work on this machine?

    python -m lrnn doctor                      # full: what an instructor runs after Colab changes
    python -m lrnn doctor --quick              # CPU-sized subset, for CI (about a minute)
    python -m lrnn doctor slowest [PATHS...]   # the slowest recorded cells of every notebook
    python -m lrnn doctor execute PATHS...     # execute notebooks in place, keeping cell times

The check runs, in order, and prints one line per result:

1. **environment**: JAX and jaxlib versions, backend, GPU name and compute capability, the
   course's matmul precision policy and whether this device runs float32 products in TF32 by
   default (measured: a 1024×1024 product at JAX's DEFAULT precision against float64);
2. **library**: the scan methods, ``rotation_scan``, ``skew_expm``, ``householder_product``, the
   LRU and RotRNN layers, each against a float64 NumPy transcription of its equation, under the
   course precision policy (``lrnn.course.precision``);
3. **grading**: ``python -m lrnn grade`` on the solution notebooks, which must get full marks;
4. **notebooks**: every chapter, solution and exercise notebook executed in a fresh kernel, its
   time and slowest cells held against the budgets (:data:`BUDGETS`), errors and warnings in
   its outputs reported;
5. **GPU benchmark** (on a GPU): the cost of one sequential scan step (what ``lrnn.course.setup.size``
   assumes), ``python -m lrnn bench scan --device gpu`` and ``python -m lrnn bench targets``.
   A missed speed target is reported as MISS (it measures the kernel, not whether the course
   works here) and fails the run only with ``--strict``; a missed accuracy target fails.

It writes ``doctor_<device>.json`` and ``.md`` (``--out-dir``; by default ``book/data`` of
the course repository for a full run, a temporary folder for ``--quick``), with the commit
(``git rev-parse``) and the device, and exits 1 if anything FAILed.

``--quick`` runs the environment and library checks, grades one solution notebook and executes
one short chapter: it needs a checkout of the course repository (found from the current folder
or from where ``lrnn`` is imported, or given with ``--repo``); without one, the grading and
notebook steps are SKIPped and say so.

One module per part: :mod:`.budgets` (budgets and recorded cell times), :mod:`.outputs`
(what must not reach the website), :mod:`.execution` (running a notebook), :mod:`.results`,
:mod:`.environment`, :mod:`.library`, :mod:`.solutions` (grading), :mod:`.notebooks`,
:mod:`.gpu` (steps 1 to 5), :mod:`.checkup` (the whole check and its reports) and
:mod:`.cli`. Their public names are importable from here.
"""
from ...scan import reference
from .budgets import (BUDGETED_DIRS, BUDGETS, NOTEBOOK_DIRS, Budget, CellTime, budget_problems,
                      cell_times, first_line, is_generated_exercise, notebook_paths,
                      notebook_seconds, slowest_report, untimed_cells)
from .checkup import (QUICK_NOTEBOOK, QUICK_SOLUTION, check_out_dir, device_slug, format_line,
                      markdown_report, run_doctor, skipped_parts, summary_line)
from .cli import main
from .environment import TF32_THRESHOLD, _colab_drift, environment_results, find_repo, git_commit, tf32_probe
from .execution import Execution, execute_notebook
from .gpu import BENCH_ARGS, bench_target_results, gpu_results, sequential_step_seconds
from .library import (check_householder, check_lru, check_rotation_scan, check_rotrnn, check_scan,
                      check_scan_float64, check_scan_gradient, check_skew_expm, library_checks,
                      run_check)
from .notebooks import notebook_results
from .outputs import TMP_KERNEL_PATTERN, WARNING_PATTERN, output_problems, setup_cells
from .results import FAIL, INFO, MISS, PASS, SKIP, WARN, Result
from .solutions import grade_solutions
