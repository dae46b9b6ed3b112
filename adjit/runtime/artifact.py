"""The file adjit.export writes and adjit.load reads (api/export.py): compiled CPU code and
what calling it needs, in one zip archive, read without MLIR.

Members: `manifest.json`, and the code files it lists (`module.so`, the shared object built
for the exporting machine's CPU as the disk cache builds it; `module.adj`, the module's
adj-level text). The manifest holds this format's version, adjit's version, the CPU the code
needs (its architecture and the /proc/cpuinfo flags of the features LLVM was allowed to
use), the size and SHA-256 of every other member, and `checksum`, the SHA-256 of its own
canonical JSON (sorted keys, no whitespace) without it.

`read` refuses, with an ArtifactError naming the problem, in this order: a file that cannot
be trusted (runtime/trust.py: owned by another user, or writable by others, or in a folder
that is), one that is not such an archive, another format version or adjit version, a
damaged manifest or member, a CPU without a feature the code needs. An artifact is code: the
checksums guard against damage, not against whoever wrote it.
"""
from __future__ import annotations

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

from . import cpu_cache
from .trust import why_untrusted

FORMAT_VERSION = 1
MANIFEST = "manifest.json"


class ArtifactError(ValueError):
    """An artifact that adjit.load refuses; the message names the file and the problem."""


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


def cpu_needs() -> dict:
    """What code built here for this CPU needs of the CPU that runs it."""
    return {"machine": platform.machine(), "system": platform.system(),
            "triple": cpu_cache.host_target()[0], "flags": cpu_cache.code_cpu_flags()}


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
    reason = why_untrusted(path)
    if reason is not None:
        raise ArtifactError(f"adjit.load refuses {path}: {reason}. An artifact is code that "
                            "this process would run: load only files you trust")
    try:
        with zipfile.ZipFile(path) as z:
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
    _check_cpu(path, body.get("cpu", {}))
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


def load_library(data: bytes, what: str) -> ctypes.CDLL:
    """The shared object `data`, loaded from a private folder (mkdtemp: this user's alone),
    removed once loaded (the loaded code stays mapped for the process)."""
    folder = tempfile.mkdtemp(prefix="adjit-load-")
    try:
        so = Path(folder) / "module.so"
        so.write_bytes(data)
        try:
            return ctypes.CDLL(str(so), mode=ctypes.RTLD_LOCAL)
        except OSError as e:
            raise ArtifactError(f"adjit.load: the code of {what} cannot be loaded here: "
                                f"{e}") from None
    finally:
        shutil.rmtree(folder, ignore_errors=True)
