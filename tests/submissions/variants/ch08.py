"""Chapter 8 (capstone): alternative answers and habit cells."""

SCRATCH = {
    "ex8.2-solution": ['''\
print(model.glu({"W": np.ones((2, 4), np.float32), "b": np.zeros(4, np.float32)},
                np.ones((3, 2), np.float32)))'''],
    "ex8.4-solution": ['''\
cfg_try = model.ModelConfig(layer="lru", d_input=2, d_output=1, depth=1, d_model=4, d_state=3,
                            pool="last")
params_try, state_try = model.init(jax.random.PRNGKey(1), cfg_try)
x_try = np.ones((2, 5, 2), np.float32)
print(model.apply(params_try, state_try, x_try, cfg_try)[0].shape)
print(model.encode(params_try, x_try, cfg_try).shape)
print([np.shape(v) for v in model.layer_inputs(params_try, state_try, x_try, cfg_try)])
layer_try = params_try["blocks"][0]["layer"]
print(lrnn.layers.lru.apply(layer_try, np.ones((5, 4), np.float32)).shape,
      lrnn.layers.lru.hidden_states(layer_try, np.ones((5, 4), np.float32)).shape)'''],
    "ex8.6-solution": ['''\
print([float(train.schedule(3e-3, 100, 0.1)(k)) for k in (0, 10, 99)])
print(train.make_optimizer(train.TrainConfig(task="adding", steps=100),
                           model.recurrent_mask(params0, mcfg)))
run_try = train.train(train.TrainConfig(task="adding", seq_len=4, depth=1, d_model=2, d_state=2,
                                        batch_size=2, steps=2, eval_every=2, n_test=2),
                      progress=False)
from lrnn.course.check import ch08
params_try = ch08.random_model(np.random.default_rng(0), 2, 2, 2, 1, 1)
print(ch08.reference_training(params_try, np.ones((2, 2, 3, 2), np.float32),
                              np.ones((2, 2), np.float32), "mean",
                              {"lr": 1e-3, "lr_factor": 1.0, "weight_decay": 0.0,
                               "warmup_frac": 0.0})[1], run_try["history"]["train_loss"])'''],
    "ex8.8-solution": ['''\
cfg_try = model.ModelConfig(layer="lru", d_input=2, d_output=1, depth=1, d_model=4, d_state=3,
                            pool="none")
params_try, state_try = model.init(jax.random.PRNGKey(1), cfg_try)
layer_try = params_try["blocks"][0]["layer"]
state_l, y_l = lrnn.layers.lru.step(layer_try, lrnn.layers.lru.init_state(layer_try, (2,)),
                                    np.ones((2, 4), np.float32))
x_mine, y_mine = lru_step(layer_try, np.zeros((2, 3), np.complex64), np.ones((2, 4), np.float32))
print(np.allclose(state_l["x"], x_mine, atol=1e-6), np.allclose(y_l, y_mine, atol=1e-5))
carry_try, out_try = model.step(params_try, state_try, model.init_carry(params_try, cfg_try, (2,)),
                                np.ones((2, 2), np.float32), cfg_try)
print(out_try.shape)'''],
}

SELF_CHECK = '''\
# my own final check against the library
cfg_me = model.ModelConfig(layer="lru", d_input=2, d_output=1, depth=2, d_model=6, d_state=4,
                           pool="mean", scan_method="sequential")
params_me, state_me = model.init(jax.random.PRNGKey(8), cfg_me)
x_me = np.asarray(jax.random.normal(jax.random.PRNGKey(9), (3, 11, 2)))
want_me = np.asarray(model.apply(params_me, state_me, x_me, cfg_me)[0])
print("lru_model:", np.allclose(lru_model(params_me, x_me, "mean"), want_me, rtol=1e-4, atol=1e-5))
y_me = x_me @ np.ones((2, 6), np.float32)
print("glu:", np.allclose(glu(y_me, params_me["blocks"][0]["glu"]["W"],
                              params_me["blocks"][0]["glu"]["b"]),
                          model.glu(params_me["blocks"][0]["glu"], y_me), atol=1e-5))
z_me = (y_me - y_me.mean(-1, keepdims=True)) / np.sqrt(y_me.var(-1, keepdims=True) + 1e-5)
print("layer_norm:", np.allclose(layer_norm(y_me, np.ones(6), np.zeros(6)), z_me, atol=1e-4))
print("no_decay_mask:", jax.tree_util.tree_all(jax.tree_util.tree_map(
    lambda a, b: bool(a) == bool(b), no_decay_mask(params_me), model.recurrent_mask(params_me, cfg_me))))
layer_me = params_me["blocks"][0]["layer"]
v_me = x_me @ np.ones((2, 6), np.float32)
x_me1, y_me1 = lru_step(layer_me, np.zeros((3, 4), np.complex64), v_me[:, 0])
print("lru_step:", np.allclose(y_me1, lrnn.layers.lru.apply(layer_me, v_me[:, :1])[:, 0], atol=1e-5))
memory_me, _ = online_mean_step(params_me, state_me, cfg_me, None, x_me[:, :5])
_, last_me = online_mean_step(params_me, state_me, cfg_me, memory_me, x_me[:, 5:])
print("online_mean_step:", np.allclose(last_me, want_me, rtol=1e-4, atol=1e-5))'''

LAYER_NORM_1 = '''\
def layer_norm(u, scale, bias, eps=1e-5):
    u = jnp.asarray(u)
    H = u.shape[-1]
    mean = jnp.sum(u, axis=-1, keepdims=True) / H
    var = jnp.sum((u - mean) ** 2, axis=-1, keepdims=True) / H
    return scale * (u - mean) / jnp.sqrt(var + eps) + bias'''

LAYER_NORM_2 = {"helpers": ['''\
def standardise(v, eps):
    """(v − mean) / sqrt(var + eps) over the last axis (one step of one sequence)."""
    return (v - v.mean(-1, keepdims=True)) / jnp.sqrt(v.var(-1, keepdims=True) + eps)'''],
    "answer": '''\
def layer_norm(u, scale, bias, eps=1e-5):
    return standardise(jnp.asarray(u), eps) * scale + bias'''}

GLU_1 = '''\
def glu(y, W, b):
    H = W.shape[1] // 2
    values = y @ W[:, :H] + b[:H]
    gates = y @ W[:, H:] + b[H:]
    return values * jax.nn.sigmoid(gates)'''

GLU_2 = '''\
def glu(y, W, b):
    z = jnp.einsum("...d,dk->...k", jnp.asarray(y), jnp.asarray(W)) + b
    a, g = jnp.split(z, 2, axis=-1)
    return a / (1 + jnp.exp(-g))'''

BLOCK_1 = '''\
def lru_layer(q, v):
    """The recurrence by a lax.scan of my own."""
    lam = jnp.exp(-jnp.exp(q["nu_log"]) + 1j * jnp.exp(q["theta_log"]))
    B = (q["B_re"] + 1j * q["B_im"]) * jnp.exp(q["gamma_log"])[:, None]
    C = q["C_re"] + 1j * q["C_im"]
    Bv = jnp.asarray(v) @ B.T                                  # (..., L, N)

    def step(x, b_k):
        x = lam * x + b_k
        return x, x

    x0 = jnp.zeros(Bv.shape[:-2] + Bv.shape[-1:], Bv.dtype)
    _, xs = jax.lax.scan(step, x0, jnp.moveaxis(Bv, -2, 0))
    x = jnp.moveaxis(xs, 0, -2)
    return (x @ C.T).real + q["D"] * v


def lru_block(p, u):
    v = layer_norm(u, p["norm"]["scale"], p["norm"]["bias"])
    y = lru_layer(p["layer"], v)
    g = 0.5 * y * (1 + jnp.tanh(jnp.sqrt(2 / jnp.pi) * (y + 0.044715 * y ** 3)))   # GELU (tanh)
    return u + glu(g, p["glu"]["W"], p["glu"]["b"])'''

BLOCK_2 = {"helpers": ['''\
def lambdas_of(q):
    """λ = exp(−exp(ν_log)) · exp(i exp(θ_log))."""
    radius = jnp.exp(-jnp.exp(q["nu_log"]))
    return radius * jnp.exp(1j * jnp.exp(q["theta_log"]))


def complex_matrix(re, im):
    return jnp.asarray(re) + 1j * jnp.asarray(im)'''], "answer": '''\
def lru_layer(q, v):
    lam = lambdas_of(q)
    gamma = jnp.exp(q["gamma_log"])
    B = complex_matrix(q["B_re"], q["B_im"])
    C = complex_matrix(q["C_re"], q["C_im"])
    drive = jnp.einsum("nh,...lh->...ln", B, v) * gamma
    x = linear_scan(lam, drive)
    return jnp.real(jnp.einsum("hn,...ln->...lh", C, x)) + q["D"] * v


def lru_block(p, u):
    residual = u
    h = layer_norm(u, **p["norm"])
    h = jax.nn.gelu(lru_layer(p["layer"], h))
    h = glu(h, **p["glu"])
    return residual + h'''}

MODEL_1 = '''\
def lru_model(params, x, pool):
    h = jnp.einsum("...li,ih->...lh", jnp.asarray(x), params["encoder"]["W"]) \\
        + params["encoder"]["b"]
    for i in range(len(params["blocks"])):
        h = lru_block(params["blocks"][i], h)
    if pool == "mean":
        pooled = h.sum(axis=-2) / h.shape[-2]
    elif pool == "last":
        pooled = h[..., -1, :]
    else:
        raise ValueError(f"pool: got {pool!r}, expected 'mean' or 'last'")
    return pooled @ params["decoder"]["W"] + params["decoder"]["b"]'''

MODEL_2 = {"helpers": ['''\
from functools import reduce'''], "answer": '''\
def lru_model(params, x, pool):
    enc, dec = params["encoder"], params["decoder"]
    stream = reduce(lambda h, blk: lru_block(blk, h), params["blocks"], x @ enc["W"] + enc["b"])
    per_step = stream @ dec["W"] + dec["b"]           # decode every step, then pool: both linear
    return per_step.mean(axis=-2) if pool == "mean" else per_step[..., -1, :]'''}

MASK_1 = '''\
def no_decay_mask(params):
    recurrence = {"nu_log", "theta_log", "gamma_log", "B_re", "B_im"}

    def is_recurrent(path, leaf):
        keys = [getattr(k, "key", None) for k in path]
        return "layer" in keys and keys[-1] in recurrence

    return jax.tree_util.tree_map_with_path(is_recurrent, params)'''

MASK_2 = '''\
def no_decay_mask(params):
    def false_like(tree):
        return jax.tree_util.tree_map(lambda _: False, tree)

    mask = {k: false_like(v) for k, v in params.items() if k != "blocks"}
    mask["blocks"] = []
    for block in params["blocks"]:
        m = false_like(block)
        m["layer"] = {k: k in ("nu_log", "theta_log", "gamma_log", "B_re", "B_im")
                      for k in block["layer"]}
        mask["blocks"].append(m)
    return mask'''

STEP_1 = '''\
def lru_step(q, x, v_t):
    lam = jnp.exp(-jnp.exp(q["nu_log"]) + 1j * jnp.exp(q["theta_log"]))
    B = (q["B_re"] + 1j * q["B_im"]) * jnp.exp(q["gamma_log"])[:, None]     # (N, H)
    C = q["C_re"] + 1j * q["C_im"]                                            # (H, N)
    x_new = lam * x + jnp.asarray(v_t) @ B.T
    y = (x_new @ C.T).real + q["D"] * v_t
    return x_new, y'''

STEP_2 = {"helpers": ['''\
def lambdas(q):
    return np.exp(-np.exp(np.asarray(q["nu_log"], np.float64))
                  + 1j * np.exp(np.asarray(q["theta_log"], np.float64)))'''], "answer": '''\
def lru_step(q, x, v_t):
    """In NumPy, one sequence of the batch at a time."""
    v_t = np.asarray(v_t, np.float64)
    x = np.asarray(x, np.complex128)
    B = np.asarray(q["B_re"], np.float64) + 1j * np.asarray(q["B_im"], np.float64)
    C = np.asarray(q["C_re"], np.float64) + 1j * np.asarray(q["C_im"], np.float64)
    gain = np.exp(np.asarray(q["gamma_log"], np.float64))
    x_new = np.empty(v_t.shape[:-1] + x.shape[-1:], np.complex128)
    y = np.empty(v_t.shape, np.float64)
    for idx in np.ndindex(*v_t.shape[:-1]):
        x_new[idx] = lambdas(q) * x[idx] + gain * (B @ v_t[idx])
        y[idx] = (C @ x_new[idx]).real + np.asarray(q["D"], np.float64) * v_t[idx]
    return x_new, y'''}

ONLINE_1 = '''\
def online_mean_step(params, state, cfg, memory, chunk):
    per_step = dataclasses.replace(cfg, pool="none")
    if memory is None:
        memory = {"carry": model.init_carry(params, per_step, (chunk.shape[0],)),
                  "mean": None, "seen": 0}
    outs, _, carry = model.apply(params, state, chunk, per_step, carry=memory["carry"],
                                 return_carry=True)
    n = chunk.shape[1]
    chunk_mean = np.asarray(outs).mean(axis=1)
    seen = memory["seen"]
    mean = chunk_mean if memory["mean"] is None else \\
        (seen * np.asarray(memory["mean"]) + n * chunk_mean) / (seen + n)
    return {"carry": carry, "mean": mean, "seen": seen + n}, mean'''

ONLINE_2 = {"helpers": ['''\
import dataclasses as dc

fast_step = jax.jit(model.step, static_argnames="cfg")     # compiled once per shape'''],
    "answer": '''\
def online_mean_step(params, state, cfg, memory, chunk):
    \"\"\"One step at a time with model.step, a running sum in float64.\"\"\"
    per_step = dc.replace(cfg, pool="none")
    if memory is None:
        memory = [model.init_carry(params, per_step, (chunk.shape[0],)), 0.0, 0]
    carry, total, count = memory
    for k in range(chunk.shape[1]):
        carry, out = fast_step(params, state, carry, chunk[:, k], cfg=per_step)
        total = total + np.asarray(out, np.float64)
        count += 1
    return [carry, total, count], total / count'''}

TRAIN_1 = '''\
def train_loop(params, xs, ys, pool, opt):
    n_steps = xs.shape[0]
    warm = int(opt["warmup_frac"] * n_steps)
    recurrent = no_decay_mask(params)
    regular = jax.tree_util.tree_map(lambda r: not r, recurrent)

    def sched(peak):
        return optax.warmup_cosine_decay_schedule(init_value=1e-7, peak_value=peak,
                                                  warmup_steps=warm, decay_steps=n_steps,
                                                  end_value=1e-7)

    # two masked optimisers in a row: each updates its own parameters, passes the others on
    tx = optax.chain(
        optax.masked(optax.adamw(sched(opt["lr"]), weight_decay=opt["weight_decay"]), regular),
        optax.masked(optax.adamw(sched(opt["lr"] * opt["lr_factor"]), weight_decay=0.0),
                     recurrent))
    loss_and_grad = jax.jit(jax.value_and_grad(
        lambda p, x, y: ((lru_model(p, x, pool)[:, 0] - y) ** 2).mean()))
    update = jax.jit(tx.update)
    state, out = tx.init(params), []
    for s in range(n_steps):
        loss, g = loss_and_grad(params, xs[s], ys[s])
        upd, state = update(g, state, params)
        params = optax.apply_updates(params, upd)
        out.append(float(loss))
    return params, np.array(out)'''

TRAIN_2 = '''\
def train_loop(params, xs, ys, pool, opt):
    n = xs.shape[0]
    warm = int(opt["warmup_frac"] * n)

    def rate(peak):          # linear warm-up from 1e-7, then a cosine down to 1e-7 at step n
        def at(count):
            count = jnp.asarray(count, jnp.float32)
            rising = 1e-7 + (peak - 1e-7) * count / max(warm, 1)
            t = jnp.clip(count - warm, 0, n - warm)
            falling = 1e-7 + (peak - 1e-7) * 0.5 * (1 + jnp.cos(jnp.pi * t / (n - warm)))
            return jnp.where(count < warm, rising, falling)
        return at

    def adam_w(peak, decay):   # AdamW from its parts
        return optax.chain(optax.scale_by_adam(), optax.add_decayed_weights(decay),
                           optax.scale_by_learning_rate(rate(peak)))

    groups = jax.tree_util.tree_map(lambda r: "rec" if r else "reg", no_decay_mask(params))
    tx = optax.multi_transform({"reg": adam_w(opt["lr"], opt["weight_decay"]),
                                "rec": adam_w(opt["lr"] * opt["lr_factor"], 0.0)}, groups)

    def loss_of(p, x, y):
        return jnp.mean(jnp.square(lru_model(p, x, pool)[..., 0] - y))

    def one_step(carry, batch):
        p, s = carry
        loss, grads = jax.value_and_grad(loss_of)(p, *batch)
        updates, s = tx.update(grads, s, p)
        return (optax.apply_updates(p, updates), s), loss

    (trained, _), losses = jax.lax.scan(one_step, (params, tx.init(params)),
                                        (jnp.asarray(xs), jnp.asarray(ys)))
    return trained, losses'''

VARIANTS = {
    "ex8.1-solution": [LAYER_NORM_1, LAYER_NORM_2],
    "ex8.2-solution": [GLU_1, GLU_2],
    "ex8.3-solution": [BLOCK_1, BLOCK_2],
    "ex8.4-solution": [MODEL_1, MODEL_2],
    "ex8.5-solution": [MASK_1, MASK_2],
    "ex8.6-solution": [TRAIN_1, TRAIN_2],
    "ex8.8-solution": [STEP_1, STEP_2],
    "ex8.9-solution": [ONLINE_1, ONLINE_2],
    "ex8.10-solution": ['carry_bytes = 65536',
                       'carry_bytes = 4 * 16 * 128 * 2 * 4   # two float32 numbers per complex64 state'],
}
