"""The tuning cache: tuned choices remembered per kernel, architecture and shape bucket.

An entry is one JSON file ``DIR/tuning/<digest>.json`` (``DIR`` is
``$XDG_CACHE_HOME/polymap``, else ``~/.cache/polymap``; the command line
fills it in). The digest hashes the key::

    kernel text  the kernel printed back as .loop (comments gone, blanks normalised)
    arch         the architecture file's content, or for host the processor model and caches
    bucket       every parameter rounded up to a power of two: M=1000 -> 1024, M=1024 -> 1024

and the file holds the key again, the tuned mapping of every nest and a
SHA-256 checksum of both::

    {"format": 1, "key": {...}, "entry": {"kernel": "gemm", "k": 4, "params": {...},
     "nests": [{"nest": 0, "source": "search #1", "mapping": {...}, "measured_s": 0.0021}],
     "tuning": [...]}, "checksum": "9f2c..."}

Writes go to a temporary file in the same directory, then ``os.replace``:
two compiles storing at once leave one whole entry, never a mix. Reading
never trusts an entry: unreadable JSON, a wrong checksum or a key that is
not the file's is ignored with a warning; what passes is re-checked by
:func:`polymap.passes.search.remember.recall` (legal, fits, verifies).
"""
from __future__ import annotations

import hashlib
import json
import os
import re
import tempfile
from dataclasses import dataclass
from importlib import resources
from pathlib import Path
from typing import Any, Mapping as MappingT

from polymap import ir, pretty
from polymap.machine.presets import FILE_PRESETS
from polymap.machine.hostinfo import CPUINFO, host_info
from polymap.machine.arch import Architecture

FORMAT = 1


def bucket_of(value: int) -> int:
    """The smallest power of two at least ``value`` (1 for values below 2)."""
    return 1 if value <= 1 else 1 << (int(value) - 1).bit_length()


def shape_bucket(params: MappingT[str, int]) -> tuple[tuple[str, int], ...]:
    """Every parameter rounded up to a power of two, sorted by name."""
    return tuple(sorted((name, bucket_of(v)) for name, v in params.items()))


def normalised_text(kernel: ir.Kernel) -> str:
    """The kernel as ``.loop`` text: printed from the IR (no comments), runs of blanks made one space."""
    lines = (re.sub(r"\s+", " ", line).strip() for line in pretty.kernel(kernel).splitlines())
    return "\n".join(line for line in lines if line)


def processor_model(cpuinfo: str) -> str:
    """The ``model name`` of the first processor in ``/proc/cpuinfo`` text ('' when absent)."""
    m = re.search(r"^model name\s*:\s*(.*)$", cpuinfo, re.MULTILINE)
    return m.group(1).strip() if m else ""


def host_fingerprint(model_name: str, caches: tuple) -> str:
    """``host`` by what does not drift: the processor model and the cache sizes (not the clock)."""
    sizes = ",".join(f"L{c.level}={c.size_bytes}x{c.instances}" for c in caches)
    return f"host:{model_name};{sizes}"


def arch_fingerprint(spec: str) -> str:
    """The fingerprint of ``--arch SPEC``: host's processor and caches, or the file's content (hashed)."""
    if spec == "host":
        try:
            text = CPUINFO.read_text()
        except OSError:
            text = ""
        return host_fingerprint(processor_model(text), host_info().caches)
    if spec in FILE_PRESETS:
        data = resources.files("polymap.machine.presets").joinpath(f"{spec}.yaml").read_bytes()
    else:
        data = Path(spec).read_bytes()
    return "file:" + hashlib.sha256(data).hexdigest()


def architecture_fingerprint(arch: Architecture) -> str:
    """For an :class:`~polymap.machine.arch.Architecture` given as an object: its data, hashed."""
    return "data:" + hashlib.sha256(json.dumps(arch.to_dict(), sort_keys=True).encode()).hexdigest()


@dataclass(frozen=True)
class CacheKey:
    kernel_text: str
    arch: str
    bucket: tuple[tuple[str, int], ...]

    def to_json(self) -> dict:
        return {"kernel_text": self.kernel_text, "arch": self.arch, "bucket": dict(self.bucket)}

    def digest(self) -> str:
        return hashlib.sha256(_canonical(self.to_json()).encode()).hexdigest()[:32]


def cache_key(kernel: ir.Kernel, arch_fp: str, params: MappingT[str, int]) -> CacheKey:
    return CacheKey(normalised_text(kernel), arch_fp, shape_bucket(params))


def _canonical(data: Any) -> str:
    return json.dumps(data, sort_keys=True, separators=(",", ":"))


def _checksum(key: dict, entry: dict) -> str:
    return hashlib.sha256(_canonical({"format": FORMAT, "key": key, "entry": entry}).encode()).hexdigest()


@dataclass(frozen=True)
class Loaded:
    """What reading one key gave: the entry's data (None: nothing usable) and why not."""

    entry: dict | None
    warnings: tuple[str, ...] = ()


@dataclass(frozen=True)
class TuningCache:
    """The entries under ``directory / "tuning"``."""

    directory: Path

    @property
    def root(self) -> Path:
        return Path(self.directory) / "tuning"

    def path(self, key: CacheKey) -> Path:
        return self.root / f"{key.digest()}.json"

    def store(self, key: CacheKey, entry: dict) -> Path:
        """Write ``entry`` for ``key`` atomically (a temporary file, then a rename); return its path."""
        self.root.mkdir(parents=True, exist_ok=True)
        data = {"format": FORMAT, "key": key.to_json(), "entry": entry, "checksum": _checksum(key.to_json(), entry)}
        fd, tmp = tempfile.mkstemp(prefix=".entry-", suffix=".tmp", dir=self.root)
        try:
            with os.fdopen(fd, "w") as f:
                f.write(json.dumps(data, indent=1, sort_keys=True) + "\n")
                f.flush()
                os.fsync(f.fileno())
            os.replace(tmp, self.path(key))
        except BaseException:
            Path(tmp).unlink(missing_ok=True)
            raise
        return self.path(key)

    def load(self, key: CacheKey) -> Loaded:
        """The entry of ``key``, or None with a warning when it is damaged or not this key's."""
        path = self.path(key)
        try:
            text = path.read_text()
        except FileNotFoundError:
            return Loaded(None)
        except OSError as exc:
            return Loaded(None, (f"cache entry {path} unreadable ({exc.strerror or exc}); ignored",))
        try:
            data = json.loads(text)
        except (json.JSONDecodeError, UnicodeDecodeError):
            return Loaded(None, (f"cache entry {path} is damaged (not JSON); ignored",))
        problem = _problem(data, key)
        if problem is not None:
            return Loaded(None, (f"cache entry {path} {problem}; ignored",))
        return Loaded(data["entry"])

    def discard(self, key: CacheKey) -> None:
        self.path(key).unlink(missing_ok=True)


def _problem(data: Any, key: CacheKey) -> str | None:
    if not isinstance(data, dict) or not isinstance(data.get("entry"), dict):
        return "is damaged (no entry)"
    if data.get("format") != FORMAT:
        return f"has format {data.get('format')!r}, not {FORMAT}"
    if data.get("checksum") != _checksum(data.get("key"), data["entry"]):
        return "fails its checksum (damaged or edited)"
    if data.get("key") != key.to_json():
        return "belongs to another kernel, architecture or bucket"
    return None
