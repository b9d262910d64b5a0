"""The exact wire.HardwareId of the GPU the collector runs on, and the hashes of the
Inductor GEMM template sources it renders (template_hashes)."""
from __future__ import annotations

import hashlib
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


# The Triton GEMM template families the collector renders (collect/template.py) and the ops of each.
TEMPLATE_FAMILIES = ("mm", "bmm")


def template_hash(kind: str) -> str:
    """sha256 (hex) of the running Inductor's Triton `mm` / `bmm` template source, as
    collect/template.py renders it (inductor_compat.gemm_template_source). The hook compares
    it with a model's model.json provenance.templates (hook/staleness.py). A shard carries
    the same hashes by template name (`templates`, inductor_compat.template_hashes:
    "triton_mm" is this function's "mm")."""
    from .. import inductor_compat as ic
    return hashlib.sha256(ic.gemm_template_source(kind).encode("utf-8")).hexdigest()


def template_hashes() -> dict[str, str]:
    """{"mm": sha256 hex, "bmm": sha256 hex} of the running torch (template_hash)."""
    return {kind: template_hash(kind) for kind in TEMPLATE_FAMILIES}
