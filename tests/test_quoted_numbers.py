"""Numbers the prose quotes agree with what they quote: a notebook's stored output, the stored
runs in book/data/results, or a paper's formula. Each rule locates one cell by a phrase,
captures one quoted number with a regular expression and recomputes it; a quote matches when it
equals the true value to the digits it shows. Nothing is executed."""
from __future__ import annotations

import functools
import math
import re
from collections import namedtuple
from pathlib import Path

import nbformat
import numpy as np
import pytest

ROOT = Path(__file__).resolve().parents[1]

Rule = namedtuple("Rule", "notebook phrase pattern value")


@functools.cache
def cells(notebook):
    return nbformat.read(ROOT / notebook, as_version=4).cells


def cell_with(notebook, phrase, cell_type=None):
    found = [c for c in cells(notebook)
             if phrase in c.source and cell_type in (None, c.cell_type)]
    assert len(found) == 1, f"{len(found)} cells of {notebook} contain {phrase!r}, not one"
    return found[0]


def stored_output(notebook, phrase):
    """The text a code cell printed or displayed, as stored in the notebook."""
    parts = []
    for out in cell_with(notebook, phrase, "code").outputs:
        if out.output_type == "stream":
            parts.append(out.text)
        else:
            parts.extend(str(v) for k, v in out.get("data", {}).items() if k.startswith("text/"))
    return "\n".join(parts)


def printed(notebook, phrase, pattern):
    match = re.search(pattern, stored_output(notebook, phrase))
    assert match, f"the stored output of the cell with {phrase!r} has no {pattern!r}"
    return match.group(1)


def printed_list(notebook, phrase, label):
    items = printed(notebook, phrase, re.escape(label) + r"\s*\[([^\]]*)\]")
    return [float(v) for v in items.replace(",", " ").split()]


def quoted_value(text):
    """``(value, tolerance)`` of a number as the prose writes it: ``0.59``, ``1 000``,
    ``20\\,000``, ``10^{-3}``, ``2\\cdot10^{-7}``."""
    text = text.replace("\\,", "").replace(" ", "")
    sci = re.fullmatch(r"(?:([\d.]+)\\cdot)?10\^\{(-?\d+)\}", text)
    mantissa, exponent = (sci.group(1) or "1", int(sci.group(2))) if sci else (text, 0)
    decimals = len(mantissa.partition(".")[2])
    tolerance = 0.5 * 10.0 ** (exponent - decimals) if sci is None or sci.group(1) else 0.0
    value = float(mantissa) * 10.0 ** exponent
    return value, max(tolerance * (1 + 1e-9), 1e-12 * abs(value))


# --- Chapter 5: oRNN Table 2, one forward step: (4n - m + 2)m flops, a dense W h 2n^2 - n ---

HH = "book/05_householder.ipynb"


def hh_n():
    source = cell_with(HH, "def jacobian_rank").source
    return int(re.search(r"^n_x = (\d+)$", source, re.M).group(1))


def ornn_flops(m, n):
    return (4 * n - m + 2) * m


def dense_flops(n):
    return 2 * n * n - n


def hh_break_even():
    n = hh_n()
    return min(m for m in range(1, n + 1) if ornn_flops(m, n) >= dense_flops(n))


def hh_rank(m):
    ranks = printed_list(HH, "def jacobian_rank", "Jacobian rank:")
    return ranks[m - 1]


# --- Chapter 7: the stored runs --------------------------------------------------------------

EXP = "book/07_experiments.ipynb"


@functools.cache
def stored_records():
    from lrnn.training import experiments
    return experiments.load_results(ROOT / "book" / "data" / "results")


@functools.cache
def stored_rows():
    from lrnn.training import experiments
    return experiments.summarize(stored_records())


def adding(model):
    found = [r for r in stored_rows()
             if (r["suite"], r["task"], r["model"]) == ("cpu-small", "adding", model)]
    assert len(found) == 1, f"{len(found)} stored cpu-small adding groups of {model}"
    return found[0]


def worse_on_every_seed(model, than):
    """The median of ``model``, after checking that its best seed is worse than every seed of
    the models ``than``."""
    assert all(adding(model)["min"] > adding(m)["max"] for m in than), \
        f"a seed of {model} is as good as a seed of one of {than}"
    return adding(model)["median"]


def better_on_every_seed(model, than):
    assert all(adding(model)["max"] < adding(m)["min"] for m in than), \
        f"a seed of {model} is as bad as a seed of one of {than}"
    return adding(model)["median"]


def overlapping(models):
    """The medians of ``models``, after checking that the seeds of every two of them overlap."""
    for a in models:
        for b in models:
            assert adding(a)["min"] <= adding(b)["max"], f"the seeds of {a} and {b} do not overlap"
    return [adding(m)["median"] for m in models]


GATED_OR_ROTATED = ["rotrnn", "gru", "rotgru", "rotlstm"]


def rotrnn_best_seed_beside_the_lru():
    overlapping(["rotrnn", "lru"])
    return adding("rotrnn")["min"]


def config_value(record, field):
    if field == "seq_len":
        from lrnn.training import experiments
        return experiments.sequence_length(record)
    return record["model_config"].get(field, record["config"][field])


def suite_values(field, suite, task=None):
    return {config_value(r, field) for r in stored_records()
            if r["suite"] == suite and task in (None, r["task"])}


def only(values):
    assert len(values) == 1, f"not one value but {sorted(values)}"
    return next(iter(values))


def gpu_over_cpu(field, task=None):
    """GPU/CPU ratios of a setting, one per task that both suites ran."""
    tasks = [task] if task else sorted({r["task"] for r in stored_records()
                                        if r["suite"] == "cpu-small"}
                                       & {r["task"] for r in stored_records()
                                          if r["suite"] == "gpu-targets"})
    return {only(suite_values(field, "gpu-targets", t)) / only(suite_values(field, "cpu-small", t))
            for t in tasks}


# --- Chapter 7, part II: a memory of 1 000 steps --------------------------------------------

MEM = "book/07_memory.ipynb"


def sigmoid(z):
    return 1 / (1 + math.exp(-z))


def order_of(x):
    """The power of ten nearest ``x``, as the prose quotes ``10^{-136}``."""
    return 10.0 ** round(math.log10(x))


def mean_predictor_sd():
    """Standard deviation of a mean predictor's test MSE on 250 recall targets:
    Var((v - 1/2)^2) = 1/180 for v ~ U(0, 1)."""
    return math.sqrt(1 / 180 / 250)


def keep_ten_percent_of_r2(T):
    """|lambda|^2 of an eigenvalue that keeps 10% of an input after T steps."""
    return math.exp(-2 * math.log(10) / T)


def seed_table():
    """The stored seed table of part II: model label -> best test MSE / baseline per seed."""
    rows = {}
    for line in stored_output(MEM, "SEEDS = (0, 1, 2)").splitlines():
        cols = [c.strip() for c in line.strip().strip("|").split("|")]
        if len(cols) >= 4 and re.fullmatch(r"\d\.\d+", cols[1]):
            rows[cols[0]] = [float(v) for v in cols[1:4]]
    assert rows, "no seed table stored"
    return rows


def schedule_at(step):
    from lrnn.training import train
    return float(train.schedule(1e-3, 1000, 0.1)(step))


# --- Chapter 8: the residual stream at initialisation ----------------------------------------

CAP = "book/08_capstone.ipynb"


def stream():
    return printed_list(CAP, "stream RMS:", "stream RMS:")


def stream_power_fit():
    """``(c, a)`` of the least-squares fit log RMS = log c + a log l over l = 1, ..., depth."""
    s = np.array(stream())
    a, log_c = np.polyfit(np.log(np.arange(1, len(s))), np.log(s[1:]), 1)
    return math.exp(log_c), a


# --- Chapter 2 exercises: the KS test of the ring's radii ------------------------------------

LRU = "solutions/02_lru.ipynb"


def ks_n():
    return int(printed(LRU, "ks = stats.kstest", r"(\d+) samples"))


def ks_p():
    return float(printed(LRU, "ks = stats.kstest", r"p-value ([\d.]+)"))


def ks_threshold():
    return float(re.search(r"assert ks\.pvalue > ([\de.+-]+)",
                           cell_with(LRU, "ks = stats.kstest").source).group(1))


def rejected_at(percent):
    assert ks_p() < percent / 100, f"p = {ks_p()} is not rejected at {percent}%"
    return percent


def ks_p_of_gap(gap):
    from scipy import stats
    return float(stats.kstwo.sf(gap, ks_n()))


# --- Chapter 6: the stored H100 runs, the probe, the peers and the H200 run ---------------------
# Every share of copy on the H100 is of one floor, the fastest copy measured on that GPU:
# PyTorch's `x * 1.0001` (the "copy" row of the peers' file), which JAX's own copy (the probe's
# first row) reached 75 % of. The probe's and the bench run's stored fractions are of other
# copies, so the rules recompute each share from the time. The H200 run measured no PyTorch
# copy: its shares are of the fastest copy it measured, JAX's, as its file stores them.

GPU = "book/06_gpu_scans.ipynb"
SOL6 = "solutions/06_gpu_scans.ipynb"
CH1 = "book/01_linear_recurrence.ipynb"


@functools.cache
def book_data(name):
    import json
    text = (ROOT / "book" / "data" / name).read_text(encoding="utf-8")
    return json.loads(text) if name.endswith(".json") else text


def jax_copy_Bps():
    return book_data("bench_scan_h100_probe.json")["rows"][0]["GBps"] * 1e9


def torch_copy_Bps():
    return next(r["GBps"] for r in book_data("bench_scan_h100_peers.json")["rows"]
                if r["what"] == "copy") * 1e9


def floor_Bps():
    """The one copy rate of chapter 6's floor: the fastest copy measured on the H100."""
    return max(jax_copy_Bps(), torch_copy_Bps())


def probe_row(shape, U):
    return next(r for r in book_data("bench_scan_h100_probe.json")["rows"]
                if r.get("what") == "c64-ti" and r.get("shape") == list(shape)
                and r.get("U") == U and r.get("bn") == 32)


def probe_of_floor(shape, U):
    """The probe's kernel (complex64, 16 bytes per element) as a share of the floor."""
    return 16 * math.prod(shape) / (probe_row(shape, U)["ms"] / 1e3) / floor_Bps()


def step_latency_s():
    """The probe's U = 1 time at (64, 4096, 256) per dependent step."""
    return probe_row((64, 4096, 256), 1)["ms"] / 1e3 / 4096


def in_flight_bytes():
    return floor_Bps() * step_latency_s()


def littles_law_share(U, lanes):
    """Little's law with the U = 1 latency: the share of the floor U rows of 16 bytes per lane
    keep in flight, capped at 1."""
    return min(1.0, U * lanes * 16 / step_latency_s() / floor_Bps())


def above_floor(label):
    """Forward time over the 16-byte floor, per shape of the stored H100 run."""
    return [r["fwd_s"] / (16 * math.prod(r["shape"]) / floor_Bps())
            for r in book_data("bench_scan_h100_649d3fa.json")["results"] if r["label"] == label]


def floor_ms(shape):
    return 16 * math.prod(shape) / floor_Bps() * 1e3


def previous_kernel_s(shape):
    return next(r["fwd_s"] for r in book_data("bench_scan_h100_649d3fa.json")["results"]
                if r["label"] == "pallas" and r["shape"] == list(shape))


def rows_in_flight_of_the_previous_kernel():
    """The latency of one dependent step over the previous kernel's time per row at
    (1, 65 536, 64), rounded as the prose rounds it."""
    return round(step_latency_s() / (previous_kernel_s((1, 65536, 64)) / 65536))


def previous_kernel_above_floor():
    """The previous kernel's worst distance above the floor: (1, 65 536, 64)."""
    return max(above_floor("pallas"))


def share_of_the_bytes_needed():
    """How many times the previous kernel's rows in flight (64 lanes of 16 bytes each) go into
    the bytes Little's law needs in flight."""
    return in_flight_bytes() / (rows_in_flight_of_the_previous_kernel() * 64 * 16)


def single_pass_peer_of_the_floor():
    """accelerated-scan (Triton) on float32 with a(t), 12 bytes per element, as a share of the
    floor, at the three shapes of the peers' table."""
    peers = book_data("bench_scan_h100_peers.json")
    shapes = peers["readme_rows"]["shapes"]
    return [12 * math.prod(r["shape"]) / floor_Bps() / (r["fwd_best_ms"] / 1e3)
            for r in peers["rows"] if r.get("peer") == "accelerated-scan triton (scalar)"
            and r.get("shape") in shapes]


def predicted_share_of_jax_copy(shape):
    """The kernel's predicted fraction of copy (of JAX's copy on the H100, as the tuning notes
    wrote it), from the predictions table of the H200 run's summary."""
    key = "×".join(str(n) for n in shape)
    for line in book_data("bench_gpu_h200_2026-11-27.md").splitlines():
        cells = [c.strip() for c in line.strip("|").split("|")]
        if cells[0] == key and len(cells) == 5:
            return float(cells[2].rstrip("%")) / 100
    raise AssertionError(f"no prediction for {key}")


def predicted_share_of_the_floor(shape):
    return predicted_share_of_jax_copy(shape) * jax_copy_Bps() / floor_Bps()


def h200_kernel_share(shape):
    return next(r["fwd_copy_fraction"] for r in book_data("bench_scan_gpu.json")["results"]
                if r["shape"] == list(shape) and r["label"].startswith("pallas kernel"))


def h200_copy():
    """The H200 run's copy: the fastest copy it measured (JAX's; it timed no PyTorch copy)."""
    copy = book_data("bench_scan_gpu.json")["copy"]
    assert copy["GBps"] == max(copy["xla_mul_GBps"], copy["pallas_copy_GBps"])
    return copy["GBps"] * 1e9


def chunked_best_share():
    """Problem 2 of chapter 6: the probe's share at C = 128 chunks of a (1, 65 536, 64) scan."""
    return probe_of_floor((64, 4096, 256), 16) * 16 / (16 + 8 * 127 / 128)


def percent(fraction):
    return 100 * fraction


RULES = [
    # Chapter 5: the cost of m reflections against a dense product
    Rule(HH, "stops being cheaper", r"\$2n\^2 - n = (\d+)\$", lambda: dense_flops(hh_n())),
    Rule(HH, "stops being cheaper", r"\$m = 3\$ costs (\d+)", lambda: ornn_flops(3, hh_n())),
    Rule(HH, "stops being cheaper", r"\$m = 4\$ costs (\d+)", lambda: ornn_flops(4, hh_n())),
    Rule(HH, "stops being cheaper", r"\$m = 5\$ costs (\d+)", lambda: ornn_flops(5, hh_n())),
    Rule(HH, "stops being cheaper", r"stops being cheaper at \$m = (\d+)", hh_break_even),
    Rule(HH, "stops being cheaper", r"\\approx (0\.\d+)n\$", lambda: 2 - math.sqrt(2)),
    Rule(HH, "stops being cheaper", r"of dimension \$7 \+ 6 \+ 5 = (\d+)\$", lambda: hh_rank(3)),
    Rule(HH, "stops being cheaper", r"\\dim O\(8\) = (\d+)\$", lambda: hh_rank(8)),
    # Chapter 7: what the GPU runs change against the CPU runs
    Rule(EXP, "the GPU runs are", r"(\d+)× wider", lambda: only(gpu_over_cpu("d_model"))),
    Rule(EXP, "the GPU runs are", r"\$H = (\d+)\$ against",
         lambda: only(suite_values("d_model", "gpu-targets"))),
    Rule(EXP, "the GPU runs are", r"\$H = \d+\$ against (\d+)",
         lambda: only(suite_values("d_model", "cpu-small"))),
    Rule(EXP, "the GPU runs are", r"(\d+)–\d+× deeper", lambda: min(gpu_over_cpu("depth"))),
    Rule(EXP, "the GPU runs are", r"\d+–(\d+)× deeper", lambda: max(gpu_over_cpu("depth"))),
    Rule(EXP, "the GPU runs are", r"depth (\d+) against",
         lambda: only(suite_values("depth", "gpu-targets"))),
    Rule(EXP, "the GPU runs are", r"depth \d+ against (\d+)–",
         lambda: min(suite_values("depth", "cpu-small"))),
    Rule(EXP, "the GPU runs are", r"depth \d+ against \d+–(\d+)",
         lambda: max(suite_values("depth", "cpu-small"))),
    Rule(EXP, "the GPU runs are", r"(\d+)–\d+× more steps", lambda: min(gpu_over_cpu("steps"))),
    Rule(EXP, "the GPU runs are", r"\d+–(\d+)× more steps", lambda: max(gpu_over_cpu("steps"))),
    Rule(EXP, "the GPU runs are", r"(\d+)× longer on adding",
         lambda: only(gpu_over_cpu("seq_len", "adding"))),
    Rule(EXP, "the GPU runs are", r"(\d+)× on copying",
         lambda: only(gpu_over_cpu("seq_len", "copying"))),
    Rule(EXP, "the GPU runs are", r"(\d+)× on ListOps",
         lambda: only(gpu_over_cpu("seq_len", "listops"))),
    Rule(EXP, "the GPU runs are", r"the same (\d+) pixels on sMNIST",
         lambda: only(suite_values("seq_len", "gpu-targets", "smnist")
                      | suite_values("seq_len", "cpu-small", "smnist"))),
    # Chapter 7: which differences on the adding problem three seeds settle
    Rule(EXP, "three seeds settle", r"LSTM \(median (0\.\d+)",
         lambda: worse_on_every_seed("lstm", ["ornn", "lru"] + GATED_OR_ROTATED)),
    Rule(EXP, "three seeds settle", r"mean predictor's (0\.\d+)",
         lambda: adding("lstm")["baseline"]),
    Rule(EXP, "three seeds settle", r"the oRNN \((0\.\d+)\)",
         lambda: worse_on_every_seed("ornn", ["lru"] + GATED_OR_ROTATED)),
    Rule(EXP, "three seeds settle", r"the LRU \((0\.\d+)\)",
         lambda: better_on_every_seed("lru", ["gru", "rotgru", "rotlstm"])),
    Rule(EXP, "three seeds settle", r"RotRNN's seeds \((0\.\d+)–",
         rotrnn_best_seed_beside_the_lru),
    Rule(EXP, "three seeds settle", r"RotRNN's seeds \(0\.\d+–(0\.\d+)\)",
         lambda: adding("rotrnn")["max"]),
    Rule(EXP, "three seeds settle", r"the LRU's \((0\.\d+)–", lambda: adding("lru")["min"]),
    Rule(EXP, "three seeds settle", r"the LRU's \(0\.\d+–(0\.\d+)\)",
         lambda: adding("lru")["max"]),
    Rule(EXP, "three seeds settle", r"medians lie within (0\.\d+)–",
         lambda: min(overlapping(GATED_OR_ROTATED))),
    Rule(EXP, "three seeds settle", r"medians lie within 0\.\d+–(0\.\d+)",
         lambda: max(overlapping(GATED_OR_ROTATED))),
    # Chapter 7, part I: the learning-rate schedule of Problem 1
    Rule(EXP, "The warm-up lasts", r"\(10\^\{-3\} - 10\^\{-7\}\)/2 \\approx ([\d.]+\\cdot10\^\{-\d+\})",
         lambda: schedule_at(50)),
    Rule(EXP, "The warm-up lasts", r"again about \$([\d.]+\\cdot10\^\{-\d+\})\$",
         lambda: schedule_at(550)),
    Rule(EXP, "The warm-up lasts", r"reaches the peak \$(10\^\{-\d+\})\$",
         lambda: round(schedule_at(100), 9)),          # float32 rounding of the peak
    Rule(EXP, "The warm-up lasts", r"Step 1 000 ends at \$(10\^\{-\d+\})\$",
         lambda: order_of(schedule_at(1000))),
    # Chapter 7, part II: what an input weighs after 999 steps, by model
    Rule(MEM, "Why the models should differ", r"0\.999\^\{999\} \\approx (0\.\d+)",
         lambda: 0.999 ** 999),
    Rule(MEM, "Why the models should differ", r"\\sigma\(1\) \\approx (0\.\d+)",
         lambda: sigmoid(1)),
    Rule(MEM, "Why the models should differ", r"\\sigma\(1\)\^\{999\} \\approx (10\^\{-\d+\})",
         lambda: order_of(sigmoid(1) ** 999)),
    Rule(MEM, "Why the models should differ", r"0\.5\^\{999\} \\approx (10\^\{-\d+\})",
         lambda: order_of(0.5 ** 999)),
    Rule(MEM, "Why the models should differ", r"\\sigma\(5\) \\approx (0\.\d+)",
         lambda: sigmoid(5)),
    Rule(MEM, "Why the models should differ",
         r"0\.9933\^\{999\} \\approx ([\d.]+\\cdot10\^\{-\d+\})", lambda: 0.9933 ** 999),
    Rule(MEM, "Why the models should differ", r"1/12 \\approx (0\.\d+)", lambda: 1 / 12),
    Rule(MEM, "The reason is the size of the gradient", r"\$\\ge (0\.\d+)\$ for the linear",
         lambda: 0.999 ** 999),
    Rule(MEM, "The reason is the size of the gradient",
         r"\\sigma\(1\)\^\{999\} \\approx (10\^\{-\d+\})", lambda: order_of(sigmoid(1) ** 999)),
    Rule(MEM, "The reason is the size of the gradient", r"0\.5\^\{999\} \\approx (10\^\{-\d+\})",
         lambda: order_of(0.5 ** 999)),
    Rule(MEM, "The verdicts printed below the figure", r"\((\d+)% of the baseline, Problem 1\)",
         lambda: percent(2 * mean_predictor_sd() * 12)),
    # Chapter 7, part II: the seed table and the claim read from it
    Rule(MEM, "What the comparison claims", r"noise band of Problem 1 \((0\.\d+)\)",
         lambda: 1 - 2 * mean_predictor_sd() * 12),
    Rule(MEM, "What the comparison claims", r"its seed 1's best is\s+(0\.\d+)",
         lambda: seed_table()["LRU"][1]),
    Rule(MEM, "What the comparison claims", r"about (\d+)\s+to keep 10%",
         lambda: math.log(0.1 ** (1 / 999) / (1 - 0.1 ** (1 / 999)))),
    # Chapter 7, part II: the answers to the problems
    Rule(MEM, "For $v \\sim U(0,1)$", r"\\sqrt\{\(1/180\)/250\} \\approx (0\.\d+)",
         mean_predictor_sd),
    Rule(MEM, "For $v \\sim U(0,1)$", r"two standard deviations, (\d+)% of",
         lambda: percent(2 * mean_predictor_sd() * 12)),
    Rule(MEM, "For $v \\sim U(0,1)$", r"10\^4\} \\approx (0\.\d+)\$\. With",
         lambda: keep_ten_percent_of_r2(1e4)),
    Rule(MEM, "For $v \\sim U(0,1)$", r"- 1 \\approx (0\.\d+)\$",
         lambda: 2 * keep_ten_percent_of_r2(1e4) - 1),
    Rule(MEM, "For $v \\sim U(0,1)$", r"r_\{\\min\} \\approx (0\.\d+)\$",
         lambda: math.sqrt(2 * keep_ten_percent_of_r2(1e4) - 1)),
    Rule(MEM, "For $v \\sim U(0,1)$", r"f = 0\.1\^\{1/999\} \\approx (0\.\d+)",
         lambda: 0.1 ** (1 / 999)),
    Rule(MEM, "For $v \\sim U(0,1)$", r"\\ln\(f/\(1-f\)\) \\approx (\d\.\d)",
         lambda: math.log(0.1 ** (1 / 999) / (1 - 0.1 ** (1 / 999)))),
    Rule(MEM, "For $v \\sim U(0,1)$", r"\\approx (0\.\d+)\$ keeps \$0\.731", lambda: sigmoid(1)),
    Rule(MEM, "For $v \\sim U(0,1)$", r"0\.731\^\{999\} \\approx (10\^\{-\d+\})",
         lambda: order_of(0.731 ** 999)),
    Rule(MEM, "For $v \\sim U(0,1)$", r"f \\approx (0\.\d+)\$ keeps \$e", lambda: sigmoid(5)),
    Rule(MEM, "For $v \\sim U(0,1)$",
         r"0\.9933\} \\approx ([\d.]+\\cdot10\^\{-\d+\})", lambda: 0.9933 ** 999),
    Rule(MEM, "For $v \\sim U(0,1)$", r"from \$k = (\d+)\$ on",
         lambda: math.ceil(-30 / math.log10(sigmoid(1)))),
    # Chapter 8: the RMS of the residual stream, Figure 8.1
    Rule(CAP, "not along the dotted line", r"\((0\.\d+) to 0\.\d+, more than", lambda: stream()[0]),
    Rule(CAP, "not along the dotted line", r"\(0\.\d+ to (0\.\d+), more than", lambda: stream()[1]),
    Rule(CAP, "not along the dotted line", r"reaching (\d\.\d+) at", lambda: stream()[-1]),
    Rule(CAP, "not along the dotted line", r"dotted line's (\d\.\d+)",
         lambda: stream()[0] * math.sqrt(len(stream()))),
    Rule(CAP, "not along the dotted line", r"RMS \$\\approx (\d\.\d+)\\,\\ell",
         lambda: stream_power_fit()[0]),
    Rule(CAP, "not along the dotted line", r"\\ell\^\{(\d\.\d+)\}", lambda: stream_power_fit()[1]),
    Rule("solutions/08_capstone.ipynb", "less regular growth", r"from (0\.\d+) to 0\.\d+",
         lambda: stream()[0]),
    Rule("solutions/08_capstone.ipynb", "less regular growth", r"from 0\.\d+ to (0\.\d+)",
         lambda: stream()[1]),
    Rule("solutions/08_capstone.ipynb", "less regular growth", r"only to (\d\.\d+)",
         lambda: stream()[-1]),
    # The capstone's recall task: memories and gains after 1 000 steps
    Rule("solutions/08_capstone.ipynb", "float32's range long before lag 1 000",
         r"\\approx (0\.9933)\$ of its memory", lambda: 1 / (1 + math.exp(-5))),
    Rule("solutions/08_capstone.ipynb", "Your model remembers 1 000 steps",
         r"\\sigma\(1\) \\approx (0\.73)\$", lambda: 1 / (1 + math.exp(-1))),
    Rule("solutions/08_capstone.ipynb", "Your model remembers 1 000 steps",
         r"\\sigma\(1\)\^\{1000\} \\approx (9 \\cdot 10\^\{-137\})",
         lambda: (1 / (1 + math.exp(-1))) ** 1000),
    Rule("solutions/08_capstone.ipynb", "float32's range long before lag 1 000",
         r"0\.9933\^\{1000\} \\approx\s+(1\.2 \\cdot 10\^\{-3\})", lambda: 0.9933 ** 1000),
    Rule("solutions/08_capstone.ipynb", "float32's range long before lag 1 000",
         r"0\.999\^\{1000\} \\approx (0\.\d+)", lambda: 0.999 ** 1000),
    Rule("solutions/08_capstone.ipynb", "the numbers are those printed above, seed 0",
         r"0\.99\^\{1000\} \\approx (4 \\cdot 10\^\{-5\})", lambda: 0.99 ** 1000),
    Rule("solutions/08_capstone.ipynb", "the numbers are those printed above, seed 0",
         r"0\.999\^2\} \\approx (0\.\d+)", lambda: math.sqrt(1 - 0.999 ** 2)),
    Rule("solutions/08_capstone.ipynb", "the numbers are those printed above, seed 0",
         r"grows to about (\d+) times", lambda: 1 / math.sqrt(1 - 0.999 ** 2)),
    Rule("solutions/08_capstone.ipynb", "the numbers are those printed above, seed 0",
         r"input's scale \((\d+) times its", lambda: 1 / (1 - 0.999 ** 2)),
    # Chapter 6: the floor (the H100's fastest copy), Little's law and the measured kernels
    Rule(GPU, "On the H100 of this chapter", r"`x \* 1\.0001` at (\d\.\d+) TB/s",
         lambda: floor_Bps() / 1e12),
    Rule(GPU, "On the H100 of this chapter", r"reached (\d+) % of it",
         lambda: percent(jax_copy_Bps() / floor_Bps())),
    Rule(GPU, "On the H100 of this chapter", r"the floor, a copy at (\d\.\d+) TB/s",
         lambda: floor_Bps() / 1e12),
    Rule(GPU, "which points come nearest the floor", r"a factor of (\d\.\d+)–",
         lambda: min(above_floor("associative"))),
    Rule(GPU, "which points come nearest the floor", r"a factor of \d\.\d+–(\d+) above",
         lambda: max(above_floor("associative"))),
    Rule(GPU, "which points come nearest the floor", r"\((\d\.\d+)× at \(16,",
         lambda: min(above_floor("associative"))),
    Rule(GPU, "which points come nearest the floor", r"(\d+\.\d+)× at\s+\(1, 65",
         lambda: max(above_floor("associative"))),
    Rule(GPU, "The points nearest the floor", r"Triton scan \((\d+)–\d+% of the floor",
         lambda: percent(min(single_pass_peer_of_the_floor()))),
    Rule(GPU, "The points nearest the floor", r"Triton scan \(\d+–(\d+)% of the floor",
         lambda: percent(max(single_pass_peer_of_the_floor()))),
    Rule(GPU, "The points nearest the floor", r"at 16 384 lanes \((\d+)%\)",
         lambda: percent(probe_of_floor((64, 4096, 256), 16))),
    Rule(GPU, "The points nearest the floor", r"a factor of (\d\.\d+)–",
         lambda: min(above_floor("associative"))),
    Rule(GPU, "The points nearest the floor", r"a factor of \d\.\d+–(\d+), not",
         lambda: max(above_floor("associative"))),
    Rule(GPU, "Little's law** says", r"took (\d\.\d+) ms for 4096 steps",
         lambda: probe_row((64, 4096, 256), 1)["ms"]),
    Rule(GPU, "Little's law** says", r"\*\*(0\.\d+) µs\s+per step",
         lambda: step_latency_s() * 1e6),
    Rule(GPU, "levels off near", r"levels off near (\d+) % of the floor",
         lambda: percent(probe_of_floor((64, 4096, 256), 16))),
    Rule(GPU, "levels off near", r"short of the (\d+) % that JAX's own copy",
         lambda: percent(jax_copy_Bps() / floor_Bps())),
    Rule(GPU, "levels off near", r"Little's law allows (\d+) %",
         lambda: percent(littles_law_share(16, 16 * 256))),
    Rule(GPU, "levels off near", r"the probe measured (\d+) %",
         lambda: percent(probe_of_floor((16, 16384, 256), 16))),
    Rule(GPU, "Little's law with the one latency", r"measurement, (0\.\d+) µs unrounded",
         lambda: step_latency_s() * 1e6),
    Rule(GPU, "Little's law with the one latency", r"\$(\d\.\d+)\$ TB/s × 0\.527",
         lambda: floor_Bps() / 1e12),
    Rule(GPU, "Little's law with the one latency", r"TB/s × (0\.\d+) µs ≈",
         lambda: step_latency_s() * 1e6),
    Rule(GPU, "Little's law with the one latency", r"≈ (\d\.\d+) MB must be in flight",
         lambda: in_flight_bytes() / 1e6),
    Rule(GPU, "Little's law with the one latency", r"need about ([\d ]+) rows in flight",
         lambda: round(in_flight_bytes() / (64 * 16), -2)),
    Rule(GPU, "Little's law with the one latency", r"some ([\d ]+) float32 registers",
         lambda: round(2 * in_flight_bytes() / (64 * 16), -2)),
    Rule(GPU, "Little's law with the one latency", r"4 096 lanes need about (\d+) rows",
         lambda: in_flight_bytes() / (4096 * 16)),
    Rule(GPU, "Little's law with the one latency", r"would take (\d+) ms at",
         lambda: step_latency_s() * 65536 * 1e3),
    Rule(GPU, "Little's law with the one latency", r"the previous kernel took (\d\.\d+) ms",
         lambda: previous_kernel_s((1, 65536, 64)) * 1e3),
    Rule(GPU, "Little's law with the one latency", r"ms, (\d+) ns per row",
         lambda: previous_kernel_s((1, 65536, 64)) / 65536 * 1e9),
    Rule(GPU, "Little's law with the one latency", r"≈ (\d+) rows must have been",
         rows_in_flight_of_the_previous_kernel),
    Rule(GPU, "Little's law with the one latency", r"about 1/(\d+) of the",
         share_of_the_bytes_needed),
    Rule(GPU, "Little's law with the one latency", r"of the (\d\.\d+) MB needed",
         lambda: in_flight_bytes() / 1e6),
    Rule(GPU, "Little's law with the one latency", r"ran (\d+)× above its floor",
         previous_kernel_above_floor),
    Rule(GPU, "The kernel of §6.5, measured", r"about (\d+) % of JAX's\s+copy where",
         lambda: percent(predicted_share_of_jax_copy((64, 4096, 256)))),
    Rule(GPU, "The kernel of §6.5, measured", r"(\d+) % on the narrow shapes",
         lambda: percent(only({predicted_share_of_jax_copy((16, 16384, 256)),
                               predicted_share_of_jax_copy((1, 65536, 64))}))),
    Rule(GPU, "The kernel of §6.5, measured", r"\((\d+) % and \d+ %\s+of the\s+floor",
         lambda: percent(predicted_share_of_the_floor((64, 4096, 256)))),
    Rule(GPU, "The kernel of §6.5, measured", r"\(\d+ % and (\d+) %\s+of the\s+floor",
         lambda: percent(only({predicted_share_of_the_floor((16, 16384, 256)),
                               predicted_share_of_the_floor((1, 65536, 64))}))),
    Rule(GPU, "Its H100 shares of copy are of that", r"run's own (\d\.\d+) TB/s copy baseline",
         lambda: book_data("bench_scan_h100_649d3fa.json")["copy_bandwidth_GBps"] / 1e3),
    Rule(GPU, "The predictions were optimistic", r"JAX's at (\d\.\d+) TB/s",
         lambda: h200_copy() / 1e12),
    Rule(GPU, "The predictions were optimistic", r"the kernel reached (\d+) % where",
         lambda: percent(h200_kernel_share((64, 4096, 256)))),
    Rule(GPU, "The predictions were optimistic", r"where (\d+) % of JAX's copy was predicted",
         lambda: percent(predicted_share_of_jax_copy((64, 4096, 256)))),
    Rule(GPU, "The predictions were optimistic", r"\((\d+) % of\s+the H100's floor\)",
         lambda: percent(predicted_share_of_the_floor((64, 4096, 256)))),
    Rule(GPU, "## Summary", r"fastest measured copy,\s+(\d\.\d+) TB/s",
         lambda: floor_Bps() / 1e12),
    Rule(GPU, "## Summary", r"associative scan sat (\d\.\d+)–",
         lambda: min(above_floor("associative"))),
    Rule(GPU, "## Summary", r"associative scan sat \d\.\d+–(\d+\.\d+)×",
         lambda: max(above_floor("associative"))),
    Rule(GPU, "## Summary", r"previous\s+`pallas` kernel (\d\.\d+)–",
         lambda: min(above_floor("pallas"))),
    Rule(GPU, "## Summary", r"previous\s+`pallas` kernel \d\.\d+–(\d+)×",
         previous_kernel_above_floor),
    Rule(GPU, "## Summary", r"\((\d+)× at \$\(1, 65",
         previous_kernel_above_floor),
    Rule(GPU, "## Summary", r"reached\s+(\d+) % of JAX's copy on an H200",
         lambda: percent(h200_kernel_share((64, 4096, 256)))),
    Rule(GPU, "## Summary", r"where (\d+) % was predicted",
         lambda: percent(predicted_share_of_jax_copy((64, 4096, 256)))),
    Rule(GPU, "## Summary", r"\\times (0\.\d+)\$ \(the probe's",
         lambda: probe_of_floor((64, 4096, 256), 16)),
    Rule(GPU, "the efficiency is capped at", r"capped at (0\.\d+) and only",
         lambda: probe_of_floor((64, 4096, 256), 16)),
    Rule(GPU, "the efficiency is capped at", r"so \$(0\.\d+) \\times 16/23",
         lambda: probe_of_floor((64, 4096, 256), 16)),
    Rule(GPU, "the efficiency is capped at", r"\\approx (\d+)\\%\$ of the floor",
         lambda: percent(chunked_best_share())),
    # Chapter 1 quotes the same floor for the same run
    Rule(CH1, "floor: 16 bytes per element at", r"at (\d\.\d+) TB/s, its fastest copy",
         lambda: floor_Bps() / 1e12),
    Rule(CH1, "floor: 16 bytes per element at", r"\| 16, 16 384, 256 \|.*\| (\d\.\d+) ms \|\n",
         lambda: floor_ms((16, 16384, 256))),
    Rule(CH1, "floor: 16 bytes per element at", r"\| 1, 65 536, 64 \|.*\| (\d\.\d+) ms \|\n",
         lambda: floor_ms((1, 65536, 64))),
    Rule(CH1, "floor: 16 bytes per element at", r"\| 32, 1 024, 512 \|.*\| (\d\.\d+) ms \|\n",
         lambda: floor_ms((32, 1024, 512))),
    # Chapter 6's exercises: the same measurements and the same floor
    Rule(SOL6, "Prediction, float32, a(t), two passes", r"= (\d+) bytes per element",
         lambda: 4 * (2 * 2 + 3)),                   # x̄ and a per pass; x, b̄, ā once
    Rule(SOL6, "Prediction, float32, a(t), two passes", r"forward, one pass: (\d+)\)",
         lambda: 4 * (2 + 1)),                       # b and a read, x written
    Rule(SOL6, "**Predict first**, by hand", r"its fastest copy (\d+) GB/s",
         lambda: floor_Bps() / 1e9),
    Rule(SOL6, "# Prediction: 1.712 ms", r"ms × (\d+) GB/s", lambda: floor_Bps() / 1e9),
    Rule(SOL6, "# Prediction: 1.712 ms", r"GB/s = (\d\.\d+) GB",
         lambda: 1.712e-3 * floor_Bps() / 1e9),
    Rule(SOL6, "# Prediction: 1.712 ms", r"= (\d\.\d) arrays",
         lambda: 1.712e-3 * floor_Bps() / (8 * math.prod((16, 16384, 256)))),
    Rule(SOL6, "# Prediction: 1.712 ms", r"arrays of (\d+) MB",
         lambda: 8 * math.prod((16, 16384, 256)) / 1e6),
    Rule(SOL6, "# Prediction: 1.712 ms", r"write and (\d+) reads",
         lambda: math.floor(1.712e-3 * floor_Bps() / (8 * math.prod((16, 16384, 256))) - 1)),
    Rule(SOL6, "**The stored H100 run.**", r"`x \* 1\.0001`, (\d+) GB/s",
         lambda: floor_Bps() / 1e9),
    Rule(SOL6, "**The stored H100 run.**", r"of 1 GiB reached (\d+) GB/s",
         lambda: jax_copy_Bps() / 1e9),
    Rule(SOL6, "**The stored H100 run.**", r"copy kernel (\d+) GB/s",
         lambda: book_data("bench_scan_h100_649d3fa.json")["copy_bandwidth_GBps"]),
    Rule(SOL6, "H100_COPY_GBPS = ", r"H100_COPY_GBPS = (\d+)\.0 ",
         lambda: floor_Bps() / 1e9),
    Rule(SOL6, "Why the wider scan won", r"took (0\.\d+) ms; the previous",
         lambda: min(r["fwd_s"] for r in book_data("bench_scan_h100_649d3fa.json")["results"]
                     if r["label"] == "associative" and r["shape"] == [1, 65536, 64]) * 1e3),
    Rule(SOL6, "Why the wider scan won", r"about (\d+)× its floor",
         previous_kernel_above_floor),
    Rule(SOL6, "**Model answer.** Little's law", r"≈\s+(\d\.\d+) TB/s ×",
         lambda: floor_Bps() / 1e12),
    Rule(SOL6, "**Model answer.** Little's law", r"TB/s × (0\.\d+) µs",
         lambda: step_latency_s() * 1e6),
    Rule(SOL6, "**Model answer.** Little's law", r"≈ (\d\.\d+) MB in flight",
         lambda: in_flight_bytes() / 1e6),
    Rule(SOL6, "**Model answer.** Little's law", r"about 1/([\d ]+) of what is needed",
         lambda: round(in_flight_bytes() / (64 * 16), -2)),
    Rule(SOL6, "**Model answer.** Little's law", r"≈ (\d+) rows must have",
         rows_in_flight_of_the_previous_kernel),
    Rule(SOL6, "**Model answer.** Little's law", r"about 1/(\d+) of the",
         share_of_the_bytes_needed),
    Rule(SOL6, "**Model answer.** Little's law", r"of the (\d\.\d+) MB needed",
         lambda: in_flight_bytes() / 1e6),
    Rule(SOL6, "**Model answer.** Little's law", r"hence\s+(\d+)× the floor",
         previous_kernel_above_floor),
    Rule(SOL6, "**Model answer.** Little's law", r"extra passes \((\d+\.\d+)× the floor\)",
         lambda: max(above_floor("associative"))),
    Rule(SOL6, "On the H100 of the book", r"\((\d\.\d+) TB/s, its fastest copy",
         lambda: floor_Bps() / 1e12),
    # Chapter 2: what the KS test's p-value says
    Rule(LRU, "The p-value is the probability", r"key gives\s+\$p = (0\.\d+)\$", ks_p),
    Rule(LRU, "The p-value is the probability", r"at the (\d+)% level would reject",
         lambda: rejected_at(5)),
    Rule(LRU, "The p-value is the probability", r"asks only \$p > (10\^\{-\d+\})\$", ks_threshold),
    Rule(LRU, "The p-value is the probability", r"at \$n = ([\d\\,]+)\$", ks_n),
    Rule(LRU, "The p-value is the probability", r"\$p \\approx ([\d.]+\\cdot10\^\{-\d+\})\$",
         lambda: ks_p_of_gap(0.02)),
]


def rule_id(rule):
    return f"{Path(rule.notebook).stem}: {rule.pattern}"


@pytest.mark.parametrize("rule", RULES, ids=rule_id)
def test_the_prose_quotes_the_number_it_stands_for(rule):
    source = cell_with(rule.notebook, rule.phrase).source
    quotes = re.findall(rule.pattern, source)
    assert len(quotes) == 1, (f"{rule.notebook}, the cell with {rule.phrase!r}: "
                              f"{len(quotes)} matches of {rule.pattern!r}, not one")
    quoted, tolerance = quoted_value(quotes[0])
    true = rule.value()
    assert abs(quoted - true) <= tolerance, (
        f"{rule.notebook}, the cell with {rule.phrase!r}: quotes {quotes[0]} where recomputing "
        f"it gives {true:.6g}")
