"""Step 1, the environment: JAX, the device, TF32, the commit."""
from __future__ import annotations

import os
import platform
import subprocess
from pathlib import Path

import numpy as np

from .results import FAIL, INFO, PASS, Result, _rel_err


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
    """``{"commit", "short", "dirty"}`` from ``$LRNN_COMMIT`` where set (a copy of the tree whose
    ``.git``, if any, may be stale), else from git, or ``{"commit": None, "why": ...}``."""
    named = os.environ.get("LRNN_COMMIT", "").strip()
    if named:
        return {"commit": named, "short": named[:7], "dirty": False, "source": "LRNN_COMMIT"}
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
    from .. import precision
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
    from .. import colab
    lines = colab.drift_lines()
    return [Result("environment", "Colab drift", colab.doctor_status(lines), "\n".join(lines))]


def environment_results(repo: Path | None) -> tuple[list[Result], dict]:
    import jax
    import jaxlib
    from .. import precision, setup
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
