# Copyright 2026 The arctic-verl Authors
# SPDX-License-Identifier: Apache-2.0
"""DSSST1 conformance against the reference's golden frames (../shared/fixtures/arctic-platform/dssst1/).

For every case in INDEX.json:
* the golden frame (written by the reference encoder) decodes to exactly the tree the reference decoder returns
  (NAME.json: tensors by dtype / shape / values, floats as float64 of the stored value, nan / inf, tuples vs
  lists, int JSON keys as str);
* our encoding of that tree decodes to the same tree;
* our bytes equal the golden bytes. The layout is deterministic for every golden case: safetensors orders tensors
  by (alignment, name) and pads the header with spaces, the skeleton is ``json.dumps`` with defaults in insertion
  order, and no golden frame carries op metadata. The exceptions, checked separately below, are frames WITH op
  metadata (chunk frames, ``response_options``): safetensors keeps ``__metadata__`` in a Rust HashMap with a
  per-process random seed, so whether ``dss`` or ``op`` comes first varies from run to run, in the reference too;
  chunk frames of a request also carry a fresh uuid4 group id.

NAME.json lists dict keys sorted, so the insertion order the bytes depend on is taken from the golden frame's own
skeleton (the decoded golden tree), and a few cases are rebuilt in the form the reference encoded them from
(:data:`ORIGINAL_FORM`: a transposed view, one tensor object twice, int keys, a tuple in JSON data), which shows
that contiguity, cloning of shared storage and JSON's key / tuple conversion give the same bytes.
"""

from __future__ import annotations

import json
import math
from pathlib import Path

import pytest
import torch

from arctic_platform import wire

REPO = Path(__file__).resolve().parents[3]
FIXTURES = REPO.parent / "shared" / "fixtures" / "arctic-platform"
DSSST1 = FIXTURES / "dssst1"
TRANSCRIPT = FIXTURES / "transcript"

if not (DSSST1 / "INDEX.json").is_file():
    pytest.skip(
        f"golden DSSST1 fixtures not found: {DSSST1} (expected ../shared next to the repo)", allow_module_level=True
    )

INDEX = json.loads((DSSST1 / "INDEX.json").read_text())
CASES = INDEX["cases"]


def _golden(name: str) -> tuple[bytes, object]:
    return (DSSST1 / f"{name}.dssst1").read_bytes(), json.loads((DSSST1 / f"{name}.json").read_text())


# ---- the description format of NAME.json -----------------------------------------------------------------------


def _value(v):
    if isinstance(v, dict) and set(v) == {"__float__"}:
        return float(v["__float__"])
    return v


def _same_number(got, want) -> bool:
    want = _value(want)
    if isinstance(want, float) and math.isnan(want):
        return isinstance(got, float) and math.isnan(got)
    return type(got) is type(want) and got == want


def assert_matches(got, desc, where="<root>"):
    """``got`` (a decoded tree) is exactly the tree ``desc`` describes."""
    if isinstance(desc, dict) and set(desc) == {"__tensor__"}:
        d = desc["__tensor__"]
        assert isinstance(got, torch.Tensor), f"{where}: expected a tensor, got {type(got).__name__}"
        assert str(got.dtype).removeprefix("torch.") == d["dtype"], f"{where}: dtype {got.dtype} != {d['dtype']}"
        assert list(got.shape) == d["shape"], f"{where}: shape {list(got.shape)} != {d['shape']}"
        flat = got.reshape(-1)
        values = flat.to(torch.float64).tolist() if got.is_floating_point() else flat.tolist()
        assert len(values) == len(d["values"]), f"{where}: {len(values)} values != {len(d['values'])}"
        for i, (a, b) in enumerate(zip(values, d["values"], strict=True)):
            assert _same_number(a, b), f"{where}[{i}]: {a!r} != {_value(b)!r}"
    elif isinstance(desc, dict) and set(desc) == {"__tuple__"}:
        assert type(got) is tuple, f"{where}: expected a tuple, got {type(got).__name__}"
        assert len(got) == len(desc["__tuple__"]), f"{where}: tuple length"
        for i, (a, b) in enumerate(zip(got, desc["__tuple__"], strict=True)):
            assert_matches(a, b, f"{where}.{i}")
    elif isinstance(desc, dict) and set(desc) == {"__float__"}:
        assert _same_number(got, desc), f"{where}: {got!r} != {desc!r}"
    elif isinstance(desc, dict):
        assert type(got) is dict, f"{where}: expected a dict, got {type(got).__name__}"
        assert sorted(got) == sorted(desc), f"{where}: keys {sorted(got)} != {sorted(desc)}"
        for k in desc:
            assert_matches(got[k], desc[k], f"{where}.{k}")
    elif isinstance(desc, list):
        assert type(got) is list, f"{where}: expected a list, got {type(got).__name__}"
        assert len(got) == len(desc), f"{where}: list length {len(got)} != {len(desc)}"
        for i, (a, b) in enumerate(zip(got, desc, strict=True)):
            assert_matches(a, b, f"{where}.{i}")
    else:  # str, int, float, bool, None: type-exact (1 is not 1.0, True is not 1)
        assert _same_number(got, desc), f"{where}: {got!r} ({type(got).__name__}) != {desc!r}"


def build(desc, order=None):
    """The tree ``desc`` describes; dict keys in the order of ``order`` (a decoded tree) where it has them."""
    if isinstance(desc, dict) and set(desc) == {"__tensor__"}:
        d = desc["__tensor__"]
        dtype = getattr(torch, d["dtype"])
        vals = [_value(v) for v in d["values"]]
        src = torch.tensor(vals, dtype=torch.float64 if dtype.is_floating_point else torch.int64)
        if dtype == torch.bool:
            src = torch.tensor(vals, dtype=torch.bool)
        return src.to(dtype).reshape(d["shape"])
    if isinstance(desc, dict) and set(desc) == {"__tuple__"}:
        o = order if isinstance(order, tuple) else [None] * len(desc["__tuple__"])
        return tuple(build(v, w) for v, w in zip(desc["__tuple__"], o, strict=True))
    if isinstance(desc, dict) and set(desc) == {"__float__"}:
        return _value(desc)
    if isinstance(desc, dict):
        keys = list(order) if isinstance(order, dict) and sorted(order) == sorted(desc) else list(desc)
        return {k: build(desc[k], order.get(k) if isinstance(order, dict) else None) for k in keys}
    if isinstance(desc, list):
        o = order if isinstance(order, list) and len(order) == len(desc) else [None] * len(desc)
        return [build(v, w) for v, w in zip(desc, o, strict=True)]
    return desc


def _non_contiguous(tree):
    t = tree["t"]
    view = t.t().contiguous().t()  # same values, transposed strides
    assert not view.is_contiguous()
    return {"t": view}


def _same_twice(tree):
    assert torch.equal(tree["a"], tree["b"])
    return {"a": tree["a"], "b": tree["a"]}  # one tensor object at two paths: the encoder clones the second


def _int_keys(tree):
    return {k: ([{int(kk): vv for kk, vv in d.items()} for d in v] if k == "logprobs" else v) for k, v in tree.items()}


ORIGINAL_FORM = {
    "non_contiguous": _non_contiguous,
    "same_tensor_twice": _same_twice,
    "int_keys_in_json": _int_keys,
    "tuple_json_only": lambda tree: {"t": tuple(tree["t"])},
}


# ---- the checks --------------------------------------------------------------------------------------------------


def test_index_lists_every_fixture_file():
    on_disk = {p.stem for p in DSSST1.glob("*.dssst1")}
    assert on_disk == set(CASES), sorted(on_disk ^ set(CASES))
    assert all((DSSST1 / f"{c}.json").is_file() for c in CASES)


@pytest.mark.parametrize("name", CASES)
def test_golden_frame_decodes_to_the_described_tree(name):
    frame, desc = _golden(name)
    assert_matches(wire.decode(frame), desc)


@pytest.mark.parametrize("name", CASES)
def test_our_encoding_decodes_to_the_same_tree(name):
    frame, desc = _golden(name)
    ours = wire.encode(build(desc, wire.decode(frame)))
    assert_matches(wire.decode(ours), desc)


@pytest.mark.parametrize("name", CASES)
def test_our_bytes_equal_the_golden_frame(name):
    frame, desc = _golden(name)
    tree = build(desc, wire.decode(frame))
    assert wire.encode(tree) == frame
    if name in ORIGINAL_FORM:
        assert wire.encode(ORIGINAL_FORM[name](tree)) == frame


def test_view_sharing_storage_encodes_where_the_reference_fails():
    """INDEX.json: the reference cannot encode a tensor and a view of it; DSSST1 clones shared storage instead."""
    assert "view_sharing_storage" in INDEX["not_encodable_by_reference"]
    whole = torch.arange(6, dtype=torch.float32)
    out = wire.decode(wire.encode({"whole": whole, "part": whole[2:]}))
    assert torch.equal(out["whole"], whole) and torch.equal(out["part"], whole[2:])


def test_dotted_key_collision_left_out_by_the_reference_is_refused_both_ways():
    """INDEX.json: the reference encodes {'a': {'b': t1}, 'a.b': t2} and decodes the wrong tensor; we refuse."""
    assert "dotted_key_collision" in INDEX["left_out"]
    with pytest.raises(wire.WireError, match="ambiguous dotted path 'a.b'"):
        wire.encode({"a": {"b": torch.ones(1)}, "a.b": torch.zeros(1)})
    # the frame the reference writes for it: two skeleton nodes name one tensor 'a.b'
    from safetensors.torch import save

    tree = ["d", [["a", ["d", [["b", ["t", "a.b"]]]]], ["a.b", ["t", "a.b"]]]]
    frame = save({"a.b": torch.zeros(1)}, metadata={"dss": json.dumps({"v": "DSSST1", "tree": tree})})
    with pytest.raises(wire.WireError, match="names tensor 'a.b' twice"):
        wire.decode(frame)


def test_frames_with_op_metadata_differ_only_in_metadata_key_order():
    """The documented exception: with op metadata the header's key order is not deterministic (in the reference too)."""
    frame = wire.encode({"x": torch.arange(3)}, metadata=wire.CHUNKED_RESPONSE_OPTIONS)
    hlen = int.from_bytes(frame[:8], "little")
    header = json.loads(frame[8 : 8 + hlen])
    assert set(header["__metadata__"]) == {"dss", "op"}
    assert json.loads(header["__metadata__"]["op"]) == wire.CHUNKED_RESPONSE_OPTIONS
    assert wire.read_metadata(frame) == wire.CHUNKED_RESPONSE_OPTIONS
    plain = wire.encode({"x": torch.arange(3)})
    assert frame[8 + hlen :] == plain[8 + int.from_bytes(plain[:8], "little") :]  # the tensor bytes are identical


def _transcript_frames():
    if not TRANSCRIPT.is_dir():
        return []
    return sorted(p.name for p in TRANSCRIPT.glob("*.dssst1"))


@pytest.mark.skipif(not TRANSCRIPT.is_dir(), reason=f"transcript fixtures not found: {TRANSCRIPT}")
@pytest.mark.parametrize("name", _transcript_frames())
def test_reference_session_frames_decode_strictly_and_re_encode(name):
    """Every octet body of the recorded reference session passes our strict decoder and re-encodes the same."""
    frame = (TRANSCRIPT / name).read_bytes()
    tree, op = wire.decode_with_metadata(frame)
    again = wire.encode(tree, metadata=op)
    if op:  # metadata key order is not deterministic: compare header content and tensor bytes
        h1, h2 = (int.from_bytes(f[:8], "little") for f in (frame, again))
        assert json.loads(frame[8 : 8 + h1]) == json.loads(again[8 : 8 + h2])
        assert frame[8 + h1 :] == again[8 + h2 :]
    else:
        assert again == frame
