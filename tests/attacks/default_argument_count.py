"""A sequential O(L) loop posing as the parallel scan: it calls the operator through a default
argument, so a counter that replaced the notebook's name never saw the calls (passed 1.2's
`count_calls`, 4 points). Calls are counted by code object now: 36 calls for L = 37."""
# %%
# replaces ex1.1-solution
import lrnn

binary_operator = lrnn.scan.binary_operator
# %%
# replaces ex1.2-solution
import numpy as np


def parallel_scan(a, b, op=binary_operator):
    a, b = np.broadcast_arrays(np.asarray(a, float), np.asarray(b, float))
    out = np.empty_like(b)
    acc = (a[..., 0, :], b[..., 0, :])
    out[..., 0, :] = acc[1]
    for t in range(1, b.shape[-2]):
        acc = op(acc, (a[..., t, :], b[..., t, :]))
        out[..., t, :] = acc[1]
    return out
