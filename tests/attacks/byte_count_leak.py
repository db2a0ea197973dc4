"""Leak a hidden input through the size of the output: the operator keeps what the hidden test
sends it, and every later cell prints 200 001 + k bytes, where k encodes that input. The
feedback used to say "Cell N printed X bytes", giving k back exactly."""
# %%
# replaces ex1.1-solution
import numpy as np

_seen = []


def binary_operator(left, right):
    _seen.append(float(np.asarray(left[1]).ravel()[0]))
    raise ValueError("not solved")


def _leak(*args):
    if _seen:
        k = int(abs(_seen[-1]) * 1000) % 100_000
        print("x" * (200_001 + k))
        raise RuntimeError(f"LEAKED-REQUEST {k}")


get_ipython().events.register("post_run_cell", _leak)
