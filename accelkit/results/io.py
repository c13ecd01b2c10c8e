"""Reading results files, and writing them (or any output file) atomically."""

from __future__ import annotations

import contextlib
import json
import os
import tempfile
from pathlib import Path

from pydantic import ValidationError

from accelkit.errors import BadInput
from accelkit.results.model import SCHEMA_ID, Results


def check_output_path(path: Path, *, flag: str) -> Path:
    """Validate an output path before any work starts, so bad input writes nothing."""
    if path.exists() and path.is_dir():
        raise BadInput(f"{flag} {path}: is a directory")
    parent = path.parent if str(path.parent) else Path(".")
    if not parent.is_dir():
        raise BadInput(f"{flag} {path}: directory {parent} does not exist")
    if not os.access(parent, os.W_OK):
        raise BadInput(f"{flag} {path}: directory {parent} is not writable")
    return path


def atomic_write_text(path: Path, text: str, *, durable: bool = True) -> None:
    """Write `text` to `path` so that readers see the old or the new file, never a torn one.

    `durable=False` skips the fsync: still atomic against a killed process, not against a
    power loss; for frequent intermediate updates.
    """
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent or ".")
    try:
        # mkstemp makes the file owner-only; give it the mode a plain open() would.
        os.fchmod(fd, 0o666 & ~_umask())
        with os.fdopen(fd, "w", encoding="utf-8") as handle:
            handle.write(text)
            if durable:
                handle.flush()
                os.fsync(handle.fileno())
        os.replace(tmp, path)
    except BaseException:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(tmp)
        raise


def _umask() -> int:
    current = os.umask(0)
    os.umask(current)
    return current


def write_results(results: Results, path: Path) -> None:
    """Replace the results file at `path` with `results` in one atomic, durable rewrite.

    For a file that is complete (or rewritten rarely); a run adding cases one by one goes
    through `writer.ResultsWriter`, which encodes each case once.
    """
    atomic_write_text(path, json.dumps(results.to_json_dict(), indent=1) + "\n")


def load_results(path: Path) -> Results:
    """Load and validate a results file; any problem is a one-line BadInput."""
    try:
        raw = json.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise BadInput(f"{path}: no such file") from None
    except IsADirectoryError:
        raise BadInput(f"{path}: is a directory") from None
    except (OSError, UnicodeDecodeError) as exc:
        raise BadInput(f"{path}: cannot read: {exc}") from None
    except json.JSONDecodeError as exc:
        raise BadInput(f"{path}:{exc.lineno}: not valid JSON: {exc.msg}") from None
    if not isinstance(raw, dict):
        raise BadInput(f"{path}: not an accelkit results file (top level is not an object)")
    schema = raw.get("schema")
    if schema != SCHEMA_ID:
        raise BadInput(f"{path}: unknown schema {schema!r} (this accelkit reads {SCHEMA_ID!r})")
    try:
        return Results.model_validate(raw)
    except ValidationError as exc:
        first = exc.errors()[0]
        where = ".".join(str(p) for p in first["loc"])
        raise BadInput(f"{path}: invalid results file at {where}: {first['msg']}") from None
