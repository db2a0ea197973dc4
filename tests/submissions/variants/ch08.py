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
    lambda a, b: bool(a) == bool(b), no_decay_mask(params_me), model.recurrent_mask(params_me, cfg_me))))'''

VARIANTS = {}
