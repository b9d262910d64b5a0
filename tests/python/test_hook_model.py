"""Model directories (docs/model-format.md): loading, the residual MLP, strict validation.

`write_model_dir` writes the documented format with msgpack directly (not through
torch_diode.model), so these tests check the reader against the document.
"""
import json
import math
import os
import pickle
import random
import struct

import msgpack
import pytest

torch = pytest.importorskip("torch")

from torch_diode.features import FeatureSpec  # noqa: E402
from torch_diode.model import ModelFormatError, load_model_dir, read_model_dir  # noqa: E402


def random_weights(inputs, hidden, blocks, seed=0):
    rng = random.Random(seed)
    shapes = {"input.weight": [hidden, inputs], "input.bias": [hidden]}
    for i in range(blocks):
        for fc in ("fc1", "fc2"):
            shapes[f"blocks.{i}.{fc}.weight"] = [hidden, hidden]
            shapes[f"blocks.{i}.{fc}.bias"] = [hidden]
    shapes["head.weight"] = [1, hidden]
    shapes["head.bias"] = [1]
    out = {}
    for name, shape in shapes.items():
        fan_in = shape[-1] if len(shape) == 2 else hidden
        bound = 1.0 / math.sqrt(fan_in)
        out[name] = (shape, [rng.uniform(-bound, bound) for _ in range(math.prod(shape))])
    return out


def write_model_dir(path, *, hidden=16, blocks=2, activation="silu", seed=0, hardware_key="nvidia-h100-80gb",
                    tensors=None, json_patch=None, fitted=True):
    """A tiny model directory: random weights, a fitted (random) normalisation."""
    os.makedirs(path, exist_ok=True)
    spec = FeatureSpec()
    n = len(spec.names)
    if fitted:
        rng = random.Random(seed + 1)
        spec.mean = [rng.uniform(-2, 8) for _ in range(n)]
        spec.stddev = [rng.uniform(0.5, 3) for _ in range(n - 1)] + [0.0]  # 0 is treated as 1
    model = {
        "format": "diode-model", "version": 1, "hardware_key": hardware_key,
        "architecture": {"kind": "residual_mlp", "input": n, "hidden": hidden, "blocks": blocks,
                         "activation": activation},
        "feature_spec": spec.to_json(), "target": "log_us",
        "dataset": {"sha256": "00" * 32, "records": 1, "problems": 1, "hardware_key": hardware_key},
        "metrics": {}, "training": {"seed": seed, "ranks": 1, "epochs": 0, "loss": "none",
                                    "torch_version": torch.__version__},
    }
    if json_patch:
        json_patch(model)
    with open(os.path.join(path, "model.json"), "w") as f:
        json.dump(model, f)
    if tensors is None:
        w = random_weights(n, hidden, blocks, seed)
        tensors = [[name, "float32", shape, struct.pack(f"<{len(vals)}f", *vals)]
                   for name, (shape, vals) in w.items()]
    with open(os.path.join(path, "weights.msgpack"), "wb") as f:
        f.write(msgpack.packb(["diode-weights", 1, tensors], use_bin_type=True))
    return path


def _reference_forward(path, x):
    """docs/model-format.md's pseudo-code, straight from the msgpack file."""
    with open(os.path.join(path, "weights.msgpack"), "rb") as f:
        _, _, tensors = msgpack.unpackb(f.read())
    w = {name: torch.tensor(struct.unpack(f"<{len(data) // 4}f", data)).reshape(shape)
         for name, _, shape, data in tensors}
    arch = json.load(open(os.path.join(path, "model.json")))["architecture"]
    act = torch.nn.functional.silu if arch["activation"] == "silu" else torch.relu
    lin = lambda name, v: v @ w[f"{name}.weight"].T + w[f"{name}.bias"]  # noqa: E731
    h = act(lin("input", x))
    for i in range(arch["blocks"]):
        h = act(h + lin(f"blocks.{i}.fc2", act(lin(f"blocks.{i}.fc1", h))))
    return lin("head", h).squeeze(-1)


@pytest.mark.parametrize("activation", ["silu", "relu"])
def test_loads_and_matches_documented_forward(tmp_path, activation):
    d = write_model_dir(str(tmp_path / "m"), activation=activation)
    m = load_model_dir(d)
    assert m.info.hardware_key == "nvidia-h100-80gb"
    assert m.info.architecture.input == len(FeatureSpec().names)
    assert len(m.info.model_id) == 64
    x = torch.randn(7, m.info.architecture.input)
    with torch.no_grad():
        got = m.module(x)
    assert got.shape == (7,)
    torch.testing.assert_close(got, _reference_forward(d, x), rtol=1e-5, atol=1e-6)


def test_model_id_changes_with_weights(tmp_path):
    a = read_model_dir(write_model_dir(str(tmp_path / "a"), seed=1))[0].model_id
    b = read_model_dir(write_model_dir(str(tmp_path / "b"), seed=2))[0].model_id
    a2 = read_model_dir(write_model_dir(str(tmp_path / "a2"), seed=1))[0].model_id
    assert a != b and a == a2


def _tensors(**changes):
    n = len(FeatureSpec().names)
    w = random_weights(n, 16, 2)
    out = [[name, "float32", shape, struct.pack(f"<{len(v)}f", *v)] for name, (shape, v) in w.items()]
    return changes.get("edit", lambda t: t)(out)


def _set(key, value):
    def patch(m):
        cur = m
        *path, last = key.split(".")
        for p in path:
            cur = cur[p]
        cur[last] = value
    return patch


BAD_JSON = [
    ("format", _set("format", "pickle"), "format"),
    ("version", _set("version", 2), "unsupported version"),
    ("kind", _set("architecture.kind", "transformer"), "unsupported architecture"),
    ("activation", _set("architecture.activation", "gelu"), "activation"),
    ("hidden", _set("architecture.hidden", 0), "architecture.hidden"),
    ("input_mismatch", _set("architecture.input", 10), "differs from the feature spec"),
    ("target", _set("target", "us"), "target"),
    ("spec_version", _set("feature_spec.version", 9), "feature spec version"),
    ("spec_names", _set("feature_spec.names", ["a"]), "feature names differ"),
    ("hw", _set("hardware_key", 3), "hardware_key"),
]


@pytest.mark.parametrize("name,patch,msg", BAD_JSON, ids=[b[0] for b in BAD_JSON])
def test_rejects_bad_model_json(tmp_path, name, patch, msg):
    d = write_model_dir(str(tmp_path / name), json_patch=patch)
    with pytest.raises(ModelFormatError, match=msg):
        load_model_dir(d)


BAD_WEIGHTS = [
    ("dtype", lambda t: [[t[0][0], "float16", *t[0][2:]]] + t[1:], "dtype must be 'float32'"),
    ("shape", lambda t: [[t[0][0], "float32", [1, 1], t[0][3]]] + t[1:], "shape"),
    ("size", lambda t: [[*t[0][:3], t[0][3][:-4]]] + t[1:], "bytes, shape needs"),
    ("missing", lambda t: t[:-1], "missing tensors"),
    ("extra", lambda t: t + [["evil", "float32", [1], b"\0\0\0\0"]], "not part of"),
    ("duplicate", lambda t: t + [t[0]], "duplicate"),
    ("nan", lambda t: [[*t[0][:3], struct.pack("<f", float("nan")) + t[0][3][4:]]] + t[1:], "non-finite"),
    ("str_data", lambda t: [[*t[0][:3], "abc"]] + t[1:], "bin"),
]


@pytest.mark.parametrize("name,edit,msg", BAD_WEIGHTS, ids=[b[0] for b in BAD_WEIGHTS])
def test_rejects_bad_weights(tmp_path, name, edit, msg):
    d = write_model_dir(str(tmp_path / name), tensors=_tensors(edit=edit))
    with pytest.raises(ModelFormatError, match=msg):
        load_model_dir(d)


def test_rejects_pickle_and_garbage(tmp_path):
    d = write_model_dir(str(tmp_path / "p"))
    with open(os.path.join(d, "weights.msgpack"), "wb") as f:
        f.write(pickle.dumps({"input.weight": [1.0]}))
    with pytest.raises(ModelFormatError, match="weights.msgpack"):
        load_model_dir(d)
    with open(os.path.join(d, "weights.msgpack"), "wb") as f:
        f.write(msgpack.packb(["diode-weights", 1, []]) + b"trailing")
    with pytest.raises(ModelFormatError, match="weights.msgpack"):
        load_model_dir(d)
    os.remove(os.path.join(d, "weights.msgpack"))
    with pytest.raises(ModelFormatError, match="missing weights.msgpack"):
        load_model_dir(d)
    with open(os.path.join(d, "model.json"), "w") as f:
        f.write("{not json")
    with open(os.path.join(d, "weights.msgpack"), "wb") as f:
        f.write(b"")
    with pytest.raises(ModelFormatError, match="not valid JSON"):
        load_model_dir(d)


def test_rejects_oversized_weights(tmp_path):
    d = write_model_dir(str(tmp_path / "big"))
    with open(os.path.join(d, "weights.msgpack"), "r+b") as f:
        f.truncate(64 * 1024 * 1024 + 1)
    with pytest.raises(ModelFormatError, match="larger than"):
        load_model_dir(d)
