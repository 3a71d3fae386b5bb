# LEGACY: the project's private ARCW1 framing as it was on main before DSSST1 replaced it (git show
# main:arctic_platform/wire.py, unchanged below this banner). Kept ONLY as the comparison baseline of
# benchmarks/server/bench_wire.py; nothing ships or imports it. It cannot talk to an Arctic-Platform peer.
#
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
"""Pickle-free binary framing of the Arctic RL wire (``application/octet-stream`` bodies).

A frame is one valid safetensors blob::

    [u64 little-endian header length N][N bytes of JSON header, space-padded to 8-byte alignment][tensor bytes]

The header maps tensor names to ``{dtype, shape, data_offsets}`` (the safetensors layout) and carries
``__metadata__ = {"format": "ARCW1", "tree": <JSON skeleton>}``. The skeleton describes the original Python tree:

* ``{"t": name}``  a tensor (names are dotted paths such as ``batch.input_ids``);
* ``{"d": {key: node}}`` a dict with string keys; ``{"l": [node]}`` a list; ``{"u": [node]}`` a tuple;
* ``{"j": value}`` a JSON value holding no tensor (str, int, float, bool, None, and lists / str-keyed dicts of them).

Tensors are detached, moved to CPU and made contiguous; each tensor in a tree is written once per occurrence, so two
names never share bytes. 0-dim tensors keep their 0-dim shape (safetensors allows ``[]``).

:func:`decode` is strict and never executes anything: it refuses a pickle prefix (``0x80``) and a zip signature
(``PK\\x03\\x04``) up front, checks the header length against the body, the header against ``max_header_bytes``,
every dtype against an allow-list, every ``data_offsets`` range against the body (contiguous, no overlap, no hole)
and ``prod(shape) * itemsize == bytes``; a skeleton must name each tensor exactly once. Any failure raises
:class:`WireError` with a one-line reason. Nothing here uses pickle, ``torch.save`` or ``torch.load``.
"""

from __future__ import annotations

import json
import math
import struct
from typing import Any

import torch

__all__ = [
    "CONTENT_TYPE",
    "DEFAULT_MAX_BODY_BYTES",
    "DEFAULT_MAX_HEADER_BYTES",
    "FORMAT",
    "WireError",
    "decode",
    "encode",
]

FORMAT = "ARCW1"
CONTENT_TYPE = "application/octet-stream"
DEFAULT_MAX_HEADER_BYTES = 64 * 1024 * 1024
"""Largest accepted JSON header (tensor index + skeleton)."""
DEFAULT_MAX_BODY_BYTES = 2 * 1024 * 1024 * 1024
"""Largest accepted frame; the server applies its own (configurable) limit before reading the body."""

# safetensors dtype name <-> torch dtype. The allow-list: nothing else decodes.
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
_NAMES: dict[torch.dtype, str] = {v: k for k, v in _DTYPES.items()}
_ITEMSIZE: dict[str, int] = {k: torch.empty((), dtype=v).element_size() for k, v in _DTYPES.items()}
_PICKLE_PREFIX = b"\x80"
_ZIP_PREFIX = b"PK\x03\x04"


class WireError(ValueError):
    """A frame that cannot be encoded or decoded; the message is a one-line reason."""


# ------------------------------------------------------------------------------------------------
# encode
# ------------------------------------------------------------------------------------------------


def _is_plain_json(x: Any) -> bool:
    """True when ``x`` survives a JSON round trip unchanged (no tuples, no non-str keys, no tensors)."""
    if x is None or isinstance(x, (bool, int, float, str)):
        return True
    if isinstance(x, list):
        return all(_is_plain_json(v) for v in x)
    if isinstance(x, dict):
        return all(isinstance(k, str) and _is_plain_json(v) for k, v in x.items())
    return False


def _skeleton(x: Any, path: str, tensors: dict[str, torch.Tensor]) -> Any:
    if isinstance(x, torch.Tensor):
        name = path or "_"
        if name in tensors:  # only possible with keys containing dots that collide with a nested path
            raise WireError(f"tensor name collision at {name!r}; dict keys must not make dotted paths ambiguous")
        if x.dtype not in _NAMES:
            raise WireError(f"{name}: dtype {x.dtype} is not in the wire allow-list")
        tensors[name] = x.detach().to("cpu").contiguous()
        return {"t": name}
    if _is_plain_json(x):
        return {"j": x}  # NaN / inf round-trip too (Python's json writes and reads NaN / Infinity)
    if hasattr(x, "item") and type(x).__module__ == "numpy":  # numpy scalar
        return _skeleton(x.item(), path, tensors)
    if isinstance(x, dict):
        out = {}
        for k, v in x.items():
            if not isinstance(k, str):
                raise WireError(f"dict key {k!r} at {path or '<root>'} is not a str")
            out[k] = _skeleton(v, f"{path}.{k}" if path else k, tensors)
        return {"d": out}
    if isinstance(x, (list, tuple)):
        items = [_skeleton(v, f"{path}.{i}" if path else str(i), tensors) for i, v in enumerate(x)]
        return {"u": items} if isinstance(x, tuple) else {"l": items}
    raise WireError(f"cannot encode {type(x).__name__} at {path or '<root>'} (tensors, dicts, lists, tuples, scalars)")


def _as_bytes(t: torch.Tensor) -> memoryview:
    flat = t.reshape(-1)
    if flat.numel() == 0:
        return memoryview(b"")
    return memoryview(flat.view(torch.uint8).numpy()).cast("B")


def encode(tree: Any) -> bytes:
    """Encode a tree of dicts / lists / tuples / scalars / str / None / tensors into one frame.

    Args:
        tree: the object to encode. Dict keys must be str.

    Returns:
        The frame bytes (a valid safetensors blob).

    Raises:
        WireError: an unsupported type, a non-str dict key or a dtype outside the allow-list.
    """
    tensors: dict[str, torch.Tensor] = {}
    skeleton = _skeleton(tree, "", tensors)
    # Largest alignment first (as safetensors does), so every tensor starts at a multiple of its itemsize.
    order = sorted(tensors, key=lambda n: (-tensors[n].element_size(), n))
    header: dict[str, Any] = {"__metadata__": {"format": FORMAT, "tree": json.dumps(skeleton, separators=(",", ":"))}}
    offset = 0
    chunks: list[memoryview] = []
    for name in order:
        t = tensors[name]
        nbytes = t.numel() * t.element_size()
        header[name] = {"dtype": _NAMES[t.dtype], "shape": list(t.shape), "data_offsets": [offset, offset + nbytes]}
        offset += nbytes
        chunks.append(_as_bytes(t))
    hjson = json.dumps(header, separators=(",", ":")).encode()
    hjson += b" " * (-len(hjson) % 8)
    if len(hjson) & 0xFF == 0x80:
        # The first frame byte is the low byte of the header length; 0x80 there would read as a pickle prefix,
        # which decode() refuses. Eight more spaces keep every frame we produce distinguishable from pickle.
        hjson += b" " * 8
    return b"".join([struct.pack("<Q", len(hjson)), hjson, *chunks])


# ------------------------------------------------------------------------------------------------
# decode
# ------------------------------------------------------------------------------------------------


def _rebuild(node: Any, tensors: dict[str, torch.Tensor], used: set[str]) -> Any:
    if not isinstance(node, dict) or len(node) != 1:
        raise WireError("malformed skeleton node")
    if "t" in node:
        name = node["t"]
        if not isinstance(name, str) or name not in tensors:
            raise WireError(f"skeleton names a tensor {name!r} that the header lacks")
        if name in used:
            raise WireError(f"skeleton names tensor {name!r} twice")
        used.add(name)
        return tensors[name]
    if "j" in node:
        return node["j"]
    if "d" in node:
        if not isinstance(node["d"], dict):
            raise WireError("malformed dict node")
        return {k: _rebuild(v, tensors, used) for k, v in node["d"].items()}
    if "l" in node or "u" in node:
        items = node.get("l", node.get("u"))
        if not isinstance(items, list):
            raise WireError("malformed list node")
        out = [_rebuild(v, tensors, used) for v in items]
        return tuple(out) if "u" in node else out
    raise WireError(f"unknown skeleton node {sorted(node)}")


def decode(
    data: bytes | bytearray | memoryview,
    *,
    max_header_bytes: int = DEFAULT_MAX_HEADER_BYTES,
    max_body_bytes: int = DEFAULT_MAX_BODY_BYTES,
) -> Any:
    """Decode one frame produced by :func:`encode` (strictly; see the module docstring).

    Args:
        data: the frame.
        max_header_bytes: refuse larger JSON headers.
        max_body_bytes: refuse larger frames.

    Returns:
        The tree. Tensors are CPU tensors backed by one private copy of the frame.

    Raises:
        WireError: with a one-line reason for any malformed, oversized or non-frame input.
    """
    size = len(data)
    if size > max_body_bytes:
        raise WireError(f"frame of {size} bytes exceeds the {max_body_bytes}-byte limit")
    head = bytes(data[:4])
    if head[:1] == _PICKLE_PREFIX:
        raise WireError("refusing a pickle payload (0x80 prefix); the wire accepts only ARCW1 safetensors frames")
    if head == _ZIP_PREFIX:
        raise WireError("refusing a zip payload (torch.save format); the wire accepts only ARCW1 safetensors frames")
    if size < 8:
        raise WireError(f"frame of {size} bytes is shorter than the 8-byte header length")
    (hlen,) = struct.unpack("<Q", bytes(data[:8]))
    if hlen > max_header_bytes:
        raise WireError(f"header length {hlen} exceeds the {max_header_bytes}-byte limit")
    if 8 + hlen > size:
        raise WireError(f"header length {hlen} runs past the end of a {size}-byte frame")
    try:
        header = json.loads(bytes(data[8 : 8 + hlen]))
    except (UnicodeDecodeError, json.JSONDecodeError) as e:
        raise WireError(f"header is not JSON ({e})") from None
    if not isinstance(header, dict):
        raise WireError("header is not a JSON object")
    meta = header.pop("__metadata__", None)
    if not isinstance(meta, dict) or meta.get("format") != FORMAT or not isinstance(meta.get("tree"), str):
        raise WireError(f"not an {FORMAT} frame (missing __metadata__.format/tree)")
    body_len = size - 8 - hlen
    spans = []
    for name, info in header.items():
        if not isinstance(info, dict) or set(info) != {"dtype", "shape", "data_offsets"}:
            raise WireError(f"tensor {name!r}: malformed header entry")
        dt, shape, offs = info["dtype"], info["shape"], info["data_offsets"]
        if dt not in _DTYPES:
            raise WireError(f"tensor {name!r}: dtype {dt!r} is not in the allow-list {sorted(_DTYPES)}")
        if not isinstance(shape, list) or not all(
            isinstance(d, int) and not isinstance(d, bool) and d >= 0 for d in shape
        ):
            raise WireError(f"tensor {name!r}: malformed shape {shape!r}")
        if (
            not isinstance(offs, list)
            or len(offs) != 2
            or not all(isinstance(o, int) and not isinstance(o, bool) for o in offs)
            or not 0 <= offs[0] <= offs[1] <= body_len
        ):
            raise WireError(f"tensor {name!r}: data_offsets {offs!r} outside the {body_len}-byte body")
        if math.prod(shape) * _ITEMSIZE[dt] != offs[1] - offs[0]:
            raise WireError(f"tensor {name!r}: shape {shape} x {_ITEMSIZE[dt]} bytes != {offs[1] - offs[0]} bytes")
        spans.append((offs[0], offs[1], name))
    spans.sort()
    pos = 0
    for b, e, name in spans:
        if b != pos:
            raise WireError(f"tensor {name!r}: byte range starts at {b}, expected {pos} (overlap or hole)")
        pos = e
    if pos != body_len:
        raise WireError(f"tensor bytes end at {pos} but the body has {body_len} bytes")
    try:
        skeleton = json.loads(meta["tree"])
    except json.JSONDecodeError as e:
        raise WireError(f"skeleton is not JSON ({e})") from None
    buf = bytearray(data[8 + hlen :]) if body_len else bytearray()
    tensors: dict[str, torch.Tensor] = {}
    for b, e, name in spans:
        info = header[name]
        dtype = _DTYPES[info["dtype"]]
        n = math.prod(info["shape"])
        if n == 0:
            t = torch.empty(info["shape"], dtype=dtype)
        else:
            t = torch.frombuffer(buf, dtype=dtype, count=n, offset=b).reshape(info["shape"])
        tensors[name] = t
    used: set[str] = set()
    tree = _rebuild(skeleton, tensors, used)
    if used != set(tensors):
        raise WireError(f"header has tensors the skeleton never names: {sorted(set(tensors) - used)[:5]}")
    return tree
