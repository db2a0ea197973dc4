"""Checks for Exercises 8 · Capstone (solutions/08_capstone.ipynb): the pieces of the deep LRU
model (LayerNorm, GLU), one residual block, the whole model, and which parameters the optimiser
treats as recurrent; each compared with ``lrnn.model`` on the same parameter dict.

The hints come from a float64 NumPy transcription of the block (LRU Fig. 1, App. D) with the
typical mistakes switched on one at a time (``np_block``/``np_model`` and their ``variant``)."""
from __future__ import annotations

import functools
import math

import numpy as np

from ._core import (alternative, as_array, call, exercise, expect, expect_close,
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
                 "lru.step": lambda q, x, v: lru.step(q, {"x": x}, v),
                 "lru.apply": lambda q, u: lru.apply(q, u, scan_method="sequential")}
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
# 8.4 The whole model
# ------------------------------------------------------------------------------------------

@exercise("8.4", points=3, title="the deep LRU model: encoder, blocks, pooling, decoder",
          reference="LRU Fig. 1 and App. D (linear encoder, residual blocks, pooling over time, "
                    "linear decoder)",
          stronger_hint="u = x @ W_enc + b_enc; for each block in params['blocks'], in order, "
                        "u = block(u) (8.3); then the mean over time (axis −2) for pool='mean' "
                        "or u[..., −1, :] for 'last'; finally u @ W_dec + b_dec.")
def _(fn, rng):
    cases = [(2, 3, 2, 1, 1, "mean", (), 6), (2, 4, 3, 2, 1, "last", (3,), 5),
             (3, 3, 2, 2, 4, "mean", (2,), 4)]
    for d_in, h, n, depth, d_out, pool, lead, length in cases:
        params = random_model(rng, d_in, h, n, depth, d_out)
        x = randn(rng, *lead, length, d_in)
        inputs = {"params": params, "x": x, "pool": pool}
        got = call(fn, inputs)
        want = reference_model(params, x, pool)
        variants = [("swap_pool", "wrong pooling: 'mean' averages over time (axis −2), 'last' "
                                  "takes the last step."),
                    ("no_encoder_bias", "the encoder's bias is missing: u = x W_enc + b_enc."),
                    ("post_norm", "the blocks are post-norm; they must be pre-norm, "
                                  "u + f(Norm(u)) (check 8.3)."),
                    ("final_norm", "there is no normalisation after the last block: the pooled "
                                   "residual stream goes straight to the decoder.")]
        if depth > 1:
            variants += [("reversed", "the blocks run in reverse order: params['blocks'][0] "
                                      "comes first."),
                         ("first_block_only", "every block uses the first block's parameters: "
                                              "block i uses params['blocks'][i].")]
        expect_close(got, want, inputs=inputs, rtol=RTOL, atol=ATOL, what="the model's output",
                     hints=[alternative(lambda v=v: np_model(params, x, pool, v), m)
                            for v, m in variants])


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


@exercise("8.5", points=2, title="no weight decay on the recurrence",
          reference="LRU App. D (weight decay on all parameters except A and B, and γ), "
                    "§3.3 (A = diag(λ) learned through ν_log, θ_log)",
          stronger_hint="go through params['blocks'][i]['layer'] only: A = diag(λ) is stored "
                        "as two arrays (modulus and phase), B as two (real and imaginary part), "
                        "and γ as one; those five are True. The read-out C, the skip D and every "
                        "norm, GLU, encoder and decoder array are False.")
def _(fn, rng):
    from lrnn import model
    for depth in (1, 3):
        params = random_model(rng, 2, 3, 2, depth, 1)
        inputs = {"params": params}
        got = call(fn, inputs)
        want = model.recurrent_mask(params, model_config(params, "mean"))
        expect(isinstance(got, dict), "return a dict shaped like params (a mask: True or False "
               "per parameter array).", inputs=inputs, received=got)
        flat_got, flat_want = _flatten(got), _flatten(want)
        expect(set(flat_got) == set(flat_want),
               "the mask must have the structure of params: the same keys and lists, one "
               "True/False per parameter array.", inputs=inputs,
               detail=f"missing: {sorted(set(flat_want) - set(flat_got))[:4]}; extra: "
                      f"{sorted(set(flat_got) - set(flat_want))[:4]}")
        wrong = [k for k in flat_want if bool(np.asarray(flat_got[k])) != bool(flat_want[k])]
        if not wrong:
            continue
        on = sorted(k.rsplit("[", 1)[-1].strip("]'") for k in wrong if not flat_want[k])
        off = sorted(k.rsplit("[", 1)[-1].strip("]'") for k in wrong if flat_want[k])
        if any("['layer']" not in k for k in wrong):
            hint = ("only the LRU layer's parameters can be recurrent: norm, GLU, encoder and "
                    "decoder are ordinary weights, with weight decay.")
        elif {"C_re", "C_im", "D"} & set(on):
            hint = ("C and D are the layer's read-out and skip, ordinary linear maps: the paper "
                    "exempts only the recurrence itself, A (ν, θ) and B, and γ.")
        elif off and set(off) <= {"B_re", "B_im"}:
            hint = "B belongs to the recurrence too (x_k = A x_{k−1} + B u_k): no decay on it."
        elif "gamma_log" in off:
            hint = "γ (gamma_log) scales B's input: the paper exempts it with A and B."
        else:
            hint = "A = diag(λ) is learned through nu_log and theta_log: both are recurrent."
        expect(False, f"wrong mask for {len(wrong)} of {len(flat_want)} parameter arrays.",
               inputs=inputs, hint=hint, detail=f"first: {wrong[0]}")


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
          stronger_hint="labels = tree_map(lambda r: 'recurrent' if r else 'regular', "
                        "no_decay_mask(params)); optax.multi_transform({'regular': "
                        "optax.adamw(schedule(lr), weight_decay=weight_decay), 'recurrent': "
                        "optax.adamw(schedule(lr · lr_factor), weight_decay=0)}, labels) with "
                        "schedule(peak) = optax.warmup_cosine_decay_schedule(1e-7, peak, "
                        "int(warmup_frac · S), S, 1e-7); a jitted step returning the loss of "
                        "jax.value_and_grad(MSE of lru_model(p, x, pool)[..., 0] against y) and "
                        "the updated parameters; one step per batch, in order; return the last "
                        "parameters and the stacked losses.")
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
# 8.8 One step of the LRU layer
# ------------------------------------------------------------------------------------------

def np_lru_step(q, x, v, *, variant=None):
    """One LRU step in float64 (LRU eq. 3 with Λ = diag(λ), §3.3–§3.4), with a mistake."""
    lam = np.exp(-np.exp(np.float64(q["nu_log"])) + 1j * np.exp(np.float64(q["theta_log"])))
    if variant == "conjugate":
        lam = np.conj(lam)
    b = (q["B_re"] + 1j * q["B_im"]).astype(np.complex128)
    gain = 1.0 if variant == "no_gamma" else np.exp(np.float64(q["gamma_log"]))
    x = np.asarray(x, np.complex128)
    v = np.asarray(v, np.float64)
    new = lam * x + gain * (v @ b.T)
    read = x if variant == "read_before_update" else new
    cx = read @ (q["C_re"] + 1j * q["C_im"]).astype(np.complex128).T
    y = (np.abs(cx) if variant == "modulus" else cx.real) \
        + (0.0 if variant == "no_D" else q["D"] * v)
    return new, y


_STEP_HINTS = [
    ("read_before_update", "y_k reads the new state: update x first (x_k = λ x_{k−1} + …), then "
                           "y_k = Re(C x_k) + D ⊙ v_k with that x_k."),
    ("no_gamma", "the γ normalisation is missing: x_k = λ x_{k−1} + exp(γ_log) ⊙ (B v_k)."),
    ("conjugate", "λ has the wrong phase sign: λ = exp(−exp(ν_log) + i·exp(θ_log))."),
    ("modulus", "take the real part Re(C x_k), not the modulus |C x_k|."),
    ("no_D", "the skip term D ⊙ v_k is missing from y_k."),
]


@exercise("8.8", points=3, title="one step of the LRU layer, state in and state out",
          reference="LRU eq. 3 with Λ = diag(λ) and §3.3–§3.4 (λ, γ); chapter 8, §8.7 (state "
                    "in, state out)",
          stronger_hint="the same three pieces as the whole layer, without the scan: λ from "
                        "ν_log and θ_log, the complex input γ ⊙ (B v_t) of shape (…, N), then "
                        "x_new = λ ⊙ x + that input, and y = Re(C x_new) + D ⊙ v_t. Return "
                        "(x_new, y); the state is everything the next step needs.")
def _(fn, rng):
    for lead, h, n in [((), 2, 3), ((3,), 4, 2), ((2, 2), 1, 5)]:
        q = random_params(rng, h, n)
        x = (randn(rng, *lead, n) + 1j * randn(rng, *lead, n)).astype(np.complex64)
        v = randn(rng, *lead, h)
        inputs = {"q": q, "x": x, "v_t": v}
        got_x, got_y = _pair(call(fn, inputs), inputs, "x_new, y")
        want = _compiled("lru.step")(q, x, v)
        hints = {name: np_lru_step(q, x, v, variant=name) for name, _ in _STEP_HINTS}
        expect_close(got_x, np.asarray(want[0]["x"]), inputs=inputs, rtol=RTOL, atol=ATOL,
                     dtype="complex", what="the new state x_new", hints=[
                         alternative(hints[name][0], m) for name, m in _STEP_HINTS])
        expect_close(got_y, np.asarray(want[1]), inputs=inputs, rtol=RTOL, atol=ATOL,
                     what="the output y", hints=[
                         alternative(hints[name][1], m) for name, m in _STEP_HINTS])
    # Fed back step after step from x = 0, the steps must give the whole layer's outputs.
    h, n, length = 3, 4, 12
    q = random_params(rng, h, n)
    u = randn(rng, 2, length, h)
    want = np.asarray(_compiled("lru.apply")(q, u))
    x = np.zeros((2, n), np.complex64)
    outputs = []
    for k in range(length):
        x, y = _pair(call(fn, {"q": q, "x": x, "v_t": u[:, k]}),
                     {"q": q, "x": "the state your step returned", "v_t": u[:, k]}, "x_new, y")
        outputs.append(np.asarray(y))
    expect_close(np.stack(outputs, axis=-2), want, inputs={"q": q, "u": u}, rtol=2e-4,
                 atol=2e-5, time_axis=-2, what=f"the outputs of {length} steps fed back from "
                 "x = 0 (against the whole layer on the sequence)")


# ------------------------------------------------------------------------------------------
# 8.9 The mean-pooled model, online
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


@exercise("8.9", points=3, title="the mean-pooled model online, a chunk at a time",
          reference="LRU Fig. 1 and App. D (mean pooling before a linear decoder); chapter 8, "
                    "§8.7 (apply with a carry, chunk by chunk)",
          stronger_hint="with pool 'none' the same parameters give the decoder's output at every "
                        "step, and the decoder is affine: the mean of those outputs over the "
                        "steps so far is the mean-pooled output. Keep three things in memory: the "
                        "model's carry (model.apply(..., carry=, return_carry=True)), the running "
                        "sum of the per-step outputs, and the number of steps; return the memory "
                        "and sum / count.")
def _(fn, rng):
    import dataclasses

    from lrnn import model
    # Both cases share their widths (one compilation per chunk length); depth 1, then 2.
    cases = [(2, 4, 3, 1, [3, 1, 3, 2, 3]), (2, 4, 3, 2, [1, 3, 3, 1])]
    for d_in, h, n, depth, lengths in cases:
        params = random_model(rng, d_in, h, n, depth, 2)
        cfg = model_config(params, "mean")
        state = {"blocks": [{} for _ in params["blocks"]]}
        x = randn(rng, 2, sum(lengths), d_in)
        ends = np.cumsum(lengths)
        described = {"params": "parameters with lrnn.model.init's layout", "state": "its state",
                     "cfg": f"ModelConfig(layer='lru', d_input={d_in}, depth={depth}, "
                            f"d_model={h}, d_state={n}, pool='mean')"}
        memory, got, sizes = None, [], []
        for k, (end, size) in enumerate(zip(ends, lengths)):
            chunk = x[:, end - size:end]
            inputs = {**described, "memory": "None (the first chunk)" if k == 0 else
                      f"what your function returned for chunk {k}", "chunk": chunk}
            pair = call(fn, {"params": params, "state": state, "cfg": cfg, "memory": memory,
                             "chunk": chunk})
            memory, mean = _pair(pair, inputs, "memory, mean")
            got.append(mean)
            sizes.append(_numbers_in(memory))
        grown = [k for k in range(2, len(sizes)) if sizes[k] > sizes[1]]
        expect(not grown, f"the memory grows with the stream: {sizes[1]} numbers after chunk 2, "
               f"{sizes[grown[0]] if grown else 0} after chunk {grown[0] + 1 if grown else 0}. "
               "Online, the memory holds what the next chunk needs, the same amount at every "
               "step.", inputs=described,
               hint="keep the model's carry, a running sum and a count of steps: not the "
                    "chunks, nor the outputs of every step.")
        none = dataclasses.replace(cfg, pool="none")
        # The mean-pooled output of every prefix: its last is model.apply on all of x, the
        # others follow from the per-step outputs because the decoder is affine.
        per_step = reference_model(params, x, none, state).astype(np.float64)
        want = [per_step[:, :end].mean(-2).astype(np.float32) for end in ends[:-1]]
        want.append(reference_model(params, x, cfg, state))

        def fresh(end):
            outs = [reference_model(params, x[:, e - k:e], none, state)
                    for e, k in zip(ends, lengths) if e <= end]
            return np.concatenate(outs, axis=-2).mean(-2)

        def chunk_means(k):
            return [per_step[:, e - n:e].mean(-2) for e, n in zip(ends[:k + 1], lengths)]
        for k, (g, w) in enumerate(zip(got, want)):
            end = ends[k]
            expect_close(g, w, inputs={**described, "chunks": f"{k + 1} of lengths "
                                                              f"{lengths[:k + 1]}"},
                         rtol=RTOL, atol=ATOL,
                         what=f"the mean after chunk {k + 1} (steps 1 to {end})", hints=[
                             alternative(lambda: fresh(end),
                                         "every chunk started from a zero state: pass the carry "
                                         "that the previous chunk returned."),
                             alternative(lambda: chunk_means(k)[-1],
                                         "this is the mean over the latest chunk only: the "
                                         "output pools every step so far (a running sum and a "
                                         "count of steps)."),
                             alternative(lambda: np.mean(chunk_means(k), axis=0),
                                         "you averaged the chunks' means: the chunks have "
                                         "different lengths, so weight each step equally (a "
                                         "running sum and a count of steps)."),
                             alternative(per_step[:, end - 1],
                                         "this is the output at the last step (pool 'last'): "
                                         "the model pools with the mean over every step so "
                                         "far."),
                         ])


# ---------------------------------------------------------------------------------------------
# Predict, then run
# ---------------------------------------------------------------------------------------------

CARRY_DEPTH, CARRY_STATE, CARRY_WIDTH, CARRY_BATCH, CARRY_STEPS = 4, 128, 256, 16, 10_000


@exercise("8.10", points=1, kind="value",
          title="predict: the bytes a deep LRU keeps between steps",
          reference="chapter 8, §8.7 (state in, state out); LRU eq. 3 (the state x_t)",
          stronger_hint="The carry is what the next step needs and nothing more: one LRU "
                        "state x_t per block, N complex numbers per sequence. Neither the "
                        "width H nor the number of steps already seen enters it. A complex64 "
                        "number is 8 bytes.")
def _(value, rng):
    want = CARRY_DEPTH * CARRY_BATCH * CARRY_STATE * 8
    expect_prediction(value, want, what="the carry's bytes", hints=[
        alternative(want // 2, "a complex64 number is two float32 numbers: 8 bytes."),
        alternative(want * CARRY_WIDTH // CARRY_STATE, "the carry holds the states (N = 128 "
                                                        "per block), not the width H."),
        alternative(want * CARRY_STEPS, "the carry does not grow with the steps already "
                                        "seen."),
        alternative(want // CARRY_BATCH, "every sequence of the batch has its own state."),
    ])
