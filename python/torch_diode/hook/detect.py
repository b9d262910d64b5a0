"""Which accelerator this process runs on, as a wire HardwareId and a hardware key."""
from __future__ import annotations

import logging
from dataclasses import asdict
from typing import Any

from ..wire import HardwareId

log = logging.getLogger("torch_diode")


def detect_hardware(device_index: int | None = None) -> HardwareId | None:
    """The current CUDA/ROCm device, or None when there is none (CPU-only machines)."""
    import torch

    if not torch.cuda.is_available():
        return None
    idx = torch.cuda.current_device() if device_index is None else device_index
    p = torch.cuda.get_device_properties(idx)
    hip = getattr(torch.version, "hip", None)
    if hip:
        vendor, arch = "amd", str(getattr(p, "gcnArchName", "")).split(":")[0]
        runtime = f"rocm {hip}"
    else:
        vendor, arch = "nvidia", f"sm_{p.major}{p.minor}"
        runtime = f"cuda {torch.version.cuda}" if torch.version.cuda else ""
    try:
        import triton
        triton_version = triton.__version__
    except Exception:
        triton_version = ""
    return HardwareId(vendor=vendor, device_name=str(p.name), arch=arch,
                      compute_capability=f"{p.major}.{p.minor}",
                      sm_count=int(p.multi_processor_count), memory_bytes=int(p.total_memory),
                      runtime_version=runtime, torch_version=torch.__version__,
                      triton_version=triton_version)


def hardware_key(hw: HardwareId) -> str:
    """The canonical key (docs/architecture.md#hardware-keys), via torch_diode.hardware.

    Imported lazily: that module belongs to the collector and may be absent in a build.
    """
    from .. import hardware  # noqa: PLC0415  (ImportError handled by the caller)
    fn = getattr(hardware, "hardware_key", None)
    if fn is None:
        raise ImportError("torch_diode.hardware has no hardware_key()")
    return fn(hw)


def describe(hw: HardwareId | None) -> dict[str, Any]:
    """get_detected_hardware()'s answer: the HardwareId fields plus `hardware_key`."""
    if hw is None:
        return {"device": None, "hardware_key": None, "reason": "no CUDA or ROCm device"}
    d = asdict(hw)
    try:
        d["hardware_key"] = hardware_key(hw)
    except Exception as e:
        log.debug("torch_diode: no hardware key for %s: %s", hw.device_name, e)
        d["hardware_key"] = None
        d["reason"] = f"hardware key unavailable: {e}"
    return d
