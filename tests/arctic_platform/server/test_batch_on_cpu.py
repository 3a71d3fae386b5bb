# Copyright 2026 The arctic-verl Authors
# SPDX-License-Identifier: Apache-2.0
"""The dense batch schema with the reference layout: response fields left-padded to [b, P+R], ``loss_mask``, and the
Arctic-Platform meta keys (honoured, or a 422 naming them)."""

import pytest
import torch

from arctic_platform.server.batch import parse_dense_batch
from arctic_platform.server.errors import RequestError

P, R = 3, 2


def _batch(**over):
    ids = torch.tensor([[0, 5, 6, 7, 8], [9, 5, 6, 7, 0]])
    mask = torch.tensor([[0, 1, 1, 1, 1], [1, 1, 1, 1, 0]])
    resp_mask = torch.tensor([[1, 1], [1, 0]])
    b = {
        "input_ids": ids,
        "attention_mask": mask,
        "prompts": ids[:, :P],
        "responses": ids[:, P:],
        "response_mask": torch.cat([torch.zeros(2, P, dtype=torch.long), resp_mask], 1),
        "old_log_probs": torch.cat([torch.zeros(2, P), torch.tensor([[-1.0, -2.0], [-3.0, 0.0]])], 1),
        "advantages": torch.cat([torch.zeros(2, P), torch.ones(2, R)], 1),
    }
    b["loss_mask"] = b["response_mask"].clone()
    b.update(over)
    return b


def _parse(batch, meta=None):
    return parse_dense_batch(batch, meta or {}, vocab_size=32, max_seq_len=64, need_response=True)


def test_left_padded_response_fields_are_cut_to_the_response():
    db = _parse(_batch())
    assert (db.prompt_len, db.response_len) == (P, R)
    assert db.resp["old_log_probs"].tolist() == [[-1.0, -2.0], [-3.0, 0.0]]
    assert db.resp["response_mask"].tolist() == [[True, True], [True, False]]
    assert torch.equal(db.resp["loss_mask"], db.resp["response_mask"])


def test_a_loss_mask_that_differs_from_the_response_mask_is_refused():
    bad = _batch()
    bad["loss_mask"] = torch.cat([torch.zeros(2, P, dtype=torch.long), torch.ones(2, R, dtype=torch.long)], 1)
    with pytest.raises(RequestError, match="loss_mask differs"):
        _parse(bad)


def test_a_response_field_with_prompt_columns_set_is_refused_as_not_left_padded():
    bad = _batch()
    bad["loss_mask"] = torch.ones(2, P + R, dtype=torch.long)
    with pytest.raises(RequestError, match="loss_mask is \\[2, 5\\] but not left-padded") as ei:
        _parse(bad)
    assert ei.value.status == 422


@pytest.mark.parametrize(
    "meta, ok",
    [
        ({"zorro_train_enable": False, "load_balancer": True, "max_token_len_per_gpu": 16384}, True),
        ({"logits_optimization": "compute", "logits_optimization_peak_mem_size_in_gib": 4}, True),
        ({"rollout_is_weights": None}, True),
        ({"zorro_train_enable": True}, "zorro_train_enable"),
        ({"logits_optimization": "memory"}, "logits_optimization='memory'"),
        ({"rollout_is_weights": torch.ones(2, R)}, "send IS weights in batch.rollout_is_weights"),
    ],
    ids=["reference-defaults", "chunked-logits", "no-is", "zorro", "memory", "is-in-meta"],
)
def test_reference_meta_keys(meta, ok):
    if ok is True:
        _parse(_batch(), meta)
    else:
        with pytest.raises(RequestError, match=ok) as ei:
            _parse(_batch(), meta)
        assert ei.value.status == 422
