"""A fork bomb (processes that sleep), to run into the process limit; classmates graded at
the same time must not notice (with one user for every sandbox, they could no longer start
threads)."""
# %%
import os
import time

children = 0
try:
    for _ in range(2000):
        pid = os.fork()
        if pid == 0:
            time.sleep(300)
            os._exit(0)
        children += 1
except OSError as e:
    print("stopped after", children, "processes:", e)
