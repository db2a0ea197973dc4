"""Checks for Exercises 8 · Capstone (solutions/08_capstone.ipynb): the pieces of the deep LRU
model (LayerNorm, GLU), one residual block, the whole model, and which parameters the optimiser
treats as recurrent in a (hybrid) stack of LRU, RotRNN and oRNN blocks; each compared with
``lrnn.model`` on the same parameter dict (a padded batch: on each sequence without its
padding). Then the training loop, the LRU's state carried over k held inputs (against the
layer's own step), an exponentially weighted mean pooling online (against its definition on the
library's per-step outputs) and the bytes of a RotLSTM's carry.

The hints come from a float64 NumPy transcription of the block (LRU Fig. 1, App. D) with the
typical mistakes switched on one at a time (``np_block``/``np_model`` and their ``variant``)."""
from __future__ import annotations

import functools
import math

import numpy as np

from ._core import (alternative, as_array, call, call_within, exercise, expect, expect_close,
                    expect_prediction, randn, when)
from .ch02 import _naive_states, _pair, random_params

#: The model's LayerNorm epsilon (``lrnn.model.NORM_EPS``), stated in the exercise.
EPS = 1e-5
#: Float32 forward passes of the same model written two ways (another order of the sums, another
#: scan) differ by a few 1e-7 relative (measured: at most 8e-7 on these inputs); the tolerance
#: is ~100 times that. The mistakes the hints name move a block's output by more than 1e-1
#: relative on these inputs, except the exact (erf) GELU in place of the tanh form: 1e-4 to
#: 3e-3, which the second input of 8.3 shows clearly.
RTOL, ATOL = 1e-4, 1e-5


# ------------------------------------------------------------------------------------------
# A float64 transcription with switchable mistakes (for hints)
# ------------------------------------------------------------------------------------------

def np_layer_norm(u, scale, bias, *, axis=-1, ddof=0, eps_inside=True, eps=EPS):
    u = np.asarray(u, np.float64)
    mean = u.mean(axis, keepdims=True)
    var = u.var(axis, keepdims=True, ddof=ddof)
    std = np.sqrt(var + eps) if eps_inside else np.sqrt(var) + eps
    return (u - mean) / std * scale + bias


def np_glu(y, W, b, *, variant=None):
    z = np.asarray(y, np.float64) @ np.asarray(W, np.float64) + b
    h = z.shape[-1] // 2
    a, g = (z[..., 0::2], z[..., 1::2]) if variant == "interleaved" else (z[..., :h], z[..., h:])
    if variant == "swapped":
        a, g = g, a
    if variant == "no_sigmoid":
        return a * g
    if variant == "tanh":
        return a * np.tanh(g)
    return a / (1 + np.exp(-g))


def gelu_tanh(x):
    """GELU in its tanh approximation (``jax.nn.gelu``'s default)."""
    return 0.5 * x * (1 + np.tanh(math.sqrt(2 / math.pi) * (x + 0.044715 * x ** 3)))


def gelu_erf(x):
    from scipy.special import erf
    return 0.5 * x * (1 + erf(x / math.sqrt(2)))


def np_lru(p, v, *, variant=None):
    x = _naive_states(p, v, gamma=variant != "no_gamma")
    c = p["C_re"] + 1j * p["C_im"]
    cx = np.einsum("...ln,hn->...lh", x, c)
    d = 0 if variant == "no_D" else p["D"] * v
    return (np.abs(cx) if variant == "modulus" else cx.real) + d


def np_block(p, u, variant=None):
    u = np.asarray(u, np.float64)
    n = p["norm"]

    def branch(v):
        y = np_lru(p["layer"], v, variant=variant)
        y = {"no_gelu": y, "gelu_erf": gelu_erf(y) if variant == "gelu_erf" else None,
             "relu": np.maximum(y, 0)}.get(variant, gelu_tanh(y))
        return np_glu(y, p["glu"]["W"], p["glu"]["b"],
                      variant=variant if variant in ("swapped", "no_sigmoid") else None)
    if variant == "post_norm":
        return np_layer_norm(u + branch(u), n["scale"], n["bias"])
    norm_kw = {"time_axis": {"axis": -2}}.get(variant, {})
    v = np_layer_norm(u, n["scale"], n["bias"], **norm_kw)
    if variant == "no_residual":
        return branch(v)
    if variant == "residual_normed":
        return v + branch(v)
    return u + branch(v)


def np_model(params, x, pool, variant=None):
    enc, dec = params["encoder"], params["decoder"]
    u = np.asarray(x, np.float64) @ enc["W"] + (0 if variant == "no_encoder_bias" else enc["b"])
    blocks = list(params["blocks"])
    if variant == "reversed":
        blocks = blocks[::-1]
    if variant == "first_block_only":
        blocks = [blocks[0]] * len(blocks)
    for p in blocks:
        u = np_block(p, u, "post_norm" if variant == "post_norm" else None)
    if variant == "final_norm":
        u = np_layer_norm(u, 1.0, 0.0)
    if variant == "swap_pool":
        pool = "last" if pool == "mean" else "mean"
    u = u.mean(-2) if pool == "mean" else u[..., -1, :]
    return u @ dec["W"] + dec["b"]


# ------------------------------------------------------------------------------------------
# Random parameters with the layout of lrnn.model.init (NumPy: no compilation per shape)
# ------------------------------------------------------------------------------------------

def random_block(rng, h, n, d_rec=None):
    """One block's parameters like ``lrnn.model.init``'s, with the norm's scale and bias and the
    GLU's bias moved off their initial 1 and 0 (a piece left out must show)."""
    d_rec = d_rec or h
    return {"norm": {"scale": (1 + 0.3 * randn(rng, h)).astype(np.float32),
                     "bias": (0.2 * randn(rng, h)).astype(np.float32)},
            "layer": random_params(rng, h, n),
            "glu": {"W": (randn(rng, d_rec, 2 * h) / np.sqrt(d_rec)).astype(np.float32),
                    "b": (0.2 * randn(rng, 2 * h)).astype(np.float32)}}


def random_model(rng, d_input, h, n, depth, d_output):
    return {"encoder": {"W": (randn(rng, d_input, h) / np.sqrt(d_input)).astype(np.float32),
                        "b": (0.2 * randn(rng, h)).astype(np.float32)},
            "blocks": [random_block(rng, h, n) for _ in range(depth)],
            "decoder": {"W": (randn(rng, h, d_output) / np.sqrt(h)).astype(np.float32),
                        "b": (0.2 * randn(rng, d_output)).astype(np.float32)}}


def model_config(params, pool):
    """The ``lrnn.model.ModelConfig`` of a parameter dict of the layout above (LayerNorm, LRU)."""
    from lrnn import model
    d_input, h = np.shape(params["encoder"]["W"])
    return model.ModelConfig(layer="lru", d_input=int(d_input), vocab_size=None,
                             d_output=int(np.shape(params["decoder"]["W"])[1]),
                             depth=len(params["blocks"]), d_model=int(h),
                             d_state=int(np.shape(params["blocks"][0]["layer"]["nu_log"])[0]),
                             norm="layer", pool=pool, scan_method="sequential")


@functools.cache
def _compiled(name):
    """The library function ``name`` under ``jax.jit``, made once per process. Op by op, every
    new shape compiles each of the model's few hundred operations on its own; one program per
    shape grades a chapter several seconds faster, with the same operations in the same order."""
    import jax
    from lrnn import model
    from lrnn.layers import lru
    functions = {"model.apply": lambda params, state, x, cfg: model.apply(params, state, x,
                                                                          cfg)[0],
                 "block": _block,
                 "lru.step": lambda q, x, v: lru.step(q, {"x": x}, v)}
    return jax.jit(functions[name], static_argnums=(3,) if name == "model.apply" else ())


def _block(p, u):
    import jax
    from lrnn import model
    from lrnn.layers import lru
    cfg = model.ModelConfig(layer="lru", d_input=1, d_model=u.shape[-1], norm="layer")
    v, _ = model.norm(p["norm"], {}, u, cfg, False)
    y = lru.apply(p["layer"], v, scan_method="sequential")
    return u + model.glu(p["glu"], jax.nn.gelu(y))


def reference_model(params, x, pool, state=None):
    """``lrnn.model.apply`` in evaluation mode (LayerNorm has no running state); ``pool`` is a
    pooling name or a whole ``ModelConfig``."""
    cfg = pool if not isinstance(pool, str) else model_config(params, pool)
    state = state if state is not None else {"blocks": [{} for _ in params["blocks"]]}
    return np.asarray(_compiled("model.apply")(params, state, x, cfg))


def reference_block(p, u):
    """One residual block exactly as ``lrnn.model.apply`` runs it: its own norm, layer, GELU
    and GLU functions, in its order."""
    return np.asarray(_compiled("block")(p, u))


# ------------------------------------------------------------------------------------------
# 8.1 LayerNorm (find the bug): probes by property first, then the values
# ------------------------------------------------------------------------------------------

def _same(a, b, rtol=RTOL, atol=ATOL):
    a, b = np.asarray(a, np.float64), np.asarray(b, np.float64)
    return a.shape == b.shape and bool(np.allclose(a, b, rtol=rtol, atol=atol))


def _layer_norm_probes(fn, u, scale, bias, got):
    """What a LayerNorm must do whatever its inputs: each step on its own (not another step,
    not another sequence), a step of equal features comes out as the bias, adding a number to
    every feature of a step changes nothing, and with scale 1 and bias 0 the features of a step
    of spread ≫ √ε have mean 0 and mean square 1. ``u`` has shape (..., L, H), ``got`` is
    ``fn(u, scale, bias)``."""
    length = u.shape[-2]
    inputs = {"u": u, "scale": scale, "bias": bias}
    if length > 1:
        k = length // 2
        changed = u.copy()
        changed[..., k, :] += 3.0 * np.linspace(-1.0, 1.0, u.shape[-1], dtype=np.float32)
        out = np.asarray(call(fn, {**inputs, "u": changed}))
        others = [j for j in range(length) if j != k]
        moved = [j for j in others if not _same(out[..., j, :], got[..., j, :])]
        expect(not moved, f"the output at time step(s) {moved} changed when only step {k} of u "
               "changed: the output of one time step depends on other time steps (in a causal "
               "model, on the future too).", inputs={**inputs, "u (step changed)": changed},
               expected=got[..., others, :], received=out[..., others, :])
    if u.ndim > 2 and u.shape[0] > 1:
        changed = u.copy()
        changed[0] = 2.0 * changed[0] - 1.0
        out = np.asarray(call(fn, {**inputs, "u": changed}))
        expect(_same(out[1:], got[1:]), "the output of one sequence changed when only another "
               "sequence of the batch (u[0]) changed.", inputs={**inputs, "u (u[0] changed)":
                                                                changed},
               expected=got[1:], received=out[1:])
    flat = u.copy()
    flat[..., 0, :] = 3.75
    out = np.asarray(call(fn, {**inputs, "u": flat}))
    expect(_same(out[..., 0, :], np.broadcast_to(bias, out[..., 0, :].shape)),
           "a step whose features are all equal (3.75 in every feature of step 0) should come out "
           "as the bias; yours comes out as "
           + ("NaN or inf." if not np.isfinite(out[..., 0, :]).all() else "something else."),
           inputs={**inputs, "u (step 0 flat)": flat}, expected=bias, received=out[..., 0, :])
    shift = (5.0 * np.arange(1, length + 1, dtype=np.float32))[:, None]
    out = np.asarray(call(fn, {**inputs, "u": u + shift}))
    expect(_same(out, got, rtol=10 * RTOL, atol=10 * ATOL),
           "adding the same number to every feature of a step (5 to step 0, 10 to step 1, …) "
           "changed your output: a LayerNorm does not see where the features sit, only how "
           "they spread around their mean.", inputs={**inputs, "u + shift": u + shift},
           expected=got, received=out)
    ones, zeros = np.ones_like(scale), np.zeros_like(bias)
    out = np.asarray(call(fn, {"u": u, "scale": ones, "bias": zeros}), np.float64)
    spread = np.asarray(u, np.float64).var(-1)
    wide = spread > 0.1                          # ε = 1e-5 is negligible against these
    if wide.any():
        mean, square = out.mean(-1)[wide], np.square(out).mean(-1)[wide]
        worst = int(np.argmax(np.abs(square - 1)))
        expect(np.allclose(mean, 0, atol=1e-4) and np.allclose(square, 1, atol=1e-3),
               f"with scale = 1 and bias = 0, the {u.shape[-1]} outputs of each step (features "
               f"of variance ≫ ε) should have mean 0 and mean square 1; one of your steps has "
               f"mean {mean[worst]:.4f} and mean square {square[worst]:.4f}.",
               inputs={"u": u, "scale": ones, "bias": zeros})


@exercise("8.1", points=2, title="LayerNorm over the features",
          reference="Ba et al. 2016, eqs. 3–4 (layer normalisation over the H features of one "
                    "step); LRU Fig. 1 and App. D (the Norm of each block)",
          stronger_hint="each symptom points at one line of layer_norm_broken. Ask of every "
                        "statistic: over which axis does it run (Ba et al. eqs. 3–4 sum over "
                        "the H hidden units of one step), and where does ε enter when the "
                        "variance is as small as ε itself (the model adds it to the variance, "
                        "under the square root)?")
def _(fn, rng):
    from lrnn import model
    cases = [((5, 4), 1.0), ((2, 7, 3), 1.0), ((1, 6, 8), 1e-3), ((3, 1, 2), 2.0)]
    for shape, spread in cases:
        h = shape[-1]
        u = (spread * (randn(rng, *shape) + rng.uniform(-1, 1))).astype(np.float32)
        scale = (1 + 0.5 * randn(rng, h)).astype(np.float32)
        bias = (0.5 * randn(rng, h)).astype(np.float32)
        inputs = {"u": u, "scale": scale, "bias": bias}
        got = as_array(call(fn, inputs), inputs=inputs, what="the normalised u")
        if spread == 1.0 and got.shape == u.shape:
            _layer_norm_probes(fn, u, scale, bias, got)
        cfg = model.ModelConfig(layer="lru", d_input=1, d_model=h, norm="layer")
        want = np.asarray(model.norm({"scale": scale, "bias": bias}, {}, u, cfg, False)[0])
        small = (f"steps whose features spread by only about {spread:g} (variance about "
                 f"{spread ** 2:g}, against ε = 1e-5)")
        expect_close(got, want, inputs=inputs, rtol=RTOL, atol=ATOL, what="the normalised u",
                     hints=[
            alternative(lambda: np_layer_norm(u, scale, bias, eps_inside=False),
                        f"yours matches the model on steps of spread 1 but not on {small}: "
                        "there the two treat ε differently."),
            alternative(lambda: np_layer_norm(u, scale, bias, eps=0.0),
                        f"on {small} your normalised features still have mean square 1, as if "
                        "ε played no part; the model's are smaller there."),
            alternative(lambda: np_layer_norm(u, 1.0, bias),
                        "(output − bias) is what it would be with scale = 1: your output does "
                        "not follow the learned scale."),
            alternative(lambda: np_layer_norm(u, scale, bias, ddof=1),
                        f"with scale 1 and bias 0 your {h} outputs of a step would have mean "
                        f"square {(h - 1) / h:.3g}, not 1."),
        ])


# ------------------------------------------------------------------------------------------
# 8.2 GLU (find the bug): the gates wide open, shut and half open first, then the values
# ------------------------------------------------------------------------------------------

def _glu_probes(fn, y, h):
    """With W = 0 the unit sees only b: values c (first H entries) and gates g (last H). The
    gate σ(g) passes c at g = +∞, blocks it at g = −∞ and halves it at g = 0 (Dauphin et al.
    2017, eq. 1); W = b = 0 gives 0."""
    W = np.zeros((y.shape[-1], 2 * h), np.float32)
    c = np.linspace(-2.5, 2.0, h).astype(np.float32)
    b = np.zeros(2 * h, np.float32)
    inputs = {"y": y, "W": W, "b": b}
    out = call(fn, inputs)
    expect_close(out, np.zeros(h, np.float32), inputs=inputs, rtol=RTOL, atol=ATOL,
                 what="GLU(y) with W = 0 and b = 0")
    gate_hints = [
        when(lambda got, want: np.max(np.abs(got)) > 5,
             "one of your outputs is far larger than every value entry of b (all within ±2.5): "
             "a gate entry of b (±30) has found its way into the output."),
        when(lambda got, want: np.allclose(got, 0, atol=ATOL),
             "your output is 0: with W = 0, only b can make it move, and yours does not."),
    ]
    for g, name, want, extra in [
            (30.0, "every gate wide open (+30)", c, [
                alternative(np.tanh(c), "your values come out squashed (a value of −2.5 gives "
                                        "−0.99): with the gate open, the unit should be linear "
                                        "in its values, the linear path of Dauphin et al. §3.")]),
            (-30.0, "every gate shut (−30)", np.zeros(h, np.float32), [
                alternative(-c, "a shut gate should block the value (output 0); yours flips its "
                                "sign instead, so your gate reaches −1, not 0, at −∞.")]),
            (0.0, "every gate at 0 (half open)", c / 2, [
                alternative(0 * c, "a gate at 0 should let half of each value through; yours "
                                   "lets none: your gate is 0, not 1/2, at 0.")])]:
        b = np.concatenate([c, np.full(h, g, np.float32)])
        inputs = {"y": y, "W": W, "b": b}
        expect_close(call(fn, inputs), want, inputs=inputs, rtol=RTOL, atol=ATOL,
                     what=f"GLU(y) with W = 0, values c = b[:{h}] and {name}",
                     hints=[*extra, *gate_hints])


@exercise("8.2", points=2, title="the gated linear unit",
          reference="Dauphin et al. 2017, eq. 1 (the gated linear unit); LRU App. D (the GLU "
                    "after the recurrence)",
          stronger_hint="read each probe as a question about the gate: wide open it must pass "
                        "the value unchanged, shut it must give 0, at 0 it must pass half. "
                        "Which function of g does that (Dauphin et al. eq. 1)? And which columns "
                        "of yW + b are the values: one contiguous half each, values first.")
def _(fn, rng):
    from lrnn import model
    for number, (lead, d_in, h) in enumerate([((), 3, 2), ((4,), 5, 3), ((2, 6), 4, 4)]):
        y = randn(rng, *lead, d_in)
        W = (randn(rng, d_in, 2 * h) / np.sqrt(d_in)).astype(np.float32)
        b = (0.5 * randn(rng, 2 * h)).astype(np.float32)
        if number == 0:
            _glu_probes(fn, y, h)
        inputs = {"y": y, "W": W, "b": b}
        got = call(fn, inputs)
        want = np.asarray(model.glu({"W": W, "b": b}, y))
        expect_close(got, want, inputs=inputs, rtol=RTOL, atol=ATOL, what="GLU(y)", hints=[
            alternative(lambda: np_glu(y, W, b, variant="swapped"),
                        "your output follows the last H columns of yW + b as values, and the "
                        "first H as gates."),
            alternative(lambda: np_glu(y, W, b, variant="interleaved"),
                        "your values and gates each take columns from both halves of yW + b."),
            alternative(lambda: np_glu(y, W, b, variant="no_sigmoid"),
                        "your output grows without bound with the gates: it is the product of "
                        "the two halves, with no gate between 0 and 1."),
            alternative(lambda: np_glu(y, W, b, variant="tanh"),
                        "your gates reach −1 for very negative inputs: a gate should lie "
                        "between 0 (shut) and 1 (open)."),
            alternative(lambda: np_glu(y, W, 0 * b),
                        "your output is what it would be with b = 0: it does not move with b."),
        ])


# ------------------------------------------------------------------------------------------
# 8.3 One residual block (find the bug): an idle branch and causality first, then the values
# ------------------------------------------------------------------------------------------

_SAME_GLU = " Does the block use your glu of 8.2, which passes its check?"
_BLOCK_HINTS = [
    ("post_norm", "each step of your output has the spread and mean that the norm's scale and "
                  "bias give, whatever the size of u: the stream is renormalised on its way "
                  "through the block."),
    ("residual_normed", "each step of your output has the spread and mean that the norm's scale "
                        "and bias give, whatever the size of u: the stream is renormalised on "
                        "its way through the block."),
    ("no_residual", "your output does not contain u: it is the branch alone."),
    ("time_axis", "the output at one step depends on later steps of u."),
    ("swapped", "your branch reads the GLU's last H columns as values and its first H as "
                "gates." + _SAME_GLU),
    ("no_sigmoid", "your GLU's gates are not between 0 and 1." + _SAME_GLU),
    ("no_gelu", "where the recurrence's output is strongly negative your GLU receives it "
                "unchanged; the model's receives nearly 0."),
    ("gelu_erf", "yours differs from the model's by 1e-4 to 1e-3 relative: far more than "
                 "float32 rounding, far less than any missing piece; the nonlinearity between "
                 "the recurrence and the GLU is not quite the model's (chapter 8, Figure 8.2)."),
    ("relu", "where the recurrence's output is slightly negative your GLU receives exactly 0; "
             "the model's receives a small negative number."),
    ("no_D", "your LRU layer's output at step k comes from its state alone: with C = 0 the "
             "model's would still carry v_k through to y_k, yours would be 0."),
    ("no_gamma", "your LRU layer's output does not change with γ_log, the model's does."),
    ("modulus", "the part of your LRU layer's output read from the state (all but the "
                "D ⊙ v_k term) is never negative; the model's is."),
]


def _block_probes(fn, p, u, got):
    """With the GLU's W = b = 0 the branch adds 0, so a residual block returns u itself; and a
    causal block's output at a step does not move when a later step of u changes."""
    idle = {**p, "glu": {"W": np.zeros_like(p["glu"]["W"]), "b": np.zeros_like(p["glu"]["b"])}}
    inputs = {"p": "p with the GLU's W and b at 0", "u": u}
    n = p["norm"]
    expect_close(call(fn, {"p": idle, "u": u}), u, inputs=inputs, rtol=RTOL, atol=ATOL,
                 what="the block's output with an idle branch (GLU W = 0, b = 0)", hints=[
                     alternative(lambda: np_layer_norm(u, n["scale"], n["bias"]),
                                 "a branch that adds 0 should leave u as it is; each step of "
                                 "yours comes out with the spread and mean that the norm's "
                                 "scale and bias give: the stream is renormalised on its way "
                                 "through the block."),
                     when(lambda got, want: np.allclose(got, 0, atol=ATOL),
                          "a branch that adds 0 should leave u as it is; yours returns 0: u "
                          "does not reach the output.")])
    length = u.shape[-2]
    if length > 2:
        k = length - 2
        changed = u.copy()
        changed[..., k:, :] += 2.0
        out = np.asarray(call(fn, {"p": p, "u": changed}))
        moved = [j for j in range(k) if not _same(out[..., j, :], got[..., j, :])]
        expect(not moved, f"the output at step(s) {moved} changed when only steps {k} and "
               f"later of u changed: the block's output depends on the future.",
               inputs={"p": p, "u": u, "u (later steps changed)": changed},
               expected=got[..., :k, :], received=out[..., :k, :])


@exercise("8.3", points=4, title="one residual LRU block",
          reference="LRU Fig. 1, App. A (the layer) and App. D (Norm–Recurrence–GLU–Skip); "
                    "chapter 2, eq. (2.1)",
          stronger_hint="read LRU App. D's sentence on post-norm: where does the norm sit, on "
                        "the skip path or on the branch, and which array does the skip carry "
                        "to the output? Then compare the nonlinearity between the recurrence "
                        "and the GLU with the one chapter 8, §8.3 says the model uses.")
def _(fn, rng):
    for number, (lead, length, h, n) in enumerate([((), 5, 2, 3), ((2,), 7, 3, 4),
                                                   ((3,), 1, 4, 2)]):
        p = random_block(rng, h, n)
        u = randn(rng, *lead, length, h)
        inputs = {"p": p, "u": u}
        got = as_array(call(fn, inputs), inputs=inputs, what="the block's output")
        if number == 0 and got.shape == u.shape:
            _block_probes(fn, p, u, got)
        want = reference_block(p, u)
        hints = [alternative(lambda v=v: np_block(p, u, v), m) for v, m in _BLOCK_HINTS
                 if not (v == "time_axis" and length == 1)]
        expect_close(got, want, inputs=inputs, rtol=RTOL, atol=ATOL, time_axis=-2,
                     what="the block's output", hints=hints)


# ------------------------------------------------------------------------------------------
# 8.4 The whole model, on a padded batch
# ------------------------------------------------------------------------------------------

def np_stream(params, x):
    """The residual stream after the last block, ``(..., L, H)``, in float64: ``np_model``
    before its pooling and decoder."""
    enc = params["encoder"]
    u = np.asarray(x, np.float64) @ enc["W"] + enc["b"]
    for p in params["blocks"]:
        u = np_block(p, u)
    return u


def np_padded_model(params, x, pool, lengths, variant=None):
    """The model's output when sequence ``b`` holds ``lengths[b]`` steps of ``x`` and padding
    after them, in float64, with one mistake of the pooling switched on (``variant``)."""
    dec = params["decoder"]
    n = np.asarray(lengths)[..., None]                  # (..., 1)
    steps = np.arange(np.shape(x)[-2])
    if variant == "zeroed_input":                       # the padding of x set to 0, L steps kept
        x = np.where((steps < n)[..., None], np.asarray(x, np.float64), 0.0)
        variant = "padded"
    u = np_stream(params, x)
    if pool == "last":
        at = {"padded": np.full_like(n, len(steps) - 1), "one_less": np.maximum(n - 2, 0),
              "one_more": np.minimum(n, len(steps) - 1)}.get(variant, n - 1)
        pooled = np.take_along_axis(u, at[..., None], axis=-2)[..., 0, :]
    else:
        keep = {"one_more": steps <= n, "one_less": steps < n - 1,
                "padded": steps < len(steps), "sum_all": steps < len(steps)}.get(variant,
                                                                                 steps < n)
        count = {"over_L": len(steps), "sum_all": n}.get(variant, keep.sum(-1, keepdims=True))
        with np.errstate(invalid="ignore", divide="ignore"):
            pooled = (u * keep[..., None]).sum(-2) / count
    return pooled @ dec["W"] + dec["b"]


def reference_padded(params, x, pool, lengths):
    """``lrnn.model.apply``'s outputs at every step (pool ``none``) on the padded batch, pooled
    in float64 over each sequence's own steps: the mean of its steps 0 … n − 1, or its step
    n − 1, for n = ``lengths[b]``. The model is causal and its decoder affine, so this is the
    library's output on each sequence without its padding (tests/test_check_exercises.py runs
    those one by one)."""
    per_step = reference_model(params, x, model_config(params, "none")).astype(np.float64)
    rows = per_step.reshape(-1, *per_step.shape[-2:])
    pooled = [row[:n].mean(0) if pool == "mean" else row[n - 1]
              for row, n in zip(rows, np.ravel(lengths))]
    return np.reshape(pooled, per_step.shape[:-2] + per_step.shape[-1:]).astype(np.float32)


_PADDED_HINTS = {
    "mean": [("padded", "your mean counts the padding steps: whatever fills them changes your "
                        "output, and a sequence's mean must run over its own steps only."),
             ("over_L", "your mean skips the padding but divides by L: the sum over a "
                        "sequence's own steps must be divided by its own length."),
             ("sum_all", "your sum takes in the padding steps, though you divide by each "
                         "sequence's own length."),
             ("one_more", "your mean takes in the first padding step after each sequence's "
                          "end."),
             ("one_less", "your mean leaves out each sequence's last real step."),
             ("zeroed_input", "you set the padding of x to 0, but the padded steps still reach "
                              "the mean: a zero input does not give a zero stream (the "
                              "encoder's bias, the blocks).")],
    "last": [("padded", "your output is read at step L, inside the padding: read each "
                        "sequence at its own last step."),
             ("one_less", "your output is read one step before each sequence's last step."),
             ("one_more", "your output is read at the first padding step after each "
                          "sequence's end."),
             ("zeroed_input", "you set the padding of x to 0 and read step L: a zero input "
                              "does not give a zero stream, and step L is not the sequence's "
                              "last.")],
}


@exercise("8.4", points=3, title="the deep LRU model on a padded batch",
          reference="LRU Fig. 1 and App. D (linear encoder, residual blocks, pooling over time, "
                    "linear decoder); chapter 8, §8.4 (the mean over the padding)",
          stronger_hint="the blocks need no change: every piece of a block is causal (the norm "
                        "and the GLU act on one step, the scan runs forwards), so the padding, "
                        "which comes after a sequence's last step, cannot reach its real steps. "
                        "Only the pooling needs lengths: a mask of shape (..., L), true where the "
                        "step index is below the sequence's length; the mean is the masked sum "
                        "over the steps divided by each sequence's own length, and 'last' reads "
                        "the step at index length − 1. lengths=None means all L steps.")
def _(fn, rng):
    # The padded cases share the shapes of the last unpadded one (one more compilation: the
    # library's per-step outputs).
    cases = [(2, 3, 2, 1, 1, "mean", (), 6, None), (2, 4, 3, 2, 1, "last", (3,), 5, None),
             (3, 3, 2, 2, 4, "mean", (3,), 5, None), (3, 3, 2, 2, 4, "mean", (3,), 5, [1, 5, 3]),
             (3, 3, 2, 2, 4, "last", (3,), 5, [4, 2, 5])]
    for d_in, h, n, depth, d_out, pool, lead, length, lengths in cases:
        params = random_model(rng, d_in, h, n, depth, d_out)
        x = randn(rng, *lead, length, d_in)
        if lengths is None:
            inputs = {"params": params, "x": x, "pool": pool}
            got = call(fn, inputs)
            want = reference_model(params, x, pool)
            variants = [("swap_pool", "wrong pooling: 'mean' averages over time (axis −2), "
                                      "'last' takes the last step."),
                        ("no_encoder_bias", "the encoder's bias is missing: u = x W_enc + "
                                            "b_enc."),
                        ("post_norm", "each block hands on a renormalised stream: every time "
                                      "step of its output has the spread and mean that the "
                                      "block's norm scale and bias give, whatever the size of "
                                      "its input. Does your model use your lru_block of 8.3, "
                                      "which passes its check?"),
                        ("final_norm", "there is no normalisation after the last block: the "
                                       "pooled residual stream goes straight to the decoder.")]
            if depth > 1:
                variants += [("reversed", "the blocks run in reverse order: params['blocks'][0] "
                                          "comes first."),
                             ("first_block_only", "every block uses the first block's "
                                                  "parameters: block i uses "
                                                  "params['blocks'][i].")]
            expect_close(got, want, inputs=inputs, rtol=RTOL, atol=ATOL,
                         what="the model's output (lengths=None: every step counts)",
                         hints=[alternative(lambda v=v: np_model(params, x, pool, v), m)
                                for v, m in variants])
            continue
        lengths = np.array(lengths)
        steps = np.arange(length)
        padding = (steps >= lengths[:, None])[..., None]          # garbage where True
        x = np.where(padding, 25.0 + 5.0 * randn(rng, *x.shape), x).astype(np.float32)
        inputs = {"params": params, "x": x, "pool": pool, "lengths": lengths}
        got = call(fn, inputs)
        want = reference_padded(params, x, pool, lengths)
        expect_close(got, want, inputs=inputs, rtol=RTOL, atol=ATOL,
                     what=f"the model's output on a padded batch (lengths {lengths.tolist()} of "
                          f"L = {length}; the padding holds values near 25)",
                     hints=[alternative(lambda v=v: np_padded_model(params, x, pool, lengths,
                                                                    v), m)
                            for v, m in _PADDED_HINTS[pool]])


# ------------------------------------------------------------------------------------------
# 8.5 Which parameters are recurrent
# ------------------------------------------------------------------------------------------

def _flatten(tree, prefix=""):
    if isinstance(tree, dict):
        out = {}
        for k, v in tree.items():
            out.update(_flatten(v, f"{prefix}[{k!r}]"))
        return out
    if isinstance(tree, (list, tuple)):
        out = {}
        for i, v in enumerate(tree):
            out.update(_flatten(v, f"{prefix}[{i}]"))
        return out
    return {prefix: tree}


#: The layers of 8.5's parameter dicts: (registry name, init options, shown as).
_MASK_LAYERS = {
    "lru": ("lru", {}, "LRU"),
    "rotrnn": ("rotrnn", {"n_heads": 1, "bidirectional": True}, "RotRNN, bidirectional"),
    "ornn": ("ornn", {"learn_h0": True}, "oRNN, m = n reflections, learned h0"),
    "ornn_m2": ("ornn", {"n_reflections": 2}, "oRNN, m = 2 reflections"),
}
#: The stacks 8.5 checks, one list of block layers each: every layer, then a hybrid stack. (The
#: gated cells are left out: there a bias, the forget gate's b_f, sets the decay of the cell
#: state, so "A and B" of LRU App. D does not say on its own what to exempt.)
_MASK_STACKS = [["lru"], ["rotrnn", "rotrnn"], ["ornn"], ["lru", "ornn_m2", "rotrnn"]]


@functools.cache
def _layer_shapes(name, h, n):
    """``{parameter: shape}`` of the library layer ``name`` of ``_MASK_LAYERS`` (traced by
    ``jax.eval_shape``: nothing is computed)."""
    import jax
    from lrnn import layers
    kind, options, _ = _MASK_LAYERS[name]
    init = layers.get(kind).init
    shapes = jax.eval_shape(lambda key: init(key, h, n, **options), jax.random.PRNGKey(0))
    return {k: tuple(v.shape) for k, v in shapes.items()}


def random_stack(rng, names, d_in=2, h=4, n=4, d_out=1):
    """A model dict with ``lrnn.model.init``'s layout whose block ``i`` holds a layer of kind
    ``names[i]`` (a hybrid stack when they differ), random float32 values."""
    def fill(shapes):
        return {k: randn(rng, *s) for k, s in shapes.items()}
    blocks = []
    for name in names:
        layer = fill(_layer_shapes(name, h, n))
        width = h if _MASK_LAYERS[name][0] in ("lru", "rotrnn") else n
        blocks.append({"norm": fill({"scale": (h,), "bias": (h,)}), "layer": layer,
                       "glu": fill({"W": (width, 2 * h), "b": (2 * h,)})})
    return {"encoder": fill({"W": (d_in, h), "b": (h,)}), "blocks": blocks,
            "decoder": fill({"W": (h, d_out), "b": (d_out,)})}


def reference_mask(params, names):
    """What ``lrnn.training.train`` exempts, block by block: ``lrnn.model.recurrent_mask`` of
    each block on its own, with the config of its layer."""
    import jax
    from lrnn import model
    blocks = []
    for block, name in zip(params["blocks"], names):
        kind, options, _ = _MASK_LAYERS[name]
        cfg = model.ModelConfig(layer=kind, d_input=1, depth=1, pool="mean",
                                bidirectional=bool(options.get("bidirectional", False)))
        one = {"encoder": params["encoder"], "blocks": [block], "decoder": params["decoder"]}
        blocks.append(model.recurrent_mask(one, cfg)["blocks"][0])
    outside = {k: v for k, v in params.items() if k != "blocks"}
    return {**jax.tree_util.tree_map(lambda _: False, outside), "blocks": blocks}


#: What exempting (True) or decaying (False) a parameter wrongly does: (the layer kinds, the
#: parameter names, the message).
_EXEMPT_WRONGLY = [
    (None, {"C", "C_re", "C_im", "C_rev", "D"},
     "your mask exempts the layer's read-out or skip ({names}) from weight decay: they map the "
     "state to the output after the recurrence has run, as the decoder does."),
    (None, {"b"},
     "your mask exempts the oRNN's bias b from weight decay: in h_t = φ(W h_{{t−1}} + V x_t + "
     "b), is b a map applied to the state, or to the input?"),
    (None, {"h0"},
     "your mask exempts the learned initial state h0: it is where the recurrence starts, not "
     "a map the recurrence applies at every step."),
]
_DECAYED_WRONGLY = [
    ({"lru"}, {"nu_log", "theta_log"},
     "your mask decays ν_log or θ_log of the LRU ({names}): decay pulls ν_log to 0, so |λ| to "
     "e^(−1) ≈ 0.37, and long memories fade; A = diag(λ) lives in these two arrays."),
    ({"lru"}, {"B_re", "B_im", "gamma_log"},
     "your mask decays the LRU's input path ({names}): x_k = λ ⊙ x_{{k−1}} + γ ⊙ (B u_k), and "
     "App. D exempts B with A, and γ where there is one."),
    ({"rotrnn"}, {"M", "theta", "nu_log", "B"},
     "your mask decays part of the RotRNN's recurrence ({names}): A = γ P D(θ) Pᵀ with P = "
     "expm(M − Mᵀ) and γ = exp(−exp(ν_log)), and its input map is B (RotRNN eq. 6); decay "
     "would pull P towards I and γ towards e^(−1) ≈ 0.37."),
    ({"ornn"}, {"U", "u1", "V"},
     "your mask decays part of the oRNN's recurrence ({names}): its transition W is the "
     "product of the reflections in U (and u1's sign), its input map V (oRNN eq. 1)."),
]


def _mask_hint(wrong, flat_want, names):
    """The hint for the wrongly marked arrays ``wrong`` (flattened paths) of the stack whose
    block ``i`` holds a layer of kind ``names[i]``."""
    import re
    if any("['layer']" not in k for k in wrong):
        return ("only the recurrent layer's parameters can be exempt: the norm, GLU, encoder "
                "and decoder are ordinary weights, with weight decay.")
    marked = []                              # (layer kind, parameter name, should be exempt)
    for k in wrong:
        block, name = re.fullmatch(r"\['blocks'\]\[(\d+)\]\['layer'\]\['(\w+)'\]", k).groups()
        marked.append((_MASK_LAYERS[names[int(block)]][0], name, bool(flat_want[k])))
    for table, exempt in ((_EXEMPT_WRONGLY, False), (_DECAYED_WRONGLY, True)):
        for kinds, keys, message in table:
            hit = sorted({n for kind, n, want in marked if want == exempt and n in keys
                          and (kinds is None or kind in kinds)})
            if hit:
                return message.format(names=", ".join(hit))
    return None


def _describe_stack(params, names):
    return {f"params['blocks'][{i}]['layer']": f"{_MASK_LAYERS[name][2]}: "
            + ", ".join(sorted(block["layer"])) for i, (block, name)
            in enumerate(zip(params["blocks"], names))}


@exercise("8.5", points=2, title="no weight decay on the recurrence, whatever the layer",
          reference="LRU App. D (weight decay on all parameters except A and B, and γ and Δ "
                    "where applicable); RotRNN eq. 6 and App. B; oRNN eqs. 1, 7–9",
          stronger_hint="write each layer's step as x_t = A x_{t−1} + B u_t and ask of every "
                        "array of params['blocks'][i]['layer']: is it A (or what A is built "
                        "from: a decay, a phase, a rotation, a reflection), B (or the gain on "
                        "it), or something else: a read-out or skip after the recurrence, a bias "
                        "(an offset, neither A nor B), an initial state? Only the first two are "
                        "exempt; the decision goes by the array's name, block by block, and "
                        "everything outside the layers is decayed.")
def _(fn, rng):
    for names in _MASK_STACKS:
        params = random_stack(rng, names)
        inputs = {"params": f"a model of {len(names)} block(s) with lrnn.model.init's layout",
                  **_describe_stack(params, names)}
        got = call(fn, {"params": params})
        want = reference_mask(params, names)
        expect(isinstance(got, dict), "return a dict shaped like params (a mask: True or False "
               "per parameter array).", inputs=inputs, received=got)
        flat_got, flat_want = _flatten(got), _flatten(want)
        expect(set(flat_got) == set(flat_want),
               "the mask must have the structure of params: the same keys and lists, one "
               "True/False per parameter array.", inputs=inputs,
               detail=f"missing: {sorted(set(flat_want) - set(flat_got))[:4]}; extra: "
                      f"{sorted(set(flat_got) - set(flat_want))[:4]}")
        wrong = [k for k in flat_want if bool(np.asarray(flat_got[k])) != bool(flat_want[k])]
        if wrong:
            expect(False, f"wrong mask for {len(wrong)} of {len(flat_want)} parameter arrays.",
                   inputs=inputs, hint=_mask_hint(wrong, flat_want, names),
                   detail=f"first: params{wrong[0]} is "
                          f"{'decayed' if flat_want[wrong[0]] else 'exempt'} in yours")


# ------------------------------------------------------------------------------------------
# 8.6 The training loop
# ------------------------------------------------------------------------------------------

#: What a loop may get wrong, as the reference run with that one change (for hints).
_LOOP_HINTS = [
    ("decay_everywhere", "the recurrent parameters got weight decay: the optimiser of the "
                         "parameters your no_decay_mask marks True has weight_decay=0."),
    ("no_lr_factor", "the recurrent parameters need the learning rate lr · lr_factor (their "
                     "own schedule, peak lr · lr_factor)."),
    ("no_warmup", "the schedule starts with a linear warm-up from 1e-7 to the peak over "
                  "int(warmup_frac · S) steps (optax.warmup_cosine_decay_schedule)."),
    ("constant_lr", "the learning rate follows a schedule (warm-up, then cosine decay to "
                    "1e-7 at step S), not a constant."),
    ("after_update", "record each step's loss on its batch before the update (the loss that "
                     "value_and_grad returns), not after it."),
    ("no_decay", "the regular parameters need AdamW's weight decay (weight_decay), not Adam "
                 "without it."),
]


def reference_training(params, xs, ys, pool, opt, variant=None):
    """``(trained parameters, losses)`` of ``lrnn.training.train``'s step on the batches
    ``(xs[s], ys[s])``: its optimiser (``train.make_optimizer`` with
    ``lrnn.model.recurrent_mask``), ``lrnn.model.apply`` and its regression loss, from
    ``params``; ``variant`` makes one mistake of _LOOP_HINTS."""
    import dataclasses

    import jax
    import optax
    from lrnn import model
    from lrnn.training import train
    cfg = model_config(params, pool)
    state = {"blocks": [{} for _ in params["blocks"]]}
    steps = len(xs)
    tcfg = train.TrainConfig(task="adding", steps=steps, lr=float(opt["lr"]),
                             lr_factor=float(opt["lr_factor"]),
                             weight_decay=float(opt["weight_decay"]),
                             warmup_frac=float(opt["warmup_frac"]))
    mask = model.recurrent_mask(params, cfg)
    labels = jax.tree_util.tree_map(lambda m: "recurrent" if m else "regular", mask)

    def two_groups(regular_rate, recurrent_rate, recurrent_decay):
        return optax.multi_transform(
            {"regular": optax.adamw(regular_rate, weight_decay=tcfg.weight_decay),
             "recurrent": optax.adamw(recurrent_rate, weight_decay=recurrent_decay)}, labels)

    if variant == "decay_everywhere":
        tx = two_groups(train.schedule(tcfg.lr, steps, tcfg.warmup_frac),
                        train.schedule(tcfg.lr * tcfg.lr_factor, steps, tcfg.warmup_frac),
                        tcfg.weight_decay)
    elif variant == "constant_lr":
        tx = two_groups(tcfg.lr, tcfg.lr * tcfg.lr_factor, 0.0)
    else:
        change = {"no_lr_factor": {"lr_factor": 1.0}, "no_warmup": {"warmup_frac": 0.0},
                  "no_decay": {"weight_decay": 0.0}}.get(variant, {})
        tx = train.make_optimizer(dataclasses.replace(tcfg, **change), mask)

    def loss(p, x, y):
        return train.loss_and_metric(model.apply(p, state, x, cfg)[0], y, "regression")[0]

    @jax.jit
    def step(p, opt_state, x, y):
        value, grads = jax.value_and_grad(loss)(p, x, y)
        updates, opt_state = tx.update(grads, opt_state, p)
        p = optax.apply_updates(p, updates)
        return p, opt_state, loss(p, x, y) if variant == "after_update" else value

    p, opt_state, losses = params, tx.init(params), []
    for x, y in zip(xs, ys):
        p, opt_state, value = step(p, opt_state, x, y)
        losses.append(value)
    return jax.device_get(p), np.asarray(jax.device_get(losses), np.float32)


@exercise("8.6", points=4, title="your training loop",
          reference="LRU App. D (AdamW, warm-up and cosine decay, no weight decay and a "
                    "learning-rate factor on the recurrence); chapter 8, §8.6",
          stronger_hint="two optimisers, one per group of your 8.5 mask: both AdamW whose "
                        "learning rate warms up from 1e-7 to its peak over the first warmup_frac "
                        "of the steps and then decays along a cosine back to 1e-7; the regular "
                        "group peaks at lr with the weight decay, the recurrent group at lr times "
                        "lr_factor with none. Then one compiled step per batch, in order: the "
                        "loss and its gradient at the current parameters, then the update; keep "
                        "every step's loss.")
def _(fn, rng):
    # One case: each call of a loop compiles its step anew, so a second shape would double
    # the time; the hidden tests add another seed.
    d_in, h, n, depth, pool, steps, batch, length = 2, 4, 3, 2, "last", 8, 3, 6
    params = random_model(rng, d_in, h, n, depth, 1)
    xs = randn(rng, steps, batch, length, d_in)
    ys = randn(rng, steps, batch)
    opt = {"lr": float(rng.uniform(2e-3, 8e-3)), "lr_factor": 0.5, "weight_decay": 0.1,
           "warmup_frac": 0.25}
    inputs = {"params": "parameters with lrnn.model.init's layout (depth 2, H = 4, N = 3)",
              "xs": xs, "ys": ys, "pool": pool, "opt": opt}
    got_params, got = _pair(call(fn, {"params": params, "xs": xs, "ys": ys, "pool": pool,
                                      "opt": opt}), inputs, "params, losses")
    want_params, want = reference_training(params, xs, ys, pool, opt)
    expect_close(got, want, inputs=inputs, rtol=RTOL, atol=ATOL,
                 what=f"the {steps} training losses", hints=[
                     alternative(lambda v=v: reference_training(params, xs, ys, pool, opt, v)[1],
                                 m) for v, m in _LOOP_HINTS])
    flat_got, flat_want, before = _flatten(got_params), _flatten(want_params), _flatten(params)
    expect(set(flat_got) == set(flat_want), "the trained parameters must have the structure of "
           "params: the same keys and lists.", inputs=inputs,
           detail=f"missing: {sorted(set(flat_want) - set(flat_got))[:4]}; extra: "
                  f"{sorted(set(flat_got) - set(flat_want))[:4]}")
    for name in sorted(flat_want):
        expect_close(flat_got[name], flat_want[name], inputs=inputs, rtol=RTOL, atol=ATOL,
                     what=f"the trained parameter params{name} after {steps} steps", hints=[
                         when(lambda got, want, initial=before[name]: np.allclose(got, initial),
                              "this is the parameter before training: return the parameters "
                              "after the last update.")])


# ------------------------------------------------------------------------------------------
# 8.8 k steps of the LRU layer with the input held, in one shot
# ------------------------------------------------------------------------------------------

def affine_power(a, c, k):
    """``(a_k, c_k)`` with ``x ↦ a x + c`` applied ``k`` times equal to ``x ↦ a_k x + c_k``,
    elementwise: binary powers of the map (the map composed with itself is ``x ↦ a² x + (a c +
    c)``), so ``O(log k)`` compositions, in the precision of ``a`` and ``c``."""
    acc_a, acc_c = np.ones_like(a), np.zeros_like(c)
    sq_a, sq_c = a, c
    k = int(k)
    while k:
        if k & 1:                     # powers of one map commute: the order does not matter
            acc_a, acc_c = sq_a * acc_a, sq_a * acc_c + sq_c
        sq_a, sq_c = sq_a * sq_a, sq_a * sq_c + sq_c
        k >>= 1
    return acc_a, acc_c


def np_lru_hold(q, x, v, k, *, variant=None):
    """``(x_k, y_k)`` in float64 after ``k`` steps from ``x`` with the input ``v`` held (LRU
    eq. 3 with Λ = diag(λ), §3.3–§3.4), from ``affine_power``; ``variant`` makes one mistake."""
    lam = np.exp(-np.exp(np.float64(q["nu_log"])) + 1j * np.exp(np.float64(q["theta_log"])))
    if variant == "conjugate":
        lam = np.conj(lam)
    gain = np.exp(np.float64(q["gamma_log"]) * (variant != "no_gamma"))
    b = (np.float64(q["B_re"]) + 1j * np.float64(q["B_im"])) * gain[:, None]
    x = np.asarray(x, np.complex128)
    v = np.asarray(v, np.float64)
    c = v @ b.T

    def state(steps_x, steps_v):
        return affine_power(lam, c, steps_x)[0] * x + affine_power(lam, c, steps_v)[1]
    x_k = {"one_more": lambda: state(k, k + 1), "one_less": lambda: state(k, k - 1),
           "x_late": lambda: state(k - 1, k), "no_x": lambda: state(k, k) - lam ** k * x,
           "linear": lambda: affine_power(lam, c, k)[0] * x + k * c,
           "steady": lambda: np.broadcast_to(c / (1 - lam), x.shape)}.get(
        variant, lambda: state(k, k))()
    read = state(k - 1, k - 1) if variant == "read_before" else x_k
    cx = read @ (np.float64(q["C_re"]) + 1j * np.float64(q["C_im"])).T
    y = (np.abs(cx) if variant == "modulus" else cx.real) + (0.0 if variant == "no_D"
                                                             else np.float64(q["D"]) * v)
    return x_k, y


_HOLD_STATE_HINTS = [
    ("no_x", "your x_k does not change with the state x you start from: x must decay into x_k "
             "too."),
    ("steady", "your x_k is the state that infinitely many steps of v would reach, whatever x "
               "and k."),
    ("one_more", "with x = 0 yours would be the state after k + 1 steps of v: the held input "
                 "entered once too often."),
    ("one_less", "with x = 0 yours would be the state after k − 1 steps of v: the held input "
                 "entered once too few."),
    ("x_late", "the share of the starting state x in yours has decayed over k − 1 steps, not "
               "k."),
    ("linear", "the held input's share in yours grows in proportion to k: none of the k inputs "
               "has faded by step k."),
    ("no_gamma", "the held input's share in yours is 1/γ times too large, state by state: as if "
                 "γ = 1."),
    ("conjugate", "your state turns the other way round: its phases go as those of conj(λ)."),
]
_HOLD_OUTPUT_HINTS = [
    ("read_before", "your y_k is read from the state one step earlier, x_{k−1}."),
    ("modulus", "the part of your y_k read from the state (all but D ⊙ v) is never negative; "
                "the layer's is."),
    ("no_D", "your y_k comes from the state alone: with C = 0 the layer's would still carry v "
             "through to y_k, yours would be 0."),
]


#: How long one case of Exercise 8.8 may take: the closed form needs milliseconds, a loop over
#: k = 10^9 steps hours.
HOLD_SECONDS = 20.0


@exercise("8.8", points=3, title="k steps of the LRU layer in one shot",
          reference="LRU eq. 3 with Λ = diag(λ) and §3.3–§3.4 (λ, γ); chapter 8, §8.7 (state "
                    "in, state out)",
          stronger_hint="unroll the step with c = γ ⊙ (B v) held fixed: x_1 = λx + c, x_2 = λ²x "
                        "+ λc + c, …, so x_k = λ^k ⊙ x + (1 + λ + … + λ^(k−1)) ⊙ c, state by "
                        "state. The sum is geometric and |λ| < 1, so it has a closed form; "
                        "λ^k = exp(k (−e^(ν_log) + i e^(θ_log))). Then y_k = Re(C x_k) + D ⊙ v.")
def _(fn, rng):
    cases = [((), 2, 3, 1, 1.0), ((2,), 3, 4, 7, 0.0), ((3,), 4, 2, 5, 1.0),
             ((2, 2), 1, 5, 40, 1.0), ((2,), 3, 4, 10 ** 9, 1.0)]
    for lead, h, n, k, scale in cases:
        q = random_params(rng, h, n)
        x = (randn(rng, *lead, n) + 1j * randn(rng, *lead, n)).astype(np.complex64)
        v = (scale * randn(rng, *lead, h)).astype(np.float32)
        inputs = {"q": q, "x": x, "v": v, "k": k}
        answer = call_within(HOLD_SECONDS, fn, inputs, what=f"x_k, y_k for k = {k:,}",
                             hint=f"no loop steps {k:,} times in a check: x_k has a closed form "
                                  "in k that costs as little at k = 10^9 as at k = 3.")
        got_x, got_y = _pair(answer, inputs, "x_k, y_k")
        if k <= 100:                  # the layer's own step, k times
            state, y = {"x": x}, None
            for _ in range(k):
                state, y = _compiled("lru.step")(q, state["x"], v)
            want_x, want_y = np.asarray(state["x"]), np.asarray(y)
        else:                         # no loop could step 10^9 times
            want_x, want_y = (w.astype(d) for w, d in zip(np_lru_hold(q, x, v, k),
                                                          (np.complex64, np.float32)))
        said = (" (v = 0: the state only decays and turns)" if scale == 0 else
                f" after {k:,} steps" if k > 100 else "")
        hints = {name: np_lru_hold(q, x, v, k, variant=name)
                 for name, _ in _HOLD_STATE_HINTS + _HOLD_OUTPUT_HINTS}
        # a mistake that gives this case's answer anyway (λ^k = 0 at k = 10^9) says nothing
        shows = lambda wrong, right: not np.allclose(wrong, right, rtol=10 * RTOL,  # noqa: E731
                                                     atol=10 * ATOL)
        expect_close(got_x, want_x, inputs=inputs, rtol=RTOL, atol=ATOL, dtype="complex",
                     what="the state x_k" + said, hints=[
                         alternative(hints[name][0], m) for name, m in _HOLD_STATE_HINTS
                         if shows(hints[name][0], want_x)])
        expect_close(got_y, want_y, inputs=inputs, rtol=RTOL, atol=ATOL,
                     what="the output y_k" + said, hints=[
                         alternative(hints[name][1], m) for name, m in _HOLD_OUTPUT_HINTS
                         if shows(hints[name][1], want_y)])


# ------------------------------------------------------------------------------------------
# 8.9 An exponentially weighted mean pooling, online
# ------------------------------------------------------------------------------------------

def _numbers_in(value) -> int:
    """How many numbers a plain-data value holds (arrays by size, containers summed)."""
    if value is None:
        return 0
    if isinstance(value, dict):
        return sum(_numbers_in(v) for v in value.values())
    if isinstance(value, (list, tuple)):
        return sum(_numbers_in(v) for v in value)
    return int(np.size(value))


def weighted_prefix_means(per_step, ends, w):
    """For each ``end``: Σ_t w^(end−1−t) y_t / Σ_t w^(end−1−t) over the steps t < end of
    ``per_step`` (B, L, d), in float64, straight from the definition (no carried sum)."""
    per_step = np.asarray(per_step, np.float64)
    out = []
    for end in ends:
        weights = np.float64(w) ** np.arange(end - 1, -1, -1)
        out.append(np.einsum("t,btd->bd", weights, per_step[:, :end]) / weights.sum())
    return out


def np_weighted_chunks(per_step, lengths, w, variant=None):
    """The output after each chunk of ``lengths``, a weighted sum and its weights carried from
    chunk to chunk in float64, with one mistake switched on (``variant``)."""
    per_step = np.asarray(per_step, np.float64)
    total, weight, seen, out = 0.0, 0.0, 0, []
    for n in lengths:
        chunk = per_step[:, seen:seen + n]
        seen += n
        ages = np.float64(w) ** np.arange(n - 1, -1, -1)
        if variant == "reversed":
            ages = ages[::-1]
        if variant == "latest_chunk":
            total, weight = 0.0, 0.0
        aged = {"no_age": 1.0, "age_once": np.float64(w)}.get(variant, np.float64(w) ** n)
        total = aged * total + np.einsum("t,btd->bd", ages, chunk)
        weight = aged * weight + ages.sum()
        norm = {"count": seen, "endless": 1 / (1 - w) if w < 1 else seen}.get(variant, weight)
        out.append(total / norm)
    return out


_WEIGHTED_HINTS = [
    ("no_age", "the steps of earlier chunks do not fade as new chunks arrive: what you carry "
               "from one chunk to the next must age with every step of the new chunk."),
    ("age_once", "what you carry from earlier chunks ages by one step per chunk, not by one "
                 "step per step of the new chunk."),
    ("reversed", "within each chunk your oldest step weighs most: a step's weight falls with "
                 "its age, counted back from the latest step."),
    ("count", "your weights do not add up to 1: you divided the weighted sum by the number of "
              "steps."),
    ("endless", "your output is too small early in the stream and catches up only after many "
                "steps: you divided by what the weights add up to on an endless stream, not by "
                "what the weights of the steps so far add up to."),
    ("latest_chunk", "this is the weighted mean over the latest chunk only: the output pools "
                     "every step so far."),
]


@exercise("8.9", points=3, title="an exponentially weighted mean, online, by chunks",
          reference="LRU Fig. 1 and App. D (pooling over time before a linear decoder); LRU eq. "
                    "3 with Λ = w I, B = I (the weighted sum is a linear recurrence); chapter "
                    "8, §8.7 (apply with a carry, chunk by chunk)",
          stronger_hint="write the pooled vector as S_L / Z_L with S_L = Σ_t w^(L−t) y_t and "
                        "Z_L = Σ_t w^(L−t): both obey x_t = w x_(t−1) + (y_t or 1). Over a chunk "
                        "of n steps, what you carried ages by w^n and the chunk's j-th step "
                        "(j = 0 … n−1) enters with w^(n−1−j). Keep the model's carry, S and Z; "
                        "add Z up as a sum (its closed form divides by 1 − w, 0 at w = 1). "
                        "Because the weights S/Z uses add up to 1, the affine decoder can come "
                        "before the pooling: pool the outputs of pool 'none'.")
def _(fn, rng):
    import dataclasses

    from lrnn import model
    # Every case shares its widths, and every chunk holds 1, 2 or 3 steps (few compilations);
    # each chunking of a case runs over the same stream.
    cases = [(1, 0.7, [[3, 3, 1], [1] * 7]), (2, 1.0, [[3, 1, 3], [2, 2, 2, 1]]),
             (2, 0.9, [[2, 3, 2]])]
    d_in, h, n_state, length = 2, 4, 3, 7
    for depth, w, chunkings in cases:
        params = random_model(rng, d_in, h, n_state, depth, 2)
        cfg = model_config(params, "mean")
        state = {"blocks": [{} for _ in params["blocks"]]}
        x = randn(rng, 2, length, d_in)
        none = dataclasses.replace(cfg, pool="none")
        per_step = reference_model(params, x, none, state).astype(np.float64)
        described = {"params": "parameters with lrnn.model.init's layout", "state": "its state",
                     "cfg": f"ModelConfig(layer='lru', d_input={d_in}, depth={depth}, "
                            f"d_model={h}, d_state={n_state}, pool='mean')", "w": w}
        for lengths in chunkings:
            ends = np.cumsum(lengths)
            memory, got, sizes = None, [], []
            for k, (end, size) in enumerate(zip(ends, lengths)):
                chunk = x[:, end - size:end]
                inputs = {**described, "memory": "None (the first chunk)" if k == 0 else
                          f"what your function returned for chunk {k}", "chunk": chunk}
                pair = call(fn, {"params": params, "state": state, "cfg": cfg, "w": w,
                                 "memory": memory, "chunk": chunk})
                memory, mean = _pair(pair, inputs, "memory, mean")
                got.append(mean)
                sizes.append(_numbers_in(memory))
            grown = [k for k in range(2, len(sizes)) if sizes[k] > sizes[1]]
            expect(not grown, f"the memory grows with the stream: {sizes[1]} numbers after "
                   f"chunk 2, {sizes[grown[0]] if grown else 0} after chunk "
                   f"{grown[0] + 1 if grown else 0}. Online, the memory holds what the next "
                   "chunk needs, the same amount at every step.", inputs=described,
                   hint="keep the model's carry and a fixed number of sums: not the chunks, "
                        "nor the outputs of every step.")
            exact = weighted_prefix_means(per_step, ends, w)
            want = [m.astype(np.float32) for m in exact]
            if w == 1:                # the whole stream: the library's own mean pooling
                want[-1] = reference_model(params, x, cfg, state)
            wrong = {v: np_weighted_chunks(per_step, lengths, w, v)
                     for v, _ in _WEIGHTED_HINTS}

            def fresh(end, lengths=lengths, ends=ends):
                outs = [reference_model(params, x[:, e - k:e], none, state)
                        for e, k in zip(ends, lengths) if e <= end]
                return weighted_prefix_means(np.concatenate(outs, axis=-2), [end], w)[0]
            for k, (g, want_k) in enumerate(zip(got, want)):
                end = ends[k]
                hints = [alternative(lambda end=end: fresh(end),
                                     "every chunk started from a zero state: pass the carry "
                                     "that the previous chunk returned.")]
                if w == 1:
                    hints.append(when(lambda got, want: not np.isfinite(got).all(),
                                      "at w = 1 your output is not finite: a closed form for "
                                      "the sum of the weights that divides by 1 − w breaks "
                                      "there."))
                if w < 1:
                    hints.append(alternative(lambda end=end: weighted_prefix_means(
                        per_step, [end], 1.0)[0], "every step of yours weighs the same, as at "
                                                  "w = 1: a step t steps back should count w^t "
                                                  "as much as the latest."))
                hints += [alternative(wrong[v][k], m) for v, m in _WEIGHTED_HINTS   # those that
                          if not np.allclose(wrong[v][k], exact[k], rtol=RTOL, atol=ATOL)]  # show
                hints.append(alternative(per_step[:, end - 1],
                                         "this is the output at the latest step alone."))
                expect_close(g, want_k, inputs={**described, "chunks": f"{k + 1} of lengths "
                                                                       f"{lengths[:k + 1]}"},
                             rtol=RTOL, atol=ATOL,
                             what=f"the output after chunk {k + 1} (steps 1 to {end}, w = {w})",
                             hints=hints)


# ---------------------------------------------------------------------------------------------
# Predict, then run
# ---------------------------------------------------------------------------------------------

CARRY_LAYER, CARRY_DEPTH, CARRY_STATE, CARRY_WIDTH = "rotlstm", 3, 96, 256
CARRY_BATCH, CARRY_STEPS = 16, 10_000


@exercise("8.10", points=1, kind="value",
          title="predict: the bytes a deep RotLSTM keeps between steps",
          reference="RotLSTM eqs. 3–10 (the cell's step: what it reads of step t − 1); chapter "
                    "8, §8.7 (state in, state out)",
          stronger_hint="List what the cell's step at t reads from step t − 1 and cannot "
                        "compute from x_t: the gates act on [h_{t−1}, x_t], the new cell state "
                        "starts from c_{t−1}, and h_t = o_t ⊙ tanh(c_t) needs o_t, which only "
                        "h_{t−1} and x_t give. The rotation angles are recomputed at every step. "
                        "That, per block and per sequence, in float32 (4 bytes), is the carry; "
                        "the width H and the steps already seen do not enter it.")
def _(value, rng):
    per_block = 2 * CARRY_STATE                        # h_t and c_t, d_state floats each
    want = CARRY_DEPTH * CARRY_BATCH * per_block * 4
    expect_prediction(value, want, what="the carry's bytes", hints=[
        alternative(want // 2, "the step reads two vectors of step t − 1: its gates act on "
                               "[h_{t−1}, x_t], and the new cell state starts from c_{t−1}; "
                               "neither can be computed from the other."),
        alternative(want * 2, "the carry holds real float32 numbers (4 bytes each), and only "
                              "what the next step reads: the four gates are recomputed at "
                              "every step."),
        alternative(want + CARRY_DEPTH * CARRY_BATCH * (CARRY_STATE // 2) * 4,
                    "the rotation angles 2π σ(W_rot [h_{t−1}, x_t] + b_rot) are recomputed at "
                    "every step (RotLSTM eq. 7): the carry does not keep them."),
        alternative(want * CARRY_WIDTH // CARRY_STATE, f"the carry holds the cell's d_state = "
                                                       f"{CARRY_STATE} hidden units per vector, "
                                                       "not the width H."),
        alternative(want * CARRY_STEPS, "the carry does not grow with the steps already "
                                        "seen."),
        alternative(want // CARRY_BATCH, "every sequence of the batch has its own state."),
        alternative(want // CARRY_DEPTH, "every block has its own cell, with its own state."),
    ])
