"""Where a submission's kernel runs: a bubblewrap sandbox on Linux, or (with a warning) not
confined at all.

``bwrap`` (Debian/Ubuntu package ``bubblewrap``) starts the kernel (``python -m
lrnn.course.grading.harness``) with:

* an empty root file system (a tmpfs) holding read-only bind mounts of ``/usr`` and the
  system library folders, a few files of ``/etc`` (the dynamic linker's cache, passwd, time
  zone), the Python environment (``sys.prefix``, ``sys.base_prefix`` and their site
  folders) and the installed ``lrnn`` package folder only (in an editable install, the
  ``src/lrnn`` folder, never the repository root with ``solutions/`` beside it); nothing
  else of the host: not the submissions, the solutions, the gradebook or the feedback;
* a private writable ``/tmp`` (a size-limited tmpfs) holding the working folder and the
  home folder, and a private ``/dev/shm``;
* its own PID, network (loopback only), IPC and UTS namespaces; a new session;
* a seccomp filter (:mod:`.seccomp`): the kernel keyrings, tracing, BPF, io_uring, new
  namespaces, mounts and the like fail with EPERM;
* as root, a user id never used before by this grader (keyrings and anything else keyed by
  user id are not shared with the previous submission);
* ``--die-with-parent``: the whole sandbox dies with the grader;
* as root: the kernel leaves root for a user id of its own (one per concurrent sandbox, so
  that one submission's process limit is not another's), with no way to regain privileges
  (``no_new_privs``, ``nosuid`` mounts); limits on the number of processes (``RLIMIT_NPROC``)
  and on the address space (``RLIMIT_AS``; not on a GPU, where CUDA reserves far more
  address space than it uses).

Where the grader may create control groups (root, writable ``/sys/fs/cgroup``; v1 hierarchies
``cpu``, ``pids``, ``memory``, or the unified hierarchy at a container's root), each sandbox
also gets a group of its own: its share of the CPU, a process limit and a memory limit that
no ``setsid``/double fork escapes.

The grader kills a sandbox by killing ``bwrap``: the kernel gets ``SIGKILL`` with it and,
being in its own PID namespace, takes every process it started along (and, with control
groups, every process of its group is killed too).

``none`` runs the kernel as the grader's user with the same limits but no isolation: a
submission can read and write whatever that user can. The grader warns and records it.
"""
from __future__ import annotations

import functools
import glob
import itertools
import os
import shutil
import signal
import site
import subprocess
import sys
import sysconfig
import tempfile
import threading
from dataclasses import dataclass, field
from pathlib import Path

from . import seccomp

MODES = ("auto", "bwrap", "none")
DEFAULT_MEMORY_MB = 8192
DEFAULT_PROCESSES = 1024
DEFAULT_TMP_MB = 1024
UID_BASE = 2_000_000_000
UID_SPAN = 100_000 * 4096
SANDBOX_TMP = "/tmp"
SANDBOX_WORKDIR = "/tmp/work"
SANDBOX_HOME = "/tmp/home"
_PASS_PREFIXES = ("JAX_", "XLA_", "CUDA_", "NVIDIA_", "TF_CPP_", "OMP_", "MKL_", "OPENBLAS_")
_PASS_NAMES = ("LRNN_EMULATE_TF32", "LD_LIBRARY_PATH", "TZ", "PYTHONHASHSEED")
_ETC = ("ld.so.cache", "ld.so.conf", "ld.so.conf.d", "localtime", "passwd", "group",
        "nsswitch.conf", "alternatives", "os-release", "fonts", "mime.types")
_SYSTEM_DIRS = ("/usr", "/bin", "/sbin", "/lib", "/lib32", "/lib64", "/libx32")


class SandboxError(RuntimeError):
    """The sandbox asked for cannot be used here (the message says why and what to do)."""


INSTALL_HINT = ("install bubblewrap (Debian/Ubuntu: `sudo apt-get install bubblewrap`; "
                "Fedora: `sudo dnf install bubblewrap`), or pass `--sandbox none` to grade "
                "without isolation (not for untrusted submissions)")


# ---------------------------------------------------------------------------------------
# What the kernel needs to see
# ---------------------------------------------------------------------------------------

def _inside(path: Path, parent: Path) -> bool:
    try:
        path.relative_to(parent)
        return True
    except ValueError:
        return False


def lrnn_package_dir() -> Path:
    import lrnn
    return Path(lrnn.__file__).resolve().parent


def python_paths() -> list[Path]:
    """The folders of the Python environment the kernel imports from."""
    paths = {sys.prefix, sys.exec_prefix, sys.base_prefix, sys.base_exec_prefix,
             str(Path(os.path.realpath(sys.executable)).parent.parent)}
    for key in ("stdlib", "platstdlib", "purelib", "platlib"):
        try:
            paths.add(sysconfig.get_path(key))
        except KeyError:
            pass
    try:
        paths.update(site.getsitepackages())
    except AttributeError:
        pass
    if site.ENABLE_USER_SITE and os.path.isdir(site.getusersitepackages()) and \
            site.getusersitepackages() in sys.path:
        paths.add(site.getusersitepackages())
    return sorted({Path(p).resolve() for p in paths if p and os.path.isdir(p)})


def grader_pythonpath(hidden=()) -> list[Path]:
    """The folders of the grader's own ``PYTHONPATH`` (packages installed with ``pip install
    --target``, a source checkout's ``src/``), so that the kernel imports what the grader
    imports; except a folder that holds a hidden one or lies inside one (``PYTHONPATH=.`` at
    the course's root would show ``solutions/``)."""
    hidden = [Path(h).resolve() for h in hidden]
    out = []
    for entry in os.environ.get("PYTHONPATH", "").split(os.pathsep):
        if not entry or not os.path.isdir(entry):
            continue
        path = Path(entry).resolve()
        if path in out or any(_inside(h, path) or _inside(path, h) for h in hidden):
            continue
        out.append(path)
    return out


def _minimal(paths) -> list[Path]:
    """Drop paths inside other paths of the list."""
    out = []
    for p in sorted(set(paths), key=lambda q: len(q.parts)):
        if not any(_inside(p, q) for q in out):
            out.append(p)
    return out


@dataclass
class Layout:
    """The read-only folders a sandbox shows, and the environment of its kernel."""
    binds: list[Path]
    pythonpath: str | None
    env: dict
    gpu_devices: list[str] = field(default_factory=list)


def kernel_environment(home: str, tmp: str, pythonpath: str | None) -> dict:
    env = {
        "PATH": os.pathsep.join([str(Path(sys.executable).parent), "/usr/local/bin",
                                 "/usr/bin", "/bin"]),
        "HOME": home, "TMPDIR": tmp, "USER": "student", "LOGNAME": "student",
        "LANG": "C.UTF-8", "PYTHONIOENCODING": "utf-8", "PYTHONDONTWRITEBYTECODE": "1",
        "MPLBACKEND": "Agg", "MPLCONFIGDIR": f"{home}/.config/matplotlib",
        "IPYTHONDIR": f"{home}/.ipython", "XDG_CACHE_HOME": f"{home}/.cache",
        "XDG_CONFIG_HOME": f"{home}/.config",
        "XLA_PYTHON_CLIENT_PREALLOCATE": "false",
    }
    for name, value in os.environ.items():
        if name.startswith(_PASS_PREFIXES) or name in _PASS_NAMES:
            env[name] = value
    if pythonpath:
        env["PYTHONPATH"] = pythonpath
    return env


def layout(hidden=(), extra=()) -> Layout:
    """What to bind. ``hidden``: folders the kernel must not see (solutions, submissions,
    gradebook, feedback); a bind that would show one is an error."""
    package = lrnn_package_dir()
    env_paths = python_paths()
    imports = grader_pythonpath(hidden)
    # A checkout's src/ shows its lrnn folder only, as an editable install does.
    binds = _minimal([Path(p) for p in _SYSTEM_DIRS if os.path.isdir(p) and
                      not os.path.islink(p)] + env_paths +
                     [p for p in imports if p != package.parent] +
                     [Path(e).resolve() for e in extra])
    entries = [str(p) for p in imports]
    if not any(_inside(package, b) for b in binds):
        binds.append(package)
        if str(package.parent) not in entries:
            entries.insert(0, str(package.parent))
    pythonpath = os.pathsep.join(entries) or None
    for ld in os.environ.get("LD_LIBRARY_PATH", "").split(os.pathsep):
        if ld and os.path.isdir(ld) and not any(_inside(Path(ld).resolve(), b) for b in binds):
            binds.append(Path(ld).resolve())
    for h in hidden:
        h = Path(h).resolve()
        for b in binds:
            if _inside(h, b):
                raise SandboxError(f"the sandbox would show {h} to the student's kernel, "
                                   f"because it lies inside {b} (part of the Python "
                                   "environment or the lrnn package): move it elsewhere")
    gpus = sorted(glob.glob("/dev/nvidia*")) + sorted(glob.glob("/dev/dri"))
    return Layout(binds=binds, pythonpath=pythonpath,
                  env=kernel_environment(SANDBOX_HOME, SANDBOX_TMP, pythonpath),
                  gpu_devices=gpus if os.environ.get("JAX_PLATFORMS", "") != "cpu" else [])


# ---------------------------------------------------------------------------------------
# bubblewrap
# ---------------------------------------------------------------------------------------

@functools.lru_cache(maxsize=None)
def bwrap_features() -> frozenset:
    exe = shutil.which("bwrap")
    if exe is None:
        return frozenset()
    try:
        text = subprocess.run([exe, "--help"], capture_output=True, text=True,
                              timeout=10).stdout
    except (OSError, subprocess.SubprocessError):
        return frozenset()
    return frozenset(opt for opt in ("--size", "--perms", "--disable-userns",
                                     "--unshare-cgroup-try", "--die-with-parent")
                     if opt in text) | {"bwrap"}


def _ancestors_dirs(path: Path, made: set, args: list, perms: bool):
    for parent in reversed(path.parents):
        p = str(parent)
        if p == "/" or p in made:
            continue
        made.add(p)
        if perms:
            args += ["--perms", "0755"]
        args += ["--dir", p]


def bwrap_args(lay: Layout, *, tmp_mb: int, userns: bool = False) -> list[str]:
    """bwrap's command line. As root, bwrap sets up the namespaces with its privileges (the
    kernel then leaves root itself); otherwise, or with ``userns``, in a user namespace."""
    feats = bwrap_features()
    root = os.geteuid() == 0
    args = [shutil.which("bwrap") or "bwrap", "--die-with-parent", "--new-session",
            "--unshare-pid", "--unshare-net", "--unshare-ipc", "--unshare-uts"]
    if "--unshare-cgroup-try" in feats:
        args.append("--unshare-cgroup-try")
    if not root or userns:
        args.append("--unshare-user")
        if "--disable-userns" in feats:
            args.append("--disable-userns")
        if root:
            args += ["--cap-drop", "ALL"]
    perms = "--perms" in feats
    args += ["--tmpfs", "/", "--dev", "/dev", "--proc", "/proc"]
    for where in ("/dev/shm", SANDBOX_TMP):     # shared memory (multiprocessing), and /tmp
        if perms:
            args += ["--perms", "1777"]
        if "--size" in feats:
            args += ["--size", str(tmp_mb * 2 ** 20)]
        args += ["--tmpfs", where]
    made = {SANDBOX_TMP}
    for name in _SYSTEM_DIRS:
        if os.path.islink(name):
            args += ["--symlink", os.readlink(name), name]
            made.add(name)
    for b in lay.binds:
        _ancestors_dirs(b, made, args, perms)
        args += ["--ro-bind", str(b), str(b)]
        made.add(str(b))
    if os.path.isdir("/etc"):
        if perms:
            args += ["--perms", "0755"]
        args += ["--dir", "/etc"]
        for name in _ETC:
            path = f"/etc/{name}"
            if os.path.exists(path):
                args += ["--ro-bind", path, path]
    for dev in lay.gpu_devices:
        args += ["--dev-bind-try", dev, dev]
    if lay.gpu_devices:
        args += ["--ro-bind-try", "/sys", "/sys"]
    args += ["--chdir", SANDBOX_TMP, "--"]
    return args


@functools.lru_cache(maxsize=None)
def _bwrap_works(argv_key: tuple) -> str | None:
    """None if a sandboxed Python starts; else why not."""
    try:
        r = subprocess.run(list(argv_key) + [sys.executable, "-S", "-c", "pass"],
                           capture_output=True, text=True, timeout=60,
                           env=kernel_environment(SANDBOX_HOME, SANDBOX_TMP, None))
    except (OSError, subprocess.SubprocessError) as e:
        return f"{type(e).__name__}: {e}"
    if r.returncode != 0:
        return (r.stderr or r.stdout).strip()[-500:] or f"exit status {r.returncode}"
    return None


# ---------------------------------------------------------------------------------------
# Control groups (best effort): a fair share of the CPU, a process and a memory limit per
# sandbox, and a reliable way to kill all of it
# ---------------------------------------------------------------------------------------

CGROUP_ROOT = "/sys/fs/cgroup"
_CGROUP_WRAPPER = ('while [ "$1" != -- ]; do echo $$ > "$1" || exit 97; shift; done; shift; '
                   'exec "$@"')


def _own_cgroups() -> dict:
    """{controller: path of this process's cgroup} ("" for the unified hierarchy)."""
    out = {}
    try:
        with open("/proc/self/cgroup") as f:
            for line in f:
                _, controllers, path = line.rstrip("\n").split(":", 2)
                for c in controllers.split(","):
                    out[c] = path
    except OSError:
        pass
    return out


def _cgroup_parents() -> list[tuple[str, str]]:
    """(controller, folder under which to create a sandbox's group) for each usable
    controller: cgroup v1 hierarchies ``/sys/fs/cgroup/{cpu,pids,memory}``, or the unified
    hierarchy when this process sits at its root (a container's own cgroup namespace)."""
    if os.geteuid() != 0 or not sys.platform.startswith("linux"):
        return []
    own = _own_cgroups()
    parents = []
    for controller in ("cpu", "pids", "memory"):
        mount = os.path.join(CGROUP_ROOT, controller)
        if controller in own and os.path.exists(os.path.join(mount, "cgroup.procs")):
            parents.append((controller, os.path.join(mount, own[controller].lstrip("/"))))
    if parents:
        return parents
    if own.get("") == "/" and os.path.exists(os.path.join(CGROUP_ROOT, "cgroup.controllers")):
        try:
            with open(os.path.join(CGROUP_ROOT, "cgroup.controllers")) as f:
                available = f.read().split()
            with open(os.path.join(CGROUP_ROOT, "cgroup.subtree_control"), "w") as f:
                f.write(" ".join(f"+{c}" for c in ("cpu", "pids", "memory") if c in available))
        except OSError:
            return []
        return [("", CGROUP_ROOT)]
    return []


class Cgroups:
    """One sandbox's control groups (one per v1 controller, or one unified)."""

    def __init__(self, name: str, *, processes: int, memory_bytes: int):
        self.dirs = []
        try:
            for controller, parent in _cgroup_parents():
                d = os.path.join(parent, name)
                os.mkdir(d)
                self.dirs.append(d)
                settings = {"pids": {"pids.max": processes},
                            "memory": {"memory.limit_in_bytes": memory_bytes},
                            "": {"pids.max": processes, "memory.max": memory_bytes}
                            }.get(controller, {})
                for key, value in settings.items():
                    if value and os.path.exists(os.path.join(d, key)):
                        with open(os.path.join(d, key), "w") as f:
                            f.write(str(value))
        except OSError:
            self.remove()
            raise

    def procs_files(self) -> list[str]:
        return [os.path.join(d, "cgroup.procs") for d in self.dirs]

    def pids(self) -> set[int]:
        found = set()
        for path in self.procs_files():
            try:
                with open(path) as f:
                    found.update(int(x) for x in f.read().split())
            except (OSError, ValueError):
                pass
        return found

    def kill(self):
        """SIGKILL every process in the groups (whatever it did to escape its parent)."""
        import time
        for d in self.dirs:
            try:
                with open(os.path.join(d, "cgroup.kill"), "w") as f:
                    f.write("1")
            except OSError:
                pass
        deadline = time.monotonic() + 5
        while time.monotonic() < deadline:
            left = self.pids()
            if not left:
                return
            for pid in left:
                try:
                    os.kill(pid, signal.SIGKILL)
                except OSError:
                    pass
            time.sleep(0.02)

    def remove(self):
        import time
        for d in reversed(self.dirs):
            for _ in range(100):
                try:
                    os.rmdir(d)
                    break
                except FileNotFoundError:
                    break
                except OSError:
                    time.sleep(0.02)
        self.dirs = []


def clean_stale_cgroups():
    """Groups left by a grader that was killed: kill what is in them, remove them."""
    for _, parent in _cgroup_parents():
        for d in glob.glob(os.path.join(parent, "lrnn-kernel-*")):
            try:
                pid = int(os.path.basename(d).split("-")[2])
                os.kill(pid, 0)
                continue                     # its grader is alive
            except ProcessLookupError:
                pass
            except (OSError, ValueError, IndexError):
                continue
            stale = Cgroups.__new__(Cgroups)
            stale.dirs = [d]
            stale.kill()
            stale.remove()


@functools.lru_cache(maxsize=None)
def cgroups_work() -> bool:
    """True if a process started through the wrapper lands in a fresh group here."""
    if not _cgroup_parents():
        return False
    try:
        probe = Cgroups(f"lrnn-kernel-{os.getpid()}-probe", processes=64,
                        memory_bytes=256 * 2 ** 20)
    except OSError:
        return False
    try:
        r = subprocess.run(["/bin/sh", "-c", _CGROUP_WRAPPER, "sh", *probe.procs_files(),
                            "--", "/bin/sh", "-c", "cat /proc/self/cgroup"],
                           capture_output=True, text=True, timeout=10)
        return r.returncode == 0 and "lrnn-kernel-" in r.stdout
    except (OSError, subprocess.SubprocessError):
        return False
    finally:
        probe.kill()
        probe.remove()


# ---------------------------------------------------------------------------------------
# A running kernel process
# ---------------------------------------------------------------------------------------

_slots_lock = threading.Lock()
_slots: set[int] = set()


def _take_slot() -> int:
    with _slots_lock:
        slot = next(i for i in range(10 ** 6) if i not in _slots)
        _slots.add(slot)
        return slot


def _give_slot(slot: int):
    with _slots_lock:
        _slots.discard(slot)


_serial = itertools.count()


def sandbox_uid(slot: int) -> int:
    """A fresh user id for every sandbox this grader process starts (never one used by an
    earlier submission: what the kernel keys by user id, such as its keyrings, is not
    passed on), distinct between concurrent sandboxes."""
    return UID_BASE + (os.getpid() % 100_000) * 4096 + next(_serial) % 4096


def grader_uids(pid: int) -> range:
    """The user ids the sandboxes of the grader process ``pid`` may get."""
    start = UID_BASE + (pid % 100_000) * 4096
    return range(start, start + 4096)


def _user_tasks(uid: int) -> int:
    n = 0
    for status in glob.glob("/proc/[0-9]*/status"):
        try:
            with open(status) as f:
                for line in f:
                    if line.startswith("Uid:"):
                        if int(line.split()[1]) == uid:
                            n += len(os.listdir(os.path.dirname(status) + "/task"))
                        break
        except (OSError, ValueError, IndexError):
            continue
    return n


class KernelProcess:
    """A harness process (sandboxed or not) with pipes to it; :meth:`kill` ends all of it."""

    def __init__(self, proc, slot, workdir_host, token, kind, cgroups=None):
        self.cgroups = cgroups
        self.proc = proc
        self.slot = slot
        self.workdir_host = workdir_host
        self.token = token
        self.kind = kind
        self._killed = False

    @property
    def pid(self):
        return self.proc.pid

    def alive(self) -> bool:
        return self.proc.poll() is None

    def kill(self):
        if self._killed:
            return
        self._killed = True
        try:
            os.killpg(self.proc.pid, signal.SIGKILL)
        except (ProcessLookupError, PermissionError, OSError):
            pass
        try:
            self.proc.kill()
        except OSError:
            pass
        if self.kind == "none":
            _kill_marked(self.token)
        if self.cgroups is not None:
            self.cgroups.kill()
        try:
            self.proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            pass
        for stream in (self.proc.stdin, self.proc.stdout, self.proc.stderr):
            try:
                if stream is not None:
                    stream.close()
            except OSError:
                pass
        if self.cgroups is not None:
            self.cgroups.remove()
        if self.workdir_host:
            shutil.rmtree(self.workdir_host, ignore_errors=True)
        if self.slot is not None:
            _give_slot(self.slot)
            self.slot = None


def _kill_marked(token: str):
    """Without a PID namespace: kill the processes whose environment carries ``token``
    (those the kernel started, even detached ones that kept the environment)."""
    needle = f"LRNN_KERNEL_TOKEN={token}".encode()
    for environ in glob.glob("/proc/[0-9]*/environ"):
        try:
            with open(environ, "rb") as f:
                if needle in f.read().split(b"\0"):
                    os.kill(int(environ.split("/")[2]), signal.SIGKILL)
        except (OSError, ValueError):
            continue


def clean_stale_workdirs():
    """Remove working folders left by graders that were killed (``--sandbox none`` only;
    a sandbox keeps its working folder in its own tmpfs)."""
    for path in glob.glob(os.path.join(tempfile.gettempdir(), "lrnn-kernel-*-*")):
        try:
            pid = int(os.path.basename(path).split("-")[2])
        except (IndexError, ValueError):
            continue
        if pid == os.getpid():
            continue
        try:
            os.kill(pid, 0)
            continue
        except ProcessLookupError:
            shutil.rmtree(path, ignore_errors=True)
        except OSError:
            continue


@dataclass
class Sandbox:
    """How to start kernels: ``kind`` is "bwrap" or "none"."""
    kind: str
    userns: bool = False
    cgroups: bool = False
    memory_mb: int = DEFAULT_MEMORY_MB
    processes: int = DEFAULT_PROCESSES
    tmp_mb: int = DEFAULT_TMP_MB
    hidden: tuple = ()
    extra: tuple = ()
    note: str = ""

    def describe(self) -> str:
        return self.kind + (f" ({self.note})" if self.note else "")

    def start(self) -> KernelProcess:
        import secrets
        lay = layout(self.hidden, self.extra)
        token = secrets.token_hex(16)
        harness = [sys.executable, "-m", "lrnn.course.grading.harness"]
        slot = None
        workdir_host = None
        memory = 0 if lay.gpu_devices else self.memory_mb * 2 ** 20
        filter_fd = None
        if self.kind == "bwrap":
            argv = bwrap_args(lay, tmp_mb=self.tmp_mb, userns=self.userns)
            if seccomp.machine() in seccomp.ARCHES:
                filter_fd = seccomp.program_fd()
                argv[-1:-1] = ["--seccomp", str(filter_fd)]
            env = dict(lay.env)
            if os.geteuid() == 0 and not self.userns:
                slot = _take_slot()
                uid = sandbox_uid(slot)
                harness += ["--uid", str(uid), "--nproc", str(self.processes)]
            elif os.geteuid() == 0:
                harness += ["--nproc", str(self.processes)]     # not enforced for root
            else:
                harness += ["--nproc", str(_user_tasks(os.getuid()) + self.processes)]
            argv += harness
        else:
            workdir_host = tempfile.mkdtemp(prefix=f"lrnn-kernel-{os.getpid()}-")
            home = os.path.join(workdir_host, "home")
            os.makedirs(home)
            env = kernel_environment(home, workdir_host, lay.pythonpath)
            argv = harness + ["--pdeathsig"]
        if memory:
            argv += ["--memory", str(memory)]
        env["LRNN_KERNEL_TOKEN"] = token
        groups = None
        try:
            if self.cgroups:
                groups = Cgroups(f"lrnn-kernel-{os.getpid()}-{token[:12]}",
                                 processes=self.processes,
                                 memory_bytes=self.memory_mb * 2 ** 20)
                argv = ["/bin/sh", "-c", _CGROUP_WRAPPER, "sh", *groups.procs_files(), "--",
                        *argv]
            proc = subprocess.Popen(argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                    stderr=subprocess.PIPE, env=env, cwd="/",
                                    start_new_session=True, close_fds=True,
                                    pass_fds=() if filter_fd is None else (filter_fd,))
        except BaseException:
            if slot is not None:
                _give_slot(slot)
            if workdir_host:
                shutil.rmtree(workdir_host, ignore_errors=True)
            if groups is not None:
                groups.remove()
            raise
        finally:
            if filter_fd is not None:
                os.close(filter_fd)
        return KernelProcess(proc, slot, workdir_host, token, self.kind, groups)

    def workdir(self, kp: KernelProcess) -> str:
        return os.path.join(kp.workdir_host, "work") if kp.workdir_host else SANDBOX_WORKDIR


def choose(mode: str = "auto", **kwargs) -> Sandbox:
    """The sandbox for ``mode`` ("auto", "bwrap" or "none"). "bwrap" fails with the reason
    when bubblewrap is missing or cannot create its namespaces here; "auto" then falls back
    to "none" and says why in ``note``."""
    if mode not in MODES:
        raise SandboxError(f"`--sandbox`: got {mode!r}, expected one of {', '.join(MODES)}")
    kwargs.setdefault("cgroups", cgroups_work())
    if mode == "none":
        return Sandbox("none", note="no isolation: asked for with --sandbox none", **kwargs)
    why = None
    if not sys.platform.startswith("linux"):
        why = "bubblewrap needs Linux"
    elif "bwrap" not in bwrap_features():
        why = "bubblewrap (bwrap) is not installed"
    else:
        lay = layout(kwargs.get("hidden", ()), kwargs.get("extra", ()))
        tmp_mb = kwargs.get("tmp_mb", DEFAULT_TMP_MB)
        problem = _bwrap_works(tuple(bwrap_args(lay, tmp_mb=tmp_mb)))
        if problem and os.geteuid() == 0:
            # Root whose privileges do not reach mount namespaces (a container without
            # CAP_SYS_ADMIN) may still create a user namespace; the kernel then keeps the
            # root user id outside it (no process-count limit: root is exempt).
            if _bwrap_works(tuple(bwrap_args(lay, tmp_mb=tmp_mb, userns=True))) is None:
                return Sandbox("bwrap", userns=True,
                               note="in a user namespace: kernels keep root's user id outside "
                                    "the sandbox, so the process limit does not apply", **kwargs)
        if problem:
            why = f"bubblewrap cannot start a sandbox here: {problem}"
    if why is None:
        return Sandbox("bwrap", **kwargs)
    if mode == "bwrap":
        raise SandboxError(f"--sandbox bwrap: {why}; {INSTALL_HINT}")
    return Sandbox("none", note=f"no isolation: {why}", **kwargs)
