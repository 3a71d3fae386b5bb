# Copyright 2026 The arctic-verl Authors
# SPDX-License-Identifier: Apache-2.0
"""arctic_platform.wire: round trips, safetensors compatibility and the strict decoder's refusals."""

import io
import json
import math
import pickle
import struct
import zipfile

import pytest
import torch

from arctic_platform import wire


def _tree():
    g = torch.Generator().manual_seed(0)
    return {
        "batch": {
            "input_ids": torch.randint(0, 300, (3, 7), generator=g),
            "mask": torch.ones(3, 7, dtype=torch.bool),
            "lp": torch.randn(3, 7, generator=g),
            "bf": torch.randn(2, 5, generator=g).to(torch.bfloat16),
            "scalar": torch.tensor(2.5, dtype=torch.float64),
            "empty": torch.empty(0, 4),
            "i8": torch.tensor([-1, 2], dtype=torch.int8),
        },
        "meta": {"temperature": 0.7, "n": 3, "flag": True, "none": None, "name": "x", "nested": [1, [2, 3], {"a": 1}]},
        "tuple": (1, torch.arange(3), "s"),
        "list_of_tensors": [torch.zeros(2), torch.ones(1, dtype=torch.int32)],
        "nan": float("nan"),
    }


def _assert_same(a, b):
    assert type(a) is type(b), (type(a), type(b))
    if isinstance(a, torch.Tensor):
        assert a.dtype == b.dtype and a.shape == b.shape
        assert torch.equal(a, b) or (a.is_floating_point() and torch.equal(a.isnan(), b.isnan()))
    elif isinstance(a, dict):
        assert list(a) == list(b)
        for k in a:
            _assert_same(a[k], b[k])
    elif isinstance(a, (list, tuple)):
        assert len(a) == len(b)
        for x, y in zip(a, b, strict=True):
            _assert_same(x, y)
    elif isinstance(a, float) and math.isnan(a):
        assert math.isnan(b)
    else:
        assert a == b


def test_round_trip_is_exact():
    t = _tree()
    _assert_same(t, wire.decode(wire.encode(t)))


def test_non_contiguous_and_shared_storage_tensors():
    base = torch.arange(12, dtype=torch.float32).reshape(3, 4)
    tree = {"t": base.t(), "slice": base[1:, ::2], "same": base, "again": base}
    out = wire.decode(wire.encode(tree))
    for k in tree:
        assert torch.equal(out[k], tree[k].contiguous())
    out["same"][0, 0] = 99.0  # decoded tensors never alias each other
    assert out["again"][0, 0] == 0.0


def test_frame_is_valid_safetensors_both_ways():
    from safetensors.torch import load, save

    t = _tree()
    plain = load(wire.encode(t))  # our frame reads as safetensors
    assert torch.equal(plain["batch.input_ids"], t["batch"]["input_ids"])
    blob = save({"x": torch.ones(2)}, metadata={"format": wire.FORMAT, "tree": json.dumps({"t": "x"})})
    assert torch.equal(wire.decode(blob), torch.ones(2))  # safetensors' own writer decodes with our reader


def test_unsupported_inputs_are_refused_on_encode():
    with pytest.raises(wire.WireError, match="not a str"):
        wire.encode({1: torch.ones(1)})
    with pytest.raises(wire.WireError, match="cannot encode"):
        wire.encode({"x": object()})
    with pytest.raises(wire.WireError, match="allow-list"):
        wire.encode({"x": torch.ones(2, dtype=torch.complex64)})


def _frame(header: dict, body: bytes = b"") -> bytes:
    h = json.dumps(header).encode()
    return struct.pack("<Q", len(h)) + h + body


META = {"format": wire.FORMAT, "tree": json.dumps({"t": "x"})}


@pytest.mark.parametrize(
    "payload, match",
    [
        (pickle.dumps({"x": 1}, protocol=2), "pickle"),
        (pickle.dumps({"x": 1}, protocol=5), "pickle"),
        (b"", "shorter"),
        (b"\x01\x02", "shorter"),
        (struct.pack("<Q", 10**12) + b"{}", "exceeds"),
        (struct.pack("<Q", 100) + b"{}", "runs past"),
        (struct.pack("<Q", 3) + b"{x}", "not JSON"),
        (_frame([1, 2]), "not a JSON object"),
        (_frame({"x": {"dtype": "F32", "shape": [1], "data_offsets": [0, 4]}}, b"\0" * 4), "not an ARCW1 frame"),
        (_frame({"__metadata__": META, "x": {"dtype": "O", "shape": [1], "data_offsets": [0, 8]}}, b"\0" * 8), "allow"),
        (_frame({"__metadata__": META, "x": {"dtype": "F32", "shape": [3], "data_offsets": [0, 8]}}, b"\0" * 8), "!="),
        (
            _frame({"__metadata__": META, "x": {"dtype": "F32", "shape": [2], "data_offsets": [0, 16]}}, b"\0" * 8),
            "outside",
        ),
        (
            _frame({"__metadata__": META, "x": {"dtype": "F32", "shape": [-1], "data_offsets": [0, 4]}}, b"\0" * 4),
            "shape",
        ),
        (
            _frame({"__metadata__": META, "x": {"dtype": "F32", "shape": [1], "data_offsets": [4, 8]}}, b"\0" * 8),
            "hole",
        ),
        (
            _frame({"__metadata__": META, "x": {"dtype": "F32", "shape": [1], "data_offsets": [0, 4]}}, b"\0" * 8),
            "end at",
        ),
        (
            _frame(
                {
                    "__metadata__": {"format": wire.FORMAT, "tree": json.dumps({"t": "y"})},
                    "x": {"dtype": "F32", "shape": [1], "data_offsets": [0, 4]},
                },
                b"\0" * 4,
            ),
            "lacks",
        ),
        (
            _frame(
                {
                    "__metadata__": {"format": wire.FORMAT, "tree": json.dumps({"l": [{"t": "x"}, {"t": "x"}]})},
                    "x": {"dtype": "F32", "shape": [1], "data_offsets": [0, 4]},
                },
                b"\0" * 4,
            ),
            "twice",
        ),
        (_frame({"__metadata__": {"format": wire.FORMAT, "tree": json.dumps({"q": 1})}}), "unknown skeleton"),
    ],
    ids=[
        "pickle-p2",
        "pickle-p5",
        "empty",
        "short",
        "huge-header",
        "header-past-end",
        "header-not-json",
        "header-not-object",
        "no-metadata",
        "dtype-object",
        "shape-bytes-mismatch",
        "range-outside-body",
        "negative-dim",
        "hole",
        "trailing-bytes",
        "unknown-tensor",
        "tensor-twice",
        "bad-node",
    ],
)
def test_strict_decoder_refuses(payload, match):
    with pytest.raises(wire.WireError, match=match):
        wire.decode(payload)


def test_torch_save_zip_is_refused():
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w") as zf:  # the torch.save container, written without calling torch.save
        zf.writestr("archive/data.pkl", pickle.dumps({"x": 1}))
    with pytest.raises(wire.WireError, match="zip"):
        wire.decode(buf.getvalue())


def test_size_limits():
    frame = wire.encode({"x": torch.zeros(1000)})
    with pytest.raises(wire.WireError, match="exceeds"):
        wire.decode(frame, max_body_bytes=len(frame) - 1)
    with pytest.raises(wire.WireError, match="header length"):
        wire.decode(frame, max_header_bytes=16)
    assert wire.decode(frame, max_body_bytes=len(frame))["x"].shape == (1000,)


def test_every_header_length_round_trips_and_never_starts_like_pickle():
    """The first byte is the header length's low byte: a length of 128 mod 256 used to look like a pickle prefix."""
    seen_low_bytes = set()
    for n in range(0, 400):
        tree = {"k" * n: torch.zeros(1)}  # header length grows with the key
        frame = wire.encode(tree)
        seen_low_bytes.add(frame[0])
        assert frame[0] != 0x80
        assert torch.equal(wire.decode(frame)["k" * n], torch.zeros(1))
    assert len(seen_low_bytes) >= 30  # the loop really swept across header lengths
