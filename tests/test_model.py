"""The deep model (LRU Fig. 1 / RotRNN Fig. 2) against a NumPy transcription, and its sizes."""
import jax
import jax.numpy as jnp
import numpy as np
import pytest

from lrnn.layers import lru
from lrnn import model


def _cfg(**kw):
    base = dict(layer="lru", d_input=2, d_output=1, d_model=4, d_state=3, depth=1, n_heads=1)
    base.update(kw)
    return model.ModelConfig(**base)


def _init(cfg, seed=0):
    return model.init(jax.random.PRNGKey(seed), cfg)


# ---------------------------------------------------------------- count_params

def test_count_params_lru_by_hand():
    p, _ = _init(_cfg())
    H, N, d_in = 4, 3, 2
    enc, norm, dec = d_in * H + H, 2 * H, H * 1 + 1
    layer = 3 * N + 2 * N * H + 2 * H * N + H            # nu, theta, gamma; B; C; D
    glu = H * 2 * H + 2 * H
    assert model.count_params(p) == enc + norm + layer + glu + dec == 126


@pytest.mark.slow
def test_count_params_rotrnn_lstm_gru_by_hand():
    H, d_in = 4, 2
    outer = (d_in * H + H) + (H + 1)                       # encoder, decoder
    p, _ = _init(_cfg(layer="rotrnn", d_state=8, n_heads=2, depth=2))
    n, heads = 4, 2
    rot = heads * n * n + heads * n // 2 + heads + heads * n * H + H * 8 + H
    assert model.count_params(p) == outer + 2 * (2 * H + rot + (H * 2 * H + 2 * H))
    p, _ = _init(_cfg(layer="lstm", d_state=6))
    lstm = 4 * (6 * (6 + H) + 6)
    assert model.count_params(p) == outer + 2 * H + lstm + (6 * 2 * H + 2 * H)
    p, _ = _init(_cfg(layer="rotgru", d_state=6))
    gru = 3 * (6 * (6 + H) + 6) + 3 * (6 + H) + 3
    assert model.count_params(p) == outer + 2 * H + gru + (6 * 2 * H + 2 * H)
    p, _ = _init(_cfg(layer="lru", d_input=None, vocab_size=11, bidirectional=True))
    assert model.count_params(p) == (11 * H + H) + (H + 1) + 2 * H + (3 * 3 + 2 * 3 * H + 2 * H * 6 + H) \
        + (H * 2 * H + 2 * H)


# ---------------------------------------------------------------- NumPy transcription

def _np_forward(params, x, cfg, bn_state=None):
    """Encoder -> [LayerNorm/BatchNorm(eval) -> LRU -> GELU -> GLU -> + skip] -> pool -> decoder."""
    u = x @ np.asarray(params["encoder"]["W"], np.float64) + np.asarray(params["encoder"]["b"])
    for i, blk in enumerate(params["blocks"]):
        if cfg.norm == "layer":
            mu = u.mean(-1, keepdims=True)
            var = ((u - mu) ** 2).mean(-1, keepdims=True)
        else:
            mu, var = np.asarray(bn_state["blocks"][i]["mean"]), np.asarray(bn_state["blocks"][i]["var"])
        v = (u - mu) / np.sqrt(var + model.NORM_EPS) * np.asarray(blk["norm"]["scale"]) + np.asarray(blk["norm"]["bias"])
        # LRU recurrence with explicit loops (LRU eqs. 1, 3 with the normalisation of §3.4)
        lp = {k: np.asarray(a, np.float64) for k, a in blk["layer"].items()}
        lam = np.exp(-np.exp(lp["nu_log"]) + 1j * np.exp(lp["theta_log"]))
        Bn = np.exp(lp["gamma_log"])[:, None] * (lp["B_re"] + 1j * lp["B_im"])
        C = lp["C_re"] + 1j * lp["C_im"]
        y = np.zeros_like(v)
        for b in range(v.shape[0]):
            h = np.zeros(len(lam), complex)
            for t in range(v.shape[1]):
                h = lam * h + Bn @ v[b, t]
                y[b, t] = (C @ h).real + lp["D"] * v[b, t]
        g = 0.5 * y * (1 + np.tanh(np.sqrt(2 / np.pi) * (y + 0.044715 * y ** 3)))   # GELU (tanh form)
        z = g @ np.asarray(blk["glu"]["W"], np.float64) + np.asarray(blk["glu"]["b"])
        H = cfg.d_model
        u = u + z[..., :H] / (1 + np.exp(-z[..., H:]))
    u = {"mean": u.mean(1), "last": u[:, -1], "none": u}[cfg.pool]
    return u @ np.asarray(params["decoder"]["W"]) + np.asarray(params["decoder"]["b"])


@pytest.mark.parametrize("norm, pool", [("layer", "mean"), ("layer", "none"), ("batch", "last")])
def test_forward_matches_numpy(x64, norm, pool):
    cfg = _cfg(depth=2, norm=norm, pool=pool, d_output=3)
    params, state = _init(cfg, seed=1)
    x = np.random.default_rng(0).normal(size=(2, 7, 2))
    if norm == "batch":   # non-trivial running statistics
        state = {"blocks": [{"mean": jnp.full((4,), 0.3), "var": jnp.full((4,), 2.0)}] * 2}
    out, _ = model.apply(params, state, jnp.asarray(x), cfg)
    ref = _np_forward(params, x, cfg, state)
    np.testing.assert_allclose(np.asarray(out), ref, rtol=1e-10, atol=1e-10)


def test_batchnorm_statistics(x64):
    cfg = _cfg(norm="batch")
    params, state = _init(cfg)
    x = np.random.default_rng(1).normal(size=(3, 5, 2))
    _, new = model.apply(params, state, jnp.asarray(x), cfg, train=True)
    u = x @ np.asarray(params["encoder"]["W"]) + np.asarray(params["encoder"]["b"])
    mean, var = u.reshape(-1, 4).mean(0), u.reshape(-1, 4).var(0)
    m = model.BN_MOMENTUM
    np.testing.assert_allclose(new["blocks"][0]["mean"], (1 - m) * mean, rtol=1e-12)
    np.testing.assert_allclose(new["blocks"][0]["var"], m * 1.0 + (1 - m) * var, rtol=1e-12)
    # evaluation leaves the state alone
    _, same = model.apply(params, new, jnp.asarray(x), cfg, train=False)
    np.testing.assert_array_equal(same["blocks"][0]["mean"], new["blocks"][0]["mean"])


# ---------------------------------------------------------------- structure

@pytest.mark.slow
def test_causality_and_bidirectionality():
    x = jax.random.normal(jax.random.PRNGKey(0), (1, 9, 2))
    x2 = x.at[:, 6:].add(1.0)
    for layer in ("lru", "rotrnn", "lstm", "ornn"):
        cfg = _cfg(layer=layer, pool="none", d_state=4, n_heads=2, depth=2)
        p, s = _init(cfg)
        a, b = model.apply(p, s, x, cfg)[0], model.apply(p, s, x2, cfg)[0]
        np.testing.assert_array_equal(a[:, :6], b[:, :6])
        assert not np.allclose(a[:, 6:], b[:, 6:])
    cfg = _cfg(bidirectional=True, pool="mean")
    p, s = _init(cfg)
    assert "C_re" in p["blocks"][0]["layer"] and p["blocks"][0]["layer"]["C_re"].shape == (4, 6)
    v = model.layer_inputs(p, s, x, cfg)[0]
    y_layer = lru.apply(p["blocks"][0]["layer"], v)
    y_layer2 = lru.apply(p["blocks"][0]["layer"], v.at[:, 8:].add(1.0))
    assert not np.allclose(y_layer[:, 0], y_layer2[:, 0])        # sees the future


@pytest.mark.slow
def test_tokens_dropout_and_shapes():
    cfg = _cfg(d_input=None, vocab_size=10, d_output=9, pool="none", dropout=0.5)
    p, s = _init(cfg)
    tok = jnp.array([[1, 2, 3, 9], [0, 0, 5, 1]])
    out, _ = model.apply(p, s, tok, cfg)
    assert out.shape == (2, 4, 9)
    d1 = model.apply(p, s, tok, cfg, train=True, key=jax.random.PRNGKey(0))[0]
    d2 = model.apply(p, s, tok, cfg, train=True, key=jax.random.PRNGKey(0))[0]
    d3 = model.apply(p, s, tok, cfg, train=True, key=jax.random.PRNGKey(1))[0]
    np.testing.assert_array_equal(d1, d2)
    assert not np.allclose(d1, d3) and not np.allclose(d1, out)
    with pytest.raises(ValueError, match="`key`"):
        model.apply(p, s, tok, cfg, train=True)
    with pytest.raises(ValueError, match="`x`"):
        model.apply(p, s, tok.astype(jnp.float32), cfg)


def test_recurrent_mask():
    cfg = _cfg(layer="rotrnn", d_state=4, n_heads=2, depth=2)
    p, _ = _init(cfg)
    mask = model.recurrent_mask(p, cfg)
    for blk in mask["blocks"]:
        assert {k for k, v in blk["layer"].items() if v} == {"M", "theta", "nu_log", "B"}
        assert not blk["layer"]["C"] and not blk["glu"]["W"] and not blk["norm"]["scale"]
    assert not mask["encoder"]["W"]
    assert jax.tree_util.tree_structure(mask) == jax.tree_util.tree_structure(p)


@pytest.mark.parametrize("kw, name", [({"layer": "transformer"}, "`layer`"),
                                      ({"layer": "lstm", "bidirectional": True}, "`bidirectional`"),
                                      ({"norm": "group"}, "`norm`"), ({"dropout": 1.0}, "`dropout`"),
                                      ({"vocab_size": 5}, "`d_input`"), ({"depth": 0}, "`depth`")])
def test_config_rejects_bad_arguments(kw, name):
    with pytest.raises(ValueError, match=name):
        _cfg(**kw)
