"""Where the commands write: check the destination before any work, write atomically, lock
shared files, edit in place without changing a file's mode, link or line endings.

One rule for every file a command writes: it is checked before any work (its suffix; its
folder exists and is writable; it is not a folder; if it exists, it is a regular, writable file
that the command recognises as one of its own earlier outputs), then written atomically. A file
the command did not write is never replaced or appended to, so that a typo in ``--out`` never
costs a student's notebook or an hour of training.

Adding an output option to a command (``lrnn bench gpu --out``, say) takes one call in place
of ``parser.add_argument``::

    from lrnn import _io
    _io.output_argument(parser, "--out", suffixes=(".json",),
                        owned_by=_io.json_field_is("benchmark", "gpu"),
                        command="lrnn bench gpu", help="write the results as JSON here")
    ...
    _io.replace_own(args.out, text, **_io.spec_of(parser, "--out"))   # after the work

:func:`output_argument` checks the value while the command line is parsed (a refusal is one
line naming the option, the path and what is wrong, before anything runs) and marks the
option (``action.lrnn_output``), so that tests/test_outputs.py, which walks every command's
parser, finds it and checks that a foreign file there is left as it is. ``folder=True`` is for
an output folder (``check_folder``). :func:`replace_own` checks again just before writing (the
run may have taken an hour) and writes atomically. ``owned_by`` predicates recognise a
command's own outputs: :func:`json_has_keys`, :func:`json_field_is`, :func:`first_line_is`,
:func:`first_line_startswith`, :func:`jsonl_first_record_is` (a JSON-lines log, which
:func:`append_own_line` then extends). Scripts that edit files in place use
:func:`edit_in_place` (follows a symlink to its target and keeps the link, keeps the mode) and
:func:`split_newlines` / :func:`join_newlines` (keep CRLF line endings).
"""
from __future__ import annotations

import argparse
import contextlib
import dataclasses
import json
import os
import stat
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
        if not os.access(p, os.W_OK):
            _fail(what, path, "this file is read-only; it is left as it is")
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
    """``owned_by`` predicate: a text file whose first line starts with ``prefix``."""
    def owned(p):
        with open(p, encoding="utf-8") as f:
            return f.readline().startswith(prefix)
    return owned


def json_field_is(key: str, value):
    """``owned_by`` predicate: a JSON object whose ``key`` is ``value`` (``"benchmark":
    "scan"``)."""
    def owned(p):
        with open(p, encoding="utf-8") as f:
            data = json.load(f)
        return isinstance(data, dict) and data.get(key) == value
    return owned


def jsonl_first_record_is(key: str, value):
    """``owned_by`` predicate: JSON lines whose first record is an object with ``key`` equal to
    ``value`` (the marker a command writes first in its own log)."""
    def owned(p):
        with open(p, encoding="utf-8") as f:
            first = json.loads(f.readline())
        return isinstance(first, dict) and first.get(key) == value
    return owned


# ------------------------------------------------------------------------------------------
# Output options of the command lines
# ------------------------------------------------------------------------------------------

@dataclasses.dataclass(frozen=True)
class OutputSpec:
    """What an output option accepts (see :func:`output_argument`)."""
    what: str
    suffixes: tuple = ()
    owned_by: object = None
    command: str = "this command"
    folder: bool = False

    def check(self, path) -> Path:
        """The check of :func:`check_destination` (or :func:`check_folder`) for ``path``."""
        if self.folder:
            return check_folder(path, what=self.what, create=True)
        return check_destination(path, suffixes=self.suffixes, what=self.what,
                                 owned_by=self.owned_by, command=self.command)


def output_argument(parser, *flags, suffixes=(), owned_by=None, command="this command",
                    folder: bool = False, **kwargs):
    """``parser.add_argument(*flags, **kwargs)`` for a file (or, with ``folder``, a folder) the
    command writes: the value is checked as the command line is parsed (:class:`OutputSpec`),
    so that a refusal comes before any work, in one line naming the option. The action
    carries its spec as ``action.lrnn_output``. Returns the action."""
    spec = OutputSpec(flags[0], tuple(suffixes), owned_by, command, folder)

    def checked(value):
        try:
            spec.check(value)
        except DestinationError as err:
            raise argparse.ArgumentTypeError(str(err).removeprefix(f"`{spec.what}`: ")) from None
        return value
    checked.__name__ = "destination"
    action = parser.add_argument(*flags, type=checked, **kwargs)
    action.lrnn_output = spec
    return action


def spec_of(parser, flag: str) -> dict:
    """The keyword arguments of :func:`replace_own` for the output option ``flag``."""
    for action in parser._actions:
        if flag in action.option_strings and hasattr(action, "lrnn_output"):
            s = action.lrnn_output
            return {"suffixes": s.suffixes, "what": s.what, "owned_by": s.owned_by,
                    "command": s.command}
    raise KeyError(f"{flag} is not an output option of {parser.prog}")


def replace_own(path, text: str, *, suffixes=(), what="--out", owned_by=None,
                command="this command", encoding="utf-8"):
    """Check ``path`` again (:func:`check_destination`: the work may have taken an hour and
    someone may have put a file there since), then write ``text`` atomically."""
    check_destination(path, suffixes=suffixes, what=what, owned_by=owned_by, command=command)
    atomic_write_text(path, text, encoding=encoding)


def append_own_line(path, line: str, *, marker, what: str = "--out"):
    """Append ``line`` (one JSON record, no newline) to the JSON-lines file ``path``: created
    (atomically) when absent; appended to only when ``marker(path)`` recognises it as the
    command's own log (else :class:`DestinationError`). A last line left without its newline
    by an interrupted run is ended first, so that every record stays on a line of its own."""
    p = Path(path)
    if not p.exists():
        atomic_write_text(p, line + "\n")
        return
    if p.is_symlink() or not p.is_file() or not _safe(marker, p):
        _fail(what, path, "this file is not this command's own log; it is left as it is")
    with open(p, "rb+") as f:
        f.seek(0, os.SEEK_END)
        ended = f.tell() == 0
        if not ended:
            f.seek(-1, os.SEEK_END)
            ended = f.read(1) == b"\n"
        f.write((("" if ended else "\n") + line + "\n").encode("utf-8"))
        f.flush()
        os.fsync(f.fileno())


# ------------------------------------------------------------------------------------------
# Atomic writes
# ------------------------------------------------------------------------------------------

@contextlib.contextmanager
def atomic_open(path, mode: str = "w", *, file_mode: int | None = None, **kwargs):
    """Open a unique temporary file in ``path``'s folder; on a clean exit flush, fsync and
    ``os.replace`` it onto ``path``; on an error (Ctrl-C included) remove it (``path`` is then
    untouched). The new file gets ``file_mode`` (default: 0o666 less the umask)."""
    p = Path(path)
    parent = p.parent if str(p.parent) else Path(".")
    fd, tmp = tempfile.mkstemp(dir=parent, prefix=f".{p.name}.", suffix=".tmp")
    try:
        if file_mode is None:
            umask = os.umask(0)
            os.umask(umask)
            file_mode = 0o666 & ~umask
        os.fchmod(fd, file_mode)
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
# Editing a file in place (scripts that rewrite the repository's own files)
# ------------------------------------------------------------------------------------------

def edit_in_place(path, data: bytes):
    """Replace the contents of the existing file ``path`` by ``data``, atomically, keeping what
    is not contents: a symlink stays a link (its target is edited) and the mode (an
    executable stays executable) is kept."""
    target = Path(os.path.realpath(path))
    mode = stat.S_IMODE(os.stat(target).st_mode)
    with atomic_open(target, "wb", file_mode=mode) as f:
        f.write(data)


def split_newlines(text: str) -> tuple[str, str]:
    """``(text with LF line endings, the file's line ending)``: CRLF when every line of
    ``text`` ends so, else LF (a file with mixed endings is left as it is)."""
    if "\r\n" in text and "\n" not in text.replace("\r\n", ""):
        return text.replace("\r\n", "\n"), "\r\n"
    return text, "\n"


def join_newlines(text: str, newline: str) -> str:
    """The inverse of :func:`split_newlines`."""
    return text.replace("\n", newline) if newline != "\n" else text


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
