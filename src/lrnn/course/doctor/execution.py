"""Executing a notebook in a fresh kernel, keeping its cell times."""
from __future__ import annotations

import dataclasses
import tempfile
import time
from pathlib import Path

from .budgets import _code_cells


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
