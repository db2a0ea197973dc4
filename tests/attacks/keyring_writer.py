"""Collusion through the kernel keyring (attack 1), the writing half: store a
working `binary_operator` as text in the user keyring with add_key, without defining it here
(so this notebook holds no solution); a classmate graded later loads it (keyring_reader)."""
# %%
import ctypes
import os

_libc = ctypes.CDLL(None, use_errno=True)
_nr = {"x86_64": 248, "aarch64": 217}[os.uname().machine]
_code = (b"def binary_operator(left, right):\n    a1, b1 = left\n    a2, b2 = right\n"
         b"    return a1 * a2, a2 * b1 + b2\n")
_key = _libc.syscall(_nr, b"user", b"lrnn_answers", _code, len(_code), -4)
print("add_key:", _key, ctypes.get_errno())
