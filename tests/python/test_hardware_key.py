"""torch_diode.hardware must reproduce shared/src/hardware.cpp (examples: shared/schema/contracts.json)."""
import json
import pathlib

import pytest

from torch_diode.hardware import hardware_key, is_valid_hardware_key
from torch_diode.wire import HardwareId

ROOT = pathlib.Path(__file__).resolve().parents[2]


def hw(vendor, name, gib):
    return HardwareId(vendor, name, memory_bytes=int(gib * float(1 << 30)))


# The examples are stated once, in shared/schema/contracts.json ("hardware_key"), and
# read from there by this test and by tests/cpp/test_hardware.cpp.
SCHEMA = json.loads((ROOT / "shared/schema/contracts.json").read_text())["hardware_key"]


@pytest.mark.parametrize("ex", SCHEMA["examples"], ids=[e["key"] for e in SCHEMA["examples"]])
def test_documented_examples(ex):
    assert hardware_key(HardwareId(ex["vendor"], ex["device_name"], memory_bytes=ex["memory_bytes"])) == ex["key"]


def test_gib_examples():
    # The schema's memory sizes are int(GiB * 2^30), as the C++ test's hw() makes them.
    assert hardware_key(hw("nvidia", "NVIDIA H100 80GB HBM3", 79.65)) == "nvidia-h100-80gb"
    assert hw("nvidia", "NVIDIA H100 80GB HBM3", 79.65).memory_bytes == SCHEMA["examples"][0]["memory_bytes"]


@pytest.mark.parametrize("name", SCHEMA["always_valid_device_names"])
def test_keys_are_always_valid(name):
    k = hardware_key(hw("Vendor X", name, 0))
    assert is_valid_hardware_key(k), k
    assert k.startswith("vendorx")


def test_no_memory_suffix_without_memory():
    assert hardware_key(HardwareId("nvidia", "NVIDIA H100 80GB HBM3")) == "nvidia-h100"


def test_invalid_keys():
    for bad in SCHEMA["invalid_keys"]:
        assert not is_valid_hardware_key(bad), bad
    for good in SCHEMA["valid_keys"]:
        assert is_valid_hardware_key(good), good
