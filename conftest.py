"""The test tiers (README, "Run the tests").

* ``python -m pytest``: every test in tests/, the exercise notebooks (blank, and completed with
  the model solutions) executed by the grader (tests/test_submissions.py) included.
  ``python -m pytest book`` (or ``solutions``) executes those notebooks under nbval in lax mode
  (every cell must run; cells tagged ``nbval-check-output`` must reproduce their output after
  tests/nbval_sanitize.cfg); CI does this for the book in its Colab lane, in Colab's package
  set. nbval's options are set here rather than in pyproject's ``addopts`` so that
  ``-p no:nbval`` works too.
* ``python -m pytest -m "not slow"``: the developers' tier. Every notebook cell nbval collects is
  marked ``notebook`` and ``slow`` here, so the tier executes no notebook.

A test that is not marked ``slow`` must stay quick: in the quick tier (a run whose ``-m``
leaves out ``slow``), one whose setup and call use more than :data:`UNMARKED_LIMIT_CPU_S` of
CPU (this process and the subprocesses it waited for, so a busy machine does not make it fail)
or more than :data:`UNMARKED_LIMIT_WALL_S` of wall time fails, saying so. The full run never
fails on time (the standards keep timings out of pass/fail): it lists such tests in its
summary, so that the next quick-tier run is not the first to see them. ``LRNN_UNMARKED_LIMIT_SCALE`` multiplies both (a slow CPU may need 2). The
terminal summary gives the CPU and wall time of the unmarked tests together, and
``LRNN_TEST_COSTS=FILE`` writes every test's ``nodeid, cpu s, wall s, slow`` there (tab
separated), to see where a run's time goes.

JAX's compilation cache on disk: the quick tier keeps it in ``.pytest_cache/jax-compilation``
(:data:`JAX_CACHE`), so that its second run is much quicker than its first. The full run, which
CI makes on a clean clone, compiles afresh but only once per program: its test processes, and
the commands and notebook kernels that tests start, share a cache in a new temporary folder
(``JAX_COMPILATION_CACHE_DIR``), removed when the run ends: a program compiled by one test is
read back by the next test, or the other process, that compiles it. A program read from the
cache is the one XLA compiled, so no result changes. The grader's kernels keep a cache of their
own each (``lrnn.course.grading.harness``), whatever the environment says.
"""
import os
import resource
import time
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent

pytest_plugins = ["pytester"]         # tests/test_tiers.py runs these rules on planted tests

#: CPU seconds (self and waited-for children) that the call of an unmarked test may use.
UNMARKED_LIMIT_CPU_S = 10.0
#: Wall seconds, for what CPU time cannot see (a kernel not yet reaped, sleeping, waiting);
#: generous, so that a loaded machine does not fail a test that is quick on its own.
UNMARKED_LIMIT_WALL_S = 120.0


#: Where the quick tier keeps JAX's compiled programs between runs (``LRNN_TEST_JAX_CACHE``: another
#: folder, or ``off``). Most of a library test's time is compiling; a second quick-tier run loads
#: what the first compiled (tests/test_lru.py: 33 s cold, 12 s warm on a 2-core CPU).
JAX_CACHE = ROOT / ".pytest_cache" / "jax-compilation"
#: Set by the process that starts a full run to the folder of its own cache, which the
#: pytest-xdist workers it starts, and the subprocesses of tests, inherit.
RUN_CACHE_ENV = "LRNN_TEST_RUN_JAX_CACHE"
_RUN_CACHE_OWNED: list[str] = []


def _use_compilation_cache(folder: str):
    import jax
    jax.config.update("jax_compilation_cache_dir", folder)
    jax.config.update("jax_persistent_cache_min_compile_time_secs", 0.0)
    jax.config.update("jax_persistent_cache_min_entry_size_bytes", 0)


def compilation_cache_folder(quick: bool) -> str | None:
    """The folder of JAX's compilation cache for this run, or None (``LRNN_TEST_JAX_CACHE=off``,
    or a ``JAX_COMPILATION_CACHE_DIR`` of the user's, which JAX then uses as it is)."""
    choice = os.environ.get("LRNN_TEST_JAX_CACHE", "")
    if os.environ.get(RUN_CACHE_ENV):              # a worker of a full run: its starter's
        return os.environ[RUN_CACHE_ENV]
    if choice.lower() == "off" or os.environ.get("JAX_COMPILATION_CACHE_DIR"):
        return None
    if quick:
        return choice or str(JAX_CACHE)
    import tempfile
    folder = tempfile.mkdtemp(prefix="lrnn-test-jax-cache-")
    _RUN_CACHE_OWNED.append(folder)
    os.environ.update(dict(_run_cache_environment(folder)))
    return folder


def _run_cache_environment(folder: str):
    """What the processes a full run starts inherit: its workers, and the subprocesses of tests."""
    yield RUN_CACHE_ENV, folder
    yield "JAX_COMPILATION_CACHE_DIR", folder
    yield "JAX_PERSISTENT_CACHE_MIN_COMPILE_TIME_SECS", "0"
    yield "JAX_PERSISTENT_CACHE_MIN_ENTRY_SIZE_BYTES", "0"


def pytest_configure(config):
    folder = compilation_cache_folder(quick_tier(config))
    if folder:
        _use_compilation_cache(folder)
    if config.pluginmanager.hasplugin("nbval"):
        opt = config.option
        if not opt.nbval:                     # `--nbval` asks for strict output comparison
            opt.nbval_lax = True
        opt.nbval_current_env = True
        if opt.nbval_sanitize_with is None:
            opt.nbval_sanitize_with = str(ROOT / "tests" / "nbval_sanitize.cfg")
        if str(opt.nbval_cell_timeout) == "2000":   # nbval's default: ours is the budget's 300 s
            opt.nbval_cell_timeout = 300


def pytest_unconfigure(config):
    import shutil
    while _RUN_CACHE_OWNED:
        folder = _RUN_CACHE_OWNED.pop()
        for name, _ in _run_cache_environment(folder):
            os.environ.pop(name, None)
        shutil.rmtree(folder, ignore_errors=True)


def is_notebook_item(item) -> bool:
    return item.path.suffix == ".ipynb"


def pytest_collection_modifyitems(config, items):
    for item in items:
        if is_notebook_item(item):
            item.add_marker(pytest.mark.notebook)
            item.add_marker(pytest.mark.slow)


def _cpu_seconds() -> float:
    own, children = resource.getrusage(resource.RUSAGE_SELF), resource.getrusage(resource.RUSAGE_CHILDREN)
    return own.ru_utime + own.ru_stime + children.ru_utime + children.ru_stime


def over_limit(cpu_s: float, wall_s: float, scale: float = 1.0) -> str | None:
    """Why a call that used ``cpu_s`` and ``wall_s`` is too slow for an unmarked test, or None."""
    if cpu_s > UNMARKED_LIMIT_CPU_S * scale:
        return f"used {cpu_s:.1f} s of CPU, over the {UNMARKED_LIMIT_CPU_S * scale:g} s"
    if wall_s > UNMARKED_LIMIT_WALL_S * scale:
        return f"took {wall_s:.1f} s, over the {UNMARKED_LIMIT_WALL_S * scale:g} s"
    return None


def _measured(item, phase):
    cpu, wall = _cpu_seconds(), time.perf_counter()
    yield
    spent = getattr(item, "_lrnn_cost", {})
    spent[phase] = (_cpu_seconds() - cpu, time.perf_counter() - wall)
    item._lrnn_cost = spent


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_setup(item):
    """Setup counts: a module fixture that grades notebooks is paid by the first test using it."""
    yield from _measured(item, "setup")


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_call(item):
    yield from _measured(item, "call")


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item, call):
    outcome = yield
    report = outcome.get_result()
    spent = getattr(item, "_lrnn_cost", {})
    if call.when != "call" or "call" not in spent:
        return
    cost = [sum(phase[k] for phase in spent.values()) for k in (0, 1)]
    slow = item.get_closest_marker("slow") is not None
    # Carried by the report, so that the summary sees the tests that pytest-xdist ran elsewhere.
    report.user_properties.append(("lrnn_cost", (item.nodeid, *cost, slow)))
    if os.environ.get("LRNN_TEST_COSTS"):
        with open(os.environ["LRNN_TEST_COSTS"], "a", encoding="utf-8") as f:
            f.write(f"{item.nodeid}\t{cost[0]:.2f}\t{cost[1]:.2f}\t{int(slow)}\n")
    if slow or not report.passed:
        return
    why = over_limit(*cost, scale=float(os.environ.get("LRNN_UNMARKED_LIMIT_SCALE", "1")))
    if why and not quick_tier(item.config):
        report.user_properties.append(("lrnn_over", f"{item.nodeid}: {why}"))
    elif why:
        report.outcome = "failed"
        report.longrepr = (f"{item.nodeid}: {why} allowed to a test that is not marked slow "
                           "(conftest.py): mark it @pytest.mark.slow, or make it quicker, so that "
                           '`python -m pytest -m "not slow"` stays a quick tier')


_COSTS: list[tuple[str, float, float, bool]] = []
_OVER: list[str] = []


def pytest_runtest_logreport(report):
    """Where the summary's numbers are gathered: in the process that prints it (with
    pytest-xdist, the reports of every worker arrive here)."""
    for key, value in getattr(report, "user_properties", ()):
        if key == "lrnn_cost":
            _COSTS.append(tuple(value))
        elif key == "lrnn_over":
            _OVER.append(value)


#: The most test processes ``-n auto`` starts: each may hold a notebook kernel and a grader's
#: sandboxes (about 2 GB), and two cores are what CI has.
MAX_WORKERS = 4


@pytest.hookimpl(optionalhook=True)
def pytest_xdist_auto_num_workers(config):
    return max(1, min(MAX_WORKERS, len(os.sched_getaffinity(0))))


def quick_tier(config) -> bool:
    """Whether this run is the quick tier: its ``-m`` expression leaves out ``slow``."""
    expression = " ".join(str(config.getoption("markexpr", "") or "").split())
    return "not slow" in expression


#: CPU seconds that all the unmarked tests together should stay under: the quick tier's
#: 3 minutes on 2 cores, less collection.
TIER_BUDGET_CPU_S = 150.0


def pytest_terminal_summary(terminalreporter):
    if _OVER:
        terminalreporter.write_line("unmarked tests over the quick tier's limits (they would "
                                    "fail `-m \"not slow\"`; mark them slow):", yellow=True)
        for line in _OVER:
            terminalreporter.write_line(f"  {line}")
    quick = [c for c in _COSTS if not c[3]]
    if not quick:
        return
    cpu, wall = sum(c[1] for c in quick), sum(c[2] for c in quick)
    terminalreporter.write_line(f"tests not marked slow: {len(quick)}, {cpu:.0f} s of CPU and "
                                f"{wall:.0f} s of wall time in their setup and calls")
    if cpu > TIER_BUDGET_CPU_S:
        terminalreporter.write_line(
            f"the quick tier's {TIER_BUDGET_CPU_S:.0f} s of CPU are spent; its costliest tests "
            "(mark some slow, or make them quicker):", yellow=True)
        for nodeid, c, w, _ in sorted(quick, key=lambda c: -c[1])[:10]:
            terminalreporter.write_line(f"  {c:6.1f} s CPU {w:7.1f} s wall  {nodeid}")
