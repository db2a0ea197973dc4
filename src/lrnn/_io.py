"""Where the commands write: check the destination before any work, write atomically, lock
shared files.

Every command that writes (``lrnn train --out/--checkpoint``, ``lrnn experiments run --out``,
``lrnn doctor --out-dir``, ``lrnn exercises build``) calls :func:`check_destination` for each
file before it trains, runs or builds anything, then writes with :func:`atomic_write_text`,
:func:`atomic_write_bytes` or :func:`atomic_open`. A file is replaced only if the command
recognises it as one of its own earlier outputs (``owned_by``), so that a typo in ``--out``
never costs a student's notebook or an hour of training.
"""
from __future__ import annotations

import contextlib
import json
import os
import tempfile
from pathlib import Path


class DestinationError(ValueError):
    """A command cannot (or must not) write where it was asked to."""


def _fail(what: str, path, problem: str):
    raise DestinationError(f"`{what}`: got {str(path)!r}, {problem}.")


def check_folder(path, *, what: str, create: bool = False) -> Path:
    """``path`` is a folder that exists (or, with ``create``, can be made: its parent exists)
    and that this process can write into."""
    p = Path(path)
    if p.exists() and not p.is_dir():
        _fail(what, path, "expected a folder, but it is an existing file")
    if not p.exists():
        parent = p.parent if str(p.parent) else Path(".")
        if not create:
            _fail(what, path, "expected an existing folder")
        if not parent.is_dir():
            _fail(what, path, f"expected a folder whose parent exists (no folder {str(parent)!r})")
        if not os.access(parent, os.W_OK | os.X_OK):
            _fail(what, path, f"expected a folder that can be created (cannot write in {str(parent)!r})")
        return p
    if not os.access(p, os.W_OK | os.X_OK):
        _fail(what, path, "expected a folder this user can write into")
    return p


def check_destination(path, *, suffixes=(), what: str = "--out", owned_by=None,
                      command: str = "this command") -> Path:
    """Check, before any work, that ``path`` can be written by ``command``.

    * its suffix is one of ``suffixes`` (lower-case, with the dot; empty: any);
    * it is not a folder, and its folder exists and is writable;
    * if it exists, it is a regular file that ``owned_by(path)`` recognises as an earlier
      output of the same command (``owned_by=None``: no existing file may be replaced).

    Returns ``path`` as a :class:`~pathlib.Path`; raises :class:`DestinationError` (a
    ValueError) naming the argument, the path and what is wrong."""
    p = Path(path)
    if not str(path):
        _fail(what, path, "expected a file name")
    if suffixes and p.suffix.lower() not in suffixes:
        _fail(what, path, f"expected a file name ending in {' or '.join(suffixes)}")
    if p.is_dir():
        _fail(what, path, "expected a file name, but it is an existing folder")
    parent = p.parent if str(p.parent) else Path(".")
    if not parent.is_dir():
        _fail(what, path, f"expected a file in an existing folder (there is no folder "
                          f"{str(parent)!r})")
    if not os.access(parent, os.W_OK | os.X_OK):
        _fail(what, path, f"expected a file in a folder this user can write into ({str(parent)!r})")
    if p.exists() or p.is_symlink():
        if not p.is_file() or p.is_symlink():
            _fail(what, path, "expected a new file or a regular file, not a link or a special file")
        if owned_by is None or not _safe(owned_by, p):
            _fail(what, path, f"this file exists and was not written by {command}; it is left "
                              "as it is: choose another name, or move the file away first")
    return p


def _safe(pred, p) -> bool:
    try:
        return bool(pred(p))
    except Exception:                 # an unreadable file is not recognisably ours
        return False


# ------------------------------------------------------------------------------------------
# Recognising a command's own outputs
# ------------------------------------------------------------------------------------------

def json_has_keys(*keys):
    """``owned_by`` predicate: a JSON object holding every one of ``keys``."""
    def owned(p):
        with open(p, encoding="utf-8") as f:
            data = json.load(f)
        return isinstance(data, dict) and all(k in data for k in keys)
    return owned


def first_line_is(line: str):
    """``owned_by`` predicate: a text file whose first line is ``line``."""
    def owned(p):
        with open(p, encoding="utf-8") as f:
            return f.readline().rstrip("\r\n") == line
    return owned


def first_line_startswith(prefix: str):
    def owned(p):
        with open(p, encoding="utf-8") as f:
            return f.readline().startswith(prefix)
    return owned


# ------------------------------------------------------------------------------------------
# Atomic writes
# ------------------------------------------------------------------------------------------

@contextlib.contextmanager
def atomic_open(path, mode: str = "w", **kwargs):
    """Open a unique temporary file in ``path``'s folder; on a clean exit flush, fsync and
    ``os.replace`` it onto ``path``; on an error remove it (``path`` is then untouched)."""
    p = Path(path)
    parent = p.parent if str(p.parent) else Path(".")
    fd, tmp = tempfile.mkstemp(dir=parent, prefix=f".{p.name}.", suffix=".tmp")
    try:
        umask = os.umask(0)
        os.umask(umask)
        os.fchmod(fd, 0o666 & ~umask)
        with os.fdopen(fd, mode, **kwargs) as f:
            yield f
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, p)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        raise


def atomic_write_bytes(path, data: bytes):
    with atomic_open(path, "wb") as f:
        f.write(data)


def atomic_write_text(path, text: str, *, encoding: str = "utf-8", newline=None):
    with atomic_open(path, "w", encoding=encoding, newline=newline) as f:
        f.write(text)


def backup_copy(path, *, what: str = "--force") -> Path:
    """Before a command replaces ``path``: copy it to ``<name>.<UTC time>.bak`` beside it
    (never over an existing file: ``.1.bak``, ``.2.bak`` ... then) and return the copy's path.
    The copy keeps the file's bytes and permissions."""
    import datetime
    import shutil
    p = Path(path)
    stamp = datetime.datetime.now(datetime.timezone.utc).strftime("%Y%m%dT%H%M%SZ")
    for n in range(1000):
        target = p.with_name(f"{p.name}.{stamp}{'' if n == 0 else f'.{n}'}.bak")
        try:
            fd = os.open(target, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o666)
        except FileExistsError:
            continue
        try:
            with open(p, "rb") as src, os.fdopen(fd, "wb") as dst:
                shutil.copyfileobj(src, dst)
                dst.flush()
                os.fsync(dst.fileno())
            shutil.copymode(p, target)
        except BaseException:
            with contextlib.suppress(OSError):
                os.unlink(target)
            raise
        return target
    _fail(what, path, "expected a free backup name beside it (1000 backups exist)")


# ------------------------------------------------------------------------------------------
# Locks
# ------------------------------------------------------------------------------------------

class LockedError(DestinationError):
    """Another process holds the lock of a shared file."""


@contextlib.contextmanager
def lock(path, *, what: str = "--checkpoint"):
    """Hold an exclusive ``fcntl`` lock on ``<path>.lock`` for the block; if another process
    holds it, raise :class:`LockedError` naming the file at once (no waiting)."""
    import fcntl
    lock_path = str(path) + ".lock"
    fd = os.open(lock_path, os.O_RDWR | os.O_CREAT, 0o666)
    try:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError:
            raise LockedError(f"`{what}`: got {str(path)!r}, which another running process is "
                              f"using (it holds {lock_path!r}); wait for it to finish or choose "
                              "another file") from None
        yield
    finally:
        os.close(fd)
