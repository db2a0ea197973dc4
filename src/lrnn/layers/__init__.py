"""The recurrent layers: ``lru``, ``rotrnn``, ``ornn``, ``lstm`` (LSTM and RotLSTM) and ``gru``
(GRU and RotGRU), each a module of pure functions over a plain dict of parameters.

Imports only ``lrnn.scan``, ``lrnn.orthogonal`` and ``lrnn._validate`` (never training or course).
"""
from . import gru, lru, lstm, ornn, rotrnn

__all__ = ["lru", "rotrnn", "ornn", "lstm", "gru"]
