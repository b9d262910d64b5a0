"""torch_diode.hardware must reproduce shared/src/hardware.cpp (examples of tests/cpp/test_hardware.cpp)."""
import pathlib
import re

import pytest

from torch_diode.hardware import hardware_key, is_valid_hardware_key
from torch_diode.wire import HardwareId

ROOT = pathlib.Path(__file__).resolve().parents[2]


def hw(vendor, name, gib):
    return HardwareId(vendor, name, memory_bytes=int(gib * float(1 << 30)))


@pytest.mark.parametrize("vendor,name,gib,key", [
    ("nvidia", "NVIDIA H100 80GB HBM3", 79.65, "nvidia-h100-80gb"),
    ("nvidia", "NVIDIA H100 PCIe", 79.2, "nvidia-h100-pcie-80gb"),
    ("nvidia", "NVIDIA A100-SXM4-80GB", 79.15, "nvidia-a100-sxm4-80gb"),
    ("nvidia", "NVIDIA A100-SXM4-40GB", 39.4, "nvidia-a100-sxm4-40gb"),
    ("nvidia", "NVIDIA H200", 140.4, "nvidia-h200-144gb"),
    ("amd", "AMD Instinct MI300X", 192.0, "amd-instinct-mi300x-192gb"),
])
def test_documented_examples(vendor, name, gib, key):
    assert hardware_key(hw(vendor, name, gib)) == key


def test_examples_are_the_cpp_ones():
    # The table above must stay in step with the C++ test it mirrors.
    cpp = (ROOT / "tests/cpp/test_hardware.cpp").read_text()
    found = re.findall(r'hardware_key\(hw\("([^"]+)", "([^"]+)", ([0-9.]+)\)\), "([^"]+)"', cpp)
    assert len(found) >= 6
    for vendor, name, gib, key in found:
        assert hardware_key(hw(vendor, name, float(gib))) == key


@pytest.mark.parametrize("name", ["", "!!!", "x" * 200, "Ünïcødé GPU", "  spaced   out  ", "a--b"])
def test_keys_are_always_valid(name):
    k = hardware_key(hw("Vendor X", name, 0))
    assert is_valid_hardware_key(k), k
    assert k.startswith("vendorx")


def test_no_memory_suffix_without_memory():
    assert hardware_key(HardwareId("nvidia", "NVIDIA H100 80GB HBM3")) == "nvidia-h100"


def test_invalid_keys():
    for bad in ("../etc", "a--b", "", "A-b", "a-", "x" * 65):
        assert not is_valid_hardware_key(bad)
