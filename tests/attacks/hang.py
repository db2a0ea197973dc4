"""Never finish: a cell that ignores the interrupt, an XLA loop that cannot be interrupted, and
exercise functions that stop the kernel (SIGSTOP) or ignore the interrupt when the grader calls
them. The grader must still finish within its time limit (plus a little)."""
# %%
import signal

signal.signal(signal.SIGINT, signal.SIG_IGN)
while True:
    pass
# %%
import jax

jax.lax.while_loop(lambda c: c >= 0, lambda c: c + 1, 0)
# %%
import os
import signal


def binary_operator(left, right):
    os.kill(os.getpid(), signal.SIGSTOP)


def parallel_scan(a, b):
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    while True:
        pass
