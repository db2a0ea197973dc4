"""The oRNN: a simple recurrent network whose transition matrix is a product of Householder
reflections (Mhammedi et al., 2017), so it is orthogonal for every parameter value.

    h_t = φ(W h_{t-1} + V x_t + b),    φ(z) = max(z/10, z)    (leaky ReLU, oRNN §5)

with ``W = H_n(u_n) ⋯ H_{n-m+1}(u_{n-m+1})`` (oRNN eq. 8; times ``H_1(u_1)`` of eq. 7 when
``m = n``). ``activation="oplu"`` replaces φ by OPLU (Chernodub & Nowicki 2016), which the
paper needed on the copying task (§5.5): each pair ``(z_{2i-1}, z_{2i})`` becomes
``(max, min)``, a permutation, so ``‖φ(z)‖ = ‖z‖``.

Two formulations compute the same states (``apply(..., formulation=...)``):

* ``"dense"``: form ``W`` once per forward pass (on a CPU by applying the m reflections to
  the identity, O(n²·m); on a GPU by the compact WY form ``I - U T⁻¹ Uᵀ`` of oRNN Prop. 1, a
  few products; gradients flow through either), then one ``(batch, n) × (n, n)`` product per
  time step, like any RNN. On a GPU a step costs what
  its kernel launches cost, not its multiply-adds, so this is the fast one there, and on a
  CPU for all but the smallest batches.
* ``"reflections"``: never form ``W``; apply the m reflections to ``h`` at every step
  (oRNN Algorithm 1, O(n·m) multiply-adds per step, m dependent operations), with the
  paper's backward pass (Theorem 2). The paper's count O(n·m) < O(n²) wins only when the
  batch is tiny and m ≪ n on a CPU (§6: "mini-batch size close to 1").

``"auto"`` asks :func:`choose_formulation`. Both agree to float rounding (tested in float64
against a NumPy transcription of the paper).

Parameters (a plain dict, symbols of the paper):

* ``U``  ``(n, m)`` reflection vectors in the layout of eq. 9 (zeros above the diagonal; the
  part above is masked inside every function, so it has zero gradient). When ``m = n`` the
  last column is unused: its eq.-9 entry ``u_1`` is the separate scalar ``u1``.
* ``V``  ``(n, d_in)`` input matrix, ``b`` ``(n,)`` bias.
* ``h0`` ``(n,)`` learnt initial state, only with ``learn_h0=True`` (otherwise ``h_0 = 0``).
* ``u1`` ``()`` only when ``m = n``. The forward pass uses ``+1`` if ``u1 > 0`` and ``-1``
  otherwise, the paper's convention; its gradient is passed straight through (the derivative
  with respect to the entry ``u_1`` of ``H_1(u_1)`` at ``±1``, the gradient the paper computes
  before resetting ``u_1`` to its sign). ``project`` performs that reset.

State in, state out: the recurrent state is ``{"h": h_t}`` of shape ``(..., n)``
(``init_state`` gives ``h0``, learnt or zero); ``step_state`` advances it by one input and
returns ``(state, h_t)``, the contract every layer of the registry shares; ``step`` is the same
step returning ``h_t`` alone; ``apply(..., state=s, return_state=True)`` runs a chunk from it.
"""
from __future__ import annotations

import math

import jax
import jax.numpy as jnp

from ._gated import batch_shape_of as _batch_shape
from .._validate import (fail, require_bool, require_choice, require_key, require_params,
                         require_positive_int)
from .._validate import as_real_array, renamed_keywords, require_sequence
from ..orthogonal import (check_reflections, compact_wy, eq9_mask, reflect_identity,
                          reflect_vectors, reflection_columns, require_reflection_count)

FORMULATIONS = ("auto", "dense", "reflections")

#: ``choose_formulation`` picks ``"reflections"`` on a CPU only when ``m <= (n /
#: REFLECTIONS_SCALE)²`` (n = 128: m <= 4; n = 256: m <= 16): the crossover measured on a
#: 2-core CPU, where one step of the dense formulation costs about n² multiply-adds per
#: sequence and one of the reflections m passes of O(n) plus m operations' fixed overhead
#: (``lrnn bench layer``, its oRNN batch sweep; ``book/data/bench_layer_cpu.json``).
REFLECTIONS_SCALE = 64
#: How the dense formulation forms W on each backend (see ``_form_W``); other backends: "wy".
W_BUILDERS = {"cpu": "identity", "gpu": "wy"}


@renamed_keywords(d_in="d_model", d_hidden="d_state")
def init(key, d_model: int, d_state: int, n_reflections: int | None = None, *,
         learn_h0: bool = False) -> dict:
    """Random oRNN parameters (uniform initialisations in the spirit of oRNN §5, zero bias).

    ``U`` entries on and below the diagonal ~ U(-1, 1) (eq. 9 layout, zeros elsewhere);
    ``V`` ~ U(-a, a) with ``a = √(6 / (n + d_model))``; ``b = 0``; ``h0`` ~ U(-c, c) with
    ``c = √(3 / (2n))`` when learnt; ``u1 = 1`` when ``m = n``.

    Args:
      key: a PRNG key.
      d_model: the input size (``H`` of the deep model; formerly ``d_in``).
      d_state: ``n``, the hidden size (formerly ``d_hidden``).
      n_reflections: ``m``, the number of reflection vectors, ``1 <= m <= n`` (default ``n``:
        every orthogonal matrix is reachable, Theorem 1).
    Returns:
      dict with ``U (n, m)``, ``V (n, d_model)``, ``b (n,)``, and ``h0 (n,)`` / ``u1 ()`` as above.
    """
    require_key("key", key)
    require_positive_int("d_model", d_model)
    require_positive_int("d_state", d_state)
    n = d_state
    m = n if n_reflections is None else n_reflections
    require_positive_int("n_reflections", m)
    require_reflection_count("n_reflections", m, n, "d_state")
    k_u, k_v, k_h = jax.random.split(key, 3)
    U = jax.random.uniform(k_u, (n, m), minval=-1.0, maxval=1.0) * eq9_mask(n, m)
    a = math.sqrt(6.0 / (n + d_model))
    params = {
        "U": U,
        "V": jax.random.uniform(k_v, (n, d_model), minval=-a, maxval=a),
        "b": jnp.zeros((n,)),
    }
    if learn_h0:
        c = math.sqrt(3.0 / (2 * n))
        params["h0"] = jax.random.uniform(k_h, (n,), minval=-c, maxval=c)
    if m == n:
        params["u1"] = jnp.ones(())
    return params


# ----------------------------------------------------------------------------------------
# The pieces of the recurrence (pure: no checks)
# ----------------------------------------------------------------------------------------

@jax.custom_jvp
def sign_u1(u1):
    """``+1`` where ``u1 > 0`` and ``-1`` otherwise (oRNN §5), with a straight-through
    derivative (the tangent of ``u1`` is passed unchanged)."""
    return jnp.where(u1 > 0, 1.0, -1.0).astype(jnp.result_type(u1, float))


@sign_u1.defjvp
def _sign_u1_jvp(primals, tangents):
    (u1,), (t,) = primals, tangents
    return sign_u1(u1), jnp.asarray(t, jnp.result_type(u1, float))


def leaky_relu(z):
    """``φ(z) = max(z/10, z)`` (oRNN §5)."""
    return jnp.maximum(z / 10, z)


def oplu(z):
    """OPLU (Chernodub & Nowicki 2016; oRNN §5.5): each pair ``(z_{2i-1}, z_{2i})`` of the
    last axis becomes ``(max(z_{2i-1}, z_{2i}), min(z_{2i-1}, z_{2i}))``. A permutation of
    the entries, so it preserves the norm. The last axis must have even size."""
    pairs = z.reshape(*z.shape[:-1], z.shape[-1] // 2, 2)
    a, b = pairs[..., 0], pairs[..., 1]
    return jnp.stack([jnp.maximum(a, b), jnp.minimum(a, b)], axis=-1).reshape(z.shape)


ACTIVATIONS = {"leaky_relu": leaky_relu, "oplu": oplu}


def _transition_parts(params):
    """``(reflection columns, u1 sign or None)`` of the checked ``params``. Pure."""
    U = jnp.asarray(params["U"])
    sign = sign_u1(jnp.asarray(params["u1"])) if "u1" in params else None
    return reflection_columns(U), sign


def _form_W(cols, sign, backend=None):
    """W for the dense formulation, built as :data:`W_BUILDERS` says for the backend. On a
    CPU: the reflections applied to the identity one at a time (``reflect_identity``), the
    closest to float64; its m dependent rank-one updates cost little there next to the scan
    over time. On a GPU: the compact WY form ``I - U T⁻¹ Uᵀ`` (``compact_wy``, oRNN Prop. 1),
    a Gram matrix, a triangular solve and a product, because there every dependent step costs
    a kernel launch (``lrnn bench layer --construction`` measures both builders:
    time, float32 error, orthogonality and gradient error against float64)."""
    builder = W_BUILDERS.get(backend or jax.default_backend(), "wy")
    return reflect_identity(cols, sign) if builder == "identity" else compact_wy(cols, sign)


def _run_dense(W, drive, h0, phi):
    """``h_t = φ(W h_{t-1} + z_t)`` over time (axis -2 of ``drive``): one product per step."""
    W_t = W.T

    def body(h, z):
        h = phi(h @ W_t + z)
        return h, h

    _, hs = jax.lax.scan(body, h0, jnp.moveaxis(drive, -2, 0))
    return jnp.moveaxis(hs, 0, -2)


def _run_reflections(cols, sign, drive, h0, phi):
    """The same recurrence with ``W h`` by oRNN Algorithm 1 at every step (``W`` never formed)."""
    def body(h, z):
        h = phi(reflect_vectors(cols, sign, h) + z)
        return h, h

    _, hs = jax.lax.scan(body, h0, jnp.moveaxis(drive, -2, 0))
    return jnp.moveaxis(hs, 0, -2)


# ----------------------------------------------------------------------------------------
# Checks (once, at the public entry points)
# ----------------------------------------------------------------------------------------

def _check_params(params):
    """Validate the shapes of ``params`` (and, on host data, the reflection vectors and
    ``u1``); return ``(n, m, d_in)``."""
    require_params("params", params, ("U", "V", "b"), "lrnn.layers.ornn.init")
    U = params["U"]
    if jnp.ndim(U) != 2:
        fail("params['U']", U, "shape (n, m) (oRNN eq. 9)")
    n, m = jnp.shape(U)
    require_reflection_count("params['U'] (its columns)", m, n)
    if m == n:
        if "u1" not in params:
            require_params("params", params, ("u1",), "lrnn.layers.ornn.init, with m = n reflections")
        if jnp.shape(params["u1"]) != ():
            fail("params['u1']", params["u1"], "a scalar (oRNN eq. 7)")
    elif "u1" in params:
        fail("params['u1']", params["u1"], f"no 'u1' entry when m = {m} < n = {n}")
    check_reflections(U, 1.0 if m == n else None, name="params['U']")
    V = params["V"]
    if jnp.ndim(V) != 2 or jnp.shape(V)[0] != n:
        fail("params['V']", V, f"shape (n, d_in) with n = {n}")
    if jnp.shape(params["b"]) != (n,):
        fail("params['b']", params["b"], f"shape ({n},)")
    if "h0" in params and jnp.shape(params["h0"]) != (n,):
        fail("params['h0']", params["h0"], f"shape ({n},)")
    return n, m, jnp.shape(V)[1]


def _check_activation(activation, n):
    require_choice("activation", activation, ACTIVATIONS)
    if activation == "oplu" and n % 2:
        fail("activation", activation, f"an activation other than 'oplu' for an odd hidden "
             f"size n = {n} (OPLU acts on pairs of units)")
    return ACTIVATIONS[activation]


def _dtype(params, *arrays):
    return jnp.result_type(*(jnp.asarray(v).dtype for v in params.values()),
                           *(a.dtype for a in arrays), float)


# ----------------------------------------------------------------------------------------
# Public functions
# ----------------------------------------------------------------------------------------

def transition_matrix(params) -> jax.Array:
    """The dense transition matrix ``W`` of shape ``(n, n)`` (oRNN eq. 8, times ``H_1`` of
    eq. 7 when ``m = n``), orthogonal for every parameter value (nonzero reflection vectors):
    the matrix that ``apply(..., formulation="dense")`` forms once per forward pass, at full
    float32 precision (on a CPU the reflections applied to the identity, on a GPU the compact
    WY form; see ``_form_W``). Differentiable with respect to ``U`` (and ``u1``, straight
    through)."""
    _check_params(params)
    cols, sign = _transition_parts(params)
    dtype = _dtype(params)
    return _form_W(cols.astype(dtype), None if sign is None else sign.astype(dtype))


transition = transition_matrix          # the name of earlier versions


def choose_formulation(batch: int, n: int, m: int, backend: str | None = None):
    """Which formulation ``apply(..., formulation="auto")`` uses, and why.

    ``"reflections"`` only on a CPU, when ``m <= (n / REFLECTIONS_SCALE)²``: there the m
    reflection passes of O(n) per step, each with its fixed cost, are cheaper than one
    ``(n, n)`` product. Everywhere else ``"dense"``: ``W`` formed once per forward pass and one
    ``(batch, n) × (n, n)`` product per step. On a GPU every dependent operation costs a
    kernel launch, so ``"dense"`` always. The batch hardly moves the CPU crossover (both
    costs grow with it); the paper's §6 remark that its method pays off for mini-batches near
    1 compares it with methods that spend O(n³) per sequence, not with a product per step.

    Args:
      batch: number of sequences run together (the product of the leading dimensions); kept
        in the reason, it does not change the choice.
      n, m: hidden size and number of reflections.
      backend: ``"cpu"``, ``"gpu"``, ``"tpu"``; default ``jax.default_backend()``.
    Returns:
      ``(name, reason)``: ``"dense"`` or ``"reflections"`` and one sentence.
    """
    backend = backend or jax.default_backend()
    if backend != "cpu":
        return "dense", (f"{backend}, batch {batch}: one (batch, n) x (n, n) product per step; "
                         f"each of the m = {m} dependent reflection updates would cost a kernel "
                         "launch")
    limit = (n / REFLECTIONS_SCALE) ** 2
    if m <= limit:
        return "reflections", (f"CPU, batch {batch}, m = {m} <= (n/{REFLECTIONS_SCALE})² = "
                               f"{limit:g}: m O(n) reflection passes per step cost less than "
                               "one (n, n) product")
    return "dense", (f"CPU, batch {batch}, m = {m} > (n/{REFLECTIONS_SCALE})² = {limit:g}: one "
                     "(n, n) product per step is cheaper than m dependent reflection passes")


def step(params, h, x_t, *, activation: str = "leaky_relu"):
    """One oRNN step ``h_t = φ(W h_{t-1} + V x_t + b)``, with ``W h`` by oRNN Algorithm 1.

    Args:
      h: ``h_{t-1}``, shape ``(..., n)``.
      x_t: shape ``(..., d_in)`` with the same leading (batch) dimensions as ``h``.
      activation: ``"leaky_relu"`` (§5) or ``"oplu"`` (§5.5).
    Returns:
      ``h_t``, shape ``(..., n)``.
    """
    n, _, d_in = _check_params(params)
    phi = _check_activation(activation, n)
    h = jnp.asarray(h)
    x_t = jnp.asarray(x_t)
    if h.ndim < 1 or h.shape[-1] != n:
        fail("h", h, f"shape (..., n) with n = {n}")
    if x_t.ndim < 1 or x_t.shape[-1] != d_in:
        fail("x_t", x_t, f"shape (..., d_model) with d_model = {d_in}")
    if x_t.shape[:-1] != h.shape[:-1]:
        fail("x_t", x_t, f"the batch dimensions of h, {h.shape[:-1]}")
    for name, x in (("h", h), ("x_t", x_t)):
        if jnp.iscomplexobj(x):
            fail(name, x, "a real array")
    dtype = _dtype(params, h, x_t)
    cols, sign = _transition_parts(params)
    sign = None if sign is None else sign.astype(dtype)
    z = x_t.astype(dtype) @ params["V"].T.astype(dtype) + params["b"].astype(dtype)
    return phi(reflect_vectors(cols.astype(dtype), sign, h.astype(dtype)) + z)


def init_state(params, batch_shape=()) -> dict:
    """The state before the first step, ``{"h": h_0}`` of shape ``(*batch_shape, n)``: the
    learnt ``h0`` when ``params`` has one, else zero."""
    n, _, _ = _check_params(params)
    shape = (*_batch_shape(batch_shape), n)
    dtype = _dtype(params)
    h0 = jnp.asarray(params["h0"]).astype(dtype) if "h0" in params else jnp.zeros((n,), dtype)
    return {"h": jnp.broadcast_to(h0, shape)}


def _check_state(state, batch_shape, n):
    if not isinstance(state, dict) or set(state) != {"h"}:
        fail("state", state, "the dict {'h': (..., n)} of lrnn.layers.ornn.init_state")
    h = jnp.asarray(state["h"])
    if h.shape != (*batch_shape, n):
        fail("state['h']", h, f"shape {(*batch_shape, n)}: the batch dims of u and n = {n}")
    if not jnp.issubdtype(h.dtype, jnp.floating):
        fail("state['h']", h, "a real floating-point array")
    return h


def step_state(params, state, u_t, *, activation: str = "leaky_relu"):
    """``step`` with the state contract of every layer: ``({"h": h_t}, h_t)`` from
    ``state = {"h": h_{t-1}}`` ``(..., n)`` and ``u_t`` ``(..., d_in)`` (oRNN eq. 1 with
    ``W`` by Algorithm 1; the output of the layer is its hidden state)."""
    n, _, d_in = _check_params(params)
    x_t = as_real_array("u_t", u_t, "(..., d_model)")
    if x_t.ndim < 1 or x_t.shape[-1] != d_in:
        fail("u_t", x_t, f"shape (..., d_model) with d_model = {d_in}")
    h = _check_state(state, x_t.shape[:-1], n)
    h = step(params, h, x_t, activation=activation)
    return {"h": h}, h


def apply(params, u, *, formulation: str = "auto", activation: str = "leaky_relu", state=None,
          return_state=False):
    """Run the oRNN over a sequence: ``h_t = φ(W h_{t-1} + V x_t + b)`` for ``t = 1, …, L``,
    starting from ``h0`` (learnt, or zero). The input drive ``V x_t + b`` of every step is one
    product before the scan over time.

    Args:
      params: from ``init``.
      u: real inputs of shape ``(..., L, d_in)``, ``L >= 1``; leading dimensions are batch
        dimensions.
      formulation: ``"dense"`` (``W`` formed once, one product per step), ``"reflections"``
        (Algorithm 1 at every step) or ``"auto"`` (:func:`choose_formulation`).
      activation: ``"leaky_relu"`` (§5) or ``"oplu"`` (§5.5, even ``n``).
      state: ``{"h": (..., n)}`` to start from instead of ``h0`` (``init_state``, or the state
        another chunk returned).
      return_state: also return the state after the last step.
    Returns:
      hidden states ``h_1, …, h_L`` of shape ``(..., L, n)``; with ``return_state=True``,
      ``(h, {"h": h_L})``.
    """
    n, m, d_in = _check_params(params)
    require_choice("formulation", formulation, FORMULATIONS)
    return_state = require_bool("return_state", return_state)
    phi = _check_activation(activation, n)
    u = require_sequence("u", u, d_in, "d_model")
    if formulation == "auto":
        batch = math.prod(u.shape[:-2])
        formulation, _ = choose_formulation(batch, n, m)
    dtype = _dtype(params, u)
    cols, sign = _transition_parts(params)
    cols = cols.astype(dtype)
    sign = None if sign is None else sign.astype(dtype)
    drive = u.astype(dtype) @ params["V"].T.astype(dtype) + params["b"].astype(dtype)
    if state is not None:
        h0 = _check_state(state, u.shape[:-2], n).astype(dtype)
    else:
        h0 = jnp.asarray(params["h0"]).astype(dtype) if "h0" in params else jnp.zeros((n,), dtype)
        h0 = jnp.broadcast_to(h0, u.shape[:-2] + (n,))
    if formulation == "dense":
        hs = _run_dense(_form_W(cols, sign), drive, h0, phi)
    else:
        hs = _run_reflections(cols, sign, drive, h0, phi)
    return (hs, {"h": hs[..., -1, :]}) if return_state else hs


def project(params) -> dict:
    """The paper's step after each gradient update (oRNN §5): zero ``U`` above its eq.-9
    structure and set ``u1`` to ``-1`` if ``u1 <= 0``, ``+1`` otherwise. Not needed for
    correctness here (the forward pass already masks and takes the sign), but it keeps the
    stored parameters equal to the ones in use."""
    _check_params(params)
    out = dict(params)
    n, m = jnp.shape(params["U"])
    out["U"] = params["U"] * eq9_mask(n, m).astype(jnp.asarray(params["U"]).dtype)
    if "u1" in params:
        out["u1"] = sign_u1(jnp.asarray(params["u1"]))
    return out
