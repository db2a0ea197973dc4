"""The deep sequence model of LRU Fig. 1 and RotRNN Fig. 2, around any recurrent layer.

    x (B, L, d_input) or tokens (B, L)
      -> linear encoder                                  (B, L, H)
      -> depth x residual block:  u + Dropout(GLU(GELU(Rec(Norm(u)))))
      -> pooling: mean or last step over L (or none: one output per step)
      -> linear decoder                                  (B, d_output) or (B, L, d_output)

``Rec`` is a layer of the registry (``lrnn.layers.get``; :data:`LAYERS`). LRU and RotRNN map
``H -> H``; oRNN and the gated cells map ``H -> d_state`` (their hidden size) and the GLU maps
it back to ``H``. The GLU (Dauphin et al.
2017) is ``(W_a y + b_a) ⊙ σ(W_b y + b_b)`` with ``W = [W_a | W_b]`` of shape
``(d_rec, 2H)``; the GELU before it is the nonlinearity of the block (LRU App. D.1).

Parameters are plain nested dicts/lists; BatchNorm running statistics live in a separate
``state`` pytree so that :func:`apply` is pure: ``out, new_state = apply(params, state, x,
config, train=..., key=...)``.

Online inference (a causal model with pool ``last`` or ``none``): the recurrent states of the
blocks' layers form the ``carry`` (named so because ``state`` is the BatchNorm statistics)::

    carry = init_carry(params, cfg, (B,))
    carry, out_t = step(params, state, carry, x_t, cfg)          # one step, (B, d_output)
    out, state, carry = apply(params, state, x_chunk, cfg, carry=carry, return_carry=True)

Each step costs the same at step 10 and 10^6 and the carry's size does not grow.
"""
from __future__ import annotations

import dataclasses
import functools
import math

import jax
import jax.numpy as jnp
import numpy as np

from . import layers
from ._validate import (fail, require_bool, require_choice, require_key, require_positive_int,
                        require_real)
from .layers import lru, lstm, ornn, rotrnn
from .scan import available_methods

NORMS = ("layer", "batch")
POOLS = ("mean", "last", "none")
BN_MOMENTUM = 0.9
NORM_EPS = 1e-5


def __getattr__(name):
    """The registry, read live (a layer registered later is listed too):

    * ``LAYERS``: the registered layers (``lrnn.layers.names()``), in registration order
      (figures colour by it);
    * ``BIDIRECTIONAL_LAYERS``: those that can run both ways;
    * ``RECURRENT_KEYS``: ``{layer: the parameters of the recurrence itself}`` (its transition
      and input map: "A and B" of LRU App. D.2, the RotRNN layer's P, θ, γ, B), which get the
      learning-rate factor and no weight decay."""
    if name == "LAYERS":
        return layers.names()
    if name == "BIDIRECTIONAL_LAYERS":
        return tuple(n for n in layers.names() if layers.get(n).bidirectional)
    if name == "RECURRENT_KEYS":
        return {n: layers.get(n).recurrent_keys for n in layers.names()}
    raise AttributeError(f"module 'lrnn.model' has no attribute {name!r}")


#: ModelConfig fields every layer uses; the others apply to the layers whose registry entry
#: maps them (``init_options``/``apply_options``), see :func:`applies_to`.
GENERAL_FIELDS = ("layer", "d_output", "d_input", "vocab_size", "depth", "d_model", "d_state",
                  "norm", "pool", "dropout")


def _f(default, help):
    return dataclasses.field(default=default, metadata={"help": help})


@dataclasses.dataclass(frozen=True)
class ModelConfig:
    """Sizes and choices of the deep model (hashable, so it can be a static jit argument).

    Each field's ``help`` is also the help of its ``lrnn train`` flag (``layer`` is
    ``--layer``; ``d_output``, ``d_input`` and ``vocab_size`` come from the task there).
    ``d_input``: real input channels, or ``None`` with ``vocab_size`` for token inputs (the
    encoder is then a lookup table, i.e. a linear map of one-hot vectors)."""
    layer: str = _f("lru", "recurrent layer: one of " + ", ".join(layers.names()))
    d_output: int = _f(1, "outputs per sequence (or per step with pool 'none')")
    d_input: int | None = _f(1, "real input channels (None for token inputs)")
    vocab_size: int | None = _f(None, "number of distinct tokens (None for real inputs)")
    depth: int = _f(2, "number of residual blocks")
    d_model: int = _f(64, "model width H")
    d_state: int = _f(64, "LRU states N / RotRNN total state / hidden size of oRNN, "
                          "(Rot)LSTM, (Rot)GRU")
    n_heads: int = _f(8, "RotRNN heads (d_state must be n_heads times an even number)")
    n_reflections: int | None = _f(None, "oRNN Householder reflections m (default d_state)")
    norm: str = _f("layer", "normalisation in each block: layer or batch")
    pool: str = _f("mean", "mean, last or none")
    dropout: float = _f(0.0, "dropout rate after each GLU")
    bidirectional: bool = _f(False, "bidirectional recurrent layers (lru and rotrnn only)")
    r_min: float = _f(0.0, "LRU: smallest initial eigenvalue modulus (Lemma 3.2)")
    r_max: float = _f(1.0, "LRU: largest initial eigenvalue modulus")
    max_phase: float = _f(math.tau, "LRU/RotRNN: initial phases uniform in [0, max_phase]")
    gamma_min: float = _f(0.9, "RotRNN: smallest initial decay γ")
    gamma_max: float = _f(0.999, "RotRNN: largest initial decay γ")
    scan_method: str = _f("auto", "scan backend of LRU/RotRNN layers: auto, sequential, "
                                  "associative, chunked")
    formulation: str = _f("auto", "oRNN: auto, dense (W formed once per forward pass) or "
                                  "reflections (oRNN Algorithm 1 at every step)")
    activation: str = _f("leaky_relu", "oRNN: leaky_relu (oRNN §5) or oplu (§5.5; even d_state)")
    forget_bias: float = _f(1.0, "(Rot)LSTM: initial forget-gate bias b_f (the oRNN paper's "
                                 "LSTM baseline uses 5)")

    def __post_init__(self):
        require_choice("layer", self.layer, layers.names())
        require_choice("norm", self.norm, NORMS)
        require_choice("pool", self.pool, POOLS)
        require_choice("formulation", self.formulation, ornn.FORMULATIONS)
        require_choice("activation", self.activation, ornn.ACTIVATIONS)
        require_choice("scan_method", self.scan_method, available_methods())
        require_bool("bidirectional", self.bidirectional)
        for name in ("d_output", "d_model", "d_state", "depth", "n_heads"):
            require_positive_int(name, getattr(self, name))
        # Every value is checked, whichever layer uses it: a typo must not wait for a switch
        # of layer to surface.
        lru.check_ring(self.r_min, self.r_max)
        lru.check_phase(self.max_phase)
        rotrnn.check_decays(self.gamma_min, self.gamma_max)
        lstm.check_forget_bias(self.forget_bias)
        if self.n_reflections is not None:
            require_positive_int("n_reflections", self.n_reflections)
        if (self.d_input is None) == (self.vocab_size is None):
            fail("d_input", self.d_input,
                 f"exactly one of d_input and vocab_size (got vocab_size={self.vocab_size!r})")
        if self.d_input is not None:
            require_positive_int("d_input", self.d_input)
        else:
            require_positive_int("vocab_size", self.vocab_size)
        if not 0.0 <= require_real("dropout", self.dropout) < 1.0:
            fail("dropout", self.dropout, "a rate in [0, 1)")
        if self.bidirectional and not self.spec.bidirectional:
            bidi = tuple(n for n in layers.names() if layers.get(n).bidirectional)
            fail("bidirectional", self.bidirectional,
                 f"False for layer {self.layer!r} (bidirectional: {bidi})")
        if self.bidirectional and self.pool == "none":
            fail("pool", self.pool, "'mean' or 'last' for a bidirectional (non-causal) model")

    @property
    def spec(self) -> layers.Layer:
        """The registry entry of ``layer``."""
        return layers.get(self.layer)


def applies_to(field: str, layer: str) -> bool:
    """Whether the ModelConfig ``field`` has an effect on a model of ``layer`` (the general
    fields always; the others where the layer's registry entry maps them)."""
    spec = layers.get(layer)
    return field in GENERAL_FIELDS or field in {**spec.init_options, **spec.apply_options}.values()


def layer_output_dim(cfg: ModelConfig) -> int:
    """Width of the recurrent layer's output: H for LRU/RotRNN, ``d_state`` otherwise."""
    return cfg.spec.width(cfg.d_model, cfg.d_state)


def _options(cfg: ModelConfig, mapping) -> dict:
    return {arg: getattr(cfg, field) for arg, field in mapping.items()}


def _layer_init(key, cfg: ModelConfig):
    spec = cfg.spec
    return spec.init(key, cfg.d_model, cfg.d_state, **_options(cfg, spec.init_options))


def _layer_apply(params, u, cfg: ModelConfig, carry=None, stateful=False):
    spec = cfg.spec
    options = _options(cfg, spec.apply_options)
    if not stateful:
        return spec.apply(params, u, **options)
    return spec.apply(params, u, state=carry, return_state=True, **options)


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
    require_key("key", key)
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
    keys = cfg.spec.recurrent_keys
    mask = jax.tree_util.tree_map(lambda _: False, params)
    for block in mask["blocks"]:
        block["layer"] = {k: (k in keys) for k in block["layer"]}
    return mask


def encode(params, x, cfg: ModelConfig):
    """The linear encoder: ``(B, L, d_input)`` floats or ``(B, L)`` ints -> ``(B, L, H)``."""
    enc = params["encoder"]
    if cfg.vocab_size is not None:
        if not jnp.issubdtype(jnp.asarray(x).dtype, jnp.integer) or np.ndim(x) != 2:
            fail("x", x, "integer tokens of shape (batch, L) for a token model")
        if not isinstance(x, jax.Array) and np.size(x) and not (
                0 <= np.min(x) and np.max(x) < cfg.vocab_size):
            fail("x", x, f"tokens in 0 .. vocab_size - 1 = {cfg.vocab_size - 1} (found "
                 f"{np.min(x)} .. {np.max(x)})")
        # Under jit the tokens have no values to check: an out-of-range token reads NaN (which
        # training reports) instead of being clamped silently to a valid row.
        return jnp.take(enc["W"], x, axis=0, mode="fill", fill_value=jnp.nan) + enc["b"]
    if np.ndim(x) < 2 or np.shape(x)[-1] != cfg.d_input:
        fail("x", x, f"shape (..., L, {cfg.d_input})")
    dtype = getattr(x, "dtype", None) or np.asarray(x).dtype
    if not (jnp.issubdtype(dtype, jnp.floating) or jnp.issubdtype(dtype, jnp.integer)) \
            or dtype == np.bool_:
        fail("x", x, f"real numbers of shape (..., L, {cfg.d_input})")
    return x @ enc["W"] + enc["b"]


def norm(p, s, u, cfg, train):
    """The block's normalisation: LayerNorm over the features of each step, or BatchNorm over
    batch and time (running statistics in ``s``, updated when ``train``). Returns ``(v, s)``."""
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


def check_params(params, state, cfg: ModelConfig):
    """``params`` and ``state`` are the model's for ``cfg``: ``depth`` blocks, encoder, GLU
    and decoder sizes from ``d_input``/``vocab_size``, ``d_model``, the layer's width and
    ``d_output`` (shapes only: no device work). A ValueError names the first disagreement."""
    if not isinstance(cfg, ModelConfig):
        fail("cfg", cfg, "a ModelConfig")
    origin = "lrnn.model.init(key, cfg)"
    if not isinstance(params, dict) or not {"encoder", "blocks", "decoder"} <= set(params):
        fail("params", params, f"the params of {origin}: a dict with 'encoder', 'blocks' and "
                               "'decoder'")
    if not isinstance(state, dict) or not isinstance(state.get("blocks"), (list, tuple)):
        fail("state", state, f"the state of {origin}: a dict with 'blocks' (a list)")
    blocks = params["blocks"]
    if not isinstance(blocks, (list, tuple)) or len(blocks) != cfg.depth:
        fail("params['blocks']", blocks, f"a list of depth = {cfg.depth} blocks (as cfg says)")
    if len(state["blocks"]) != cfg.depth:
        fail("state['blocks']", state["blocks"], f"a list of depth = {cfg.depth} block states")
    H = cfg.d_model
    rows = cfg.vocab_size if cfg.vocab_size is not None else cfg.d_input
    what = "vocab_size" if cfg.vocab_size is not None else "d_input"
    shapes = [("params['encoder']['W']", params["encoder"].get("W"), (rows, H),
               f"({what}, d_model) = {(rows, H)}"),
              ("params['decoder']['W']", params["decoder"].get("W"), (H, cfg.d_output),
               f"(d_model, d_output) = {(H, cfg.d_output)}")]
    width = layer_output_dim(cfg)
    for i, block in enumerate(blocks):
        glu_w = block.get("glu", {}).get("W") if isinstance(block, dict) else None
        shapes.append((f"params['blocks'][{i}]['glu']['W']", glu_w, (width, 2 * H),
                       f"(layer width, 2 d_model) = {(width, 2 * H)} for layer {cfg.layer!r}"))
    for name, value, shape, text in shapes:
        if value is None or tuple(np.shape(value)) != shape:
            fail(name, value, f"shape {text}, as cfg says")
    want = _layer_shapes(cfg)
    for i, block in enumerate(blocks if want is not None else ()):
        got = block.get("layer")
        if not isinstance(got, dict) or set(got) != set(want):
            fail(f"params['blocks'][{i}]['layer']", got,
                 f"the parameters {sorted(want)} of layer {cfg.layer!r} (as cfg says)")
        for k, shape in want.items():
            if tuple(np.shape(got[k])) != shape:
                fail(f"params['blocks'][{i}]['layer'][{k!r}]", got[k],
                     f"shape {shape} for layer {cfg.layer!r} with d_model = {cfg.d_model}, "
                     f"d_state = {cfg.d_state} and its options, as cfg says")


@functools.lru_cache(maxsize=64)
def _layer_shapes(cfg: ModelConfig) -> dict | None:
    """``{name: shape}`` of one block's layer parameters for ``cfg``, from an abstract
    evaluation of the layer's ``init`` (no arrays are made)."""
    try:
        tree = jax.eval_shape(lambda: _layer_init(jax.random.PRNGKey(0), cfg))
    except Exception:         # a layer of one's own whose init needs concrete values: not checked
        return None
    if not isinstance(tree, dict):
        return None
    return {k: tuple(getattr(v, "shape", ())) for k, v in tree.items()}


def _require_online(cfg: ModelConfig, what: str):
    """A model that can carry its layers' states: a causal layer with ``init_state``/``step``,
    and a pooling that each step can give (``last``: the output after the latest step;
    ``none``: one output per step). Mean pooling needs the whole sequence."""
    if not cfg.spec.stateful:
        fail("cfg.layer", cfg.layer, f"a layer with init_state and step for {what} (the "
             "built-in layers have them)")
    if cfg.bidirectional:
        fail("cfg.bidirectional", cfg.bidirectional, f"False for {what}: a bidirectional layer "
             "reads the future, so it has no state to carry")
    if cfg.pool == "mean":
        fail("cfg.pool", cfg.pool, f"'last' or 'none' for {what}: a mean over the sequence "
             "needs the whole sequence (use apply on it)")


def init_carry(params, cfg: ModelConfig, batch_shape=()):
    """The recurrent state before the first step: ``{"blocks": [layer state, ...]}``, one
    ``cfg.spec.init_state(block params, batch_shape)`` per block (each a dict of arrays of
    shape ``(*batch_shape, ...)``, e.g. ``{"x": (B, N) complex}`` for the LRU). Only for a
    causal model with pool ``last`` or ``none``."""
    if not isinstance(cfg, ModelConfig):
        fail("cfg", cfg, "a ModelConfig")
    _require_online(cfg, "init_carry")
    if not isinstance(params, dict) or not isinstance(params.get("blocks"), (list, tuple)):
        fail("params", params, "the params of lrnn.model.init(key, cfg)")
    return {"blocks": [cfg.spec.init_state(p["layer"], batch_shape) for p in params["blocks"]]}


def _check_carry(carry, cfg: ModelConfig):
    if not isinstance(carry, dict) or not isinstance(carry.get("blocks"), (list, tuple)) \
            or len(carry["blocks"]) != cfg.depth:
        fail("carry", carry, f"the carry of lrnn.model.init_carry: a dict with 'blocks', a "
                             f"list of depth = {cfg.depth} layer states")
    return carry["blocks"]


def _decode(params, u):
    return u @ params["decoder"]["W"] + params["decoder"]["b"]


def step(params, state, carry, x_t, cfg: ModelConfig):
    """One step of a causal model (evaluation mode: BatchNorm reads its running statistics).

    Args:
      params, state: from ``init`` (``state``: the BatchNorm statistics).
      carry: the recurrent states (``init_carry``, or a previous ``step`` or ``apply``).
      x_t: one input per sequence, ``(B, d_input)`` floats or ``(B,)`` tokens.
      cfg: a causal ``ModelConfig`` with pool ``last`` or ``none``.

    Returns:
      ``(carry, out_t)``, ``out_t`` of shape ``(B, d_output)``: the output of ``apply`` at that
      step (pool ``none``) or over the sequence so far (pool ``last``). Each block runs its
      layer's ``step``: the cost does not grow with the number of steps taken."""
    check_params(params, state, cfg)
    _require_online(cfg, "step")
    layer_states = _check_carry(carry, cfg)
    if cfg.vocab_size is not None:
        if np.ndim(x_t) != 1:
            fail("x_t", x_t, "integer tokens of shape (batch,) for a token model, one per "
                             "sequence")
        u = encode(params, x_t[:, None] if isinstance(x_t, jax.Array) else np.asarray(x_t)[:, None],
                   cfg)[:, 0]
    else:
        if np.ndim(x_t) < 1 or np.shape(x_t)[-1] != cfg.d_input:
            fail("x_t", x_t, f"shape (..., {cfg.d_input}), one step of each sequence")
        u = encode(params, jnp.asarray(x_t)[..., None, :], cfg)[..., 0, :]
    spec = cfg.spec
    options = _options(cfg, spec.step_options)
    new_states = []
    for p, s, ls in zip(params["blocks"], state["blocks"], layer_states):
        v, _ = norm(p["norm"], s, u, cfg, False)
        ls, y = spec.step(p["layer"], ls, v, **options)
        u = u + glu(p["glu"], jax.nn.gelu(y))
        new_states.append(ls)
    return {"blocks": new_states}, _decode(params, u)


def apply(params, state, x, cfg: ModelConfig, *, train: bool = False, key=None, carry=None,
          return_carry: bool = False):
    """Run the model. ``x``: ``(B, L, d_input)`` floats or ``(B, L)`` tokens.

    Returns ``(out, new_state)`` with ``out`` of shape ``(B, d_output)`` (pool ``mean`` or
    ``last``) or ``(B, L, d_output)`` (pool ``none``). ``train=True`` uses batch statistics
    (and updates the running ones) and applies dropout, which then needs ``key``.

    ``carry``: the recurrent states to start from (``init_carry``, or those another chunk of
    the same sequences returned); ``return_carry=True`` returns ``(out, new_state, carry)``
    with the states after the last step, so a long sequence runs chunk by chunk with the
    outputs of one pass. Only for a causal model with pool ``last`` or ``none``; refused with
    ``train=True`` and BatchNorm (a chunk's batch statistics are not the sequence's).

    ``params`` and ``state`` must be those of ``init(key, cfg)`` (see :func:`check_params`):
    params for another depth or width are a ValueError, never run as they are."""
    check_params(params, state, cfg)
    train = require_bool("train", train)
    return_carry = require_bool("return_carry", return_carry)
    if key is not None:
        require_key("key", key)
    if train and cfg.dropout > 0 and key is None:
        fail("key", key, "a jax.random key when train=True and dropout > 0")
    stateful = carry is not None or return_carry
    if stateful:
        _require_online(cfg, "carry" if carry is not None else "return_carry")
        if train and cfg.norm == "batch":
            fail("train", train, "False when a carry runs a sequence in chunks with BatchNorm "
                 "(a chunk's batch statistics are not those of the sequence)")
    u = encode(params, x, cfg)
    layer_states = _check_carry(carry, cfg) if carry is not None else [None] * cfg.depth
    keys = jax.random.split(key, cfg.depth) if key is not None else [None] * cfg.depth
    new_states, new_carry = [], []
    for p, s, k, ls in zip(params["blocks"], state["blocks"], keys, layer_states):
        v, s = norm(p["norm"], s, u, cfg, train)
        y = _layer_apply(p["layer"], v, cfg, ls, stateful)
        if stateful:
            y, ls = y
            new_carry.append(ls)
        y = glu(p["glu"], jax.nn.gelu(y))
        u = u + _dropout(k, y, cfg.dropout, train)
        new_states.append(s)
    if cfg.pool == "mean":
        u = u.mean(-2)
    elif cfg.pool == "last":
        u = u[..., -1, :]
    out = _decode(params, u)
    if return_carry:
        return out, {"blocks": new_states}, {"blocks": new_carry}
    return out, {"blocks": new_states}


def layer_inputs(params, state, x, cfg: ModelConfig):
    """The normalised input of every block's recurrent layer in evaluation mode: a list of
    ``depth`` arrays ``(B, L, H)`` (to inspect hidden states, e.g. ``rotrnn.hidden_states``)."""
    check_params(params, state, cfg)
    u = encode(params, x, cfg)
    out = []
    for p, s in zip(params["blocks"], state["blocks"]):
        v, _ = norm(p["norm"], s, u, cfg, False)
        out.append(v)
        u = u + glu(p["glu"], jax.nn.gelu(_layer_apply(p["layer"], v, cfg)))
    return out
