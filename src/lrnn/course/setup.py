"""The first cell of every notebook: what machine this is, and which problem sizes to use.

    import lrnn
    env = lrnn.course.setup.environment()      # two plain lines: device, JAX, matmul precision
    L = lrnn.course.setup.pick("sequence length", cpu=1024, gpu=16384)
    L = lrnn.course.setup.size("longest sequential scan", cpu=2**15, gpu=2**21,
                        bytes_per_item=16 * 256, sequential_steps_per_item=1, seconds=1.0)

``environment`` applies the course's matmul precision policy (``lrnn.course.precision``: full
float32 matrix products, so that a chapter shows the same numbers on a CPU, a T4 and a TF32
GPU); training notebooks opt out with ``environment(matmul_precision="default")``. It prints,
never warns: a warning in the setup cell would show on every page of the website.

``pick`` returns a fixed CPU or GPU value. ``size`` chooses a GPU size from what the GPU at
hand can do (:func:`gpu_profile`) and prints what it chose and why. The facts it uses:

* a T4 (Colab's free GPU) has about 1/10 of an H100's memory bandwidth (320 against
  3 350 GB/s) and 1/8 of its float32 throughput (8.1 against 67 TFLOP/s);
* a sequential scan (``lax.scan``) costs microseconds *per time step* on any GPU, however fast:
  each step is a tiny kernel plus loop control. Chapter 1's timing sweep on an H100 ran about
  8.4 million sequential steps in 213 s, at most 25 µs each, which is the figure used here. So
  no sequential method runs far beyond L ≈ 10⁴ in a notebook cell on a GPU.
"""
from __future__ import annotations

import dataclasses
import logging
import os

import jax

from .._validate import fail
from . import precision

COLAB_GPU_HINT = "in Colab: Runtime → Change runtime type → T4 GPU"

#: Seconds per step of a sequential scan on a GPU (an upper bound measured on an H100, see the
#: module docstring; the kernel launch and loop control per step do not shrink on a faster GPU).
GPU_SEQUENTIAL_STEP_S = 25e-6


@dataclasses.dataclass(frozen=True)
class GPUProfile:
    """What a GPU can do, as far as problem sizes are concerned (vendor specifications).

    ``bandwidth_gbs``: memory bandwidth in GB/s; ``fp32_tflops``: float32 throughput without
    tensor cores, in TFLOP/s; ``memory_gb``: device memory in GB; ``sequential_step_s``: seconds
    per step of a sequential scan; ``assumed``: True when the GPU was not recognised and a T4
    (the slowest GPU students get) is assumed instead."""
    name: str
    bandwidth_gbs: float
    fp32_tflops: float
    memory_gb: float = 16.0
    sequential_step_s: float = GPU_SEQUENTIAL_STEP_S
    assumed: bool = False

    def describe(self) -> str:
        step_us = self.sequential_step_s * 1e6
        what = (f"≈{self.bandwidth_gbs:,.0f} GB/s, ≈{self.fp32_tflops:g} TFLOP/s float32, "
                f"{self.memory_gb:g} GB, ≈{step_us:g} µs per sequential step")
        if self.assumed:
            return f"{self.name}, not in the course's table: sized as a T4 ({what})"
        return f"{self.name} ({what})"


#: Substrings of ``device.device_kind`` (checked in this order) and their specifications.
GPU_TABLE = (
    ("H200", GPUProfile("H200", 4800, 67, 141)),
    ("H100 PCIe", GPUProfile("H100 PCIe", 2000, 51, 80)),
    ("H100", GPUProfile("H100", 3350, 67, 80)),
    ("A100-SXM4-80GB", GPUProfile("A100 80GB", 2039, 19.5, 80)),
    ("A100", GPUProfile("A100", 1555, 19.5, 40)),
    ("L40S", GPUProfile("L40S", 864, 91.6, 48)),
    ("A10G", GPUProfile("A10G", 600, 31.2, 24)),
    ("L4", GPUProfile("L4", 300, 30.3, 24)),
    ("V100", GPUProfile("V100", 900, 15.7, 16)),
    ("P100", GPUProfile("P100", 732, 9.3, 16)),
    ("T4", GPUProfile("T4", 320, 8.1, 16)),
)
T4 = dict(GPU_TABLE)["T4"]
H100 = dict(GPU_TABLE)["H100"]


def has_gpu() -> bool:
    return jax.default_backend() == "gpu"


def _devices():
    """``jax.devices()``, with JAX's own backend-probing log lines (for example "Unable to
    initialize backend 'cuda'" on a Colab CPU runtime) kept out of the notebook: the first line
    of :func:`environment` says which device is used."""
    logger = logging.getLogger("jax._src.xla_bridge")
    level = logger.level
    logger.setLevel(logging.ERROR)
    try:
        return jax.devices()
    finally:
        logger.setLevel(level)


def in_colab() -> bool:
    return "COLAB_RELEASE_TAG" in os.environ or "COLAB_GPU" in os.environ


def compute_capability(device=None) -> str | None:
    """The CUDA compute capability of an NVIDIA GPU as a string (``"7.5"`` on a T4), else None."""
    device = device or _devices()[0]
    cc = getattr(device, "compute_capability", None)
    return None if cc is None else str(cc)


def gpu_profile(device=None) -> GPUProfile:
    """The :class:`GPUProfile` of ``device`` (default: the first JAX device), looked up by its
    name in :data:`GPU_TABLE`; an unknown GPU (or a CPU, for estimates) is treated as a T4."""
    device = device or _devices()[0]
    kind = getattr(device, "device_kind", str(device))
    for key, profile in GPU_TABLE:
        if key.lower() in kind.lower():
            return dataclasses.replace(profile, name=kind)
    return dataclasses.replace(T4, name=kind, assumed=True)


def _set_matmul_precision(matmul_precision):
    if matmul_precision == "course":
        precision.use_course_policy()
        return
    value = None if matmul_precision == "default" else matmul_precision
    try:
        jax.config.update("jax_default_matmul_precision", value)
    except ValueError:
        fail("matmul_precision", matmul_precision,
             '"course" (full float32 products, the course policy), "default" (JAX\'s default, '
             'TF32 allowed on Ampere and newer GPUs) or a value of jax_default_matmul_precision')


def environment(*, matmul_precision: str = "course", quiet: bool = False) -> dict:
    """Print the device, the JAX version and the matmul precision in force, in two plain lines.

    Args:
      matmul_precision: ``"course"`` (default) applies the course policy, full float32 matrix
        products (``lrnn.course.precision.use_course_policy``); ``"default"`` keeps JAX's
        default, which lets an A100/L4/H100 run float32 products in TF32 (chapter 7's training
        does this: TF32 rounding is far below the noise of stochastic gradients); any other
        value is passed to ``jax.config.update("jax_default_matmul_precision", ...)``.
      quiet: print nothing.

    On a CPU the first line also says that smaller problem sizes are used and how to get a GPU
    in Colab. Nothing is sent to stderr, so the website shows no warning under this cell.

    Returns ``{"jax", "backend", "devices", "gpu", "colab", "device_kind",
    "compute_capability", "matmul_precision", "tf32_possible", "cpu_count"}``.
    """
    _set_matmul_precision(matmul_precision)
    devices = _devices()
    first = devices[0]
    gpu = first.platform == "gpu"
    info = {
        "jax": jax.__version__,
        "backend": jax.default_backend(),
        "devices": [f"{d.platform}:{d.device_kind}" for d in devices],
        "gpu": gpu,
        "colab": in_colab(),
        "device_kind": first.device_kind,
        "compute_capability": compute_capability(first),
        "matmul_precision": precision.current_default(),
        "tf32_possible": precision.tf32_possible(first),
        "cpu_count": os.cpu_count(),
    }
    if not quiet:
        print(device_line(info))
        print(precision.policy_line(first))
    return info


def device_line(info: dict) -> str:
    """The first line of :func:`environment` from its returned dict."""
    if info["gpu"]:
        count = len(info["devices"])
        many = f" ×{count}" if count > 1 else ""
        cc = f", compute capability {info['compute_capability']}" if info["compute_capability"] else ""
        return f"JAX {info['jax']} on GPU: {info['device_kind']}{many}{cc}."
    where = info["backend"].upper()
    cores = f" ({info['cpu_count']} cores)" if info["backend"] == "cpu" and info["cpu_count"] else ""
    return (f"JAX {info['jax']} on {where}{cores}, no GPU: this notebook uses smaller problem "
            f"sizes and says where ({COLAB_GPU_HINT}).")


def pick(what: str, *, cpu, gpu, quiet: bool = False):
    """Return ``gpu`` on a GPU and ``cpu`` elsewhere, printing the choice when it is the CPU's."""
    if has_gpu():
        return gpu
    if not quiet:
        print(f"CPU run: {what} = {cpu} (a GPU run uses {gpu}).")
    return cpu


def estimate_seconds(n, *, bytes_per_item=0.0, flops_per_item=0.0, sequential_steps_per_item=0.0,
                     profile: GPUProfile | None = None) -> float:
    """Lower-bound run time in seconds of work of size ``n`` on a GPU: the bytes moved at the
    memory bandwidth, plus the float32 operations at full throughput, plus the sequential steps
    at :data:`GPU_SEQUENTIAL_STEP_S` each. Compilation is not included."""
    p = profile or gpu_profile()
    per_item = (bytes_per_item / (p.bandwidth_gbs * 1e9) + flops_per_item / (p.fp32_tflops * 1e12)
                + sequential_steps_per_item * p.sequential_step_s)
    return n * per_item


def _seconds(s: float) -> str:
    return f"{s * 1e3:.0f} ms" if s < 1 else f"{s:.1f} s"


def size(what: str, *, cpu: int, gpu: int, seconds: float = 1.0, bytes_per_item: float = 0.0,
         flops_per_item: float = 0.0, sequential_steps_per_item: float = 0.0,
         resident_bytes_per_item: float = 0.0, profile: GPUProfile | None = None,
         quiet: bool = False) -> int:
    """A problem size for this machine, printed with the reason.

    On a CPU: ``cpu`` (the notebook's CPU size, chosen to fit the CPU time budget).
    On a GPU: the largest of ``gpu, gpu // 2, gpu // 4, ...`` whose estimated time
    (:func:`estimate_seconds` with the GPU's :func:`gpu_profile`) is at most ``seconds`` and
    whose arrays (``resident_bytes_per_item``) take at most half of the GPU's memory; it may be
    smaller than ``cpu`` (a sequential scan is slower per step on a GPU than on a CPU).

    Args:
      what: the name printed, e.g. ``"longest sequence for the sequential scan"``.
      cpu: the size on a CPU.
      gpu: the largest size worth running on a GPU.
      seconds: the time one run at the chosen size may take (a cell that runs it ``k`` times
        should pass its share of its 60 s budget; keep the notebook within 2 min on a T4).
      bytes_per_item, flops_per_item, sequential_steps_per_item: the cost of one unit of size:
        bytes read and written, float32 operations, and steps that must run one after another.
        E.g. a complex64 scan over ``L`` steps of ``N`` channels, sized in ``L``: 16·N bytes and
        one sequential step per time step for ``method="sequential"``, 16·N bytes and no
        sequential step for ``"associative"``.
      resident_bytes_per_item: bytes held in GPU memory at once per unit of size (inputs,
        outputs, temporaries), e.g. 3·8·N for a complex64 scan that keeps ``a``, ``b`` and ``x``.
      profile: the GPU to size for (default: this one, e.g. ``lrnn.course.setup.T4`` to check a T4).

    Returns the chosen size (an int).
    """
    for name, v in (("cpu", cpu), ("gpu", gpu)):
        if not isinstance(v, int) or isinstance(v, bool) or v < 1:
            fail(name, v, "a positive integer size")
    if not seconds > 0:
        fail("seconds", seconds, "a positive time budget in seconds")
    if profile is None and not has_gpu():
        if not quiet:
            print(f"CPU run: {what} = {cpu} (a GPU run uses up to {gpu}, as fast as its GPU allows).")
        return cpu
    p = profile or gpu_profile()
    cost = dict(bytes_per_item=bytes_per_item, flops_per_item=flops_per_item,
                sequential_steps_per_item=sequential_steps_per_item, profile=p)
    memory = 0.5 * p.memory_gb * 1e9
    n = gpu
    while n > 1 and (estimate_seconds(n, **cost) > seconds or n * resident_bytes_per_item > memory):
        n //= 2
    if not quiet:
        est = estimate_seconds(n, **cost)
        parts = {"memory traffic": estimate_seconds(n, bytes_per_item=bytes_per_item, profile=p),
                 "arithmetic": estimate_seconds(n, flops_per_item=flops_per_item, profile=p),
                 "sequential steps": estimate_seconds(
                     n, sequential_steps_per_item=sequential_steps_per_item, profile=p)}
        main = max(parts, key=parts.get)
        why = (f"the largest size up to {gpu} estimated within {_seconds(seconds)}"
               if n < gpu else f"the largest size asked for, estimated within {_seconds(seconds)}")
        if n < gpu and 2 * n * resident_bytes_per_item > memory \
                and estimate_seconds(2 * n, **cost) <= seconds:
            why = (f"the largest size up to {gpu} whose arrays fit in half of the GPU's "
                   f"{p.memory_gb:g} GB")
        where = "GPU run on" if profile is None else "Sized for"
        print(f"{where} {p.describe()}: {what} = {n}, {why} "
              f"(estimate {_seconds(est)}, mostly {main}).")
    return n
