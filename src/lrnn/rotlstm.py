"""The old home of the gated cells, kept so that saved code still runs: the (Rot)LSTM is now
``lrnn.layers.lstm`` and the (Rot)GRU ``lrnn.layers.gru``."""
from .layers._gated import angles
from .layers.gru import GRU_GATES
from .layers.gru import apply as gru_apply
from .layers.gru import cell as gru_cell
from .layers.gru import init as gru_init
from .layers.lstm import LSTM_GATES, apply, cell, init

__all__ = ["init", "cell", "apply", "angles", "gru_init", "gru_cell", "gru_apply",
           "LSTM_GATES", "GRU_GATES"]
