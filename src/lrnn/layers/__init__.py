"""The recurrent layers: ``lru``, ``rotrnn``, ``ornn``, ``lstm`` (LSTM and RotLSTM) and ``gru``
(GRU and RotGRU), each a module of pure functions over a plain dict of parameters, and the
registry that the deep model (``lrnn.model``) picks them from by name.

Imports only ``lrnn.scan``, ``lrnn.orthogonal`` and ``lrnn._validate`` (never training or course).

Every registered layer is called the same way::

    params = layer.init(key, d_model, d_state, **options)  # options: see layer.init_options
    y = layer.apply(params, u, **options)                   # u (..., L, d_model) -> (..., L, width)

State in, state out: every built-in layer also runs one step (or one chunk) at a time::

    state = layer.init_state(params, batch_shape)           # a dict of arrays, (*batch, ...)
    state, y_t = layer.step(params, state, u_t, **step_options)   # u_t (..., d_model)
    y, state = layer.apply(params, u, state=state, return_state=True, **options)

A bidirectional layer reads the future, so it has no state: ``step`` and ``state=`` are a
ValueError for it.

Every layer names its sizes the same way: ``d_model`` (the input width, ``H`` of the deep
model) and ``d_state`` (its state or hidden size); the old names ``d_in``/``d_hidden`` of the
oRNN and the gated cells still work, with a DeprecationWarning.

``get(name)`` returns the :class:`Layer`; an unknown name is a ValueError listing the known
ones. ``register`` adds a layer of your own.
"""
from __future__ import annotations

import dataclasses
import functools
from typing import Callable, Mapping

from .._validate import require_bool, require_choice
from . import gru, lru, lstm, ornn, rotrnn


@dataclasses.dataclass(frozen=True)
class Layer:
    """A recurrent layer as the deep model sees it.

    Attributes:
      name: the registry name (``ModelConfig.layer``, ``--layer`` of ``lrnn train``).
      init: ``init(key, d_model, d_state, **options) -> params``.
      apply: ``apply(params, u, **options)``: ``(..., L, d_model) -> (..., L, width)``.
      recurrent_keys: the parameters of the recurrence itself (transition and input map), which
        training gives the learning-rate factor and no weight decay (LRU App. D.2).
      init_options, apply_options: ``{keyword of init/apply: ModelConfig field}`` (the same
        name on both sides for the built-in layers).
      output: ``"d_model"`` when the layer maps ``d_model -> d_model`` (LRU, RotRNN: a
        read-out ``C`` and skip ``D``), ``"d_state"`` when its output is its hidden state
        (``"d_in"``, the old name of ``"d_model"``, is still accepted).
      bidirectional: whether ``init(..., bidirectional=True)`` gives a non-causal layer.
      paper: where its equations come from.
      init_state: ``init_state(params, batch_shape) -> state`` (a dict of arrays), or ``None``
        for a layer that cannot run step by step; its ``apply`` then takes ``state=`` and
        ``return_state=`` too.
      step: ``step(params, state, u_t, **step_options) -> (state, y_t)``, ``u_t`` of shape
        ``(..., d_model)`` and ``y_t`` ``(..., width)``: the numbers of ``apply`` at that step.
      step_options: ``{keyword of step: ModelConfig field}``.
    """
    name: str
    init: Callable
    apply: Callable
    recurrent_keys: tuple
    init_options: Mapping[str, str] = dataclasses.field(default_factory=dict)
    apply_options: Mapping[str, str] = dataclasses.field(default_factory=dict)
    output: str = "d_state"
    bidirectional: bool = False
    paper: str = ""
    init_state: Callable | None = None
    step: Callable | None = None
    step_options: Mapping[str, str] = dataclasses.field(default_factory=dict)

    @property
    def stateful(self) -> bool:
        """Whether the layer runs step by step (``init_state`` and ``step`` given)."""
        return self.init_state is not None and self.step is not None

    def width(self, d_model: int, d_state: int) -> int:
        """The size of the last axis of ``apply``'s output."""
        return d_model if self.output in ("d_model", "d_in") else d_state


def _same(*names):
    return {n: n for n in names}


_REGISTRY: dict[str, Layer] = {}


def register(layer: Layer, *, replace: bool = False) -> Layer:
    """Add ``layer`` to the registry (``replace=True`` to overwrite a registered name)."""
    if not isinstance(layer, Layer):
        raise ValueError(f"`layer`: got {type(layer).__name__}, expected an lrnn.layers.Layer.")
    if layer.name in _REGISTRY and not replace:
        raise ValueError(f"`layer`: got the name {layer.name!r}, expected a name not registered "
                         f"yet (registered: {names()}); pass replace=True to overwrite it.")
    if not isinstance(layer.name, str) or not layer.name.isidentifier():
        raise ValueError(f"`layer.name`: got {layer.name!r}, expected a name such as 'mylayer'.")
    for part in ("init", "apply"):
        if not callable(getattr(layer, part)):
            raise ValueError(f"`layer.{part}`: got {getattr(layer, part)!r}, expected a function "
                             f"({part}(key, d_model, d_state, **options) for init, "
                             "apply(params, u, **options) for apply).")
    if not isinstance(layer.recurrent_keys, (tuple, list)) or \
            not all(isinstance(k, str) for k in layer.recurrent_keys):
        raise ValueError(f"`layer.recurrent_keys`: got {layer.recurrent_keys!r}, expected a "
                         "tuple of parameter names.")
    for part in ("init_state", "step"):
        if getattr(layer, part) is not None and not callable(getattr(layer, part)):
            raise ValueError(f"`layer.{part}`: got {getattr(layer, part)!r}, expected a function "
                             "or None.")
    if (layer.init_state is None) != (layer.step is None):
        raise ValueError(f"`layer.step`: got {layer.step!r} with init_state "
                         f"{layer.init_state!r}, expected both functions or neither.")
    for part in ("init_options", "apply_options", "step_options"):
        options = getattr(layer, part)
        if not isinstance(options, Mapping) or not all(
                isinstance(k, str) and isinstance(v, str) for k, v in options.items()):
            raise ValueError(f"`layer.{part}`: got {options!r}, expected a dict "
                             "{keyword: ModelConfig field}.")
    require_choice("layer.output", layer.output, ("d_model", "d_state", "d_in"))
    require_bool("layer.bidirectional", layer.bidirectional)
    _REGISTRY[layer.name] = layer
    return layer


def names() -> tuple:
    """The registered layer names, in registration order."""
    return tuple(_REGISTRY)


def get(name: str) -> Layer:
    """The registered :class:`Layer` called ``name``; ValueError listing the known names."""
    if name not in _REGISTRY:
        raise ValueError(f"`layer`: got {name!r}, expected one of the registered layers "
                         f"{list(_REGISTRY)}.")
    return _REGISTRY[name]


_LSTM_KEYS = ("W_f", "W_i", "W_o", "W_c")
_GRU_KEYS = ("W_z", "W_r", "W_h")

register(Layer("lru", lru.init, lru.apply,
               ("nu_log", "theta_log", "gamma_log", "B_re", "B_im"),
               _same("r_min", "r_max", "max_phase", "bidirectional"), _same("scan_method"),
               output="d_model", bidirectional=True, paper="LRU (Orvieto et al. 2023)",
               init_state=lru.init_state, step=lru.step))
register(Layer("rotrnn", rotrnn.init, rotrnn.apply, ("M", "theta", "nu_log", "B"),
               _same("n_heads", "gamma_min", "gamma_max", "max_phase", "bidirectional"),
               _same("scan_method"), output="d_model", bidirectional=True,
               paper="RotRNN (Dolga et al. 2024)", init_state=rotrnn.init_state,
               step=rotrnn.step))
register(Layer("ornn", ornn.init, ornn.apply, ("U", "u1", "V"), _same("n_reflections"),
               _same("formulation", "activation"), paper="oRNN (Mhammedi et al. 2017)",
               init_state=ornn.init_state, step=ornn.step_state, step_options=_same("activation")))
register(Layer("lstm", functools.partial(lstm.init, rotate=False), lstm.apply, _LSTM_KEYS,
               _same("forget_bias"), paper="LSTM (the RotLSTM paper's baseline)",
               init_state=lstm.init_state, step=lstm.step))
register(Layer("rotlstm", functools.partial(lstm.init, rotate=True), lstm.apply,
               _LSTM_KEYS + ("W_rot",), _same("forget_bias"),
               paper="RotLSTM (Velici & Prügel-Bennett 2017)", init_state=lstm.init_state,
               step=lstm.step))
register(Layer("gru", functools.partial(gru.init, rotate=False), gru.apply, _GRU_KEYS,
               paper="GRU (the RotGRU baseline)", init_state=gru.init_state, step=gru.step))
register(Layer("rotgru", functools.partial(gru.init, rotate=True), gru.apply,
               _GRU_KEYS + ("W_rot",), paper="RotGRU (Velici & Prügel-Bennett 2017)",
               init_state=gru.init_state, step=gru.step))

__all__ = ["lru", "rotrnn", "ornn", "lstm", "gru", "Layer", "register", "names", "get"]
