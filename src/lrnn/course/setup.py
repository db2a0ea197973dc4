"""The first cell of every notebook: what hardware this is, and which problem sizes to use.

    import lrnn
    env = lrnn.setup.environment()         # prints backend and devices, warns without a GPU
    L = lrnn.setup.pick("sequence length", cpu=1024, gpu=16384)
"""
from __future__ import annotations

import os
import warnings

import jax


def has_gpu() -> bool:
    return jax.default_backend() == "gpu"


def environment(*, quiet: bool = False) -> dict:
    """Print the JAX version, backend and devices; warn when no GPU is present.

    Returns ``{"backend", "devices", "gpu", "colab", "jax"}``."""
    devices = jax.devices()
    info = {
        "jax": jax.__version__,
        "backend": jax.default_backend(),
        "devices": [f"{d.platform}:{d.device_kind}" for d in devices],
        "gpu": has_gpu(),
        "colab": "COLAB_RELEASE_TAG" in os.environ or "COLAB_GPU" in os.environ,
    }
    if not quiet:
        print(f"JAX {info['jax']} | backend: {info['backend']} | devices: {', '.join(info['devices'])}")
        if not info["gpu"]:
            hint = (" In Colab: Runtime → Change runtime type → GPU." if info["colab"] else "")
            warnings.warn("No GPU found: this notebook runs on the CPU with smaller problem "
                          "sizes, and says so where it picks them." + hint, stacklevel=2)
    return info


def pick(what: str, *, cpu, gpu, quiet: bool = False):
    """Return ``gpu`` on a GPU and ``cpu`` elsewhere, printing the choice when it is the CPU's."""
    if has_gpu():
        return gpu
    if not quiet:
        print(f"CPU run: {what} = {cpu} (a GPU run uses {gpu}).")
    return cpu
