"""Forge the kernel's replies: find the pipe to the grader (through the harness object and
/proc/self/fd) and write frames that claim success, then garbage; replace the harness's call
handler so that every call returns made-up numbers."""
# %%
import gc
import os
import struct

from lrnn.course.grading import harness, wire

fds = set()
for obj in gc.get_objects():
    if isinstance(obj, harness.Channel):
        fds.add(obj.fd_out)
for name in os.listdir("/proc/self/fd"):
    try:
        if os.readlink(f"/proc/self/fd/{name}").startswith("pipe:"):
            fds.add(int(name))
    except OSError:
        pass
for fd in fds:
    try:
        for rid in range(1, 200):
            os.write(fd, wire.pack({"id": rid, "status": "ok", "value": 1.0, "counts": {}}))
        os.write(fd, struct.pack(">I", 2 ** 31) + b"garbage")
    except OSError:
        pass
# %%
def fake_call(self, request):
    return {"status": "ok", "value": {"t": "tuple", "v": [1.0, 1.0]}, "counts": {"binary_operator": 6}}


harness.Harness.op_call = fake_call
