"""The kernels' seccomp filter: the keyrings (a channel between submissions) and the other
refused system calls fail with EPERM inside the sandbox; ordinary Python still runs."""
import errno
import os
import struct
import time

import pytest

from lrnn.course.grading import remote, seccomp
from lrnn.course.grading import sandbox as sb


def test_program_is_well_formed():
    for arch in seccomp.ARCHES:
        prog = seccomp.program(arch)
        assert len(prog) % 8 == 0 and len(prog) // 8 < 256
        ins = [struct.unpack("=HBBI", prog[i:i + 8]) for i in range(0, len(prog), 8)]
        assert ins[-1] == (0x06, 0, 0, 0x00050000 | errno.EPERM)       # deny: EPERM
        assert ins[-2] == (0x06, 0, 0, 0x7FFF0000)                      # allow
        denied = {k for i, (code, jt, jf, k) in enumerate(ins)
                  if code == 0x15 and jt and i + jt + 1 == len(ins) - 1}
        assert set(seccomp.denied(arch).values()) <= denied
    with pytest.raises(ValueError, match="architecture"):
        seccomp.program("sparc")


def test_keyring_and_ptrace_refused_in_the_sandbox():
    try:
        box = sb.choose("bwrap")
    except sb.SandboxError as e:
        if os.environ.get("LRNN_REQUIRE_SANDBOX") == "1":
            pytest.fail(str(e))
        pytest.skip(str(e))
    if seccomp.machine() not in seccomp.ARCHES:
        pytest.skip("no filter for this architecture")
    nr = seccomp.denied()
    kernel = remote.Kernel(box, files={}, deadline=time.monotonic() + 120)
    try:
        probe = f"""
import ctypes, os
libc = ctypes.CDLL(None, use_errno=True)
for name, nr in {{"add_key": {nr['add_key']}, "keyctl": {nr['keyctl']},
                 "request_key": {nr['request_key']}, "ptrace": {nr['ptrace']},
                 "unshare": {nr['unshare']}}}.items():
    r = libc.syscall(nr, b"user", b"k", b"v", 1, -4)
    assert r == -1 and ctypes.get_errno() == {errno.EPERM}, (name, r, ctypes.get_errno())
assert os.listdir(".") == [], os.listdir(".")
"""
        out = kernel.run_cell(probe, time.monotonic() + 60)
        assert out["status"] == "ok", out
    finally:
        kernel.kill()
