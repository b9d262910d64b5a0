"""The shared decoder corpus (tests/golden/decoder_corpus): every message there is
decoded by the Python decoder here and by the C++ one in tests/cpp/test_decoder_corpus.cpp;
both must give the verdict expect.json records, so they agree on accept/reject."""
from __future__ import annotations

import json
import pathlib

import pytest

from torch_diode import wire

CORPUS = pathlib.Path(__file__).resolve().parents[1] / "golden" / "decoder_corpus"
EXPECT = json.loads((CORPUS / "expect.json").read_text())


def test_every_corpus_file_has_a_verdict_and_both_verdicts_occur():
    files = {p.name for p in CORPUS.iterdir() if p.name != "expect.json"}
    assert files == set(EXPECT)
    assert {e["expect"] for e in EXPECT.values()} == {"accept", "reject"}


@pytest.mark.parametrize("name", sorted(EXPECT))
def test_python_decoder_verdict(name):
    data = (CORPUS / name).read_bytes()
    try:
        wire.decode(data)
        got = "accept"
    except wire.WireError:
        got = "reject"
    assert got == EXPECT[name]["expect"], EXPECT[name]["why"]
