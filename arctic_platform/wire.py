# Copyright 2026 The arctic-verl Authors
#
# Licensed under the Apache License, Version 2.0 (the "License");
# you may not use this file except in compliance with the License.
# You may obtain a copy of the License at
#
#     http://www.apache.org/licenses/LICENSE-2.0
#
# Unless required by applicable law or agreed to in writing, software
# distributed under the License is distributed on an "AS IS" BASIS,
# WITHOUT WARRANTIES OR CONDITIONS OF ANY KIND, either express or implied.
# See the License for the specific language governing permissions and
# limitations under the License.
# SPDX-License-Identifier: Apache-2.0
"""DSSST1: the Arctic-Platform binary wire format (``application/octet-stream`` bodies), byte-compatible.

A frame is one safetensors blob written and read by the ``safetensors`` library::

    [u64 little-endian header length N][N bytes of JSON header][tensor bytes]

Its ``__metadata__`` carries ``dss``, the JSON string ``{"v": "DSSST1", "tree": <skeleton>}``, and optionally ``op``,
a JSON string of operation metadata (chunk descriptors, response options, ...). Skeleton nodes are lists:

* ``["t", name]`` a tensor, ``["t", name, {"scalar": true}]`` a 0-dim tensor (stored with shape ``[1]``);
  ``name`` is the dotted path of the tensor in the tree (``batch.input_ids``, ``xs.0``), ``__root__`` at the root;
* ``["d", [[key, node], ...]]`` a dict holding a tensor somewhere below (str keys, insertion order);
* ``["l", [node, ...]]`` a list holding a tensor; ``["u", [node, ...]]`` a tuple (always, tensors or not);
* ``["j", value]`` any subtree without a tensor, as JSON: tuples in it come back as lists and int dict keys as str.

A frame without any tensor carries the ``__dss_empty__`` U8[1] placeholder (safetensors needs one). Tensors are
detached, moved to CPU and made contiguous; a tensor sharing storage with one already written is cloned, so a
frame never aliases. The skeleton is serialised with ``json.dumps`` defaults, exactly as the reference does, so
the same tree gives the same bytes.

Stricter than the reference where it is silent (every refusal raises :class:`WireError`, one line):

* encode refuses ambiguous dotted paths (``{"a": {"b": x}, "a.b": y}`` would name two tensors ``a.b``), a tensor
  at the reserved name ``__dss_empty__``, non-str keys in a tensor-holding dict, dict keys other than str / int in
  JSON subtrees, keys that collide once JSON turns them into strings, values JSON cannot hold and dtypes outside
  the allow-list;
* decode refuses a pickle stream or a zip (``torch.save``) container before anything else, a body over
  ``max_body_bytes``, a declared header length over ``max_header_bytes`` or past the end, dtypes outside the
  allow-list (checked before the library allocates anything), anything the safetensors library refuses (shape vs
  byte count, overlapping / holed / out-of-range offsets, bad JSON), a missing or wrong ``dss`` version, a
  malformed skeleton, a tensor whose name is not its dotted path, a tensor named twice (ambiguous), and header
  tensors the skeleton never names.

Byte chunking (:func:`encode_byte_chunks` / :func:`decode_byte_chunks`) cuts a frame larger than a limit (60 MiB by
default, the Cortex per-request cap) into DSSST1 chunk frames: a 1-D uint8 ``payload`` tensor plus op metadata
``{"request_chunk" | "result_chunk": {chunk_idx, total_chunks, frame_sha256, frame_size_bytes[, chunk_group_id]
[, operation]}}``. Reassembly checks kinds, counts, indices, sizes and the sha256 of the whole frame.

Nothing here uses pickle, ``torch.save`` or ``torch.load``.
"""

from __future__ import annotations

import hashlib
import json
import math
import uuid
from typing import Any

import torch
from safetensors import SafetensorError
from safetensors.torch import load as _st_load
from safetensors.torch import save as _st_save

from .reasons import one_line

__all__ = [
    "CHUNKED_RESPONSE_OPTIONS",
    "CONTENT_TYPE",
    "DEFAULT_CHUNK_BYTES",
    "DEFAULT_MAX_BODY_BYTES",
    "DEFAULT_MAX_HEADER_BYTES",
    "FORMAT",
    "WIRE_FORMAT_VERSION",
    "WireError",
    "decode",
    "decode_byte_chunks",
    "decode_result_chunks",
    "decode_with_metadata",
    "dumps",
    "encode",
    "encode_byte_chunks",
    "encode_request_chunks",
    "encode_result_chunks",
    "loads",
    "read_byte_chunk_metadata",
    "read_metadata",
]

FORMAT = "DSSST1"
WIRE_FORMAT_VERSION = FORMAT  # the reference's name
CONTENT_TYPE = "application/octet-stream"
DEFAULT_MAX_HEADER_BYTES = 64 * 1024 * 1024
"""Largest accepted JSON header (tensor index + skeleton + op metadata); the reference's limit too."""
DEFAULT_MAX_BODY_BYTES = 2 * 1024 * 1024 * 1024
"""Largest accepted frame; the server applies its own (configurable) limit before reading the body."""
DEFAULT_CHUNK_BYTES = 60 * 1024 * 1024
"""Largest chunk frame the Cortex transport sends (the SnowAPI per-request cap)."""
CHUNKED_RESPONSE_OPTIONS: dict[str, Any] = {"response_options": {"format": "dssst1", "delivery": "chunked"}}
"""Op metadata the reference's Cortex transport puts on a request frame before chunking it."""

_STRUCT_KEY = "dss"
_OP_KEY = "op"
_ROOT = "__root__"
_PLACEHOLDER = "__dss_empty__"
_SEP = "."
_CHUNK_KEYS = {"request": "request_chunk", "result": "result_chunk"}
_PAYLOAD = "payload"
_CHUNK_OVERHEAD_BYTES = 8192  # room left in a chunk frame for its header (as the reference)

# safetensors dtype name <-> torch dtype. The allow-list: nothing else encodes or decodes.
_DTYPES: dict[str, torch.dtype] = {
    "F64": torch.float64,
    "F32": torch.float32,
    "F16": torch.float16,
    "BF16": torch.bfloat16,
    "I64": torch.int64,
    "I32": torch.int32,
    "I16": torch.int16,
    "I8": torch.int8,
    "U8": torch.uint8,
    "BOOL": torch.bool,
}
_ALLOWED = frozenset(_DTYPES.values())
_ITEMSIZE: dict[str, int] = {k: torch.empty((), dtype=v).element_size() for k, v in _DTYPES.items()}
_PICKLE_PREFIX = 0x80
_ZIP_PREFIX = b"PK\x03\x04"


class WireError(ValueError):
    """A frame that cannot be encoded or decoded; the message is a one-line reason."""


# ------------------------------------------------------------------------------------------------
# encode
# ------------------------------------------------------------------------------------------------


def _has_tensor(x: Any) -> bool:
    if isinstance(x, torch.Tensor):
        return True
    if isinstance(x, dict):
        return any(_has_tensor(v) for v in x.values())
    if isinstance(x, (list, tuple)):
        return any(_has_tensor(v) for v in x)
    return False


def _where(path: str) -> str:
    return path or "<root>"


def _json_value(x: Any, path: str) -> Any:
    """``x`` checked for ``json.dumps``: refuse what it would reject or silently change beyond the documented
    tuple / int-key rules; numpy scalars become Python scalars. Returns ``x`` itself when nothing changed."""
    x = _to_plain(x)
    if x is None or isinstance(x, (bool, int, float, str)):
        return x
    if isinstance(x, (list, tuple)):
        items = [_json_value(v, f"{path}{_SEP}{i}" if path else str(i)) for i, v in enumerate(x)]
        return x if all(a is b for a, b in zip(items, x, strict=True)) else type(x)(items)
    if isinstance(x, dict):
        seen: set[str] = set()
        out = {}
        for k, v in x.items():
            if isinstance(k, bool) or not isinstance(k, (str, int)):
                raise WireError(f"dict key {k!r} at {_where(path)} is not a str (int keys are allowed in JSON data)")
            ks = str(k)
            if ks in seen:
                raise WireError(f"dict keys at {_where(path)} collide as JSON strings ({ks!r} twice)")
            seen.add(ks)
            out[k] = _json_value(v, f"{path}{_SEP}{ks}" if path else ks)
        return x if all(out[k] is v for k, v in x.items()) else out
    raise WireError(f"cannot encode {type(x).__name__} at {_where(path)} (tensors, dicts, lists, tuples, JSON scalars)")


def _to_plain(x: Any) -> Any:
    """numpy scalars become Python scalars (an extension: the reference's json.dumps refuses them)."""
    if type(x).__module__ == "numpy" and hasattr(x, "item") and getattr(x, "ndim", None) == 0:
        return x.item()
    return x


def _skeleton(x: Any, path: str, tensors: dict[str, torch.Tensor], storages: set[int]) -> list:
    x = _to_plain(x)
    if isinstance(x, torch.Tensor):
        name = path or _ROOT
        if name in tensors:
            raise WireError(
                f"ambiguous dotted path {name!r}: two tensors in the tree get this name (a dict key containing "
                f"{_SEP!r} collides with a nested path); rename one"
            )
        if name == _PLACEHOLDER:
            raise WireError(f"a tensor may not sit at the reserved name {_PLACEHOLDER!r}")
        if x.dtype not in _ALLOWED:
            raise WireError(f"{name}: dtype {x.dtype} is not in the wire allow-list {sorted(_DTYPES)}")
        t = x.detach().cpu().contiguous()
        node: list = ["t", name]
        if t.dim() == 0:
            t = t.reshape(1)
            node = ["t", name, {"scalar": True}]
        if t.numel():
            ptr = t.untyped_storage().data_ptr()
            if ptr in storages:  # safetensors refuses tensors that share memory: give this one its own copy
                t = t.clone()
                ptr = t.untyped_storage().data_ptr()
            storages.add(ptr)
        tensors[name] = t
        return node
    if isinstance(x, tuple):  # the reference writes every tuple as "u", with or without tensors
        return ["u", [_skeleton(v, f"{path}{_SEP}{i}" if path else str(i), tensors, storages) for i, v in enumerate(x)]]
    if not _has_tensor(x):
        return ["j", _json_value(x, path)]
    if isinstance(x, dict):
        items = []
        for k, v in x.items():
            if not isinstance(k, str):
                raise WireError(
                    f"dict key {k!r} at {_where(path)} is not a str (a dict holding tensors needs str keys)"
                )
            items.append([k, _skeleton(v, f"{path}{_SEP}{k}" if path else k, tensors, storages)])
        return ["d", items]
    # a list holding a tensor
    return ["l", [_skeleton(v, f"{path}{_SEP}{i}" if path else str(i), tensors, storages) for i, v in enumerate(x)]]


def encode(tree: Any, *, metadata: dict | None = None) -> bytes:
    """Encode a tree of dicts / lists / tuples / JSON scalars / tensors into one DSSST1 frame.

    Args:
        tree: the object to encode. Dicts holding tensors need str keys; JSON-only dicts may use int keys too
            (they come back as str).
        metadata: optional op metadata (a JSON-able dict), stored as ``__metadata__.op``; empty means none.

    Returns:
        The frame bytes, identical to the reference encoder's for the same tree and no metadata.

    Raises:
        WireError: an unsupported type, a bad dict key, an ambiguous dotted path or a dtype outside the allow-list.
    """
    tensors: dict[str, torch.Tensor] = {}
    skel = _skeleton(tree, "", tensors, set())
    if not tensors:
        tensors[_PLACEHOLDER] = torch.zeros(1, dtype=torch.uint8)
    try:
        header = {_STRUCT_KEY: json.dumps({"v": FORMAT, "tree": skel})}
        if metadata:
            header[_OP_KEY] = json.dumps(metadata)
    except (TypeError, ValueError) as e:
        raise WireError(f"op metadata is not JSON ({e})") from None
    try:
        return _st_save(tensors, metadata=header)
    except (SafetensorError, RuntimeError, ValueError) as e:
        raise WireError(f"safetensors refused the frame: {one_line(e, 500, with_type=False)}") from None


dumps = encode  # the reference's name


# ------------------------------------------------------------------------------------------------
# decode
# ------------------------------------------------------------------------------------------------


def _precheck(data: bytes, max_header_bytes: int, max_body_bytes: int) -> int:
    """Cheap refusals before the library runs; returns the declared header length."""
    size = len(data)
    if size > max_body_bytes:
        raise WireError(f"frame of {size} bytes exceeds the {max_body_bytes}-byte limit")
    if data[:4] == _ZIP_PREFIX:
        # as a header length these bytes declare > 64 MiB, so no frame under the default limit starts like this
        raise WireError(f"refusing a zip payload (torch.save format); the wire accepts only {FORMAT} frames")
    hlen = int.from_bytes(data[:8], "little") if size >= 8 else None
    plausible = hlen is not None and 0 < hlen <= size - 8 and data[8:9] == b"{"
    if size and data[0] == _PICKLE_PREFIX and not plausible:
        # 0x80 opens every pickle stream (protocol 2+), but it is also the low byte of a safetensors header length
        # of 128 mod 256, so only a 0x80 frame that is not structurally a safetensors blob is called pickle
        raise WireError(f"refusing a pickle payload (0x80 prefix); the wire accepts only {FORMAT} frames")
    if hlen is None:
        raise WireError(f"frame of {size} bytes is shorter than the 8-byte header length")
    if hlen > max_header_bytes:
        raise WireError(f"header length {hlen} exceeds the {max_header_bytes}-byte limit")
    if 8 + hlen > size:
        raise WireError(f"header length {hlen} runs past the end of a {size}-byte frame")
    return hlen


def _int_list(x: Any) -> bool:
    return isinstance(x, list) and all(isinstance(v, int) and not isinstance(v, bool) for v in x)


def _header_metadata(data: bytes, hlen: int) -> dict[str, Any]:
    """The ``__metadata__`` strings, after checking every declared dtype against the allow-list.

    The safetensors library validates the layout (offsets, shapes, byte counts) when it loads; this reads only
    what it does not expose for an in-memory blob: the metadata, and the dtypes before anything is allocated.
    """
    try:
        header = json.loads(data[8 : 8 + hlen])
    except (UnicodeDecodeError, json.JSONDecodeError) as e:
        raise WireError(f"header is not JSON ({e})") from None
    if not isinstance(header, dict):
        raise WireError("header is not a JSON object")
    for name, info in header.items():
        if name == "__metadata__":
            continue
        if not isinstance(info, dict) or set(info) != {"dtype", "shape", "data_offsets"}:
            raise WireError(f"tensor {name!r}: header entry must have exactly dtype, shape and data_offsets")
        dt, shape, offs = info["dtype"], info["shape"], info["data_offsets"]
        if dt not in _DTYPES:
            raise WireError(f"tensor {name!r}: dtype {dt!r} is not in the allow-list {sorted(_DTYPES)}")
        if _int_list(shape) and _int_list(offs) and len(offs) == 2 and min(shape, default=0) >= 0:
            # the library checks this too; checked here first so the message names the tensor
            nbytes = math.prod(shape) * _ITEMSIZE[dt]
            if nbytes != offs[1] - offs[0]:
                raise WireError(f"tensor {name!r}: shape {shape} x {_ITEMSIZE[dt]} bytes != {offs[1] - offs[0]} bytes")
    meta = header.get("__metadata__")
    if meta is None:
        meta = {}
    if not isinstance(meta, dict):
        raise WireError("header __metadata__ is not a JSON object")
    return meta


def _load(data: bytes, max_header_bytes: int, max_body_bytes: int) -> tuple[dict[str, torch.Tensor], dict]:
    hlen = _precheck(data, max_header_bytes, max_body_bytes)
    meta = _header_metadata(data, hlen)
    try:
        tensors = _st_load(data)
    except Exception as e:  # whatever the library refuses is a malformed frame, never a crash
        raise WireError(f"not a valid safetensors blob: {one_line(e, 500, with_type=False)}") from None
    for name, t in tensors.items():
        if t.dtype not in _ALLOWED:  # defensive: the header check above already refused these
            raise WireError(f"tensor {name!r}: dtype {t.dtype} is not in the allow-list")
    return tensors, meta


def _rebuild(node: Any, path: str, tensors: dict[str, torch.Tensor], used: set[str]) -> Any:
    if not isinstance(node, list) or not node or not isinstance(node[0], str):
        raise WireError(f"malformed skeleton node at {_where(path)}: {str(node)[:80]}")
    tag = node[0]
    if tag == "t":
        if len(node) not in (2, 3) or not isinstance(node[1], str):
            raise WireError(f"malformed tensor node at {_where(path)}")
        name = node[1]
        if name != (path or _ROOT):
            raise WireError(f"tensor {name!r} sits at {_where(path)}; a tensor must be named by its dotted path")
        if name not in tensors:
            raise WireError(f"skeleton names a tensor {name!r} that the header lacks")
        if name in used:
            raise WireError(
                f"skeleton names tensor {name!r} twice: an ambiguous dotted path (a key containing {_SEP!r} "
                "collides with a nested path), refused rather than decoding the wrong tensor"
            )
        used.add(name)
        t = tensors[name]
        if len(node) == 3:
            if not isinstance(node[2], dict) or set(node[2]) - {"scalar"}:
                raise WireError(f"tensor {name!r}: malformed tensor flags {node[2]!r}")
            if node[2].get("scalar"):
                if tuple(t.shape) != (1,):
                    raise WireError(f"tensor {name!r}: scalar flag on shape {list(t.shape)} (must be [1])")
                return t.reshape(())
        return t
    if len(node) != 2:
        raise WireError(f"malformed {tag!r} node at {_where(path)}")
    body = node[1]
    if tag == "j":
        return body
    if tag == "d":
        if not isinstance(body, list):
            raise WireError(f"malformed dict node at {_where(path)}")
        out: dict[str, Any] = {}
        for item in body:
            if not (isinstance(item, list) and len(item) == 2 and isinstance(item[0], str)):
                raise WireError(f"malformed dict item at {_where(path)}")
            k = item[0]
            if k in out:
                raise WireError(f"dict at {_where(path)} has key {k!r} twice")
            out[k] = _rebuild(item[1], f"{path}{_SEP}{k}" if path else k, tensors, used)
        return out
    if tag in ("l", "u"):
        if not isinstance(body, list):
            raise WireError(f"malformed {'list' if tag == 'l' else 'tuple'} node at {_where(path)}")
        items = [_rebuild(v, f"{path}{_SEP}{i}" if path else str(i), tensors, used) for i, v in enumerate(body)]
        return tuple(items) if tag == "u" else items
    raise WireError(f"unknown skeleton node tag {tag!r} at {_where(path)}")


def _parse_json(raw: Any, what: str) -> Any:
    if not isinstance(raw, str):
        raise WireError(f"__metadata__.{what} is not a JSON string")
    try:
        return json.loads(raw)
    except json.JSONDecodeError as e:
        raise WireError(f"__metadata__.{what} is not JSON ({e})") from None


def decode_with_metadata(
    data: bytes | bytearray | memoryview,
    *,
    max_header_bytes: int = DEFAULT_MAX_HEADER_BYTES,
    max_body_bytes: int = DEFAULT_MAX_BODY_BYTES,
) -> tuple[Any, dict]:
    """Decode one frame strictly (see the module docstring) and return ``(tree, op_metadata)``.

    ``op_metadata`` is ``{}`` when the frame carries none.

    Raises:
        WireError: with a one-line reason for any malformed, oversized or non-frame input.
    """
    if not isinstance(data, (bytes, bytearray, memoryview)):
        raise WireError(f"a frame is bytes, got {type(data).__name__}")
    data = bytes(data)
    tensors, meta = _load(data, max_header_bytes, max_body_bytes)
    if _STRUCT_KEY not in meta:
        raise WireError(f"not a {FORMAT} frame (the safetensors metadata has no {_STRUCT_KEY!r} entry)")
    info = _parse_json(meta[_STRUCT_KEY], _STRUCT_KEY)
    if not isinstance(info, dict) or info.get("v") != FORMAT or "tree" not in info:
        v = info.get("v") if isinstance(info, dict) else None
        raise WireError(f"unsupported wire version {v!r} (expected {FORMAT!r} with a tree)")
    op = _parse_json(meta[_OP_KEY], _OP_KEY) if _OP_KEY in meta else {}
    if not isinstance(op, dict):
        raise WireError("__metadata__.op is not a JSON object")
    placeholder = tensors.pop(_PLACEHOLDER, None)
    if placeholder is not None and tensors:
        raise WireError(f"the {_PLACEHOLDER!r} placeholder belongs only in a frame without tensors")
    used: set[str] = set()
    tree = _rebuild(info["tree"], "", tensors, used)
    if used != set(tensors):
        raise WireError(f"header has tensors the skeleton never names: {sorted(set(tensors) - used)[:5]}")
    return tree, op


def decode(
    data: bytes | bytearray | memoryview,
    *,
    max_header_bytes: int = DEFAULT_MAX_HEADER_BYTES,
    max_body_bytes: int = DEFAULT_MAX_BODY_BYTES,
) -> Any:
    """Decode one frame (strictly; see the module docstring).

    Args:
        data: the frame.
        max_header_bytes: refuse larger declared JSON headers.
        max_body_bytes: refuse larger frames.

    Returns:
        The tree. Tensors are CPU tensors owning their memory.

    Raises:
        WireError: with a one-line reason for any malformed, oversized or non-frame input.
    """
    return decode_with_metadata(data, max_header_bytes=max_header_bytes, max_body_bytes=max_body_bytes)[0]


def loads(data: bytes | bytearray | memoryview) -> Any:
    """The reference's name for :func:`decode` (default limits)."""
    return decode(data)


def read_metadata(data: bytes | bytearray | memoryview, *, max_header_bytes: int = DEFAULT_MAX_HEADER_BYTES) -> dict:
    """The op metadata of a frame (``{}`` if none), read from the header without loading tensors.

    Raises:
        WireError: the bytes are not a safetensors blob or the op metadata is not a JSON object.
    """
    if not isinstance(data, (bytes, bytearray, memoryview)):
        raise WireError(f"a frame is bytes, got {type(data).__name__}")
    data = bytes(data)
    hlen = _precheck(data, max_header_bytes, len(data))
    meta = _header_metadata(data, hlen)
    op = _parse_json(meta[_OP_KEY], _OP_KEY) if _OP_KEY in meta else {}
    if not isinstance(op, dict):
        raise WireError("__metadata__.op is not a JSON object")
    return op


# ------------------------------------------------------------------------------------------------
# byte chunking
# ------------------------------------------------------------------------------------------------


def _chunk_key(kind: str) -> str:
    if kind not in _CHUNK_KEYS:
        raise WireError(f"unknown byte chunk kind {kind!r} (request or result)")
    return _CHUNK_KEYS[kind]


def encode_byte_chunks(
    frame: bytes | bytearray | memoryview,
    *,
    kind: str,
    operation: str | None = None,
    max_bytes: int = 0,
    chunk_group_id: str | None = None,
    force_chunk: bool = False,
) -> list[bytes]:
    """Split a frame into DSSST1 byte-chunk frames of at most ``max_bytes`` each.

    Args:
        frame: the frame to split (normally a DSSST1 frame).
        kind: ``"request"`` or ``"result"`` (selects the ``request_chunk`` / ``result_chunk`` metadata key).
        operation: the operation name recorded in every chunk (e.g. ``"forward-backward"``).
        max_bytes: the largest chunk frame; ``0`` means no limit.
        chunk_group_id: the group id of a request's chunks (a fresh uuid4 if not given); results carry none.
        force_chunk: wrap the frame in a one-chunk envelope even when it fits.

    Returns:
        ``[frame]`` when it fits in ``max_bytes`` (or there is no limit) and ``force_chunk`` is false; otherwise
        the chunk frames in order.

    Raises:
        WireError: an unknown kind, or ``max_bytes`` too small for even a one-byte chunk.
    """
    key = _chunk_key(kind)
    if not isinstance(frame, (bytes, bytearray, memoryview)):
        raise WireError(f"encode_byte_chunks takes frame bytes, got {type(frame).__name__}")
    frame = bytes(frame)
    if not force_chunk and (max_bytes <= 0 or len(frame) <= max_bytes):
        return [frame]
    group_id = None
    if kind == "request":
        group_id = chunk_group_id or str(uuid.uuid4())
    digest = hashlib.sha256(frame).hexdigest()
    size = len(frame)

    def chunk(idx: int, total: int, start: int, end: int) -> bytes:
        desc: dict[str, Any] = {
            "chunk_idx": idx,
            "total_chunks": total,
            "frame_sha256": digest,
            "frame_size_bytes": size,
        }
        if group_id is not None:
            desc["chunk_group_id"] = group_id
        if operation is not None:
            desc["operation"] = operation
        payload = torch.frombuffer(bytearray(frame[start:end]), dtype=torch.uint8) if end > start else None
        if payload is None:
            payload = torch.zeros(0, dtype=torch.uint8)
        return encode({_PAYLOAD: payload}, metadata={key: desc})

    if max_bytes <= 0:
        return [chunk(0, 1, 0, size)]
    step = max(1, max_bytes - _CHUNK_OVERHEAD_BYTES)
    while True:
        ranges = [(s, min(s + step, size)) for s in range(0, size, step)] or [(0, 0)]
        chunks = [chunk(i, len(ranges), s, e) for i, (s, e) in enumerate(ranges)]
        if all(len(c) <= max_bytes for c in chunks):
            return chunks
        if step == 1:
            raise WireError(f"max_bytes={max_bytes} is too small to hold one {FORMAT} byte-chunk frame")
        step = max(1, step // 2)


def read_byte_chunk_metadata(frame: bytes | bytearray | memoryview) -> dict | None:
    """The chunk descriptor of a chunk frame with ``kind`` added, or ``None`` for a frame that is not a chunk.

    Raises:
        WireError: the bytes are not a frame, or the frame claims to be both a request and a result chunk.
    """
    op = read_metadata(frame)
    found = [kind for kind, key in _CHUNK_KEYS.items() if key in op]
    if not found:
        return None
    if len(found) > 1:
        raise WireError("a frame is both a request chunk and a result chunk")
    desc = op[_CHUNK_KEYS[found[0]]]
    if not isinstance(desc, dict):
        raise WireError(f"{_CHUNK_KEYS[found[0]]} metadata is not a JSON object")
    return dict(desc, kind=found[0])


def _int_field(desc: dict, field: str, idx: int) -> int:
    v = desc.get(field)
    if isinstance(v, bool) or not isinstance(v, int):
        raise WireError(f"byte chunk #{idx}: {field} must be an int, got {v!r}")
    return v


def decode_byte_chunks(
    chunks: list[bytes],
    *,
    kind: str | None = None,
    max_frame_bytes: int = DEFAULT_MAX_BODY_BYTES,
) -> bytes:
    """Reassemble chunk frames (in any order) into the original frame, checking it end to end.

    A single frame without chunk metadata is returned as it is.

    Args:
        chunks: the chunk frames, each exactly once.
        kind: the expected kind (``"request"`` / ``"result"``), or None to accept either.
        max_frame_bytes: refuse a reassembled frame larger than this (checked on the descriptor, before copying).

    Raises:
        WireError: no chunks, a plain frame among chunks, mixed kinds / groups / operations / hashes / sizes, a wrong
            count, an index out of range, missing or repeated, a payload that is not 1-D uint8, a size mismatch or a
            sha256 mismatch.
    """
    if kind is not None:
        _chunk_key(kind)
    if not chunks:
        raise WireError("decode_byte_chunks needs at least one frame")
    descs = [read_byte_chunk_metadata(c) for c in chunks]
    if len(chunks) == 1 and descs[0] is None:
        return bytes(chunks[0])
    if any(d is None for d in descs):
        raise WireError(f"frame #{[d is None for d in descs].index(True)} has no byte chunk metadata")
    first = descs[0]
    if kind is not None and first["kind"] != kind:
        raise WireError(f"expected {kind} chunks, got {first['kind']} chunks")
    total = _int_field(first, "total_chunks", 0)
    size = _int_field(first, "frame_size_bytes", 0)
    digest = first.get("frame_sha256")
    if not (isinstance(digest, str) and len(digest) == 64):
        raise WireError(f"byte chunk #0: frame_sha256 must be 64 hex digits, got {digest!r}")
    if total < 1:
        raise WireError(f"byte chunk total_chunks must be >= 1, got {total}")
    if size < 0 or size > max_frame_bytes:
        raise WireError(f"byte chunks describe a {size}-byte frame; the limit is {max_frame_bytes} bytes")
    if len(chunks) != total:
        raise WireError(f"expected {total} byte chunks, got {len(chunks)}")
    parts: dict[int, bytes] = {}
    for n, (c, d) in enumerate(zip(chunks, descs, strict=True)):
        for field in ("kind", "frame_sha256", "chunk_group_id", "operation"):
            if d.get(field) != first.get(field):
                raise WireError(
                    f"byte chunk #{n}: {field} {d.get(field)!r} differs from chunk #0's {first.get(field)!r}"
                )
        for field, want in (("total_chunks", total), ("frame_size_bytes", size)):
            if _int_field(d, field, n) != want:
                raise WireError(f"byte chunk #{n}: {field} {d[field]} differs from chunk #0's {want}")
        idx = _int_field(d, "chunk_idx", n)
        if not 0 <= idx < total:
            raise WireError(f"byte chunk #{n}: chunk_idx {idx} is outside 0..{total - 1}")
        if idx in parts:
            raise WireError(f"byte chunk_idx {idx} appears twice")
        tree = decode(c)
        if not (isinstance(tree, dict) and set(tree) == {_PAYLOAD}):
            raise WireError(f"byte chunk #{n} must hold exactly {{{_PAYLOAD!r}: tensor}}")
        p = tree[_PAYLOAD]
        if not isinstance(p, torch.Tensor) or p.dtype != torch.uint8 or p.dim() != 1:
            what = f"{p.dtype} {list(p.shape)}" if isinstance(p, torch.Tensor) else type(p).__name__
            raise WireError(f"byte chunk #{n}: payload must be a 1-D uint8 tensor, got {what}")
        parts[idx] = p.numpy().tobytes()
    missing = sorted(set(range(total)) - set(parts))
    if missing:  # unreachable with the count and range checks above; kept as the invariant
        raise WireError(f"missing byte chunks: {missing}")
    got = sum(len(p) for p in parts.values())
    if got != size:
        raise WireError(f"byte chunks hold {got} bytes but describe a {size}-byte frame")
    frame = b"".join(parts[i] for i in range(total))
    if hashlib.sha256(frame).hexdigest() != digest:
        raise WireError("reassembled frame sha256 does not match frame_sha256 (corrupt or mixed chunks)")
    return frame


def encode_request_chunks(
    tree: Any,
    *,
    operation: str,
    max_bytes: int = DEFAULT_CHUNK_BYTES,
    chunk_group_id: str | None = None,
    force_chunk: bool = False,
) -> list[bytes]:
    """Encode a request the way the reference's Cortex transport does: one frame carrying
    :data:`CHUNKED_RESPONSE_OPTIONS` as op metadata, cut into request chunks of at most ``max_bytes``."""
    frame = encode(tree, metadata=CHUNKED_RESPONSE_OPTIONS)
    return encode_byte_chunks(
        frame,
        kind="request",
        operation=operation,
        max_bytes=max_bytes,
        chunk_group_id=chunk_group_id,
        force_chunk=force_chunk,
    )


def encode_result_chunks(result: Any, *, max_bytes: int = 0) -> list[bytes]:
    """Encode a result and cut it into result chunks of at most ``max_bytes`` (``0``: one plain frame)."""
    return encode_byte_chunks(encode(result), kind="result", max_bytes=max_bytes)


def decode_result_chunks(chunks: list[bytes], *, max_frame_bytes: int = DEFAULT_MAX_BODY_BYTES) -> Any:
    """Decode what :func:`encode_result_chunks` produced."""
    return decode(decode_byte_chunks(chunks, kind="result", max_frame_bytes=max_frame_bytes))
