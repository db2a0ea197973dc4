"""The grader's end of a student's kernel: requests with time limits, and proxies.

:class:`Kernel` starts a harness (:mod:`lrnn.course.grading.harness`) in a sandbox
(:mod:`lrnn.course.grading.sandbox`) and talks to it through the two pipes the grader owns. Every wait
has a deadline; a kernel that does not answer in time, answers nonsense or dies is killed
(with everything it started) and :class:`KernelLost` is raised.

:class:`Proxy` stands, in the grader's process, for a function defined in the notebook:
calling it sends the arguments (plain data) to the kernel, which calls the student's function
and sends back the result (plain data). Inside a hidden test's ``with forbid(...)`` or
``with count_calls(...)`` block (see :mod:`lrnn.course.grading.context`) the call carries those
blocks along, the kernel traces the call (:mod:`lrnn.course.check.calltrace`), and the counts,
the forbidden functions that ran, and what the trace could not decide come back.
"""
from __future__ import annotations

import builtins
import base64
import itertools
import os
import selectors
import time

import numpy as np

from . import wire
from .context import GraderAbort
from .sandbox import Sandbox

#: Seconds a kernel may take to start (importing JAX and IPython), within the notebook limit.
STARTUP_TIMEOUT = 120.0
#: Seconds granted after a request's own time limit for the interrupt to take effect.
GRACE = 5.0
STDERR_TAIL = 8192


class KernelLost(GraderAbort):
    """The kernel died, ran past its time limit, or broke the protocol; it has been killed.
    A ``BaseException``: neither checkers nor hidden tests catch it."""

    def __init__(self, reason: str, detail: str = ""):
        super().__init__(f"{reason}: {detail}" if detail else reason)
        self.reason = reason          # "died", "timeout" or "protocol"
        self.detail = detail


class CallTimeout(GraderAbort):
    """A call reached the test's time limit; the kernel interrupted it and is still usable."""


class RemoteError(Exception):
    """An exception raised by the student's code in the kernel (its type name is kept)."""


_SAFE_BUILTIN_ERRORS = {
    name: obj for name, obj in vars(builtins).items()
    if isinstance(obj, type) and issubclass(obj, Exception)
    and not issubclass(obj, (StopIteration, StopAsyncIteration))
}


#: What the feedback says in place of the message of an exception raised in the kernel
#: during an official test: the kernel has seen the hidden inputs, and a message (or an
#: exception class named by the student) could carry them out.
HIDDEN_MESSAGE = ("(its message is not shown: run the check in your notebook to see it)")


def rebuild_exception(ename: str, evalue: str) -> Exception:
    """An exception of the student's type if it is a builtin one (else ``RemoteError``),
    with ``evalue`` as its message."""
    cls = _SAFE_BUILTIN_ERRORS.get(ename)
    if cls is not None:
        try:
            return cls(evalue)
        except Exception:  # noqa: BLE001 - e.g. UnicodeDecodeError needs five arguments
            pass
    return RemoteError(evalue)


class Kernel:
    """One harness process. ``deadline`` (time.monotonic()) bounds everything it does."""

    def __init__(self, sandbox: Sandbox, *, files: dict, deadline: float, targets=()):
        self.sandbox = sandbox
        self.deadline = deadline
        self.process = None
        self.reader = wire.FrameReader(wire.MAX_REPLY)
        self.frames: list = []
        self.stderr_tail = b""
        self.ids = itertools.count(1)
        self.selector = None
        self.dead: KernelLost | None = None
        self.startup_s = None
        self._start(files, list(targets))

    # -- process ------------------------------------------------------------------------
    def _start(self, files, targets):
        t0 = time.monotonic()
        self.process = self.sandbox.start()
        proc = self.process.proc
        for stream in (proc.stdin, proc.stdout, proc.stderr):
            os.set_blocking(stream.fileno(), False)
        self.selector = selectors.DefaultSelector()
        self.selector.register(proc.stdout, selectors.EVENT_READ, "out")
        self.selector.register(proc.stderr, selectors.EVENT_READ, "err")
        init = {"op": "init", "cwd": self.sandbox.workdir(self.process),
                "files": {name: base64.b64encode(data).decode("ascii")
                          for name, data in files.items()},
                "targets": targets}
        limit = min(self.deadline, time.monotonic() + STARTUP_TIMEOUT)
        reply = self._request(init, limit, grace=0.0)
        if reply.get("status") != "ok":
            self.kill()
            raise KernelLost("died", "the kernel could not start: "
                             + str(reply.get("detail", ""))[:1000])
        self.startup_s = time.monotonic() - t0

    def kill(self):
        if self.process is not None:
            self.process.kill()
        if self.selector is not None:
            try:
                self.selector.close()
            except (OSError, ValueError):
                pass
            self.selector = None

    close = kill

    def _lost(self, reason, detail=""):
        tail = self.stderr_tail.decode("utf-8", "replace").strip()
        self.kill()
        self.dead = KernelLost(reason, detail or (tail[-1500:] if reason == "died" else ""))
        raise self.dead

    # -- frames -------------------------------------------------------------------------
    def _send(self, data: bytes, limit: float):
        fd = self.process.proc.stdin.fileno()
        view = memoryview(data)
        with selectors.DefaultSelector() as sel:
            sel.register(fd, selectors.EVENT_WRITE)
            while view:
                left = limit - time.monotonic()
                if left <= 0:
                    self._lost("timeout", "the kernel stopped reading its requests")
                if not sel.select(left):
                    continue
                try:
                    n = os.write(fd, view)
                except BlockingIOError:
                    continue
                except (BrokenPipeError, OSError):
                    self._lost("died")
                view = view[n:]

    def _pump(self, until: float) -> bool:
        """Read what is available until ``until``; False when the time is up."""
        left = until - time.monotonic()
        if left <= 0:
            return False
        events = self.selector.select(min(left, 1.0))
        for key, _ in events:
            try:
                data = os.read(key.fileobj.fileno(), 1 << 20)
            except BlockingIOError:
                continue
            except OSError:
                data = b""
            if key.data == "err":
                if data:
                    self.stderr_tail = (self.stderr_tail + data)[-STDERR_TAIL:]
                else:
                    self.selector.unregister(key.fileobj)
                continue
            if not data:
                self._lost("died")
            try:
                self.frames.extend(self.reader.feed(data))
            except wire.WireError as e:
                self._lost("protocol", f"the kernel sent {e}")
        if not events and not self.process.alive() and not self.frames:
            self._lost("died")
        return True

    def _request(self, message: dict, limit: float, *, grace: float = GRACE) -> dict:
        if self.dead is not None:
            raise self.dead
        rid = next(self.ids)
        message = dict(message, id=rid)
        limit = min(limit, self.deadline)
        if message.get("op") != "init":
            message["timeout"] = max(0.0, limit - time.monotonic())
        data = wire.pack(message)
        if len(data) > wire.MAX_REQUEST:
            raise wire.Unsendable(f"arguments of {len(data):,} bytes", "arguments")
        self._send(data, limit + grace)
        hard = min(limit + grace, self.deadline + grace)
        while True:
            while self.frames:
                frame = self.frames.pop(0)
                if isinstance(frame, dict) and frame.get("id") == rid:
                    return frame
            if not self._pump(hard):
                self._lost("timeout", "the kernel did not answer within its time limit")

    def request(self, message: dict, limit: float) -> dict:
        """Send ``message``; wait until ``limit`` (plus a grace period) for its reply."""
        return self._request(message, limit)

    # -- operations ---------------------------------------------------------------------
    def run_cell(self, source: str, limit: float) -> dict:
        reply = self.request({"op": "cell", "source": source}, limit)
        if reply.get("status") not in ("ok", "error", "timeout"):
            reply = {"status": "error", "ename": "GraderError",
                     "evalue": str(reply.get("detail", reply.get("status")))[:2000]}
        return reply


class Session:
    """The calls of one hidden test: the kernel, the time limit, and the ``forbid`` /
    ``count_calls`` blocks in force (entered by the test's ``with`` statements)."""

    def __init__(self, kernel: Kernel, limit: float):
        self.kernel = kernel
        self.limit = limit
        self.forbidden: list[list[str]] = []
        self.counters: list = []
        #: What the kernel's call traces could not decide: for a person to look at.
        self.review: list[str] = []

    # forbid / count_calls (called by lrnn.course.grading.context)
    def push_forbid(self, targets):
        self.forbidden.append(list(targets))

    def pop_forbid(self):
        self.forbidden.pop()

    def push_counter(self, counter):
        self.counters.append(counter)

    def pop_counter(self, counter):
        self.counters.remove(counter)

    def _ref(self, value):
        if isinstance(value, Proxy):
            return value.name
        return None

    def _encode_arguments(self, args, kwargs):
        try:
            return (wire.encode(list(args), ref=self._ref),
                    wire.encode(dict(kwargs), ref=self._ref))
        except wire.Unsendable as e:
            raise TypeError(f"the grader cannot send {e} to the notebook") from None

    def _check(self, reply):
        status = reply.get("status")
        if status == "timeout":
            raise CallTimeout("the test ran past its time limit")
        if status == "harness error":
            raise KernelLost("protocol", str(reply.get("detail", ""))[:1000])
        return status

    def call(self, name: str, args, kwargs):
        args_w, kwargs_w = self._encode_arguments(args, kwargs)
        names = []
        for c in self.counters:
            if c.name not in names:
                names.append(c.name)
        reply = self.kernel.request({
            "op": "call", "name": name, "args": args_w, "kwargs": kwargs_w,
            "forbid": [t for group in self.forbidden for t in group], "count": names},
            self.limit)
        status = self._check(reply)
        counts = reply.get("counts") if isinstance(reply.get("counts"), dict) else {}
        for c in self.counters:
            n = counts.get(c.name, 0)
            if isinstance(n, int) and not isinstance(n, bool) and n >= 0:
                c.n += n
        self._note_review(reply.get("review"))
        hit = _first_hit(reply.get("forbidden"))
        if hit is not None and status in ("ok", "raised", "unsendable"):
            from ..check import ForbiddenCall
            target, by = hit
            via = "" if by in ("?", name) else f" (from {by})"
            raise ForbiddenCall(
                f"while this test ran, {name} called {target}{via}. This exercise asks for "
                f"the result without {target}; calling it elsewhere in the notebook (a demo "
                "or a self-check) is fine.")
        if status == "ok":
            try:
                return guard_broadcasting(wire.decode(reply.get("value"), jax_arrays=False))
            except wire.WireError as e:
                raise TypeError(f"the result of {name} could not be read: {e}") from None
        if status == "raised":
            raise rebuild_exception(str(reply.get("ename", "Exception")), HIDDEN_MESSAGE)
        if status == "unsendable":
            raise TypeError(f"{name} returned {reply.get('detail', 'a value')}, which the "
                            "grader cannot compare: return arrays, numbers, tuples, lists or "
                            "dicts of them")
        raise KernelLost("protocol", f"unexpected reply {status!r}")

    def _note_review(self, notes):
        if not isinstance(notes, list):
            return
        for note in notes[:20]:
            if isinstance(note, str) and note[:300] not in self.review:
                self.review.append(note[:300])

    def probe(self, what: str, name: str, args):
        args_w, _ = self._encode_arguments(args, {})
        reply = self.kernel.request({"op": "probe", "what": what, "name": name,
                                     "args": args_w}, self.limit)
        status = self._check(reply)
        if status == "raised":
            raise rebuild_exception(str(reply.get("ename", "Exception")), HIDDEN_MESSAGE)
        value = reply.get("value")
        if value is not None and (not isinstance(value, int) or isinstance(value, bool)):
            raise TypeError("the notebook sent a size that is not an integer")
        return value

    def names(self, names) -> dict:
        if not names:
            return {}
        reply = self.kernel.request({"op": "names", "names": list(names)}, self.limit)
        self._check(reply)
        out = reply.get("names")
        return out if isinstance(out, dict) else {}


#: Elements a comparison may create by broadcasting results of the notebook beyond the size
#: of its largest operand (16 Mi: a (4096, 4096) float64 array is 128 MiB).
MAX_BROADCAST = 1 << 24


class Returned(np.ndarray):
    """A NumPy array returned by the notebook. Arithmetic and comparisons with it check the
    broadcast shape first: shapes (N, 1) and (1, N), sent in a few kilobytes, would otherwise
    make the grader build an N x N array (a broadcast bomb). Results are plain arrays."""

    def __array_ufunc__(self, ufunc, method, *inputs, **kwargs):
        arrays = [np.shape(x) for x in inputs if isinstance(x, np.ndarray)]
        if method == "__call__" and len(arrays) > 1:
            try:
                shape = np.broadcast_shapes(*arrays)
            except ValueError:
                shape = None
            if shape is not None:
                size = int(np.prod(shape, dtype=np.int64))
                largest = max(int(np.prod(s, dtype=np.int64)) for s in arrays)
                if size > largest and size > MAX_BROADCAST:
                    raise ValueError(f"arrays of shapes {' and '.join(map(str, arrays))} "
                                     f"broadcast to {shape}: expected matching shapes")
        plain = [x.view(np.ndarray) if isinstance(x, Returned) else x for x in inputs]
        if "out" in kwargs:
            kwargs["out"] = tuple(x.view(np.ndarray) if isinstance(x, Returned) else x
                                  for x in kwargs["out"])
        return getattr(ufunc, method)(*plain, **kwargs)


def guard_broadcasting(value):
    """``value`` with every NumPy array in it (in tuples, lists, dicts) viewed as
    :class:`Returned`."""
    if type(value) is np.ndarray:
        return value.view(Returned)
    if isinstance(value, tuple):
        return tuple(guard_broadcasting(v) for v in value)
    if isinstance(value, list):
        return [guard_broadcasting(v) for v in value]
    if isinstance(value, dict):
        return {k: guard_broadcasting(v) for k, v in value.items()}
    return value


def _first_hit(hits):
    """The first (forbidden target, calling function) in a kernel's reply, as text."""
    if not isinstance(hits, list):
        return None
    for hit in hits:
        if isinstance(hit, list) and len(hit) == 2 and all(isinstance(h, str) for h in hit):
            return hit[0][:200], hit[1][:200]
    return None


class Proxy:
    """A notebook function, seen from the grader: calls run in the kernel."""

    __slots__ = ("name", "session", "__weakref__")

    def __init__(self, name: str, session: Session):
        self.name = name
        self.session = session

    @property
    def __name__(self):
        return self.name

    def __call__(self, *args, **kwargs):
        return self.session.call(self.name, args, kwargs)

    def __lrnn_probe__(self, what, *args):
        return self.session.probe(what, self.name, args)

    def __repr__(self):
        return f"<function {self.name} (in the notebook)>"


class Unavailable:
    """A notebook value the grader cannot read (not plain data): any use fails clearly."""

    __slots__ = ("_name", "_detail")

    def __init__(self, name, detail):
        object.__setattr__(self, "_name", name)
        object.__setattr__(self, "_detail", detail)

    def _fail(self, *args, **kwargs):
        raise TypeError(f"the grader cannot read `{self._name}` from the notebook: it is "
                        f"{self._detail}; exercises must return arrays, numbers, tuples, "
                        "lists or dicts of them")

    __getattr__ = __call__ = __getitem__ = __iter__ = __len__ = __array__ = _fail
    __eq__ = __lt__ = __gt__ = __le__ = __ge__ = __bool__ = __float__ = __int__ = _fail
    __add__ = __radd__ = __sub__ = __rsub__ = __mul__ = __rmul__ = __truediv__ = _fail
    __hash__ = None

    def __repr__(self):
        return f"<{self._name}: cannot be read>"
