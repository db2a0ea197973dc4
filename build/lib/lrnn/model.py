"""The deep sequence model of LRU Fig. 1 and RotRNN Fig. 2, around any recurrent layer.

    x (B, L, d_input) or tokens (B, L)
      -> linear encoder                                  (B, L, H)
      -> depth x residual block:  u + Dropout(GLU(GELU(Rec(Norm(u)))))
      -> pooling: mean or last step over L (or none: one output per step)
      -> linear decoder                                  (B, d_output) or (B, L, d_output)

``Rec`` is one of :data:`LAYERS`. LRU and RotRNN map ``H -> H``; oRNN and the gated cells map
``H -> d_state`` (their hidden size) and the GLU maps it back to ``H``. The GLU (Dauphin et al.
2017) is ``(W_a y + b_a) ⊙ σ(W_b y + b_b)`` with ``W = [W_a | W_b]`` of shape
``(d_rec, 2H)``; the GELU before it is the nonlinearity of the block (LRU App. D.1).

Parameters are plain nested dicts/lists; BatchNorm running statistics live in a separate
``state`` pytree so that :func:`apply` is pure: ``out, new_state = apply(params, state, x,
config, train=..., key=...)``.
"""
from __future__ import annotations

import dataclasses
import importlib
import math

import jax
import jax.numpy as jnp
import numpy as np

from ._validate import fail, require_choice, require_positive_int

LAYERS = ("lru", "rotrnn", "ornn", "lstm", "rotlstm", "gru", "rotgru")
NORMS = ("layer", "batch")
POOLS = ("mean", "last", "none")
BIDIRECTIONAL_LAYERS = ("lru", "rotrnn")
BN_MOMENTUM = 0.9
NORM_EPS = 1e-5

# The parameters of the recurrence itself (its transition and input map: "A and B" of LRU
# App. D.2, the RotRNN layer's P, θ, γ, B): they get the learning-rate factor, no weight decay.
RECURRENT_KEYS = {
    "lru": ("nu_log", "theta_log", "gamma_log", "B_re", "B_im"),
    "rotrnn": ("M", "theta", "nu_log", "B"),
    "ornn": ("U", "u1", "V"),
    "lstm": ("W_f", "W_i", "W_o", "W_c"),
    "rotlstm": ("W_f", "W_i", "W_o", "W_c", "W_rot"),
    "gru": ("W_z", "W_r", "W_h"),
    "rotgru": ("W_z", "W_r", "W_h", "W_rot"),
}


@dataclasses.dataclass(frozen=True)
class ModelConfig:
    """Sizes and choices of the deep model (hashable, so it can be a static jit argument).

    ``d_input``: real input channels, or ``None`` with ``vocab_size`` for token inputs (the
    encoder is then a lookup table, i.e. a linear map of one-hot vectors). ``d_model`` = H,
    ``d_state``: LRU complex states N, RotRNN total state ``n_heads · n``, hidden size of
    oRNN/LSTM/GRU. ``n_reflections``: oRNN's m (default ``d_state``). ``lru_r_min/r_max``,
    ``max_phase`` (LRU and RotRNN), ``gamma_min/max`` (RotRNN) are the layer inits.
    ``scan_method``: the ``lrnn.linear_scan`` backend of LRU and RotRNN layers."""
    layer: str = "lru"
    d_output: int = 1
    d_input: int | None = 1
    vocab_size: int | None = None
    d_model: int = 64
    d_state: int = 64
    depth: int = 2
    n_heads: int = 8
    n_reflections: int | None = None
    norm: str = "layer"
    pool: str = "mean"
    dropout: float = 0.0
    bidirectional: bool = False
    r_min: float = 0.0
    r_max: float = 1.0
    max_phase: float = 2 * math.pi
    gamma_min: float = 0.9
    gamma_max: float = 0.999
    scan_method: str = "auto"

    def __post_init__(self):
        require_choice("layer", self.layer, LAYERS)
        require_choice("norm", self.norm, NORMS)
        require_choice("pool", self.pool, POOLS)
        for name in ("d_output", "d_model", "d_state", "depth", "n_heads"):
            require_positive_int(name, getattr(self, name))
        if (self.d_input is None) == (self.vocab_size is None):
            fail("d_input", self.d_input,
                 f"exactly one of d_input and vocab_size (got vocab_size={self.vocab_size!r})")
        if self.d_input is not None:
            require_positive_int("d_input", self.d_input)
        else:
            require_positive_int("vocab_size", self.vocab_size)
        if not 0.0 <= self.dropout < 1.0:
            fail("dropout", self.dropout, "a rate in [0, 1)")
        if self.bidirectional and self.layer not in BIDIRECTIONAL_LAYERS:
            fail("bidirectional", self.bidirectional,
                 f"False for layer {self.layer!r} (bidirectional: {BIDIRECTIONAL_LAYERS})")
        if self.bidirectional and self.pool == "none":
            fail("pool", self.pool, "'mean' or 'last' for a bidirectional (non-causal) model")


def _layer_module(cfg: ModelConfig):
    name = {"lru": "lru", "rotrnn": "rotrnn", "ornn": "ornn"}.get(cfg.layer, "rotlstm")
    return importlib.import_module(f"lrnn.{name}")


def layer_output_dim(cfg: ModelConfig) -> int:
    """Width of the recurrent layer's output: H for LRU/RotRNN, ``d_state`` otherwise."""
    return cfg.d_model if cfg.layer in ("lru", "rotrnn") else cfg.d_state


def _layer_init(key, cfg: ModelConfig):
    mod, H, N = _layer_module(cfg), cfg.d_model, cfg.d_state
    if cfg.layer == "lru":
        return mod.init(key, H, N, r_min=cfg.r_min, r_max=cfg.r_max, max_phase=cfg.max_phase,
                        bidirectional=cfg.bidirectional)
    if cfg.layer == "rotrnn":
        return mod.init(key, H, N, cfg.n_heads, gamma_min=cfg.gamma_min, gamma_max=cfg.gamma_max,
                        max_phase=cfg.max_phase, bidirectional=cfg.bidirectional)
    if cfg.layer == "ornn":
        return mod.init(key, H, N, cfg.n_reflections or N)
    if cfg.layer in ("lstm", "rotlstm"):
        return mod.init(key, H, N, rotate=cfg.layer == "rotlstm")
    return mod.gru_init(key, H, N, rotate=cfg.layer == "rotgru")


def _layer_apply(params, u, cfg: ModelConfig):
    mod = _layer_module(cfg)
    if cfg.layer in ("gru", "rotgru"):
        return mod.gru_apply(params, u)
    if cfg.layer in ("lru", "rotrnn"):
        return mod.apply(params, u, method=cfg.scan_method)
    return mod.apply(params, u)


def _dense(key, d_in, d_out, scale=1.0):
    return {"W": jax.random.normal(key, (d_in, d_out)) * (scale / math.sqrt(d_in)),
            "b": jnp.zeros((d_out,))}


def init(key, cfg: ModelConfig):
    """Parameters and BatchNorm state of the model.

    Returns ``(params, state)``: ``params = {"encoder": {"W", "b"}, "blocks": [{"norm":
    {"scale", "bias"}, "layer": <layer params>, "glu": {"W" (d_rec, 2H), "b" (2H,)}}, ...],
    "decoder": {"W" (H, d_output), "b"}}``; ``state = {"blocks": [{"mean" (H,), "var" (H,)}
    or {} per block]}``. Keys: ``k_enc, k_dec, *k_blocks = split(key, depth + 2)``, and each
    block's key splits into ``(k_layer, k_glu)``."""
    if not isinstance(cfg, ModelConfig):
        fail("cfg", cfg, "a ModelConfig")
    H = cfg.d_model
    k_enc, k_dec, *k_blocks = jax.random.split(key, cfg.depth + 2)
    if cfg.vocab_size is not None:
        encoder = {"W": jax.random.normal(k_enc, (cfg.vocab_size, H)), "b": jnp.zeros((H,))}
    else:
        encoder = _dense(k_enc, cfg.d_input, H)
    blocks, states = [], []
    for kb in k_blocks:
        k_layer, k_glu = jax.random.split(kb)
        blocks.append({"norm": {"scale": jnp.ones((H,)), "bias": jnp.zeros((H,))},
                       "layer": _layer_init(k_layer, cfg),
                       "glu": _dense(k_glu, layer_output_dim(cfg), 2 * H)})
        states.append({"mean": jnp.zeros((H,)), "var": jnp.ones((H,))} if cfg.norm == "batch" else {})
    params = {"encoder": encoder, "blocks": blocks, "decoder": _dense(k_dec, H, cfg.d_output)}
    return params, {"blocks": states}


def count_params(params) -> int:
    """Number of scalar parameters (BatchNorm running statistics are state, not counted)."""
    return int(sum(np.size(leaf) for leaf in jax.tree_util.tree_leaves(params)))


def recurrent_mask(params, cfg: ModelConfig):
    """A pytree like ``params`` with ``True`` on the recurrent parameters (see
    :data:`RECURRENT_KEYS`), which get the learning-rate factor and no weight decay."""
    keys = RECURRENT_KEYS[cfg.layer]
    mask = jax.tree_util.tree_map(lambda _: False, params)
    for block in mask["blocks"]:
        block["layer"] = {k: (k in keys) for k in block["layer"]}
    return mask


def encode(params, x, cfg: ModelConfig):
    """The linear encoder: ``(B, L, d_input)`` floats or ``(B, L)`` ints -> ``(B, L, H)``."""
    enc = params["encoder"]
    if cfg.vocab_size is not None:
        if not jnp.issubdtype(jnp.asarray(x).dtype, jnp.integer):
            fail("x", x, "integer tokens of shape (batch, L) for a token model")
        return enc["W"][x] + enc["b"]
    if np.ndim(x) < 2 or np.shape(x)[-1] != cfg.d_input:
        fail("x", x, f"shape (..., L, {cfg.d_input})")
    return x @ enc["W"] + enc["b"]


def _norm(p, s, u, cfg, train):
    if cfg.norm == "layer":
        mean = u.mean(-1, keepdims=True)
        var = u.var(-1, keepdims=True)
        return (u - mean) * jax.lax.rsqrt(var + NORM_EPS) * p["scale"] + p["bias"], s
    axes = tuple(range(u.ndim - 1))
    if train:
        mean, var = u.mean(axes), u.var(axes)
        s = {"mean": BN_MOMENTUM * s["mean"] + (1 - BN_MOMENTUM) * mean,
             "var": BN_MOMENTUM * s["var"] + (1 - BN_MOMENTUM) * var}
    else:
        mean, var = s["mean"], s["var"]
    return (u - mean) * jax.lax.rsqrt(var + NORM_EPS) * p["scale"] + p["bias"], s


def glu(p, y):
    """``(y W_a + b_a) ⊙ σ(y W_b + b_b)`` with ``W = [W_a | W_b]``."""
    z = y @ p["W"] + p["b"]
    a, b = jnp.split(z, 2, axis=-1)
    return a * jax.nn.sigmoid(b)


def _dropout(key, y, rate, train):
    if not train or rate == 0.0:
        return y
    keep = jax.random.bernoulli(key, 1.0 - rate, y.shape)
    return jnp.where(keep, y / (1.0 - rate), 0.0)


def apply(params, state, x, cfg: ModelConfig, *, train: bool = False, key=None):
    """Run the model. ``x``: ``(B, L, d_input)`` floats or ``(B, L)`` tokens.

    Returns ``(out, new_state)`` with ``out`` of shape ``(B, d_output)`` (pool ``mean`` or
    ``last``) or ``(B, L, d_output)`` (pool ``none``). ``train=True`` uses batch statistics
    (and updates the running ones) and applies dropout, which then needs ``key``."""
    if train and cfg.dropout > 0 and key is None:
        fail("key", key, "a jax.random key when train=True and dropout > 0")
    u = encode(params, x, cfg)
    keys = jax.random.split(key, cfg.depth) if key is not None else [None] * cfg.depth
    new_states = []
    for p, s, k in zip(params["blocks"], state["blocks"], keys):
        v, s = _norm(p["norm"], s, u, cfg, train)
        y = _layer_apply(p["layer"], v, cfg)
        y = glu(p["glu"], jax.nn.gelu(y))
        u = u + _dropout(k, y, cfg.dropout, train)
        new_states.append(s)
    if cfg.pool == "mean":
        u = u.mean(-2)
    elif cfg.pool == "last":
        u = u[..., -1, :]
    out = u @ params["decoder"]["W"] + params["decoder"]["b"]
    return out, {"blocks": new_states}


def layer_inputs(params, state, x, cfg: ModelConfig):
    """The normalised input of every block's recurrent layer in evaluation mode: a list of
    ``depth`` arrays ``(B, L, H)`` (to inspect hidden states, e.g. ``rotrnn.hidden_states``)."""
    u = encode(params, x, cfg)
    out = []
    for p, s in zip(params["blocks"], state["blocks"]):
        v, _ = _norm(p["norm"], s, u, cfg, False)
        out.append(v)
        u = u + glu(p["glu"], jax.nn.gelu(_layer_apply(p["layer"], v, cfg)))
    return out
