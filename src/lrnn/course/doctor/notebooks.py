"""Step 4, notebooks: each executed in a fresh kernel and held against the budgets."""
from __future__ import annotations

import dataclasses
from pathlib import Path

from .budgets import Budget, budget_problems, cell_times, notebook_seconds
from .execution import execute_notebook
from .outputs import output_problems
from .results import FAIL, PASS, WARN, Result


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
