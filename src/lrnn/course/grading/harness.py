"""The grader's side of a student's kernel: a small fixed program that runs inside the sandbox.

    python -m lrnn.course.grading.harness [--uid U] [--nproc N] [--memory BYTES] [--pdeathsig]

It reads requests from its standard input and writes replies to its standard output, both
pipes owned by the grader, as length-prefixed JSON frames (:mod:`lrnn.course.grading.wire`); right at
start it moves them to private descriptors and points descriptors 0 and 1 at ``/dev/null``, so
nothing the notebook prints can be taken for a reply. Requests:

* ``init``: the plain files beside the submission, written into the working folder;
* ``cell``: run one of the student's code cells in an IPython shell (errors are reported,
  never raised; the output is counted, not kept);
* ``names``: for each name, whether the notebook defines it as a function, or its value as
  plain data;
* ``call``: call a notebook function on plain-data arguments under
  :func:`lrnn.course.precision.exact_matmuls` and send back the result as plain data; when
  the hidden test has ``forbid``/``count_calls`` blocks in force, the call runs under a
  :class:`lrnn.course.check.calltrace.CallTrace`, and the reply says which forbidden functions
  ran, how often each counted function ran, and what the trace could not decide;
* ``probe``: the size of the largest array a function creates when traced by JAX.

Each request carries a time limit: at the limit the main thread is interrupted (as a
notebook's interrupt button does); the grader kills the sandbox if that does not help.

Nothing here decides a grade: the grader compares what comes back with its own references,
in its own process. Everything here runs with the student's code and is only as trustworthy
as that code lets it be.
"""
from __future__ import annotations

import argparse
import base64
import io
import os
import sys
import threading
import time
import _thread

from . import wire

PR_SET_PDEATHSIG = 1
PR_SET_NO_NEW_PRIVS = 38
MAX_EVALUE = 4000


# ---------------------------------------------------------------------------------------
# Confinement: limits and privileges, before any student code runs
# ---------------------------------------------------------------------------------------

def _prctl(option, value):
    if not sys.platform.startswith("linux"):
        return
    import ctypes
    libc = ctypes.CDLL(None, use_errno=True)
    libc.prctl(option, value, 0, 0, 0)


def _set_limit(resource, which, value):
    soft, hard = resource.getrlimit(which)
    if hard != resource.RLIM_INFINITY:
        value = min(value, hard)
    resource.setrlimit(which, (value, value))


def confine(opts) -> None:
    """Lower the limits, forbid gaining privileges, and leave root for ``--uid``."""
    if opts.pdeathsig:
        import signal
        _prctl(PR_SET_PDEATHSIG, signal.SIGKILL)
        if os.getppid() == 1:              # the grader is already gone
            os._exit(70)
    _prctl(PR_SET_NO_NEW_PRIVS, 1)
    try:
        import resource
    except ImportError:                    # not on Linux/macOS: no limits
        resource = None
    if resource is not None:
        _set_limit(resource, resource.RLIMIT_CORE, 0)
    if opts.uid is not None and os.geteuid() == 0:
        os.setgroups([])
        # The sandbox's own user id; in a container whose user namespace maps only a small
        # range of ids, "nobody" (65534) instead.
        for uid in (opts.uid, 65534):
            try:
                os.setresgid(uid, uid, uid)
                os.setresuid(uid, uid, uid)
                break
            except OSError:
                continue
        if os.geteuid() == 0 or os.getuid() == 0:
            raise SystemExit("harness: could not leave root")
    if resource is not None:
        if opts.nproc:
            _set_limit(resource, resource.RLIMIT_NPROC, opts.nproc)
        if opts.memory:
            _set_limit(resource, resource.RLIMIT_AS, opts.memory)


# ---------------------------------------------------------------------------------------
# The pipes
# ---------------------------------------------------------------------------------------

class Channel:
    """Blocking frame I/O on the two private descriptors."""

    def __init__(self, fd_in: int, fd_out: int):
        self.fd_in, self.fd_out = fd_in, fd_out
        self.reader = wire.FrameReader(wire.MAX_REQUEST)
        self.pending: list = []

    def receive(self):
        while not self.pending:
            data = os.read(self.fd_in, 1 << 20)
            if not data:
                raise EOFError
            self.pending.extend(self.reader.feed(data))
        return self.pending.pop(0)

    def send(self, message: dict):
        data = wire.pack(message)
        if len(data) > wire.MAX_REPLY + 4:
            data = wire.pack({"id": message.get("id"), "status": "unsendable",
                              "detail": f"a reply of {len(data):,} bytes is too large"})
        view = memoryview(data)
        while view:
            n = os.write(self.fd_out, view)
            view = view[n:]


def take_pipes() -> Channel:
    """Move stdin/stdout to private descriptors; 0 reads /dev/null, 1 writes to /dev/null."""
    fd_in, fd_out = os.dup(0), os.dup(1)
    os.set_inheritable(fd_in, False)
    os.set_inheritable(fd_out, False)
    null = os.open(os.devnull, os.O_RDWR)
    os.dup2(null, 0)
    os.dup2(null, 1)
    os.close(null)
    return Channel(fd_in, fd_out)


class Counter(io.TextIOBase):
    """A text stream that counts what is written to it and keeps nothing."""

    def __init__(self, name):
        super().__init__()
        self.name = name
        self.bytes = 0

    @property
    def encoding(self):
        return "utf-8"

    def writable(self):
        return True

    def write(self, text):
        if not isinstance(text, str):
            raise TypeError(f"write() argument must be str, not {type(text).__name__}")
        self.bytes += len(text.encode("utf-8", "replace"))
        return len(text)

    def isatty(self):
        return False


# ---------------------------------------------------------------------------------------
# Time limits: interrupt the main thread, like a notebook's interrupt button
# ---------------------------------------------------------------------------------------

class Watchdog:
    """Interrupts the main thread at a request's time limit. Its SIGINT handler raises
    ``KeyboardInterrupt`` only while a request runs, so a late signal cannot land in the
    middle of a reply."""

    def __init__(self):
        self.fired = False
        self.armed = False
        self._timer = None

    def install(self):
        import signal
        signal.signal(signal.SIGINT, self._on_sigint)

    def _on_sigint(self, signum, frame):
        if self.armed:
            raise KeyboardInterrupt

    def arm(self, seconds):
        self.fired = False
        self.armed = True
        if seconds is None:
            return
        self._timer = threading.Timer(max(0.0, float(seconds)), self._fire)
        self._timer.daemon = True
        self._timer._lrnn_harness = True
        self._timer.start()

    def _fire(self):
        self.fired = True
        # A real SIGINT to the main thread, as a notebook's interrupt button sends: it also
        # ends a blocking call (sleep, wait, I/O), which interrupt_main() alone would not.
        try:
            import signal
            signal.pthread_kill(threading.main_thread().ident, signal.SIGINT)
        except (AttributeError, OSError, ValueError):
            _thread.interrupt_main()

    def disarm(self):
        self.armed = False
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None


# ---------------------------------------------------------------------------------------
# The kernel
# ---------------------------------------------------------------------------------------

def _error_fields(error: BaseException) -> dict:
    try:
        text = str(error)
    except Exception:       # noqa: BLE001 - a student's __str__ may raise
        text = "(the message could not be formatted)"
    name = type(error).__name__
    if not isinstance(name, str) or not name.isidentifier() or len(name) > 80:
        name = "Exception"
    return {"ename": name, "evalue": text[:MAX_EVALUE],
            "notimpl": isinstance(error, NotImplementedError)}


def _persistent_compilation_cache():
    """JAX's compilation cache on disk, in a folder of this kernel's own: a ban clears JAX's
    in-memory caches so that compiled code runs its Python again (lrnn.course.check.calltrace),
    and the programs compiled before it are then read back instead of compiled anew (chapter
    8 grades in 48 s instead of 62 s)."""
    try:
        import tempfile
        import jax
        jax.config.update("jax_compilation_cache_dir", tempfile.mkdtemp(prefix="jax-cache-"))
        for name in ("jax_persistent_cache_min_compile_time_secs",
                     "jax_persistent_cache_min_entry_size_bytes"):
            try:
                jax.config.update(name, 0)
            except (AttributeError, KeyError, ValueError):
                pass
    except Exception:  # noqa: BLE001 - only a speed-up
        pass


def _private_trace():
    """A copy of :mod:`lrnn.course.check.calltrace` of the harness's own, outside
    ``sys.modules``: a notebook that patches the module it can import changes nothing in the
    one that traces its calls."""
    import importlib.util
    from ..check import calltrace
    spec = importlib.util.spec_from_file_location("_lrnn_harness_trace", calltrace.__file__)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


class Harness:
    def __init__(self, channel: Channel):
        self.channel = channel
        self.watchdog = Watchdog()
        self.stdout = Counter("stdout")
        self.stderr = Counter("stderr")
        self.shell = None
        self.precision = None
        self.core = None
        self.CallTrace = None

    # -- setup --------------------------------------------------------------------------
    def start(self, init: dict):
        # Everything the harness needs is imported before the student's files land in the
        # working folder (a `jax.py` beside the notebook must not replace JAX for the harness).
        from traitlets.config import Config
        from IPython.core.interactiveshell import InteractiveShell
        # Loaded before any student code: the course's precision policy (and, with
        # LRNN_EMULATE_TF32=1, the TF32 emulation) and the structural checks.
        from .. import check, precision
        self.precision, self.core = precision, check
        trace = _private_trace()
        trace.remember([t for t in init.get("targets") or () if isinstance(t, str)])
        self.CallTrace = trace.CallTrace
        try:
            # A progress bar starts tqdm's monitor thread, and a thread running before a test
            # puts the row up for review: honest notebooks with a bar would all be reviewed.
            import tqdm.std
            tqdm.std.tqdm.monitor_interval = 0
        except ImportError:
            pass

        class Shell(InteractiveShell):
            def enable_gui(self, gui=None):      # `%matplotlib inline` as in a notebook
                pass
        config = Config()
        config.HistoryManager.enabled = False
        config.HistoryManager.hist_file = ":memory:"
        self.shell = Shell.instance(config=config, colors="nocolor")
        workdir = init.get("cwd") or os.path.join(os.environ.get("TMPDIR", "/tmp"), "work")
        os.makedirs(workdir, exist_ok=True)
        for var in ("HOME", "MPLCONFIGDIR", "IPYTHONDIR", "XDG_CACHE_HOME", "XDG_CONFIG_HOME"):
            if os.environ.get(var):
                os.makedirs(os.environ[var], exist_ok=True)
        for name, data in (init.get("files") or {}).items():
            if not isinstance(name, str) or "/" in name or name in ("", ".", "..") or \
                    "\0" in name:
                continue
            with open(os.path.join(workdir, name), "wb") as f:
                f.write(base64.b64decode(data))
        os.chdir(workdir)
        _persistent_compilation_cache()
        if workdir not in sys.path:
            sys.path.insert(0, workdir)
        sys.stdout, sys.stderr = self.stdout, self.stderr
        self.watchdog.install()

    # -- requests -----------------------------------------------------------------------
    def serve(self):
        while True:
            try:
                request = self.channel.receive()
            except KeyboardInterrupt:           # a late interrupt after a finished request
                continue
            except EOFError:
                return
            op = request.get("op")
            rid = request.get("id")
            try:
                handler = getattr(self, f"op_{op}", None)
                if handler is None:
                    reply = {"status": "harness error", "detail": f"unknown request {op!r}"}
                else:
                    reply = self._timed(handler, request)
            except KeyboardInterrupt:
                reply = {"status": "timeout"}
            except Exception as e:  # noqa: BLE001 - a broken request must not end the kernel
                reply = {"status": "harness error", "detail": f"{type(e).__name__}: {e}"[:2000]}
            reply["id"] = rid
            try:
                self.channel.send(reply)
            except KeyboardInterrupt:
                self.channel.send(reply)
            if op == "exit":
                return

    def _timed(self, handler, request):
        self.watchdog.arm(request.get("timeout"))
        try:
            reply = handler(request)
        finally:
            self.watchdog.disarm()
        if self.watchdog.fired and reply.get("status") in ("error", "raised"):
            if reply.get("ename") == "KeyboardInterrupt":
                reply = dict(reply, status="timeout")
        return reply

    def op_ping(self, request):
        return {"status": "ok"}

    def op_exit(self, request):
        return {"status": "ok"}

    def op_cell(self, request):
        before = self.stdout.bytes + self.stderr.bytes
        result = self.shell.run_cell(request.get("source", ""), store_history=True)
        error = result.error_before_exec or result.error_in_exec
        reply = {"status": "ok" if error is None else "error",
                 "output_bytes": self.stdout.bytes + self.stderr.bytes - before}
        if error is not None:
            reply.update(_error_fields(error))
            if isinstance(error, KeyboardInterrupt) and self.watchdog.fired:
                reply["status"] = "timeout"
        return reply

    def _lookup(self, name):
        ns = self.shell.user_ns
        if not isinstance(name, str) or name not in ns:
            raise NameError(f"name {name!r} is not defined")
        return ns[name]

    def op_names(self, request):
        out = {}
        for name in request.get("names", []):
            ns = self.shell.user_ns
            if not isinstance(name, str) or name not in ns:
                out[name] = {"kind": "missing"}
                continue
            value = ns[name]
            if callable(value):
                out[name] = {"kind": "function"}
                continue
            try:
                out[name] = {"kind": "value", "value": wire.encode(value)}
            except wire.Unsendable as e:
                out[name] = {"kind": "unsendable", "detail": str(e)}
            except Exception as e:  # noqa: BLE001 - e.g. a jax array that fails to compute
                out[name] = {"kind": "unsendable", "detail": f"{type(e).__name__}: {e}"[:500]}
        return {"status": "ok", "names": out}

    def _decode_arguments(self, request):
        resolve = self._lookup
        args = wire.decode(request.get("args", []), resolve=resolve)
        kwargs = wire.decode(request.get("kwargs", {"t": "dict", "k": [], "v": []}),
                             resolve=resolve)
        return tuple(args), dict(kwargs)

    def op_call(self, request):
        try:
            fn = self._lookup(request.get("name"))
            args, kwargs = self._decode_arguments(request)
        except NameError as e:
            return {"status": "raised", **_error_fields(e), "counts": {}}
        forbidden = [t for t in request.get("forbid", []) if isinstance(t, str)]
        labels = [n for n in request.get("count", []) if isinstance(n, str)]
        trace = None
        if forbidden or labels:
            try:
                trace = self.CallTrace(forbidden, {n: self._lookup_counted(n) for n in labels},
                                       watch_threads=True)
            except NameError as e:
                return {"status": "raised", **_error_fields(e), "counts": {}}
        import contextlib
        with contextlib.ExitStack() as stack:
            stack.enter_context(self.precision.exact_matmuls())
            try:
                if trace is not None:
                    stack.enter_context(trace)
                value = fn(*args, **kwargs)
            except KeyboardInterrupt as e:
                if not self.watchdog.fired:
                    return {"status": "raised", **_error_fields(e), **self._traced(trace)}
                return {"status": "timeout"}
            except BaseException as e:  # noqa: BLE001 - reported to the grader
                return {"status": "raised", **_error_fields(e), **self._traced(trace)}
        try:
            encoded = wire.encode(value)
        except wire.Unsendable as e:
            return {"status": "unsendable", "detail": str(e), "type": e.type_name,
                    **self._traced(trace)}
        except BaseException as e:  # noqa: BLE001 - e.g. a jax array that fails to compute
            return {"status": "raised", **_error_fields(e), **self._traced(trace)}
        return {"status": "ok", "value": encoded, **self._traced(trace)}

    def _lookup_counted(self, name):
        value = self.shell.user_ns.get(name)
        if not callable(value):
            raise NameError(f"count_calls: no function {name!r} is defined in the notebook")
        return value

    @staticmethod
    def _traced(trace) -> dict:
        """What a trace saw, as plain data: the counts, the forbidden calls, what to review."""
        if trace is None:
            return {"counts": {}}
        return {"counts": dict(trace.counts),
                "forbidden": [list(hit) for hit in trace.hits][:20],
                "review": list(trace.review)[:20]}

    def op_probe(self, request):
        if request.get("what") != "largest_intermediate":
            return {"status": "harness error", "detail": "unknown probe"}
        try:
            fn = self._lookup(request.get("name"))
            args, _ = self._decode_arguments(request)
        except NameError as e:
            return {"status": "raised", **_error_fields(e)}
        with self.precision.exact_matmuls():
            size = self.core.largest_intermediate(fn, *args)
        return {"status": "ok", "value": size}


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(prog="python -m lrnn.course.grading.harness")
    parser.add_argument("--uid", type=int, default=None)
    parser.add_argument("--nproc", type=int, default=0)
    parser.add_argument("--memory", type=int, default=0, help="address-space limit, bytes")
    parser.add_argument("--pdeathsig", action="store_true")
    opts = parser.parse_args(argv)
    channel = take_pipes()
    confine(opts)
    harness = Harness(channel)
    try:
        init = channel.receive()
    except EOFError:
        return 0
    start = time.monotonic()
    try:
        harness.start(init)
    except BaseException as e:  # noqa: BLE001 - say why, then stop
        channel.send({"id": init.get("id"), "status": "harness error",
                      "detail": f"{type(e).__name__}: {e}"[:2000]})
        return 1
    channel.send({"id": init.get("id"), "status": "ok",
                  "startup_s": round(time.monotonic() - start, 3)})
    harness.serve()
    return 0


if __name__ == "__main__":
    sys.exit(main())
