# Copyright 2026 The arctic-verl Authors
# SPDX-License-Identifier: Apache-2.0
"""densify on a CUDA GPU: the compiled Triton kernel at the real shape equals the reference bit for bit."""

import math

import pytest
import torch

pytest.importorskip("triton")
pytestmark = [
    pytest.mark.gpu,
    pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU (CPU coverage: test_densify_on_cpu.py)"),
]

from arctic_platform.kernels.densify import densify, densify_reference, densify_triton, densify_vectorized  # noqa: E402


def bits(t):
    return t.view({1: torch.int8, 2: torch.int16, 4: torch.int32, 8: torch.int64}[t.element_size()])


def batch(B, P, R, seed=0):
    g = torch.Generator().manual_seed(seed)
    lp = torch.randint(0, P + 1, (B,), generator=g)
    lr = torch.randint(0, R + 1, (B,), generator=g)
    lp[:4] = torch.tensor([0, P, 0, P])
    lr[:4] = torch.tensor([R, 0, 0, R])

    def nt(values, lens):
        offsets = torch.cat([torch.zeros(1, dtype=torch.int64), lens.cumsum(0)])
        return torch.nested.nested_tensor_from_jagged(values, offsets)

    n_r = int(lr.sum())
    prompts = nt(torch.randint(0, 150_000, (int(lp.sum()),), generator=g), lp)
    responses = nt(torch.randint(0, 150_000, (n_r,), generator=g), lr)
    fields = {
        "old_log_probs": nt(torch.randn(n_r, generator=g), lr),
        "advantages": nt(torch.randn(n_r, generator=g), lr),
        "ref_log_prob": nt(torch.randn(n_r, generator=g).bfloat16(), lr),
        "response_mask": nt(torch.randint(0, 2, (n_r,), generator=g), lr),
        "rollout_is_weights": nt(torch.rand(n_r, generator=g), lr),
    }
    return prompts, responses, fields


@pytest.mark.parametrize("B,P,R", [(1024, 512, 1024), (37, 100, 333)], ids=["real", "odd"])
def test_triton_equals_reference_on_gpu(B, P, R):
    prompts, responses, fields = batch(B, P, R)
    kw = dict(max_prompt_len=P, max_response_len=R, pad_token_id=151643,
              field_pads={"old_log_probs": math.nan, "advantages": -1.0})  # fmt: skip
    ref = densify_reference(prompts, responses, fields=fields, **kw)
    cuda_fields = {k: v.cuda() for k, v in fields.items()}
    for fn in (densify, densify_triton, densify_vectorized):
        out = fn(prompts.cuda(), responses.cuda(), fields=cuda_fields, **kw)
        assert set(out) == set(ref)
        for k in ref:  # exact: densify only moves bits
            assert out[k].is_cuda and out[k].dtype == ref[k].dtype and out[k].shape == ref[k].shape
            assert torch.equal(bits(out[k].cpu()), bits(ref[k])), (fn.__name__, k)


def test_over_length_raises_on_gpu():
    prompts, responses, _ = batch(16, 8, 8)
    with pytest.raises(ValueError, match=r"row 0: response length 8 > max_response_len 7"):
        densify(prompts.cuda(), responses.cuda(), max_prompt_len=8, max_response_len=7, pad_token_id=0)
