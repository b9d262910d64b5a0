"""The exact wire.HardwareId of the GPU the collector runs on."""
from __future__ import annotations

import subprocess

from .. import wire


def driver_version(device: int = 0) -> str:
    try:  # NVML first: exact and cheap
        import pynvml
        pynvml.nvmlInit()
        v = pynvml.nvmlSystemGetDriverVersion()
        return v.decode() if isinstance(v, bytes) else str(v)
    except Exception:
        pass
    try:
        out = subprocess.run(["nvidia-smi", "--query-gpu=driver_version", "--format=csv,noheader"],
                             capture_output=True, text=True, timeout=20)
        lines = out.stdout.strip().splitlines()
        return lines[min(device, len(lines) - 1)].strip() if lines else ""
    except Exception:
        return ""


def detect(device: int = 0) -> wire.HardwareId:
    import torch
    import triton
    props = torch.cuda.get_device_properties(device)
    if torch.version.hip:
        vendor = "amd"
        arch = str(getattr(props, "gcnArchName", "")).split(":")[0]
        runtime = f"rocm {torch.version.hip}"
    else:
        vendor = "nvidia"
        arch = f"sm_{props.major}{props.minor}"
        runtime = f"cuda {torch.version.cuda}"
    return wire.HardwareId(vendor=vendor, device_name=props.name, arch=arch,
                           compute_capability=f"{props.major}.{props.minor}",
                           sm_count=int(props.multi_processor_count), memory_bytes=int(props.total_memory),
                           driver_version=driver_version(device), runtime_version=runtime,
                           torch_version=torch.__version__, triton_version=triton.__version__)
