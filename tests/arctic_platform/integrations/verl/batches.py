# Copyright 2026 The arctic-verl Authors
# SPDX-License-Identifier: Apache-2.0
"""Build V1-shaped batches (nested-jagged rows as TransferQueue hands them to the forwarder)."""

import torch
from tensordict import TensorDict

from verl.utils import tensordict_utils as tu


def nested(rows, dtype):
    return torch.nested.nested_tensor([torch.tensor(r, dtype=dtype) for r in rows], layout=torch.jagged)


def v1_batch(prompts, responses, *, extra=None, non_tensor=None, seed=0):
    """prompts/responses: lists of token-id lists. Adds the fields update_actor needs (advantages etc.)."""
    g = torch.Generator().manual_seed(seed)
    input_ids = [p + r for p, r in zip(prompts, responses, strict=True)]
    fields = {
        "prompts": nested(prompts, torch.int64),
        "responses": nested(responses, torch.int64),
        "input_ids": nested(input_ids, torch.int64),
        "position_ids": nested([list(range(len(x))) for x in input_ids], torch.int64),
        "response_mask": nested([[1] * len(r) for r in responses], torch.int64),
    }
    for name in ("old_log_probs", "advantages"):
        fields[name] = nested([torch.randn(len(r), generator=g).tolist() for r in responses], torch.float32)
    fields.update(extra or {})
    td = TensorDict(fields, batch_size=[len(prompts)])
    for key, value in (non_tensor or {}).items():
        tu.assign_non_tensor_data(td, key, value)
    return td
