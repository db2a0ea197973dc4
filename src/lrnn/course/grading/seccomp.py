"""A seccomp filter for the kernels: system calls a notebook never needs fail with EPERM.

No ``libseccomp`` is needed: the program is a few classic-BPF instructions, assembled here and
handed to ``bwrap --seccomp FD``. Refused: the kernel keyrings (``add_key``, ``keyctl``,
``request_key``: a channel between submissions graded one after another), tracing and reading
other processes, BPF, perf events, userfaultfd, io_uring, new namespaces, mounts, modules,
kexec, reboot, swap, accounting, file handles. On x86_64 the x32 and i386 ABIs are refused
whole (a second table of numbers the list would not cover). The numbers are those of the
kernel headers (``asm/unistd_64.h``; ``asm-generic/unistd.h`` for aarch64).
"""
from __future__ import annotations

import errno
import os
import platform
import struct

_DENIED = ("add_key", "request_key", "keyctl", "ptrace", "process_vm_readv",
           "process_vm_writev", "bpf", "perf_event_open", "userfaultfd", "kexec_load",
           "kexec_file_load", "init_module", "finit_module", "delete_module", "mount",
           "umount2", "pivot_root", "swapon", "swapoff", "reboot", "acct", "unshare", "setns",
           "open_by_handle_at", "name_to_handle_at", "io_uring_setup", "io_uring_enter",
           "io_uring_register", "fanotify_init")
_NUMBERS = {
    "x86_64": (0xC000003E, (248, 249, 250, 101, 310, 311, 321, 298, 323, 246, 320, 175, 313,
                            176, 165, 166, 155, 167, 168, 169, 163, 272, 308, 304, 303, 425,
                            426, 427, 300)),
    "aarch64": (0xC00000B7, (217, 218, 219, 117, 270, 271, 280, 241, 282, 104, 294, 105, 273,
                             106, 40, 39, 41, 224, 225, 142, 89, 97, 268, 265, 264, 425, 426,
                             427, 262)),
}
ARCHES = tuple(_NUMBERS)
_X32_BIT = 0x40000000
_LD_W_ABS, _JEQ_K, _JGE_K, _RET_K = 0x20, 0x15, 0x35, 0x06
_RET_ALLOW = 0x7FFF0000
_RET_ERRNO = 0x00050000


def machine() -> str | None:
    m = platform.machine().lower()
    return {"amd64": "x86_64", "arm64": "aarch64"}.get(m, m) if m else None


def denied(arch: str | None = None) -> dict[str, int]:
    """The refused system calls and their numbers on ``arch`` (default: this machine)."""
    _, numbers = _NUMBERS[arch or machine()]
    return dict(zip(_DENIED, numbers))


def program(arch: str | None = None) -> bytes:
    """The filter as ``struct sock_filter[]`` bytes (native byte order), or an error for an
    architecture whose numbers are not listed here."""
    arch = arch or machine()
    if arch not in _NUMBERS:
        raise ValueError(f"no seccomp filter for the architecture {arch!r}; known: "
                         f"{', '.join(_NUMBERS)}")
    audit, numbers = _NUMBERS[arch]
    body = [(_LD_W_ABS, 0, 0, 4),                       # seccomp_data.arch
            (_JEQ_K, 1, 0, audit),                      # this ABI: go on
            ("deny",),                                  # any other ABI (i386 on x86_64)
            (_LD_W_ABS, 0, 0, 0)]                       # seccomp_data.nr
    if arch == "x86_64":
        body.append((_JGE_K, "deny", 0, _X32_BIT))     # the x32 ABI
    body += [(_JEQ_K, "deny", 0, n) for n in numbers]
    body.append((_RET_K, 0, 0, _RET_ALLOW))
    deny_at = len(body)
    body.append((_RET_K, 0, 0, _RET_ERRNO | errno.EPERM))
    out = []
    for i, ins in enumerate(body):
        if ins == ("deny",):
            ins = (0x05, 0, 0, deny_at - i - 1)         # BPF_JMP|BPF_JA
        code, jt, jf, k = ins
        if jt == "deny":
            jt = deny_at - i - 1
        out.append(struct.pack("=HBBI", code, jt, jf, k))
    return b"".join(out)


def program_fd(arch: str | None = None) -> int:
    """A readable file descriptor holding :func:`program`, for ``bwrap --seccomp FD``
    (inheritable; the caller closes it after starting bwrap)."""
    data = program(arch)
    r, w = os.pipe()
    try:
        os.write(w, data)                               # < 1 KiB: fits the pipe's buffer
    finally:
        os.close(w)
    os.set_inheritable(r, True)
    return r
