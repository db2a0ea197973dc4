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
"""
from __future__ import annotations

import argparse
import csv
import dataclasses
import datetime as _dt
import json
import os
import platform
import re
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

from ..scan import reference
from .. import _io

PASS, FAIL, SKIP, INFO, WARN, MISS = "PASS", "FAIL", "SKIP", "INFO", "WARN", "MISS"


# ----------------------------------------------------------------------------------------
# Time budgets and recorded cell times
# ----------------------------------------------------------------------------------------

@dataclasses.dataclass(frozen=True)
class Budget:
    """A notebook runs top to bottom in ``notebook_s`` and no cell takes over ``cell_s``."""
    where: str
    notebook_s: float
    cell_s: float


#: The course's time budgets (the developers' guide): 3 min on a 2-core CPU, 2 min on a Colab
#: T4, and 60 s for any cell on either. On a faster GPU the T4 budget is a necessary check only.
BUDGETS = {"cpu": Budget("CPU (2 cores)", 180.0, 60.0), "gpu": Budget("Colab T4", 120.0, 60.0)}

#: Folders of notebooks, relative to the repository root. ``exercises/`` is generated from
#: ``solutions/`` by ``python -m lrnn exercises build``, which drops execution metadata, so its
#: committed notebooks hold no cell times; the doctor still executes and times them.
NOTEBOOK_DIRS = ("book", "solutions", "exercises")
BUDGETED_DIRS = ("book", "solutions")


@dataclasses.dataclass
class CellTime:
    """The recorded run time of one code cell: ``index`` in ``nb.cells``, ``code_index`` among
    the code cells (what nbval calls "Cell N")."""
    index: int
    code_index: int
    seconds: float
    start: _dt.datetime
    end: _dt.datetime
    first_line: str

    def where(self) -> str:
        return f"cell {self.index} (nbval Cell {self.code_index})"


def _timestamp(text):
    text = str(text).replace("Z", "+00:00")
    # nbclient writes microseconds; Python 3.10 rejects other fraction widths.
    text = re.sub(r"\.(\d+)", lambda m: "." + (m.group(1) + "000000")[:6], text)
    return _dt.datetime.fromisoformat(text)


def first_line(source: str, width: int = 70) -> str:
    for line in source.splitlines():
        if line.strip() and not line.strip().startswith("#"):
            line = line.strip()
            return line if len(line) <= width else line[:width - 1] + "…"
    return source.strip().splitlines()[0][:width] if source.strip() else ""


def _code_cells(nb):
    code = 0
    for index, cell in enumerate(nb.cells):
        if cell.cell_type == "code":
            yield index, code, cell
            code += 1


def cell_times(nb) -> list[CellTime]:
    """The code cells of ``nb`` with nbclient's timing metadata (``metadata.execution``)."""
    out = []
    for index, code, cell in _code_cells(nb):
        e = cell.get("metadata", {}).get("execution", {})
        starts = [e[k] for k in ("iopub.status.busy", "iopub.execute_input") if k in e]
        ends = [e[k] for k in ("shell.execute_reply", "iopub.status.idle") if k in e]
        if not starts or not ends:
            continue
        start = min(_timestamp(s) for s in starts)
        end = max(_timestamp(s) for s in ends)
        out.append(CellTime(index, code, (end - start).total_seconds(), start, end,
                            first_line(cell.source)))
    return out


def untimed_cells(nb) -> list[tuple[int, int, str]]:
    """Code cells with source but no timing metadata, as ``(index, code_index, first line)``.
    (nbclient does not execute empty cells, so they are never timed and are not listed.)"""
    timed = {t.index for t in cell_times(nb)}
    return [(i, c, first_line(cell.source)) for i, c, cell in _code_cells(nb)
            if cell.source.strip() and i not in timed]


def notebook_seconds(times: list[CellTime]) -> float | None:
    """Wall time from the start of the first timed cell to the end of the last one (kernel
    start-up not included: it is not recorded)."""
    if not times:
        return None
    return (max(t.end for t in times) - min(t.start for t in times)).total_seconds()


def budget_problems(name: str, nb, budget: Budget = BUDGETS["cpu"], *,
                    require_timing: bool = True) -> list[str]:
    """What in ``nb``'s recorded cell times breaks ``budget``, one message per problem (empty
    when within budget). With ``require_timing``, an executed code cell without timing is a
    problem too: its time is unknown."""
    problems = []
    times = cell_times(nb)
    if require_timing:
        missing = untimed_cells(nb)
        if missing:
            cells = ", ".join(f"cell {i} (nbval Cell {c})" for i, c, _ in missing[:5])
            more = f" and {len(missing) - 5} more" if len(missing) > 5 else ""
            problems.append(
                f"{name}: {len(missing)} code cells have no recorded time ({cells}{more}): "
                f"re-execute it with `python -m lrnn doctor execute {name}` (nbclient records "
                f"cell times in metadata.execution)")
    for t in times:
        if t.seconds > budget.cell_s:
            problems.append(f"{name}: {t.where()} took {t.seconds:.1f} s, over the {budget.cell_s:.0f} s "
                            f"budget per cell on {budget.where} (`{t.first_line}`)")
    total = notebook_seconds(times)
    if total is not None and total > budget.notebook_s:
        slow = sorted(times, key=lambda t: -t.seconds)[:3]
        worst = "; ".join(f"{t.where()} {t.seconds:.1f} s" for t in slow)
        problems.append(f"{name}: ran {total:.1f} s top to bottom, over the {budget.notebook_s:.0f} s "
                        f"budget on {budget.where} (slowest: {worst})")
    return problems


def notebook_paths(paths=None, repo: Path | None = None, dirs=NOTEBOOK_DIRS) -> list[Path]:
    """Notebooks named by ``paths`` (files or folders), or those of ``dirs`` in ``repo``."""
    if not paths:
        repo = repo or find_repo()
        if repo is None:
            return []
        paths = [repo / d for d in dirs]
    out = []
    for p in map(Path, paths):
        if p.is_dir():
            out += sorted(q for q in p.glob("*.ipynb") if ".ipynb_checkpoints" not in q.parts)
        elif p.suffix == ".ipynb":
            out.append(p)
    return out


def slowest_report(paths, *, top: int = 15, budget: Budget = BUDGETS["cpu"]) -> str:
    """The text of ``python -m lrnn doctor slowest``: per notebook its recorded time and three
    slowest cells, then the ``top`` slowest cells overall; over-budget entries are marked."""
    import nbformat
    rows, cells = [], []
    for p in paths:
        nb = nbformat.read(p, as_version=4)
        times = cell_times(nb)
        total = notebook_seconds(times)
        untimed = len(untimed_cells(nb))
        rows.append((str(p), total, sorted(times, key=lambda t: -t.seconds)[:3], untimed))
        cells += [(str(p), t) for t in times]
    lines = [f"Recorded cell times (nbclient metadata.execution). Budget on {budget.where}: "
             f"{budget.notebook_s:.0f} s per notebook, {budget.cell_s:.0f} s per cell; "
             f"'!' marks what is over it.", ""]
    width = max([len(r[0]) for r in rows] + [8])
    lines.append(f"{'notebook':{width}s}  {'total':>8s}  slowest cells")
    for name, total, slow, untimed in rows:
        t = "–" if total is None else f"{total:7.1f}s" + ("!" if total > budget.notebook_s else " ")
        s = " · ".join(f"cell {c.index}: {c.seconds:.1f} s" + ("!" if c.seconds > budget.cell_s else "")
                       for c in slow)
        if untimed:
            s += f"{' · ' if s else ''}{untimed} code cells without a recorded time"
        lines.append(f"{name:{width}s}  {t:>9s} {s}")
    lines += ["", f"The {top} slowest cells:"]
    for name, t in sorted(cells, key=lambda nt: -nt[1].seconds)[:top]:
        mark = "!" if t.seconds > budget.cell_s else " "
        lines.append(f"  {t.seconds:6.1f} s{mark} {name} {t.where()}: {t.first_line}")
    return "\n".join(lines)


# ----------------------------------------------------------------------------------------
# Outputs: warnings and temporary paths that must not reach the website
# ----------------------------------------------------------------------------------------

WARNING_PATTERN = re.compile(r"\b\w*Warning\b|^WARNING\b", re.MULTILINE)
TMP_KERNEL_PATTERN = re.compile(r"/tmp/ipykernel_\d*")


def _output_texts(output):
    if output.get("output_type") == "stream":
        yield output.get("name", "stdout"), output.get("text", "")
    elif output.get("output_type") == "error":
        yield "error", "\n".join([output.get("ename", ""), output.get("evalue", ""),
                                  *output.get("traceback", [])])
    else:
        for mime, value in output.get("data", {}).items():
            if mime.startswith("text/") or mime.endswith("json"):
                yield mime, value if isinstance(value, str) else json.dumps(value)


def output_problems(nb, *, warnings: bool = True) -> list[tuple[int, str, str]]:
    """``(cell index, what, excerpt)`` for every output that shows a temporary kernel path
    (``/tmp/ipykernel_…``) or, with ``warnings``, a warning printed to stderr."""
    found = []
    for index, _, cell in _code_cells(nb):
        for output in cell.get("outputs", []):
            for kind, text in _output_texts(output):
                m = TMP_KERNEL_PATTERN.search(text)
                if m:
                    found.append((index, "temporary kernel path", _excerpt(text, m.start())))
                if warnings and kind == "stderr":
                    w = WARNING_PATTERN.search(text)
                    if w:
                        found.append((index, "warning", _excerpt(text, w.start())))
    return found


def _excerpt(text, at, width=160):
    start = text.rfind("\n", 0, at) + 1
    line = text[start:].split("\n", 1)[0]
    return line[:width]


def setup_cells(nb) -> list[int]:
    """Indices of the cells that call ``lrnn.course.setup.environment``."""
    return [i for i, _, c in _code_cells(nb) if "setup.environment(" in c.source]


# ----------------------------------------------------------------------------------------
# Executing notebooks
# ----------------------------------------------------------------------------------------

@dataclasses.dataclass
class Execution:
    path: Path
    nb: object
    seconds: float                      # wall time, kernel start included
    error: str | None


def execute_notebook(path, *, cell_timeout: float = 600, in_place: bool = False,
                     kernel_name: str = "python3") -> Execution:
    """Execute ``path`` top to bottom in a fresh kernel started in its folder, recording each
    cell's time (nbclient ``record_timing``). Cells tagged ``raises-exception`` may raise;
    any other error stops the run and is returned in ``error``. With ``in_place`` the executed
    notebook is written back (``nbformat.write``: indent 1, sorted keys)."""
    import nbclient
    import nbformat
    path = Path(path)
    nb = nbformat.read(path, as_version=4)
    client = nbclient.NotebookClient(nb, timeout=cell_timeout, kernel_name=kernel_name,
                                     record_timing=True,
                                     resources={"metadata": {"path": str(path.parent.resolve())}})
    start = time.perf_counter()
    error = None
    # The kernel's own log (e.g. ipykernel's notice about its TCP transport) goes to a file,
    # quoted only if the kernel fails.
    with tempfile.TemporaryFile("w+") as kernel_log:
        try:
            client.execute(stderr=kernel_log)
        except nbclient.exceptions.CellTimeoutError as e:
            error = f"a cell ran over {cell_timeout:.0f} s: {str(e).splitlines()[0]}"
        except nbclient.exceptions.CellExecutionError as e:
            error = _cell_error(nb) or str(e).strip().splitlines()[-1]
        except Exception as e:  # noqa: BLE001 - a dead kernel must be reported, not crash the doctor
            kernel_log.seek(0)
            tail = " | ".join(kernel_log.read().strip().splitlines()[-3:])
            error = f"{type(e).__name__}: {e}" + (f" (kernel log: {tail[:300]})" if tail else "")
    seconds = time.perf_counter() - start
    if in_place and error is None:
        nbformat.write(nb, path)
    return Execution(path, nb, seconds, error)


def _cell_error(nb):
    for index, _, cell in _code_cells(nb):
        if "raises-exception" in cell.get("metadata", {}).get("tags", []):
            continue
        for o in cell.get("outputs", []):
            if o.get("output_type") == "error":
                return f"cell {index}: {o.get('ename')}: {o.get('evalue', '')[:200]}"
    return None


# ----------------------------------------------------------------------------------------
# Results
# ----------------------------------------------------------------------------------------

@dataclasses.dataclass
class Result:
    section: str
    name: str
    status: str
    detail: str = ""
    seconds: float | None = None
    data: dict = dataclasses.field(default_factory=dict)


def _rel_err(got, ref) -> float:
    got, ref = np.asarray(got), np.asarray(ref)
    scale = float(np.max(np.abs(ref))) or 1.0
    return float(np.max(np.abs(got - ref))) / scale


# ----------------------------------------------------------------------------------------
# Environment
# ----------------------------------------------------------------------------------------

def find_repo(start=None) -> Path | None:
    """The course repository: the first folder holding ``book/`` and ``solutions/``, from
    ``start`` (default: the current folder) upwards, else the checkout ``lrnn`` is imported from."""
    candidates = []
    here = Path(start or os.getcwd()).resolve()
    candidates += [here, *here.parents]
    candidates += list(Path(__file__).resolve().parents)
    for c in candidates:
        if (c / "book").is_dir() and (c / "solutions").is_dir():
            return c
    return None


def git_commit(repo: Path | None) -> dict:
    """``{"commit", "short", "dirty"}`` from git, or ``{"commit": None, "why": ...}``."""
    if repo is None:
        return {"commit": None, "why": "no course repository here"}
    try:
        full = subprocess.run(["git", "-C", str(repo), "rev-parse", "HEAD"], capture_output=True,
                              text=True, timeout=30)
        if full.returncode != 0:
            return {"commit": None, "why": full.stderr.strip()[:200] or "git rev-parse failed"}
        dirty = subprocess.run(["git", "-C", str(repo), "status", "--porcelain",
                                "--untracked-files=no"], capture_output=True, text=True, timeout=30)
        sha = full.stdout.strip()
        return {"commit": sha, "short": sha[:7], "dirty": bool(dirty.stdout.strip())}
    except (OSError, subprocess.SubprocessError) as e:
        return {"commit": None, "why": f"git not available ({e})"}


def tf32_probe(n: int = 1024) -> dict:
    """Relative error of an ``n×n`` float32 product against float64 at JAX's DEFAULT precision
    and under the course policy (:func:`lrnn.course.precision.exact_matmuls`). TF32 keeps 10
    mantissa bits: its error is near 1e-4, full float32 near 1e-6."""
    import jax
    import jax.numpy as jnp
    from jax import lax
    from . import precision
    rng = np.random.default_rng(0)
    a = rng.standard_normal((n, n)).astype(np.float32)
    b = rng.standard_normal((n, n)).astype(np.float32)
    ref = a.astype(np.float64) @ b.astype(np.float64)
    default = jax.jit(lambda x, y: jnp.matmul(x, y, precision=lax.Precision.DEFAULT))
    plain = jax.jit(lambda x, y: x @ y)
    err_default = _rel_err(default(a, b), ref)
    with precision.exact_matmuls():
        err_course = _rel_err(jax.jit(lambda x, y: x @ y)(a, b), ref)
    err_plain = _rel_err(plain(a, b), ref)
    return {"n": n, "default_rel_err": err_default, "course_policy_rel_err": err_course,
            "process_default_rel_err": err_plain, "tf32_by_default": err_default > TF32_THRESHOLD}


#: Relative error above which a float32 product is taken to have run in TF32 (see tf32_probe).
TF32_THRESHOLD = 2e-5


def _colab_drift(in_colab: bool) -> list[Result]:
    """In Colab: which preinstalled versions differ from those CI tested (lrnn.course.colab)."""
    if not in_colab:
        return []
    from . import colab
    lines = colab.drift_lines()
    return [Result("environment", "Colab drift", colab.doctor_status(lines), "\n".join(lines))]


def environment_results(repo: Path | None) -> tuple[list[Result], dict]:
    import jax
    import jaxlib
    from . import precision, setup
    devices = setup._devices()
    d = devices[0]
    probe = tf32_probe()
    env = {
        "python": platform.python_version(),
        "jax": jax.__version__,
        "jaxlib": getattr(jaxlib, "__version__", "?"),
        "backend": jax.default_backend(),
        "devices": [f"{x.platform}:{x.device_kind}" for x in devices],
        "device_kind": d.device_kind,
        "platform": d.platform,
        "compute_capability": setup.compute_capability(d),
        "cpu_count": os.cpu_count(),
        "host_machine": platform.machine(),
        "colab": setup.in_colab(),
        "matmul_precision_in_force": precision.current_default(),
        "tf32_possible": precision.tf32_possible(d),
        "tf32_emulated": precision.emulating(),
        "tf32_probe": probe,
        "repo": str(repo) if repo else None,
        **{f"git_{k}": v for k, v in git_commit(repo).items()},
    }
    gpu = f"{d.device_kind}, compute capability {env['compute_capability']}" if d.platform == "gpu" \
        else "none"
    tf32 = ("yes" if probe["tf32_by_default"] else "no") + \
        f" (a 1024×1024 float32 product at DEFAULT precision: relative error {probe['default_rel_err']:.1e})"
    commit = env.get("git_short") or f"unknown ({env.get('git_why')})"
    if env.get("git_dirty"):
        commit += " (with uncommitted changes)"
    results = [
        Result("environment", "JAX", INFO, f"jax {env['jax']}, jaxlib {env['jaxlib']}, Python {env['python']}"),
        Result("environment", "backend", INFO, f"{env['backend']}: {', '.join(env['devices'])}"),
        Result("environment", "GPU", INFO, gpu),
        Result("environment", "TF32 by default", INFO, tf32),
        Result("environment", "course commit", INFO, commit),
        *_colab_drift(env["colab"]),
        Result("environment", "course precision policy gives full float32 products",
               PASS if probe["course_policy_rel_err"] <= TF32_THRESHOLD else FAIL,
               f"relative error {probe['course_policy_rel_err']:.1e} under "
               f"lrnn.course.precision.exact_matmuls() (TF32 would be above {TF32_THRESHOLD:g})"),
    ]
    return results, env


# ----------------------------------------------------------------------------------------
# Library checks against float64 references
# ----------------------------------------------------------------------------------------

def _scan_methods():
    import jax
    methods = ["sequential", "associative", "chunked", "auto"]
    if jax.default_backend() == "gpu":
        methods.insert(3, "pallas")
    return methods


def check_scan(method, linear_scan=None, shape=(2, 1000, 32)):
    """Complex time-invariant λ (|λ| up to 0.999) and real time-varying a run backwards."""
    import jax
    import jax.numpy as jnp
    import lrnn
    linear_scan = linear_scan or lrnn.linear_scan
    rng = np.random.default_rng(1)
    B, L, N = shape
    lam = (rng.uniform(0.9, 0.999, N) * np.exp(1j * rng.uniform(0, np.pi, N))).astype(np.complex64)
    b = (rng.standard_normal(shape) + 1j * rng.standard_normal(shape)).astype(np.complex64)
    forward = jax.jit(lambda a_, b_: linear_scan(a_, b_, method=method))
    backward = jax.jit(lambda a_, b_: linear_scan(a_, b_, reverse=True, method=method))
    e1 = _rel_err(forward(jnp.asarray(lam), jnp.asarray(b)), reference.linear_scan(lam, b))
    a = rng.uniform(0.5, 1.0, shape).astype(np.float32)
    br = rng.standard_normal(shape).astype(np.float32)
    e2 = _rel_err(backward(jnp.asarray(a), jnp.asarray(br)), reference.linear_scan(a, br, reverse=True))
    return max(e1, e2), f"complex λ: {e1:.1e}; time-varying a, reverse: {e2:.1e}"


def check_scan_gradient(method, linear_scan=None, shape=(2, 500, 16)):
    import jax
    import jax.numpy as jnp
    import lrnn
    linear_scan = linear_scan or lrnn.linear_scan
    rng = np.random.default_rng(2)
    a = rng.uniform(0.9, 0.999, shape[-1]).astype(np.float32)
    b = rng.standard_normal(shape).astype(np.float32)
    g = rng.standard_normal(shape).astype(np.float32)
    loss = lambda a_, b_: jnp.sum(jnp.asarray(g) * linear_scan(a_, b_, method=method))  # noqa: E731
    da, db = jax.jit(jax.grad(loss, argnums=(0, 1)))(jnp.asarray(a), jnp.asarray(b))
    da_ref, db_ref = reference.linear_scan_vjp(a, reference.linear_scan(a, b), g)
    e_a, e_b = _rel_err(da, da_ref), _rel_err(db, db_ref)
    return max(e_a, e_b), f"∂/∂b: {e_b:.1e}; ∂/∂a: {e_a:.1e}"


def check_scan_float64(linear_scan=None):
    """``method="auto"`` on float64 inputs must choose a method that runs them."""
    import jax
    import jax.numpy as jnp
    import lrnn
    linear_scan = linear_scan or lrnn.linear_scan
    previous = jax.config.jax_enable_x64
    jax.config.update("jax_enable_x64", True)
    try:
        rng = np.random.default_rng(3)
        a = rng.uniform(0.9, 0.999, 16)
        b = rng.standard_normal((2, 512, 16))
        x = linear_scan(jnp.asarray(a), jnp.asarray(b), method="auto")
        dtype = str(x.dtype)
        err = _rel_err(x, reference.linear_scan(a, b))
    finally:
        jax.config.update("jax_enable_x64", previous)
    if dtype != "float64":
        return float("inf"), f"returned {dtype}, not float64"
    return err, f"float64 result, error {err:.1e}"


def check_rotation_scan(rotation_scan=None):
    import jax.numpy as jnp
    import lrnn
    rotation_scan = rotation_scan or lrnn.rotation_scan
    rng = np.random.default_rng(4)
    K, L = 8, 512
    gamma = rng.uniform(0.9, 0.999, K)
    theta = rng.uniform(-np.pi, np.pi, K)
    b = rng.standard_normal((2, L, 2 * K))
    ref = reference.rotation_scan(gamma, theta, b)         # x_t = γ R(θ) x_{t-1} + b_t (eq. 14)
    got = rotation_scan(jnp.asarray(gamma, jnp.float32), jnp.asarray(theta, jnp.float32),
                        jnp.asarray(b, jnp.float32))
    err = _rel_err(got, ref)
    return err, f"error {err:.1e} against 2×2 rotations in float64"


def check_skew_expm(skew_expm=None):
    import jax.numpy as jnp
    import scipy.linalg
    from lrnn import orthogonal
    skew_expm = skew_expm or orthogonal.skew_expm
    rng = np.random.default_rng(5)
    M = rng.standard_normal((3, 16, 16))
    Q = np.asarray(skew_expm(jnp.asarray(M, jnp.float32)), np.float64)
    ref = np.stack([scipy.linalg.expm(m - m.T) for m in M])
    e_ref = _rel_err(Q, ref)
    e_orth = float(np.max(np.abs(np.swapaxes(Q, -1, -2) @ Q - np.eye(16))))
    det = np.linalg.det(Q)
    e_det = float(np.max(np.abs(det - 1)))
    return max(e_ref, e_orth, e_det), (f"vs SciPy expm(M - Mᵀ): {e_ref:.1e}; |QᵀQ - I|: {e_orth:.1e}; "
                                       f"|det Q - 1|: {e_det:.1e}")


def check_householder(householder_product=None):
    import jax.numpy as jnp
    from lrnn import orthogonal
    householder_product = householder_product or orthogonal.householder_product
    rng = np.random.default_rng(6)
    n, m = 16, 8
    U = np.tril(rng.standard_normal((n, m)))          # column j is [0_j; u_{n-j}] (oRNN eq. 9)
    W = np.eye(n)
    for j in range(m):                                # W = H(U[:,0]) H(U[:,1]) ... (eq. 8)
        u = U[:, j]
        W = W @ (np.eye(n) - 2 * np.outer(u, u) / (u @ u))
    got = np.asarray(householder_product(jnp.asarray(U, jnp.float32)), np.float64)
    e_ref = _rel_err(got, W)
    e_orth = float(np.max(np.abs(got.T @ got - np.eye(n))))
    Wn = np.asarray(householder_product(jnp.asarray(np.tril(rng.standard_normal((n, n))), jnp.float32),
                                        u1_sign=-1.0), np.float64)
    e_det = abs(np.linalg.det(Wn) - (-1) ** (n - 1) * -1.0)
    return max(e_ref, e_orth, e_det), (f"vs product of reflections: {e_ref:.1e}; |WᵀW - I|: "
                                       f"{e_orth:.1e}; m = n, u₁ = -1: |det W - (-1)ⁿ⁻¹u₁| = {e_det:.1e}")


def check_lru(apply=None):
    import jax
    import jax.numpy as jnp
    from lrnn.layers import lru
    apply = apply or lru.apply
    H, N, L = 4, 16, 300
    p = {k: np.asarray(v, np.float64) for k, v in
         lru.init(jax.random.PRNGKey(7), H, N, r_min=0.9, r_max=0.999).items()}
    u = np.random.default_rng(7).standard_normal((2, L, H))
    lam = np.exp(-np.exp(p["nu_log"]) + 1j * np.exp(p["theta_log"]))          # §3.3
    B = np.exp(p["gamma_log"])[:, None] * (p["B_re"] + 1j * p["B_im"])         # §3.4: γ ⊙ B
    C = p["C_re"] + 1j * p["C_im"]
    x, ys = np.zeros((2, N), complex), []
    for t in range(L):                     # x_k = Λ x_{k-1} + γ ⊙ B u_k; y_k = Re(C x_k) + D ⊙ u_k
        x = lam * x + u[:, t] @ B.T
        ys.append((x @ C.T).real + p["D"] * u[:, t])
    ref = np.stack(ys, axis=1)
    got = apply({k: jnp.asarray(v, jnp.float32) for k, v in p.items()}, jnp.asarray(u, jnp.float32))
    err = _rel_err(got, ref)
    return err, f"error {err:.1e} against LRU §3.3–3.4 in float64"


def check_rotrnn(apply=None):
    import jax
    import jax.numpy as jnp
    import scipy.linalg
    from lrnn.layers import rotrnn
    apply = apply or rotrnn.apply
    K, heads, n, L = 4, 2, 4, 200
    p = {k: np.asarray(v, np.float64) for k, v in
         rotrnn.init(jax.random.PRNGKey(8), K, heads * n, heads).items()}
    u = np.random.default_rng(8).standard_normal((L, K))
    gamma = np.exp(-np.exp(p["nu_log"]))                                     # App. B.3
    theta = p["theta"].reshape(heads, n // 2)
    Bh = p["B"]                                                              # (H, n, K)
    xi = np.sqrt((1 - gamma ** 2) / np.sum(Bh ** 2, axis=(1, 2)))            # §3.1
    A = []
    for h in range(heads):                 # A_h = γ_h P_h D(θ_h) P_hᵀ, P_h = expm(M_h - M_hᵀ) (eq. 6)
        P = scipy.linalg.expm(p["M"][h] - p["M"][h].T)
        D = scipy.linalg.block_diag(*[[[np.cos(t), -np.sin(t)], [np.sin(t), np.cos(t)]] for t in theta[h]])
        A.append(gamma[h] * P @ D @ P.T)
    x, ys = np.zeros((heads, n)), []
    for t in range(L):
        x = np.stack([A[h] @ x[h] + xi[h] * Bh[h] @ u[t] for h in range(heads)])
        ys.append(p["C"] @ x.reshape(-1) + p["D"] * u[t])
    ref = np.stack(ys)
    got = apply({k: jnp.asarray(v, jnp.float32) for k, v in p.items()}, jnp.asarray(u, jnp.float32))
    err = _rel_err(got, ref)
    return err, f"error {err:.1e} against RotRNN eq. 6 with dense matrices in float64"


def library_checks() -> list[tuple[str, object, float]]:
    """``(name, check function, tolerance on its relative error)``; a check returns
    ``(error, detail)``. float32 tolerances: 1e-4 for recurrences over hundreds of steps, 1e-5
    for single matrix functions; float64 ones: 1e-10."""
    checks = []
    for m in _scan_methods():
        checks.append((f"linear_scan method={m!r} vs float64 loop", lambda m=m: check_scan(m), 1e-4))
        checks.append((f"linear_scan method={m!r} gradient vs float64 adjoint",
                       lambda m=m: check_scan_gradient(m), 1e-4))
    checks += [
        ("linear_scan method='auto' on float64 inputs", check_scan_float64, 1e-10),
        ("rotation_scan vs float64 rotations (RotRNN eq. 14)", check_rotation_scan, 1e-4),
        ("skew_expm orthogonal, = SciPy expm (RotRNN Lemma 2)", check_skew_expm, 1e-5),
        ("householder_product orthogonal, = reflections (oRNN eq. 8)", check_householder, 1e-5),
        ("LRU layer vs NumPy transcription", check_lru, 1e-4),
        ("RotRNN layer vs NumPy transcription", check_rotrnn, 1e-4),
    ]
    return checks


def run_check(name, fn, tol, section="library") -> Result:
    from . import precision
    start = time.perf_counter()
    try:
        with precision.exact_matmuls():
            err, detail = fn()
        status = PASS if err <= tol else FAIL
        detail = f"{detail} (tolerance {tol:.0e})"
        data = {"error": err, "tolerance": tol}
    except Exception as e:  # noqa: BLE001 - a crash is a failed check
        status, detail, data = FAIL, f"raised {type(e).__name__}: {str(e)[:300]}", {}
    return Result(section, name, status, detail, time.perf_counter() - start, data)


# ----------------------------------------------------------------------------------------
# Grading the solutions
# ----------------------------------------------------------------------------------------

def _subprocess_env():
    env = dict(os.environ)
    src = str(Path(__file__).resolve().parents[2])        # so a source checkout grades itself
    env["PYTHONPATH"] = os.pathsep.join([src, *filter(None, [env.get("PYTHONPATH")])])
    return env


def grade_solutions(repo: Path, notebooks: list[Path], workdir: Path, *, timeout: float) -> list[Result]:
    """``python -m lrnn grade NOTEBOOKS --out gradebook.csv``: every solution must get full
    marks."""
    out = workdir / "gradebook.csv"
    cmd = [sys.executable, "-m", "lrnn", "grade", *map(str, notebooks), "--out", str(out),
           "--feedback-dir", str(workdir / "feedback"), "--solutions", str(repo / "solutions"),
           "--workers", "1" if len(notebooks) == 1 else "2"]
    start = time.perf_counter()
    try:
        proc = subprocess.run(cmd, cwd=repo, capture_output=True, text=True, timeout=timeout,
                              env=_subprocess_env())
    except subprocess.TimeoutExpired:
        return [Result("grading", "python -m lrnn grade", FAIL, f"did not finish in {timeout:.0f} s",
                       time.perf_counter() - start)]
    seconds = time.perf_counter() - start
    if proc.returncode != 0 or not out.exists():
        tail = (proc.stderr or proc.stdout).strip().splitlines()[-3:]
        return [Result("grading", "python -m lrnn grade", FAIL,
                       f"exit code {proc.returncode}: {' | '.join(tail)[:400]}", seconds)]
    with open(out, newline="", encoding="utf-8") as f:
        rows = {str(Path(r.get("submission", "")).resolve()): r for r in csv.DictReader(f)}
    results = []
    for nb in notebooks:
        row = rows.get(str(nb.resolve()))
        name = f"{nb.parent.name}/{nb.name}"
        if row is None:
            results.append(Result("grading", name, FAIL, "not in the gradebook", seconds))
            continue
        try:
            total, best = float(row["total"]), float(row["max_total"])
        except (KeyError, ValueError):
            results.append(Result("grading", name, FAIL, f"unreadable gradebook row: {row}", seconds))
            continue
        ok = best > 0 and total == best
        missed = [k for k, v in row.items() if re.fullmatch(r"ex\d+\.\d+", k) and v not in ("", None)
                  and _is_zero(v)]
        detail = f"{total:g} / {best:g} points, status {row.get('status', '?')!r}"
        if missed:
            detail += f"; no points for {', '.join(missed)}"
        results.append(Result("grading", name, PASS if ok else FAIL, detail, seconds / len(notebooks),
                              {"total": total, "max_total": best, "status": row.get("status")}))
    return results


def _is_zero(v):
    try:
        return float(v) == 0.0
    except ValueError:
        return False


# ----------------------------------------------------------------------------------------
# Executing the notebooks against the budgets
# ----------------------------------------------------------------------------------------

def notebook_results(repo: Path, notebooks: list[Path], budget: Budget, *,
                     cell_timeout: float) -> tuple[list[Result], list[dict]]:
    results, slow = [], []
    for path in notebooks:
        name = str(path.relative_to(repo)) if path.is_relative_to(repo) else str(path)
        run = execute_notebook(path, cell_timeout=cell_timeout)
        times = cell_times(run.nb)
        total = notebook_seconds(times) or 0.0
        slowest = sorted(times, key=lambda t: -t.seconds)[:3]
        slow += [{"notebook": name, "cell": t.index, "nbval_cell": t.code_index,
                  "seconds": round(t.seconds, 2), "source": t.first_line} for t in times]
        problems = [] if run.error else budget_problems(name, run.nb, budget, require_timing=False)
        shown = [p for p in output_problems(run.nb)]
        detail = (f"{total:.1f} s (kernel start included: {run.seconds:.1f} s); slowest: "
                  + ", ".join(f"cell {t.index} {t.seconds:.1f} s" for t in slowest))
        data = {"seconds": total, "wall_seconds": run.seconds,
                "slowest": [dataclasses.asdict(t) | {"start": str(t.start), "end": str(t.end)}
                            for t in slowest]}
        if run.error:
            results.append(Result("notebooks", name, FAIL, f"error: {run.error}", run.seconds, data))
        elif problems:
            results.append(Result("notebooks", name, FAIL,
                                  "; ".join(p.split(": ", 1)[1] for p in problems), run.seconds, data))
        elif shown:
            cell, what, text = shown[0]
            more = f" (and {len(shown) - 1} more)" if len(shown) > 1 else ""
            results.append(Result("notebooks", name, WARN,
                                  f"{detail}; {what} in cell {cell}: {text}{more}", run.seconds, data))
        else:
            results.append(Result("notebooks", name, PASS, detail, run.seconds, data))
    return results, sorted(slow, key=lambda r: -r["seconds"])


# ----------------------------------------------------------------------------------------
# GPU: sequential step cost, scan benchmark and its targets
# ----------------------------------------------------------------------------------------

#: The shapes of the GPU issue's scan targets; ``sequential`` first, so that the benchmark's
#: accuracy column (error against its first row) measures the accuracy target.
BENCH_ARGS = ["--shapes", "16x16384x256,1x65536x64,32x1024x512",
              "--methods", "sequential,pallas,associative,auto,paper: associative_scan",
              "--repeats", "5"]


def sequential_step_seconds(length: int = 4096, channels: int = 256, repeats: int = 5) -> float:
    """Seconds per time step of ``linear_scan(method="sequential")`` at ``(1, length, channels)``
    complex64, best of ``repeats`` after a warm-up (what ``lrnn.course.setup.size`` assumes)."""
    import jax
    import jax.numpy as jnp
    import lrnn
    lam = jnp.full((channels,), 0.99 + 0.0j, jnp.complex64)
    b = jnp.ones((1, length, channels), jnp.complex64)
    f = jax.jit(lambda a, x: lrnn.linear_scan(a, x, method="sequential"))
    f(lam, b).block_until_ready()
    best = float("inf")
    for _ in range(repeats):
        t = time.perf_counter()
        f(lam, b).block_until_ready()
        best = min(best, time.perf_counter() - t)
    return best / length


def bench_target_results(scan: dict, *, strict: bool) -> list[Result]:
    """Results for ``lrnn.training.bench``'s GPU targets evaluated on ``scan`` (its JSON). Speed targets
    missed are MISS (FAIL with ``strict``); an accuracy target missed is FAIL."""
    from ..training import bench
    results = []
    for t in bench.scan_targets(scan):
        if t["measured"] is None:
            results.append(Result("gpu benchmark", t["target"], SKIP, "not measured by this run"))
            continue
        accuracy = "error" in t["target"] or "matches" in t["target"]
        status = PASS if t["passed"] else (FAIL if accuracy or strict else MISS)
        shape = "×".join(map(str, t["shape"])) if t.get("shape") else ""
        results.append(Result("gpu benchmark", t["target"] + (f" at {shape}" if shape else ""), status,
                              f"measured {t['measured']:.3g}, target {t['threshold']:g}", data=t))
    return results


def gpu_results(repo: Path | None, workdir: Path, *, strict: bool, bench_args=None,
                timeout: float = 1800) -> list[Result]:
    import jax
    from . import setup
    if jax.default_backend() != "gpu":
        return [Result("gpu benchmark", "scan benchmark and targets", SKIP, "no GPU here")]
    results = []
    step = sequential_step_seconds()
    assumed = setup.gpu_profile().sequential_step_s
    results.append(Result("gpu benchmark", "sequential scan: seconds per step", INFO if step <= assumed else WARN,
                          f"{step * 1e6:.1f} µs per step at (1, 4096, 256) complex64; lrnn.course.setup.size "
                          f"assumes {assumed * 1e6:.0f} µs" + ("" if step <= assumed else
                                                               ": its GPU sizes are optimistic here"),
                          data={"measured_s": step, "assumed_s": assumed}))
    out = workdir / "bench_scan_gpu.json"
    cmd = [sys.executable, "-m", "lrnn", "bench", "scan", "--device", "gpu", "--out", str(out),
           *(bench_args if bench_args is not None else BENCH_ARGS)]
    start = time.perf_counter()
    try:
        proc = subprocess.run(cmd, cwd=repo or os.getcwd(), capture_output=True, text=True,
                              timeout=timeout, env=_subprocess_env())
    except subprocess.TimeoutExpired:
        return results + [Result("gpu benchmark", "python -m lrnn bench scan", FAIL,
                                 f"did not finish in {timeout:.0f} s")]
    seconds = time.perf_counter() - start
    if proc.returncode != 0 or not out.exists():
        tail = (proc.stderr or proc.stdout).strip().splitlines()[-3:]
        return results + [Result("gpu benchmark", "python -m lrnn bench scan", FAIL,
                                 f"exit code {proc.returncode}: {' | '.join(tail)[:400]}", seconds)]
    scan = json.loads(out.read_text())
    results.append(Result("gpu benchmark", "python -m lrnn bench scan", PASS,
                          f"{len(scan.get('results', []))} rows in {seconds:.0f} s; copy bandwidth "
                          f"{scan.get('copy_bandwidth_GBps', float('nan')):.0f} GB/s "
                          f"(lrnn.course.setup assumes {setup.gpu_profile().bandwidth_gbs:,.0f} GB/s)",
                          seconds, {"command": " ".join(cmd[1:]), "json": str(out)}))
    targets = subprocess.run([sys.executable, "-m", "lrnn", "bench", "targets", "--scan", str(out)],
                             cwd=repo or os.getcwd(), capture_output=True, text=True, timeout=300,
                             env=_subprocess_env())
    results.append(Result("gpu benchmark", "python -m lrnn bench targets",
                          PASS if targets.returncode == 0 else FAIL,
                          "table below" if targets.returncode == 0 else targets.stderr[-300:],
                          data={"markdown": targets.stdout}))
    return results + bench_target_results(scan, strict=strict)


# ----------------------------------------------------------------------------------------
# The whole check
# ----------------------------------------------------------------------------------------

QUICK_SOLUTION = "solutions/01_linear_recurrence.ipynb"
QUICK_NOTEBOOK = "book/00_welcome.ipynb"


def device_slug(env: dict) -> str:
    if env["platform"] != "gpu":
        return env["platform"]
    return re.sub(r"[^a-z0-9]+", "-", env["device_kind"].lower()).strip("-")


def run_doctor(*, quick: bool = False, repo: Path | None = None, out_dir: Path | None = None,
               strict: bool = False, skip=(), cell_timeout: float = 600, bench_args=None,
               log=print) -> dict:
    """Run every step (see the module docstring), print one line per result, write the JSON and
    Markdown reports; return the report dict (``report["ok"]``: nothing FAILed).

    ``out_dir`` and the two report files are checked before any step runs (see
    :func:`check_out_dir`), so a bad ``--out-dir`` costs nothing."""
    repo = repo or find_repo()
    if out_dir is None and repo is not None and not quick:
        out_dir = repo / "book" / "data"          # the default of a full run, checked now too
    report_dir = check_out_dir(out_dir, quick=quick)
    started = time.perf_counter()
    date = _dt.datetime.now(_dt.timezone.utc).isoformat(timespec="seconds")
    results: list[Result] = []

    def add(new):
        for r in new:
            results.append(r)
            log(format_line(r))

    log(f"lrnn doctor ({'quick' if quick else 'full'}): the course on this machine\n")
    env_results, env = environment_results(repo)
    add(env_results)
    if "library" not in skip:
        for name, fn, tol in library_checks():
            add([run_check(name, fn, tol)])
    budget = BUDGETS["gpu" if env["platform"] == "gpu" else "cpu"]
    workdir = Path(tempfile.mkdtemp(prefix="lrnn-doctor-"))
    slow = []
    try:
        if repo is None:
            add([Result(s, "course notebooks", SKIP, "no checkout of the course repository here: "
                        "clone it and run the doctor inside it, or pass --repo")
                 for s in ("grading", "notebooks") if s not in skip])
        else:
            if "grading" not in skip:
                sols = [repo / QUICK_SOLUTION] if quick else notebook_paths(dirs=("solutions",), repo=repo)
                add(grade_solutions(repo, sols, workdir,
                                    timeout=(600 if quick else 600 * max(1, len(sols)))))
            if "notebooks" not in skip:
                nbs = [repo / QUICK_NOTEBOOK] if quick else notebook_paths(repo=repo)
                for nb in nbs:                                   # one line as each one ends
                    new, times = notebook_results(repo, [nb], budget, cell_timeout=cell_timeout)
                    add(new)
                    slow += times
                slow.sort(key=lambda r: -r["seconds"])
        if "gpu" not in skip:
            if quick and env["platform"] == "gpu":
                add([Result("gpu benchmark", "scan benchmark and targets", SKIP, "not in --quick")])
            else:
                add(gpu_results(repo, workdir, strict=strict, bench_args=bench_args))
    finally:
        bench_json = workdir / "bench_scan_gpu.json"
        bench = json.loads(bench_json.read_text()) if bench_json.exists() else None
        shutil.rmtree(workdir, ignore_errors=True)
    counts = {s: sum(r.status == s for r in results) for s in (PASS, FAIL, MISS, WARN, SKIP, INFO)}
    report = {
        "doctor": "python -m lrnn doctor" + (" --quick" if quick else "") + (" --strict" if strict else ""),
        "mode": "quick" if quick else "full",
        "date": date,
        "seconds": round(time.perf_counter() - started, 1),
        "commit": env.get("git_commit"),
        "commit_dirty": env.get("git_dirty"),
        "device": {"platform": env["platform"], "kind": env["device_kind"],
                   "compute_capability": env["compute_capability"], "jax": env["jax"]},
        "budget": dataclasses.asdict(budget),
        "environment": env,
        "results": [dataclasses.asdict(r) for r in results],
        "slowest_cells": slow[:20],
        "bench_scan": bench,
        "counts": counts,
        "ok": counts[FAIL] == 0,
    }
    out_dir = Path(report_dir) if report_dir is not None else \
        Path(tempfile.mkdtemp(prefix="lrnn-doctor-report-"))
    out_dir.mkdir(parents=True, exist_ok=True)
    stem = f"doctor{'-quick' if quick else ''}_{device_slug(env)}"
    report["files"] = [str(out_dir / f"{stem}.json"), str(out_dir / f"{stem}.md")]
    _io.atomic_write_text(out_dir / f"{stem}.json", json.dumps(report, indent=1, default=str) + "\n")
    _io.atomic_write_text(out_dir / f"{stem}.md", markdown_report(report))
    log("")
    log(summary_line(report))
    log(f"reports: {report['files'][0]} and .md")
    return report


def check_out_dir(out_dir, *, quick: bool):
    """Before any step: ``out_dir`` (``None``: the default, not checked) is a folder or can be
    made in an existing one, and the reports there, if they exist, are earlier doctor reports."""
    if out_dir is None:
        return None
    import jax
    d = jax.devices()[0]
    slug = device_slug({"platform": d.platform, "device_kind": d.device_kind})
    stem = f"doctor{'-quick' if quick else ''}_{slug}"
    folder = _io.check_folder(out_dir, what="--out-dir", create=True)
    _io.check_destination(folder / f"{stem}.json", suffixes=(".json",), what="--out-dir",
                          owned_by=_io.json_has_keys("doctor", "results", "counts"),
                          command="lrnn doctor (a report)")
    _io.check_destination(folder / f"{stem}.md", suffixes=(".md",), what="--out-dir",
                          owned_by=_io.first_line_startswith("# lrnn doctor:"),
                          command="lrnn doctor (a report)")
    return folder


def _positive_seconds(s: str) -> float:
    try:
        value = float(s)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a number of seconds, got {s!r}") from None
    if not (0 < value < float("inf")):
        raise argparse.ArgumentTypeError(f"expected a finite number of seconds > 0, got {s!r}")
    return value


def _positive_int(s: str) -> int:
    try:
        value = int(s)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a positive integer, got {s!r}") from None
    if value <= 0:
        raise argparse.ArgumentTypeError(f"expected a positive integer, got {s!r}")
    return value


def format_line(r: Result) -> str:
    return f"{r.status:4s}  {r.section:13s} {r.name}: {r.detail}"


def summary_line(report: dict) -> str:
    c = report["counts"]
    verdict = "the course works here" if report["ok"] else "the course does NOT work here as it should"
    extra = "".join(f", {c[s]} {label}" for s, label in ((MISS, "speed targets missed"),
                                                        (WARN, "warnings"), (SKIP, "skipped")) if c[s])
    return (f"{c[PASS]} passed, {c[FAIL]} failed{extra} in {report['seconds']:.0f} s on "
            f"{report['device']['kind']} (JAX {report['device']['jax']}): {verdict}.")


def markdown_report(report: dict) -> str:
    env = report["environment"]
    commit = report["commit"] or "unknown"
    if report.get("commit_dirty"):
        commit += " (uncommitted changes)"
    lines = [f"# lrnn doctor: {report['device']['kind']} ({report['mode']})", "",
             f"`{report['doctor']}` on {report['date']}, commit `{commit}`, "
             f"JAX {env['jax']} (jaxlib {env['jaxlib']}), Python {env['python']}, "
             f"backend {env['backend']}"
             + (f", compute capability {env['compute_capability']}" if env["compute_capability"] else "")
             + f". Budget: {report['budget']['notebook_s']:.0f} s per notebook, "
               f"{report['budget']['cell_s']:.0f} s per cell ({report['budget']['where']}).", "",
             f"**{summary_line(report)}**", "",
             "| status | section | check | result | seconds |", "|---|---|---|---|---|"]
    for r in report["results"]:
        sec = "" if r["seconds"] is None else f"{r['seconds']:.1f}"
        detail = str(r["detail"]).replace("|", "\\|").replace("\n", " ")
        lines.append(f"| {r['status']} | {r['section']} | {r['name']} | {detail} | {sec} |")
    if report["slowest_cells"]:
        lines += ["", "## Slowest cells", "", "| seconds | notebook | cell | nbval | source |",
                  "|---|---|---|---|---|"]
        for c in report["slowest_cells"][:15]:
            src = c["source"].replace("|", "\\|").replace("`", "'")
            lines.append(f"| {c['seconds']:.1f} | {c['notebook']} | {c['cell']} | Cell {c['nbval_cell']} "
                         f"| `{src}` |")
    md = next((r["data"].get("markdown") for r in report["results"]
               if r["name"] == "python -m lrnn bench targets"), None)
    if md:
        lines += ["", "## Scan benchmark targets (`python -m lrnn bench targets`)", "", md.strip()]
    return "\n".join(lines) + "\n"


# ----------------------------------------------------------------------------------------
# Command line
# ----------------------------------------------------------------------------------------

def _main_check(argv):
    p = argparse.ArgumentParser(prog="lrnn doctor",
                                description="Check that the course works on this machine "
                                            "(subcommands: slowest, execute; see --help of each).")
    p.add_argument("--quick", action="store_true",
                   help="library checks, one solution graded, one short notebook executed (CI)")
    p.add_argument("--repo", type=Path, default=None, help="the course repository (default: found)")
    p.add_argument("--out-dir", type=Path, default=None,
                   help="where doctor_<device>.json/.md go (default: book/data for a full run, "
                        "a temporary folder for --quick)")
    p.add_argument("--strict", action="store_true", help="missed GPU speed targets fail the run")
    p.add_argument("--skip", nargs="*", default=[], choices=["library", "grading", "notebooks", "gpu"],
                   help="steps to leave out")
    p.add_argument("--cell-timeout", type=_positive_seconds, default=600,
                   help="seconds before a cell is stopped")
    args = p.parse_args(argv)
    if args.repo is not None and not ((args.repo / "solutions").is_dir()
                                      or (args.repo / "book").is_dir()):
        p.error(f"--repo: got {str(args.repo)!r}, expected the course repository (a folder "
                "with solutions/ or book/)")
    try:
        check_out_dir(args.out_dir, quick=args.quick)
    except ValueError as err:
        p.error(str(err))
    report = run_doctor(quick=args.quick, repo=args.repo.resolve() if args.repo else None,
                        out_dir=args.out_dir, strict=args.strict, skip=set(args.skip),
                        cell_timeout=args.cell_timeout)
    return 0 if report["ok"] else 1


def _main_slowest(argv):
    p = argparse.ArgumentParser(prog="lrnn doctor slowest",
                                description="List the slowest recorded cells of every notebook "
                                            "(from the cell times nbclient stores in the notebooks).")
    p.add_argument("paths", nargs="*", help="notebooks or folders (default: book/ solutions/ "
                                            "exercises/ of the course repository)")
    p.add_argument("--top", type=_positive_int, default=15,
                   help="how many of the slowest cells to list")
    p.add_argument("--device", choices=sorted(BUDGETS), default="cpu", help="whose budget to mark")
    args = p.parse_args(argv)
    paths = notebook_paths(args.paths)
    if not paths:
        print("no notebooks found", file=sys.stderr)
        return 2
    print(slowest_report(paths, top=args.top, budget=BUDGETS[args.device]))
    return 0


def is_generated_exercise(path) -> bool:
    """Whether ``path`` is an exercise notebook that ``lrnn exercises build`` generates (a
    notebook in ``exercises/`` with a namesake in the sibling ``solutions/``)."""
    path = Path(path).resolve()
    return (path.parent.name == "exercises"
            and (path.parent.parent / "solutions" / path.name).is_file())


def _main_execute(argv):
    p = argparse.ArgumentParser(prog="lrnn doctor execute",
                                description="Execute notebooks in place, top to bottom in a fresh "
                                            "kernel each, keeping nbclient's per-cell times.")
    p.add_argument("paths", nargs="+", help="notebooks or folders")
    p.add_argument("--cell-timeout", type=_positive_seconds, default=600)
    args = p.parse_args(argv)
    status = 0
    for path in notebook_paths(args.paths):
        if is_generated_exercise(path):
            print(f"skip  {path}: generated from solutions/{Path(path).name} by "
                  "`python -m lrnn exercises build`, which it must match; not executed")
            continue
        run = execute_notebook(path, cell_timeout=args.cell_timeout, in_place=True)
        times = cell_times(run.nb)
        total = notebook_seconds(times) or 0.0
        worst = max(times, key=lambda t: t.seconds, default=None)
        if run.error:
            status = 1
            print(f"FAIL  {path}: {run.error} (not written)")
            continue
        problems = budget_problems(str(path), run.nb, BUDGETS["cpu"], require_timing=False)
        print(f"{'OVER' if problems else 'ok  '}  {path}: {total:.1f} s"
              + (f", slowest {worst.where()} {worst.seconds:.1f} s" if worst else ""))
        for prob in problems:
            print(f"      {prob}")
    return status


def main(argv=None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    if argv and argv[0] == "slowest":
        return _main_slowest(argv[1:])
    if argv and argv[0] == "execute":
        return _main_execute(argv[1:])
    return _main_check(argv)


if __name__ == "__main__":
    sys.exit(main())
