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
    "ex8.5-solution": ['''\
print(lrnn.layers.get("rotrnn").recurrent_keys, lrnn.layers.get("ornn").recurrent_keys)
cfg_try = model.ModelConfig(layer="ornn", d_input=2, depth=1, d_model=4, d_state=4)
params_try = model.init(jax.random.PRNGKey(0), cfg_try)[0]
print(model.recurrent_mask(params_try, cfg_try)["blocks"][0]["layer"])'''],
    "ex8.8-solution": ['''\
cfg_try = model.ModelConfig(layer="lru", d_input=2, d_output=1, depth=1, d_model=4, d_state=3,
                            pool="none")
params_try, state_try = model.init(jax.random.PRNGKey(1), cfg_try)
layer_try = params_try["blocks"][0]["layer"]
state_l = lrnn.layers.lru.init_state(layer_try, (2,))
for _ in range(5):
    state_l, y_l = lrnn.layers.lru.step(layer_try, state_l, np.ones((2, 4), np.float32))
x_mine, y_mine = lru_hold(layer_try, np.zeros((2, 3), np.complex64), np.ones((2, 4), np.float32),
                          5)
print(np.allclose(state_l["x"], x_mine, atol=1e-5), np.allclose(y_l, y_mine, atol=1e-5))
lam_try = lrnn.layers.lru.eigenvalues(layer_try)
print(lrnn.scan.linear_scan(jnp.broadcast_to(lam_try, (5, 3)),
                            jnp.ones((5, 3), jnp.complex64))[-1])
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
v_me = np.repeat(x_me[:, :1] @ np.ones((2, 6), np.float32), 4, axis=1)    # one input, held 4 steps
x_me4, y_me4 = lru_hold(layer_me, np.zeros((3, 4), np.complex64), v_me[:, 0], 4)
print("lru_hold:", np.allclose(y_me4, lrnn.layers.lru.apply(layer_me, v_me)[:, -1], atol=1e-4))
memory_me, _ = online_mean_step(params_me, state_me, cfg_me, 1.0, None, x_me[:, :5])
_, last_me = online_mean_step(params_me, state_me, cfg_me, 1.0, memory_me, x_me[:, 5:])
print("online_mean_step:", np.allclose(last_me, want_me, rtol=1e-4, atol=1e-5))
x_pad = np.concatenate([x_me, np.full((3, 4, 2), 30.0, np.float32)], axis=1)   # 4 junk steps
print("padded:", np.allclose(lru_model(params_me, x_pad, "mean", np.full(3, 11)), want_me,
                             rtol=1e-4, atol=1e-5))'''

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
def lru_model(params, x, pool, lengths=None):
    h = jnp.einsum("...li,ih->...lh", jnp.asarray(x), params["encoder"]["W"]) \\
        + params["encoder"]["b"]
    for i in range(len(params["blocks"])):
        h = lru_block(params["blocks"][i], h)
    L, width = h.shape[-2], h.shape[-1]
    if lengths is None:
        lengths = np.full(h.shape[:-2], L)
    pooled = []
    for seq, n in zip(h.reshape(-1, L, width), np.asarray(lengths).reshape(-1)):
        n = int(n)                                   # the padding starts at step n
        if pool == "mean":
            pooled.append(seq[:n].sum(axis=0) / n)
        elif pool == "last":
            pooled.append(seq[n - 1])
        else:
            raise ValueError(f"pool: got {pool!r}, expected 'mean' or 'last'")
    pooled = jnp.stack(pooled).reshape(h.shape[:-2] + (width,))
    return pooled @ params["decoder"]["W"] + params["decoder"]["b"]'''

MODEL_2 = {"helpers": ['''\
from functools import reduce'''], "answer": '''\
def lru_model(params, x, pool, lengths=None):
    enc, dec = params["encoder"], params["decoder"]
    stream = reduce(lambda h, blk: lru_block(blk, h), params["blocks"], x @ enc["W"] + enc["b"])
    per_step = stream @ dec["W"] + dec["b"]    # decode every step, then pool: weights sum to 1
    L = per_step.shape[-2]
    n = L if lengths is None else jnp.asarray(lengths)[..., None]          # (..., 1)
    k = jnp.arange(L)
    if pool == "mean":
        weights = jnp.where(k < n, 1.0 / n, 0.0)                           # 1/n on real steps
    else:
        weights = jnp.where(k == n - 1, 1.0, 0.0)                          # the last real step
    return jnp.einsum("...l,...ld->...d", weights, per_step)'''}

MASK_1 = '''\
def no_decay_mask(params):
    recurrence = {"nu_log", "theta_log", "gamma_log", "B_re", "B_im",   # LRU
                  "M", "theta", "B",                                    # RotRNN (and nu_log)
                  "U", "u1", "V"}                                       # oRNN

    def is_recurrent(path, leaf):
        keys = [getattr(k, "key", None) for k in path]
        return "layer" in keys and keys[-1] in recurrence

    return jax.tree_util.tree_map_with_path(is_recurrent, params)'''

MASK_2 = {"helpers": ['''\
def layer_kind(layer):
    """Which of the library's layers a block holds, read from its parameter names."""
    if "theta_log" in layer:
        return "lru"
    if "M" in layer:
        return "rotrnn"
    return "ornn"


def recurrent_names(layer):
    """The names of A and B (and what builds them) in one block's layer."""
    kind = layer_kind(layer)
    if kind == "lru":
        return {"nu_log", "theta_log", "gamma_log", "B_re", "B_im"}
    if kind == "rotrnn":
        return {"M", "theta", "nu_log", "B"}         # P from M, D(θ), γ from nu_log; B
    return {"U", "u1", "V"} & set(layer)           # W from the reflections (u1 only if m = n)'''],
    "answer": '''\
def no_decay_mask(params):
    def false_like(tree):
        return jax.tree_util.tree_map(lambda _: False, tree)

    mask = {k: false_like(v) for k, v in params.items() if k != "blocks"}
    mask["blocks"] = []
    for block in params["blocks"]:
        m = false_like(block)
        names = recurrent_names(block["layer"])
        m["layer"] = {k: k in names for k in block["layer"]}
        mask["blocks"].append(m)
    return mask'''}

HOLD_1 = '''\
def lru_hold(q, x, v, k):
    lam = jnp.exp(-jnp.exp(q["nu_log"]) + 1j * jnp.exp(q["theta_log"]))
    B = (q["B_re"] + 1j * q["B_im"]) * jnp.exp(q["gamma_log"])[:, None]     # (N, H)
    C = q["C_re"] + 1j * q["C_im"]                                            # (H, N)
    c = jnp.asarray(v) @ B.T
    lam_k = lam ** k
    x_k = lam_k * x + c * (1 - lam_k) / (1 - lam)          # 1 + λ + ... + λ^(k-1)
    return x_k, (x_k @ C.T).real + q["D"] * v'''

HOLD_2 = {"helpers": ['''\
def compose(first, second):
    """The affine map x -> second(first(x)); a map is a pair (a, b) for x -> a x + b."""
    (a1, b1), (a2, b2) = first, second
    return a2 * a1, a2 * b1 + b2'''], "answer": '''\
def lru_hold(q, x, v, k):
    """Square-and-multiply on the one-step map x -> λ x + c, in NumPy: log2(k) compositions."""
    lam = np.exp(-np.exp(np.asarray(q["nu_log"], np.float64))
                 + 1j * np.exp(np.asarray(q["theta_log"], np.float64)))
    B = np.asarray(q["B_re"], np.float64) + 1j * np.asarray(q["B_im"], np.float64)
    gain = np.exp(np.asarray(q["gamma_log"], np.float64))
    c = gain * (np.asarray(v, np.float64) @ B.T)
    total, power = (np.ones_like(lam), np.zeros_like(c)), (lam, c)
    while k > 0:
        if k % 2 == 1:
            total = compose(total, power)
        power = compose(power, power)
        k //= 2
    x_k = total[0] * np.asarray(x, np.complex128) + total[1]
    C = np.asarray(q["C_re"], np.float64) + 1j * np.asarray(q["C_im"], np.float64)
    return x_k, (x_k @ C.T).real + np.asarray(q["D"], np.float64) * np.asarray(v, np.float64)'''}

ONLINE_1 = '''\
def online_mean_step(params, state, cfg, w, memory, chunk):
    per_step = dataclasses.replace(cfg, pool="none")
    if memory is None:
        memory = {"carry": model.init_carry(params, per_step, (chunk.shape[0],)),
                  "mean": None, "weight": 0.0}
    outs, _, carry = model.apply(params, state, chunk, per_step, carry=memory["carry"],
                                 return_carry=True)
    outs = np.asarray(outs, np.float64)
    n = outs.shape[1]
    ages = w ** np.arange(n - 1, -1, -1.0)               # newest step of the chunk: weight 1
    chunk_sum = np.tensordot(ages, outs, axes=(0, 1))    # (B, d_output)
    old_weight = memory["weight"] * w ** n               # the earlier steps got n steps older
    if memory["mean"] is None:
        mean = chunk_sum / ages.sum()
    else:
        mean = (old_weight * memory["mean"] + chunk_sum) / (old_weight + ages.sum())
    return {"carry": carry, "mean": mean, "weight": old_weight + ages.sum()}, mean'''

ONLINE_2 = {"helpers": ['''\
import dataclasses as dc

fast_step = jax.jit(model.step, static_argnames="cfg")     # compiled once per shape'''],
    "answer": '''\
def online_mean_step(params, state, cfg, w, memory, chunk):
    \"\"\"One step at a time with model.step: S <- w S + y_t and Z <- w Z + 1, in float64.\"\"\"
    per_step = dc.replace(cfg, pool="none")
    if memory is None:
        memory = [model.init_carry(params, per_step, (chunk.shape[0],)), 0.0, 0.0]
    carry, S, Z = memory
    for k in range(chunk.shape[1]):
        carry, out = fast_step(params, state, carry, chunk[:, k], cfg=per_step)
        S = w * S + np.asarray(out, np.float64)
        Z = w * Z + 1.0
    return [carry, S, Z], S / Z'''}

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
    "ex8.8-solution": [HOLD_1, HOLD_2],
    "ex8.9-solution": [ONLINE_1, ONLINE_2],
    "ex8.10-solution": ['carry_bytes = 36864',
                       'carry_bytes = 3 * 16 * (96 + 96) * 4   # h and c per block and sequence'],
}
