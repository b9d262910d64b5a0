"""The measured tables the hook reads (hook/gemv.py's GEMV reductions, hook/launch_configs.py's
launch configs): one document shape, strictly parsed, and one loader.

A table is a JSON object with exactly `format` (the table kind and its version), `hardware`
(the hardware key it was measured on), `measured` (an object: where, when and how) and
`entries` (a non-empty list; each kind checks its own entries). Sizes are bounded before
anything is parsed. The loader reads a table once per path and logs a broken one once; a
table made for another GPU is refused where the caller asks (a shipped table under the
wrong name), and used as given where the user named it.
"""
from __future__ import annotations

import json
import logging
import math
from pathlib import Path
from typing import Any, Callable

from .state import PROCESS

log = logging.getLogger("torch_diode")


class TableError(ValueError):
    """A table document that is not valid; the message names the source and the reason."""


def pow2(v: int) -> bool:
    return v > 0 and v & (v - 1) == 0


def bounded_int(obj: dict, key: str, lo: int, hi: int, where: str, err: type[TableError]) -> int:
    v = obj.get(key)
    if isinstance(v, bool) or not isinstance(v, int) or not lo <= v <= hi:
        raise err(f"{where}: {key} must be an int in [{lo}, {hi}], got {v!r}")
    return v


def positive_number(obj: dict, key: str, unit: str, where: str, err: type[TableError], hi: float = 1e9) -> float:
    v = obj.get(key)
    if isinstance(v, bool) or not isinstance(v, (int, float)) or not math.isfinite(v) or not 0 < v < hi:
        raise err(f"{where}: {key} must be a positive finite number of {unit}, got {v!r}")
    return float(v)


def parse_document(data: bytes, source: str, fmt: str, max_bytes: int, max_entries: int,
                   err: type[TableError]) -> tuple[str, dict, list]:
    """(hardware, measured, raw entries) of a table document of format `fmt`."""
    if len(data) > max_bytes:
        raise err(f"{source}: {len(data)} bytes, over the {max_bytes}-byte limit")
    try:
        doc = json.loads(data.decode("utf-8"))
    except (UnicodeDecodeError, json.JSONDecodeError, RecursionError) as e:
        raise err(f"{source}: not JSON: {e}") from None
    if not isinstance(doc, dict) or doc.get("format") != fmt:
        raise err(f"{source}: format must be {fmt!r}")
    extra = set(doc) - {"format", "hardware", "measured", "entries"}
    if extra:
        raise err(f"{source}: unknown keys {sorted(extra)}")
    hw = doc.get("hardware")
    if not isinstance(hw, str) or not 0 < len(hw) <= 128:
        raise err(f"{source}: hardware must be a hardware key")
    if not isinstance(doc.get("measured"), dict):
        raise err(f"{source}: measured (the provenance: where, when and how it was measured) must be an object")
    raw = doc.get("entries")
    if not isinstance(raw, list) or not 0 < len(raw) <= max_entries:
        raise err(f"{source}: entries must be a list of 1-{max_entries} objects")
    return hw, doc["measured"], raw


def load_once(path: Path, cache: dict[str, Any], parse: Callable[[bytes, str], Any], what: str,
              hardware: str | None = None) -> Any | None:
    """The table at `path`, parsed once per process (`cache`: path -> table, or None when
    absent or broken); with `hardware`, a table made for another GPU is refused. A broken
    or refused table is logged once ("torch_diode: <what> not used: <reason>")."""
    key = str(path)
    with PROCESS.lock:
        if key not in cache:
            table = None
            if path.is_file():
                try:
                    table = parse(path.read_bytes(), key)
                    if hardware is not None and table.hardware != hardware:
                        raise TableError(f"{path}: made for {table.hardware}, not {hardware}")
                except (OSError, TableError) as e:
                    log.warning("torch_diode: %s not used: %s", what, e)
                    table = None
            else:
                if hardware is None:   # named by the user: say that it is missing
                    log.warning("torch_diode: %s not used: %s: no such file", what, path)
            cache[key] = table
        return cache[key]
