"""Hardware keys, mirroring `diode::hardware_key` in shared/src/hardware.cpp exactly.

A hardware key names a dataset folder and a model bucket, e.g. `nvidia-h100-80gb`.
It is derived from a wire.HardwareId, never sent. The C++ rule is the reference;
tests/python/test_hardware_key.py checks this against tests/cpp/test_hardware.cpp.
"""
from __future__ import annotations

import re

from .wire import HardwareId

_MEMORY_TOKEN = re.compile(r"^(\d+gb|\d+g|hbm\d*e?|gddr\d*x?|lpddr\d*x?)$")
_VALID_KEY = re.compile(r"^[a-z0-9]+(-[a-z0-9]+)*$")
MAX_KEY = 64


def _ascii_alnum(c: str) -> bool:
    # C++ std::isalnum in the "C" locale: ASCII letters and digits only.
    return c.isascii() and c.isalnum()


def hardware_key(h: HardwareId) -> str:
    vendor = "".join(c.lower() for c in h.vendor if _ascii_alnum(c)) or "unknown"
    tokens, cur = [], ""
    for c in h.device_name + " ":
        if _ascii_alnum(c):
            cur += c.lower()
        elif cur:
            tokens.append(cur)
            cur = ""
    key = vendor
    for i, t in enumerate(tokens):
        if i == 0 and t == vendor:
            continue
        if _MEMORY_TOKEN.match(t):
            continue
        key += "-" + t
    gib = h.memory_bytes / float(1 << 30)
    if gib > 0:
        # Same float arithmetic as C++: round up to a multiple of 8 GiB.
        key += f"-{int((gib + 7.999999) / 8.0) * 8}gb"
    return key[:MAX_KEY].rstrip("-")


def is_valid_hardware_key(key: str) -> bool:
    return len(key) <= MAX_KEY and bool(_VALID_KEY.match(key))
