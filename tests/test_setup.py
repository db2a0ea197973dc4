"""lrnn.course.setup: the setup cell (two plain lines, no warning, the precision policy) and the
problem-size helpers ``pick`` and ``size``."""
import dataclasses
import warnings

import jax
import pytest

from lrnn.course import precision, setup


@pytest.fixture(autouse=True)
def restore_matmul_precision():
    previous = precision.current_default()
    yield
    jax.config.update("jax_default_matmul_precision", previous)


@dataclasses.dataclass
class FakeDevice:
    platform: str
    device_kind: str
    compute_capability: str | None = None


def run_environment(capsys, **kwargs):
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        info = setup.environment(**kwargs)
    out, err = capsys.readouterr()
    return info, out, err, caught


def test_environment_prints_two_plain_lines_and_no_warning_on_cpu(capsys):
    info, out, err, caught = run_environment(capsys)
    lines = out.strip().splitlines()
    assert len(lines) == 2, out
    assert err == "" and not caught, (err, [str(w.message) for w in caught])
    assert lines[0].startswith(f"JAX {jax.__version__} on CPU")
    assert "smaller problem sizes" in lines[0] and "Change runtime type" in lines[0]
    assert lines[1] == precision.policy_line()
    assert "/tmp" not in out and "Warning" not in out


def test_environment_applies_the_course_policy_unless_told_otherwise(capsys):
    jax.config.update("jax_default_matmul_precision", None)
    info, out, _, _ = run_environment(capsys)
    assert precision.current_default() == precision.POLICY == info["matmul_precision"]
    assert "full float32" in out.splitlines()[1]
    info, out, _, _ = run_environment(capsys, matmul_precision="default")
    assert precision.current_default() is None and info["matmul_precision"] is None
    assert "JAX's default" in out.splitlines()[1]


def test_environment_keeps_its_old_keys_and_quiet(capsys):
    info, out, _, _ = run_environment(capsys, quiet=True)
    assert out == ""
    for key in ("backend", "devices", "gpu", "colab", "jax", "device_kind", "compute_capability",
                "matmul_precision", "tf32_possible", "cpu_count"):
        assert key in info, key
    assert info["gpu"] is setup.has_gpu() is False


def test_environment_rejects_an_unknown_precision():
    with pytest.raises(ValueError, match="matmul_precision"):
        setup.environment(matmul_precision="fast please", quiet=True)


@pytest.mark.parametrize("kind,cc,tf32", [("Tesla T4", "7.5", False),
                                          ("NVIDIA H100 80GB HBM3", "9.0", True)])
def test_environment_on_a_gpu_names_it_and_its_compute_capability(monkeypatch, capsys, kind, cc, tf32):
    monkeypatch.setattr(setup, "_devices", lambda: [FakeDevice("gpu", kind, cc)])
    info, out, err, caught = run_environment(capsys)
    first, second = out.strip().splitlines()
    assert first == f"JAX {jax.__version__} on GPU: {kind}, compute capability {cc}."
    assert info["gpu"] and info["compute_capability"] == cc and info["tf32_possible"] is tf32
    assert ("would otherwise run them in TF32" in second) is tf32
    assert err == "" and not caught


def test_pick_prints_the_cpu_choice(capsys):
    assert setup.pick("sequence length", cpu=8, gpu=64) == 8
    assert capsys.readouterr().out == "CPU run: sequence length = 8 (a GPU run uses 64).\n"


@pytest.mark.parametrize("kind,name,assumed", [
    ("Tesla T4", "T4", False), ("NVIDIA L4", "L4", False), ("NVIDIA L40S", "L40S", False),
    ("NVIDIA A100-SXM4-40GB", "A100", False), ("NVIDIA A100-SXM4-80GB", "A100 80GB", False),
    ("NVIDIA H100 80GB HBM3", "H100", False), ("NVIDIA H100 PCIe", "H100 PCIe", False),
    ("Some Future GPU", "T4", True)])
def test_gpu_profile_recognises_colab_gpus(kind, name, assumed):
    p = setup.gpu_profile(FakeDevice("gpu", kind))
    reference = next(q for key, q in setup.GPU_TABLE if q.name == name)
    assert (p.bandwidth_gbs, p.fp32_tflops, p.assumed) == (reference.bandwidth_gbs, reference.fp32_tflops, assumed)
    assert p.name == kind
    assert ("sized as a T4" in p.describe()) is assumed


def test_the_t4_is_a_tenth_of_an_h100():
    # The T4's facts: ~1/10 of the bandwidth, ~1/8 of the float32 throughput.
    assert 8 < setup.H100.bandwidth_gbs / setup.T4.bandwidth_gbs < 12
    assert 7 < setup.H100.fp32_tflops / setup.T4.fp32_tflops < 9
    assert setup.T4.sequential_step_s == setup.H100.sequential_step_s == setup.GPU_SEQUENTIAL_STEP_S


def test_estimate_seconds_adds_bandwidth_arithmetic_and_steps():
    t4 = setup.T4
    assert setup.estimate_seconds(10 ** 6, bytes_per_item=320, profile=t4) == pytest.approx(1e-3)
    assert setup.estimate_seconds(10 ** 6, flops_per_item=8.1e3, profile=t4) == pytest.approx(1e-3)
    assert setup.estimate_seconds(1000, sequential_steps_per_item=1, profile=t4) == pytest.approx(0.025)
    both = setup.estimate_seconds(1000, bytes_per_item=320e3, sequential_steps_per_item=1, profile=t4)
    assert both == pytest.approx(0.026)


def test_size_on_cpu_returns_the_cpu_size_and_says_so(capsys):
    assert setup.size("L", cpu=4096, gpu=2 ** 21, sequential_steps_per_item=1) == 4096
    assert capsys.readouterr().out.startswith("CPU run: L = 4096")


def test_size_keeps_a_sequential_scan_near_ten_thousand_steps_on_any_gpu(capsys):
    for gpu in (setup.T4, setup.H100):
        n = setup.size("L", cpu=2 ** 15, gpu=2 ** 21, seconds=0.5, bytes_per_item=16 * 256,
                       sequential_steps_per_item=1, profile=gpu)
        assert n == 2 ** 14                      # 16384 × 25 µs = 0.41 s; 32768 would be 0.82 s
    out = capsys.readouterr().out
    assert "L = 16384" in out and "mostly sequential steps" in out and "T4" in out and "H100" in out


def test_size_gives_a_fast_gpu_more_when_bandwidth_bound(capsys):
    kw = dict(cpu=2 ** 12, gpu=2 ** 26, seconds=0.01, bytes_per_item=16 * 256)
    n_t4 = setup.size("L", profile=setup.T4, **kw)
    n_h100 = setup.size("L", profile=setup.H100, **kw)
    assert n_h100 == 8 * n_t4
    assert setup.estimate_seconds(n_t4, bytes_per_item=16 * 256, profile=setup.T4) <= 0.01
    assert setup.estimate_seconds(2 * n_t4, bytes_per_item=16 * 256, profile=setup.T4) > 0.01
    assert "mostly memory traffic" in capsys.readouterr().out


def test_size_returns_the_largest_size_when_it_fits(capsys):
    assert setup.size("batch", cpu=8, gpu=64, flops_per_item=1e6, profile=setup.T4) == 64
    assert "the largest size asked for" in capsys.readouterr().out


def test_size_keeps_the_arrays_within_half_of_the_gpu_memory(capsys):
    # 2^21 steps of 256 complex64 channels, a, b and x resident: 12.9 GB, more than half a T4.
    kw = dict(cpu=2 ** 15, gpu=2 ** 21, seconds=10.0, bytes_per_item=16 * 256,
              resident_bytes_per_item=3 * 8 * 256)
    assert setup.size("L", profile=setup.T4, **kw) == 2 ** 20
    assert "fit in half of the GPU's 16 GB" in capsys.readouterr().out
    assert setup.size("L", profile=setup.H100, **kw) == 2 ** 21


@pytest.mark.parametrize("kwargs,name", [(dict(cpu=0, gpu=8), "cpu"), (dict(cpu=8, gpu=2.5), "gpu"),
                                         (dict(cpu=8, gpu=8, seconds=0), "seconds")])
def test_size_rejects_bad_arguments(kwargs, name):
    with pytest.raises(ValueError, match=f"`{name}`"):
        setup.size("L", **kwargs)
