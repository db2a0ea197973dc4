"""``lrnn bench step`` at tiny sizes: the table's structure, the sizes it reports, and its
refusal to replace a file it did not write."""
import json
import re

import numpy as np
import pytest

from lrnn.benchmarks import scan as bench, step as bench_step

TINY = ["step", "--layers", "lru,gru", "--batch", "2", "--d-model", "4", "--d-state", "4",
        "--steps", "2", "--repeats", "1", "--length", "4", "--attention-steps", "3,7"]


@pytest.fixture(scope="module")
def result(tmp_path_factory):
    out = tmp_path_factory.mktemp("bench") / "step.json"
    res = bench.main(TINY + ["--out", str(out)])
    return res, out


def test_bench_step_reports_every_layer_and_attention(result, capsys):
    res, out = result
    stored = json.loads(out.read_text())
    assert stored["benchmark"] == "step" and stored["device"]["jax"] and "commit" in stored
    assert [r["layer"] for r in stored["layers"]] == ["lru", "gru"]
    lru, gru = stored["layers"]
    assert lru["state_bytes"] == 2 * 4 * 8            # batch × N complex64
    assert gru["state_bytes"] == 2 * 4 * 4            # batch × n float32
    for r in stored["layers"]:
        assert r["step_us"] > 0 and r["scan_us_per_step"] > 0
        assert r["step_median_us"] >= r["step_us"]
    assert [r["steps"] for r in stored["attention"]] == [3, 7]
    # keys and values, batch 2, t + 1 positions, width 4, float32: grows with the step
    assert [r["cache_bytes"] for r in stored["attention"]] == [2 * 2 * 4 * 4 * 4,
                                                               2 * 2 * 8 * 4 * 4]
    text = bench_step.table(res)
    assert "| lru | 64 (any step) |" in text and "| attention, step 7 | 512 |" in text


def test_attention_step_is_causal_attention_over_the_cache():
    import jax
    import jax.numpy as jnp
    params = bench_step.attention_init(jax.random.PRNGKey(0), 3)
    rng = np.random.default_rng(0)
    xs = rng.normal(size=(5, 1, 3)).astype(np.float32)
    cache = {"k": jnp.zeros((1, 5, 3)), "v": jnp.zeros((1, 5, 3))}
    for t in range(5):
        cache, y = bench_step.attention_step(params, cache, xs[t], t)
    q, k, v = (np.asarray(xs[:, 0] @ np.asarray(params[w])) for w in ("W_q", "W_k", "W_v"))
    s = q[-1] @ k.T / np.sqrt(3)
    want = (np.exp(s - s.max()) / np.exp(s - s.max()).sum()) @ v @ np.asarray(params["W_o"])
    np.testing.assert_allclose(y[0], want, rtol=1e-5, atol=1e-5)


def test_bench_step_refuses_a_file_it_did_not_write(tmp_path, result, capsys):
    """Refused as the command line is parsed, before any timing, in one line naming --out."""
    other = tmp_path / "notes.json"
    other.write_text('{"mine": 1}\n')
    with pytest.raises(SystemExit):
        bench.main(TINY + ["--out", str(other)])
    assert re.search(r"--out.*not written by lrnn bench step", capsys.readouterr().err)
    assert other.read_text() == '{"mine": 1}\n'
    with pytest.raises(SystemExit):
        bench.main(TINY + ["--out", str(tmp_path / "x.txt")])
    assert re.search(r"ending in \.json", capsys.readouterr().err)
    _, own = result                                   # its own earlier output: replaced
    before = json.loads(own.read_text())["date_utc"]
    bench.main(["step", "--layers", "gru", "--steps", "1", "--repeats", "1", "--length", "2",
                "--d-model", "2", "--d-state", "2", "--attention-steps", "1", "--out", str(own)])
    stored = json.loads(own.read_text())
    assert [r["layer"] for r in stored["layers"]] == ["gru"] and before


def test_bench_step_rejects_bad_arguments(capsys):
    with pytest.raises(SystemExit):
        bench.main(["step", "--attention-steps", "0"])
    with pytest.raises(SystemExit, match=r"--layers: got 'nope'"):
        bench.main(["step", "--layers", "nope"])
