"""Rebindings that a ban read from the notebook's text missed: the library reached through a
list (`[lrnn][0]`), a `for` target, a `with ... as` target and a lambda parameter (scored 8 to
11 of 14 when bans were decided on the source)."""
# %%
# replaces ex1.1-solution
import lrnn

_lib = [lrnn][0]
binary_operator = _lib.scan.binary_operator
# %%
# replaces ex1.2-solution
import contextlib

import lrnn

for _scan in [lrnn.linear_scan]:
    pass


def parallel_scan(a, b):
    binary_operator((a, b), (a, b))
    return _scan(a, b)
# %%
# replaces ex1.3-solution
import contextlib

import lrnn

with contextlib.nullcontext(lrnn.scan.linear_scan) as _s:
    pass
chunked_scan = (lambda s: lambda a, b, T: s(a, b))(_s)
# %%
# replaces ex1.5-solution
import numpy as np

spectral_radius = (lambda e: lambda A: float(max(abs(e(np.asarray(A))))))([np][0].linalg.eigvals)
