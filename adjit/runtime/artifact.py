"""The file adjit.export writes and adjit.load reads (api/export.py): compiled CPU code and
what calling it needs, in one zip archive, read without MLIR.

Members: `manifest.json`, and the code files it lists (`module.so`, the shared object built
for the exporting machine's CPU as the disk cache builds it; `module.adj`, the module's
adj-level text). The manifest holds this format's version, adjit's version, the CPU the code
needs (its architecture and the /proc/cpuinfo flags of the features LLVM was allowed to
use), the size and SHA-256 of every other member, and `checksum`, the SHA-256 of its own
canonical JSON (sorted keys, no whitespace) without it.

`read` refuses, with an adjit.ArtifactError naming the problem, in this order: a file that cannot
be trusted (runtime/trust.py: owned by another user, or writable by others, or in a folder
that is), one that is not such an archive, another format version or adjit version, a
damaged manifest or member, a CPU without a feature the code needs. An artifact is code: the
checksums guard against damage, not against whoever wrote it.
"""
from __future__ import annotations

import contextlib
import ctypes
import hashlib
import io
import json
import os
import platform
import shutil
import tempfile
import zipfile
from functools import cache
from pathlib import Path
from typing import Iterator

from ..core.errors import ArtifactError
from . import cpu_cache, trust

FORMAT_VERSION = 1
MANIFEST = "manifest.json"


def _digest(body: dict) -> str:
    return hashlib.sha256(json.dumps(body, sort_keys=True, separators=(",", ":"),
                                     ensure_ascii=True).encode()).hexdigest()


@cache
def adjit_version() -> str:
    from importlib.metadata import PackageNotFoundError, version
    try:
        return version("adjit")
    except PackageNotFoundError:     # (sources used without installing)
        return "unknown"


def cpu_needs(portable: bool = False) -> dict:
    """What code built here needs of the CPU that runs it: built for this CPU, or with
    `portable` for cpu_cache.portable_target (host programs of device="cuda" code)."""
    return {"machine": platform.machine(), "system": platform.system(),
            "triple": cpu_cache.host_target()[0],
            "flags": cpu_cache.portable_cpu_flags() if portable else cpu_cache.code_cpu_flags()}


def write(path: str | os.PathLike, manifest: dict, members: dict[str, bytes]) -> None:
    """Writes the artifact: `manifest` sealed (format and adjit versions, members' sizes and
    digests, its checksum) and the `members`; atomically (a temporary file renamed into
    place), readable by all and writable by its owner only (whatever the umask)."""
    body = {**manifest, "format": FORMAT_VERSION, "adjit": adjit_version(),
            "members": {name: {"size": len(data), "sha256": hashlib.sha256(data).hexdigest()}
                        for name, data in members.items()}}
    body["checksum"] = _digest(body)
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w", zipfile.ZIP_DEFLATED) as z:
        z.writestr(MANIFEST, json.dumps(body, indent=1))
        for name, data in members.items():
            z.writestr(name, data)
    path = Path(path)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", dir=path.parent or ".")
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(buffer.getvalue())
            os.fchmod(f.fileno(), 0o644)
        os.replace(tmp, path)
    except BaseException:
        os.unlink(tmp)
        raise


def read(path: str | os.PathLike) -> tuple[dict, dict[str, bytes]]:
    """(the manifest, without its seal; the members' bytes by name) of the artifact at
    `path`, checked (the module's docstring says what is refused, ArtifactError);
    FileNotFoundError where there is none."""
    path = Path(path)
    if not path.is_file():
        raise FileNotFoundError(f"adjit.load: no artifact at {path}")
    # The rule of the disk caches (runtime/trust.py), on the file and the folders to it;
    # then the file is read as opened, checked again on the open file.
    try:
        found = trust.problem(path)
        data = None if found is not None else trust.read_file(os.path.realpath(path))[0]
    except trust.UntrustedFile as e:
        found = e.problem
    if found is not None:
        raise ArtifactError(f"adjit.load refuses {path}: {found}, so others could make this "
                            f"process run code of theirs. Fix: {found.fix}. An artifact is "
                            "code: load only files you trust")
    try:
        with zipfile.ZipFile(io.BytesIO(data)) as z:
            files = {name: z.read(name) for name in z.namelist()}
    except (zipfile.BadZipFile, OSError, EOFError) as e:
        raise ArtifactError(f"adjit.load: {path} is not an artifact of adjit.export "
                            f"(not a readable zip archive: {e})") from None
    try:
        body = json.loads(files[MANIFEST])
        if not isinstance(body, dict):
            raise ValueError("not a JSON object")
    except (KeyError, ValueError) as e:
        raise ArtifactError(f"adjit.load: {path} is not an artifact of adjit.export "
                            f"(no readable {MANIFEST}: {e})") from None
    if body.get("format") != FORMAT_VERSION:
        raise ArtifactError(f"adjit.load: {path} is of artifact format {body.get('format')!r}"
                            f"; this adjit reads format {FORMAT_VERSION}: export it again "
                            "with this version of adjit")
    checksum = body.pop("checksum", None)
    if checksum != _digest(body):
        raise ArtifactError(f"adjit.load: {path} is damaged: its {MANIFEST} does not match "
                            "its checksum")
    if body.get("adjit") != adjit_version():
        raise ArtifactError(f"adjit.load: {path} was exported by adjit {body.get('adjit')}, "
                            f"this is adjit {adjit_version()}: export it again with this "
                            "version (the code calls adjit's runtime, which may differ)")
    members = {}
    for name, seal in body.get("members", {}).items():
        data = files.get(name)
        if data is None:
            raise ArtifactError(f"adjit.load: {path} is damaged: the member {name} is missing")
        if len(data) != seal["size"] or hashlib.sha256(data).hexdigest() != seal["sha256"]:
            raise ArtifactError(f"adjit.load: {path} is damaged: the member {name} does not "
                                "match its checksum")
        members[name] = data
    if body.get("cpu") is not None:     # (None: GPU code, which the driver compiles)
        _check_cpu(path, body["cpu"])
    return body, members


def _check_cpu(path: Path, needs: dict) -> None:
    here = (platform.machine(), platform.system())
    there = (needs.get("machine"), needs.get("system"))
    if there != here:
        raise ArtifactError(f"adjit.load: {path} holds code for {there[0]} ({there[1]}); this "
                            f"machine is {here[0]} ({here[1]}): export it on such a machine")
    missing = sorted(set(needs.get("flags", ())) - cpu_cache.cpu_flags())
    if missing:
        raise ArtifactError(f"adjit.load: {path} holds code for a CPU with features this "
                            f"CPU lacks: {', '.join(missing)}. Export it on a machine with "
                            "this machine's CPU (or an older one)")


@contextlib.contextmanager
def extracted(data: bytes) -> Iterator[Path]:
    """The path of a shared object holding `data`, in a private folder (mkdtemp: mode 0700,
    this user's alone) removed after the block: a library loaded from it stays mapped."""
    folder = tempfile.mkdtemp(prefix="adjit-load-")
    try:
        so = Path(folder) / "module.so"
        so.write_bytes(data)
        yield so
    finally:
        shutil.rmtree(folder, ignore_errors=True)


def load_library(data: bytes, what: str) -> ctypes.CDLL:
    """The shared object `data` loaded (from a private folder: `extracted`)."""
    with extracted(data) as so:
        try:
            return ctypes.CDLL(str(so), mode=ctypes.RTLD_LOCAL)
        except OSError as e:
            raise ArtifactError(f"adjit.load: the code of {what} cannot be loaded here: "
                                f"{e}") from None
