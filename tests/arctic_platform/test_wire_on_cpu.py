# Copyright 2026 The arctic-verl Authors
# SPDX-License-Identifier: Apache-2.0
"""arctic_platform.wire (DSSST1): round trips, safetensors compatibility, chunking and the strict decoder's refusals.

Conformance with the reference's golden frames is in conformance/test_dssst1_on_cpu.py.
"""

import hashlib
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


def test_zero_dim_tensors_travel_as_shape_1_with_the_scalar_flag():
    from safetensors.torch import load

    frame = wire.encode({"s": torch.tensor(3, dtype=torch.int64)})
    assert load(frame)["s"].shape == (1,)  # stored as [1] ...
    out = wire.decode(frame)["s"]
    assert out.shape == () and out.item() == 3  # ... and comes back 0-dim


def test_frame_is_valid_safetensors_both_ways():
    from safetensors.torch import load, save

    t = _tree()
    plain = load(wire.encode(t))  # our frame reads as safetensors
    assert torch.equal(plain["batch.input_ids"], t["batch"]["input_ids"])
    assert torch.equal(load(wire.encode(torch.ones(2)))["__root__"], torch.ones(2))
    meta = {"dss": json.dumps({"v": wire.FORMAT, "tree": ["t", "__root__"]})}
    blob = save({"__root__": torch.ones(2)}, metadata=meta)
    assert torch.equal(wire.decode(blob), torch.ones(2))  # safetensors' own writer decodes with our reader
    assert wire.FORMAT == wire.WIRE_FORMAT_VERSION == "DSSST1"


def test_frame_without_tensors_carries_the_placeholder():
    from safetensors.torch import load

    frame = wire.encode({"a": [1, 2], "s": "x"})
    assert set(load(frame)) == {"__dss_empty__"}
    assert wire.decode(frame) == {"a": [1, 2], "s": "x"}


def test_op_metadata_round_trips_and_is_readable_without_the_tensors():
    meta = {"router_replay": {"layers": [1, 2]}, **wire.CHUNKED_RESPONSE_OPTIONS}
    frame = wire.encode({"x": torch.arange(4)}, metadata=meta)
    tree, op = wire.decode_with_metadata(frame)
    assert op == meta and wire.read_metadata(frame) == meta
    assert torch.equal(tree["x"], torch.arange(4))
    assert wire.read_metadata(wire.encode({"x": 1})) == {}
    with pytest.raises(wire.WireError, match="op metadata is not JSON"):
        wire.encode({"x": 1}, metadata={"bad": object()})


def test_unsupported_inputs_are_refused_on_encode():
    with pytest.raises(wire.WireError, match="not a str"):
        wire.encode({1: torch.ones(1)})
    with pytest.raises(wire.WireError, match="cannot encode object"):
        wire.encode({"x": object()})
    with pytest.raises(wire.WireError, match="cannot encode set"):
        wire.encode({"x": {1, 2}})
    with pytest.raises(wire.WireError, match="allow-list"):
        wire.encode({"x": torch.ones(2, dtype=torch.complex64)})
    with pytest.raises(wire.WireError, match="collide as JSON strings"):
        wire.encode({"lp": {1: 0.5, "1": 0.25}})  # JSON would keep only one of them
    with pytest.raises(wire.WireError, match="not a str"):
        wire.encode({"lp": {(1, 2): 0.5}})
    with pytest.raises(wire.WireError, match="reserved name"):
        wire.encode({"__dss_empty__": torch.ones(1)})


def test_int_keys_in_json_data_come_back_as_str():
    out = wire.decode(wire.encode({"logprobs": [{5: {"logprob": -1.0}}], "x": torch.ones(1)}))
    assert out["logprobs"] == [{"5": {"logprob": -1.0}}]


@pytest.mark.parametrize(
    "tree, name",
    [
        ({"a": {"b": torch.ones(1)}, "a.b": torch.zeros(1)}, "a.b"),
        ({"a.b": torch.zeros(1), "a": {"b": torch.ones(1)}}, "a.b"),
        ({"xs": [torch.ones(1)], "xs.0": torch.zeros(1)}, "xs.0"),
        ({"t": (torch.ones(1), {"0": torch.zeros(1)}), "t.1.0": torch.zeros(1)}, "t.1.0"),
    ],
    ids=["nested-then-dotted", "dotted-then-nested", "list-index", "tuple-dict"],
)
def test_ambiguous_dotted_paths_are_refused_on_encode(tree, name):
    with pytest.raises(wire.WireError, match=f"ambiguous dotted path '{name}'"):
        wire.encode(tree)


def test_dotted_keys_that_do_not_collide_are_fine():
    tree = {"a.b": torch.ones(1), "a": {"c": torch.zeros(1)}, "a.b.json": 1}
    out = wire.decode(wire.encode(tree))
    assert torch.equal(out["a.b"], torch.ones(1)) and torch.equal(out["a"]["c"], torch.zeros(1))


def _st(tensors, tree, **meta):
    """A frame written by safetensors itself with a hand-made skeleton."""
    from safetensors.torch import save

    return save(tensors, metadata={"dss": json.dumps({"v": "DSSST1", "tree": tree}), **meta})


@pytest.mark.parametrize(
    "payload, match",
    [
        (_st({"a.b": torch.zeros(1)}, ["d", [["a", ["d", [["b", ["t", "a.b"]]]]], ["a.b", ["t", "a.b"]]]]), "twice"),
        (_st({"x": torch.zeros(1)}, ["d", [["y", ["t", "x"]]]]), "must be named by its dotted path"),
        (_st({"x": torch.zeros(1)}, ["d", [["x", ["t", "x"]], ["x", ["j", 1]]]]), "key 'x' twice"),
        (_st({"x": torch.zeros(2)}, ["d", [["x", ["t", "x", {"scalar": True}]]]]), "scalar flag on shape"),
        (_st({"x": torch.zeros(1)}, ["d", [["y", ["t", "y"]]]]), "lacks"),
        (_st({"x": torch.zeros(1), "y": torch.zeros(1)}, ["d", [["x", ["t", "x"]]]]), "never names"),
        (_st({"x": torch.zeros(1)}, ["q", 1]), "unknown skeleton node tag"),
        (_st({"x": torch.zeros(1)}, {"t": "x"}), "malformed skeleton node"),
        (_st({"x": torch.zeros(1)}, ["d", {"x": ["t", "x"]}]), "malformed dict node"),
        (_st({"x": torch.zeros(1), "__dss_empty__": torch.zeros(1, dtype=torch.uint8)}, ["t", "x"]), "placeholder"),
        (_st({"x": torch.zeros(1)}, ["d", [["x", ["t", "x"]]]], op="[1]"), "op is not a JSON object"),
        (_st({"x": torch.zeros(1)}, ["d", [["x", ["t", "x"]]]], op="{"), "op is not JSON"),
    ],
    ids=[
        "reference-collision-frame",
        "name-not-path",
        "dict-key-twice",
        "scalar-flag-bad-shape",
        "unknown-tensor",
        "unnamed-tensor",
        "bad-tag",
        "node-not-list",
        "dict-node-not-list",
        "placeholder-with-tensors",
        "op-not-object",
        "op-not-json",
    ],
)
def test_strict_skeleton_checks(payload, match):
    with pytest.raises(wire.WireError, match=match):
        wire.decode(payload)


def _frame(header, body: bytes = b"") -> bytes:
    h = json.dumps(header).encode()
    return struct.pack("<Q", len(h)) + h + body


META = {"dss": json.dumps({"v": wire.FORMAT, "tree": ["t", "__root__"]})}


def _x(dtype="F32", shape=(1,), offs=(0, 4)):
    return {"dtype": dtype, "shape": list(shape), "data_offsets": list(offs)}


@pytest.mark.parametrize(
    "payload, match",
    [
        (pickle.dumps({"x": 1}, protocol=2), "pickle"),
        (pickle.dumps({"x": 1}, protocol=5), "pickle"),
        (b"\x80", "pickle"),
        (b"", "shorter"),
        (b"\x01\x02", "shorter"),
        (struct.pack("<Q", 10**12) + b"{}", "exceeds"),
        (struct.pack("<Q", 100) + b"{}", "runs past"),
        (struct.pack("<Q", 3) + b"{x}", "not JSON"),
        (_frame([1, 2]), "not a JSON object"),
        (_frame({"__root__": _x()}, b"\0" * 4), "not a DSSST1 frame"),
        (
            _frame({"__metadata__": {"dss": json.dumps({"v": "ARCW1", "tree": ["j", 1]})}, "x": _x()}, b"\0" * 4),
            "version",
        ),
        (_frame({"__metadata__": {"dss": "{"}, "x": _x()}, b"\0" * 4), "dss is not JSON"),
        (_frame({"__metadata__": META, "__root__": _x("O", (1,), (0, 8))}, b"\0" * 8), "allow-list"),
        (_frame({"__metadata__": META, "__root__": _x("U16", (1,), (0, 2))}, b"\0" * 2), "allow-list"),
        (_frame({"__metadata__": META, "__root__": _x("F32", (3,), (0, 8))}, b"\0" * 8), "!="),
        (_frame({"__metadata__": META, "__root__": _x("F32", (4,), (0, 16))}, b"\0" * 8), "not a valid safetensors"),
        (_frame({"__metadata__": META, "__root__": _x("F32", (-1,), (0, 4))}, b"\0" * 4), "not a valid safetensors"),
        (_frame({"__metadata__": META, "__root__": _x("F32", (1,), (4, 8))}, b"\0" * 8), "invalid offset"),
        (_frame({"__metadata__": META, "__root__": _x("F32", (1,), (0, 4))}, b"\0" * 8), "not fully covered"),
        (_frame({"__metadata__": META, "__root__": {**_x(), "extra": 1}}, b"\0" * 4), "exactly dtype, shape"),
        (
            _frame({"__metadata__": META, "a": _x(), "b": _x()}, b"\0" * 4),  # two tensors over the same bytes
            "invalid offset",
        ),
    ],
    ids=[
        "pickle-p2",
        "pickle-p5",
        "pickle-byte",
        "empty",
        "short",
        "huge-header",
        "header-past-end",
        "header-not-json",
        "header-not-object",
        "no-dss",
        "wrong-version",
        "dss-not-json",
        "dtype-object",
        "dtype-u16",
        "shape-bytes-mismatch",
        "range-outside-body",
        "negative-dim",
        "hole",
        "trailing-bytes",
        "extra-entry-field",
        "overlap",
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


def test_non_bytes_are_refused():
    with pytest.raises(wire.WireError, match="a frame is bytes"):
        wire.decode("not bytes")


def test_size_limits():
    frame = wire.encode({"x": torch.zeros(1000)})
    with pytest.raises(wire.WireError, match="exceeds"):
        wire.decode(frame, max_body_bytes=len(frame) - 1)
    with pytest.raises(wire.WireError, match="header length"):
        wire.decode(frame, max_header_bytes=16)
    assert wire.decode(frame, max_body_bytes=len(frame))["x"].shape == (1000,)


def test_every_header_length_round_trips_including_a_0x80_low_byte():
    """The first byte is the header length's low byte. 0x80 there (a length of 128 mod 256) also opens every pickle
    stream; the reference writes such frames, so they must decode while real pickle streams stay refused."""
    seen_low_bytes = set()
    for n in range(0, 400):
        tree = {"k" * n: torch.zeros(1)}  # header length grows with the key
        frame = wire.encode(tree)
        seen_low_bytes.add(frame[0])
        assert torch.equal(wire.decode(frame)["k" * n], torch.zeros(1))
    assert 0x80 in seen_low_bytes
    assert len(seen_low_bytes) >= 30  # the loop really swept across header lengths


# ---- byte chunking ----------------------------------------------------------------------------------------------


def _big():
    return wire.encode({"x": torch.arange(4096, dtype=torch.int64)})


def test_small_frames_are_not_chunked_unless_forced():
    frame = wire.encode({"x": torch.tensor([1])})
    assert wire.encode_byte_chunks(frame, kind="request", max_bytes=0) == [frame]
    assert wire.encode_byte_chunks(frame, kind="request", max_bytes=len(frame)) == [frame]
    assert wire.decode_byte_chunks([frame]) == frame
    (env,) = wire.encode_byte_chunks(frame, kind="request", operation="fwd", chunk_group_id="g", force_chunk=True)
    desc = wire.read_byte_chunk_metadata(env)
    assert desc == {
        "chunk_idx": 0,
        "total_chunks": 1,
        "frame_sha256": hashlib.sha256(frame).hexdigest(),
        "frame_size_bytes": len(frame),
        "chunk_group_id": "g",
        "operation": "fwd",
        "kind": "request",
    }
    assert wire.decode_byte_chunks([env], kind="request") == frame


def test_chunks_round_trip_in_any_order_and_fit_the_limit():
    frame = _big()
    chunks = wire.encode_byte_chunks(frame, kind="request", operation="forward-backward", max_bytes=12_000)
    assert len(chunks) > 2 and all(len(c) <= 12_000 for c in chunks)
    descs = [wire.read_byte_chunk_metadata(c) for c in chunks]
    assert [d["chunk_idx"] for d in descs] == list(range(len(chunks)))
    assert len({d["chunk_group_id"] for d in descs}) == 1  # a uuid4 made up for the request
    for c in chunks:
        tree = wire.decode(c)
        assert set(tree) == {"payload"} and tree["payload"].dtype == torch.uint8 and tree["payload"].dim() == 1
    assert wire.decode_byte_chunks(list(reversed(chunks)), kind="request") == frame
    result = wire.encode_byte_chunks(frame, kind="result", max_bytes=12_000)
    assert "chunk_group_id" not in wire.read_byte_chunk_metadata(result[0])
    assert wire.decode_byte_chunks(result, kind="result") == frame


def test_result_and_request_helpers():
    res = {"job_id": 1, "results": [{"text": "hi", "token_ids": [1, 2]}], "lp": torch.randn(300, 50)}
    chunks = wire.encode_result_chunks(res, max_bytes=20_000)
    assert len(chunks) > 1
    out = wire.decode_result_chunks(chunks)
    assert out["results"] == res["results"] and torch.equal(out["lp"], res["lp"])
    req = wire.encode_request_chunks({"x": torch.arange(5000)}, operation="forward-backward", max_bytes=20_000)
    inner = wire.decode_byte_chunks(req, kind="request")
    assert wire.read_metadata(inner) == {"response_options": {"format": "dssst1", "delivery": "chunked"}}
    assert torch.equal(wire.decode(inner)["x"], torch.arange(5000))


def _retag(chunk: bytes, **changes) -> bytes:
    """The same chunk with its descriptor fields changed (the payload kept)."""
    desc = wire.read_byte_chunk_metadata(chunk)
    kind = desc.pop("kind")
    desc.update(changes)
    return wire.encode(wire.decode(chunk), metadata={f"{kind}_chunk": desc})


def test_reassembly_refuses_bad_chunk_sets():
    frame = _big()
    chunks = wire.encode_byte_chunks(frame, kind="request", operation="op", max_bytes=12_000)
    n = len(chunks)
    with pytest.raises(wire.WireError, match="at least one"):
        wire.decode_byte_chunks([])
    with pytest.raises(wire.WireError, match=f"expected {n} byte chunks, got {n - 1}"):
        wire.decode_byte_chunks(chunks[:-1])
    with pytest.raises(wire.WireError, match="appears twice"):
        wire.decode_byte_chunks([chunks[0], *chunks[:-1]])
    with pytest.raises(wire.WireError, match="expected result chunks, got request"):
        wire.decode_byte_chunks(chunks, kind="result")
    with pytest.raises(wire.WireError, match="no byte chunk metadata"):
        wire.decode_byte_chunks([wire.encode({"x": 1}), *chunks[1:]])
    with pytest.raises(wire.WireError, match="chunk_group_id"):
        wire.decode_byte_chunks([chunks[0], _retag(chunks[1], chunk_group_id="other"), *chunks[2:]])
    with pytest.raises(wire.WireError, match="operation"):
        wire.decode_byte_chunks([chunks[0], _retag(chunks[1], operation="other"), *chunks[2:]])
    with pytest.raises(wire.WireError, match="outside"):
        wire.decode_byte_chunks([chunks[0], _retag(chunks[1], chunk_idx=n), *chunks[2:]])
    with pytest.raises(wire.WireError, match="must be an int"):
        wire.decode_byte_chunks([chunks[0], _retag(chunks[1], chunk_idx="1"), *chunks[2:]])
    with pytest.raises(wire.WireError, match="limit"):
        wire.decode_byte_chunks(chunks, max_frame_bytes=len(frame) - 1)
    # swap two payloads: every descriptor is right, the bytes are not
    swapped = [_retag(chunks[1], chunk_idx=0), _retag(chunks[0], chunk_idx=1), *chunks[2:]]
    with pytest.raises(wire.WireError, match="sha256"):
        wire.decode_byte_chunks(swapped)
    # a payload that lost a byte
    short = wire.encode({"payload": wire.decode(chunks[0])["payload"][:-1]}, metadata=wire.read_metadata(chunks[0]))
    with pytest.raises(wire.WireError, match="describe a"):
        wire.decode_byte_chunks([short, *chunks[1:]])
    bad_payload = wire.encode({"payload": torch.zeros(3)}, metadata=wire.read_metadata(chunks[0]))
    with pytest.raises(wire.WireError, match="1-D uint8"):
        wire.decode_byte_chunks([bad_payload, *chunks[1:]])


def test_chunk_limit_too_small_and_unknown_kind():
    with pytest.raises(wire.WireError, match="too small"):
        wire.encode_byte_chunks(_big(), kind="result", max_bytes=64)
    with pytest.raises(wire.WireError, match="unknown byte chunk kind"):
        wire.encode_byte_chunks(_big(), kind="reply", max_bytes=64)
