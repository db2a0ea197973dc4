"""Time budgets and the cell times nbclient records in a notebook."""
from __future__ import annotations

import dataclasses
import datetime as _dt
import re
from pathlib import Path

from .environment import find_repo


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


def is_generated_exercise(path) -> bool:
    """Whether ``path`` is an exercise notebook that ``lrnn exercises build`` generates (a
    notebook in ``exercises/`` with a namesake in the sibling ``solutions/``)."""
    path = Path(path).resolve()
    return (path.parent.name == "exercises"
            and (path.parent.parent / "solutions" / path.name).is_file())
