# Copyright 2026 The arctic-verl Authors
# SPDX-License-Identifier: Apache-2.0
"""densify on CPU: the vectorized torch path and the Triton kernel (interpreted) equal the loop reference bit for bit.

Every comparison is exact (integer views of the outputs, so NaN pads compare by their bits): densify only moves
values, so there is no rounding to tolerate.
"""

import math

import pytest
import torch

from arctic_platform.kernels.densify import (
    DEFAULT_FIELD_PADS,
    densify,
    densify_reference,
    densify_triton,
    densify_vectorized,
)

PATHS = {
    "vectorized": densify_vectorized,
    "triton": densify_triton,
    "dispatch": densify,
}
KEYS = ("input_ids", "attention_mask", "position_ids", "prompts", "responses")


def bits(t: torch.Tensor) -> torch.Tensor:
    size = t.element_size()
    return t.view({1: torch.int8, 2: torch.int16, 4: torch.int32, 8: torch.int64}[size])


def assert_same(out: dict, ref: dict) -> None:
    assert set(out) == set(ref)
    for k in ref:
        a, b = out[k], ref[k]
        assert a.dtype == b.dtype and a.shape == b.shape and a.device == b.device, (k, a.dtype, b.dtype, a.shape)
        assert a.is_contiguous(), k
        assert torch.equal(bits(a), bits(b)), f"{k} differs bitwise"


def njt(rows):
    return torch.nested.nested_tensor(rows, layout=torch.jagged)


def random_batch(seed, B, P, R, *, id_dtype=torch.int64, device="cpu"):
    """Random lengths that always include 0 and the exact maxima on both sides."""
    g = torch.Generator().manual_seed(seed)
    lp = torch.randint(0, P + 1, (B,), generator=g)
    lr = torch.randint(0, R + 1, (B,), generator=g)
    lp[0], lr[0] = 0, R  # empty prompt, full response
    lp[1], lr[1] = P, 0  # full prompt, empty response
    lp[2], lr[2] = 0, 0  # empty row
    lp[3], lr[3] = P, R  # full row
    prompts = njt([torch.randint(0, 50_000, (int(n),), generator=g, dtype=id_dtype) for n in lp]).to(device)
    responses = njt([torch.randint(0, 50_000, (int(n),), generator=g, dtype=id_dtype) for n in lr]).to(device)
    fields = {
        "old_log_probs": njt([torch.randn(int(n), generator=g) for n in lr]).to(device),
        "advantages": njt([torch.randn(int(n), generator=g, dtype=torch.float64) for n in lr]).to(device),
        "ref_log_prob": njt([torch.randn(int(n), generator=g).bfloat16() for n in lr]).to(device),
        "response_mask": njt([torch.randint(0, 2, (int(n),), generator=g) for n in lr]).to(device),
        "rollout_is_weights": njt([torch.rand(int(n), generator=g) for n in lr]).to(device),
        "loss_mask": njt([torch.rand(int(n), generator=g) > 0.5 for n in lr]).to(device),
        "token_level_rewards": njt([torch.randn(int(n), generator=g).half() for n in lr]).to(device),
    }
    return prompts, responses, fields


PADS = [
    pytest.param({}, id="default-pads"),
    pytest.param(
        {
            "old_log_probs": math.nan,
            "advantages": -1.5,
            "response_mask": -1,
            "ref_log_prob": math.nan,
            "loss_mask": True,
            "token_level_rewards": -0.0,
            "rollout_is_weights": math.inf,
        },
        id="nan-negative-pads",
    ),  # fmt: skip
]


@pytest.mark.parametrize("seed,B,P,R", [(0, 9, 16, 24), (1, 13, 7, 33), (2, 6, 32, 16)], ids=["a", "b", "c"])
@pytest.mark.parametrize("pads", PADS)
@pytest.mark.parametrize("path", ["vectorized", "triton", "dispatch"])
def test_paths_equal_reference(path, pads, seed, B, P, R, triton_device_or_cpu):
    device = triton_device_or_cpu(path)
    prompts, responses, fields = random_batch(seed, B, P, R, device=device)
    kw = dict(max_prompt_len=P, max_response_len=R, pad_token_id=-3, fields=fields, field_pads=pads)
    ref = densify_reference(prompts, responses, **kw)
    extra = {"block": 16} if path == "triton" else {}  # 16-wide tiles: several per row, one straddling P
    assert_same(PATHS[path](prompts, responses, **kw, **extra), ref)


@pytest.fixture
def triton_device_or_cpu(request):
    def pick(path):
        if path == "triton":
            return request.getfixturevalue("triton_device")
        return "cpu"

    return pick


def test_reference_layout_by_hand():
    """Pins the layout and the position convention clip(cumsum(mask) - 1, 0) on a batch small enough to read."""
    prompts = njt([torch.tensor([11, 12]), torch.tensor([], dtype=torch.int64), torch.tensor([13, 14, 15])])
    responses = njt([torch.tensor([21]), torch.tensor([], dtype=torch.int64), torch.tensor([22, 23])])
    fields = {"rollout_is_weights": njt([torch.tensor([0.5]), torch.tensor([]), torch.tensor([0.25, 0.75])])}
    out = densify_reference(prompts, responses, max_prompt_len=3, max_response_len=3, pad_token_id=0, fields=fields)
    assert out["input_ids"].tolist() == [[0, 11, 12, 21, 0, 0], [0, 0, 0, 0, 0, 0], [13, 14, 15, 22, 23, 0]]
    assert out["attention_mask"].tolist() == [[0, 1, 1, 1, 0, 0], [0, 0, 0, 0, 0, 0], [1, 1, 1, 1, 1, 0]]
    # Left pads 0, then 0..lp+lr-1, right pads REPEAT the last position (not lp+lr, ...), empty row all 0.
    assert out["position_ids"].tolist() == [[0, 0, 1, 2, 2, 2], [0, 0, 0, 0, 0, 0], [0, 1, 2, 3, 4, 4]]
    assert out["prompts"].tolist() == [[0, 11, 12], [0, 0, 0], [13, 14, 15]]
    assert out["responses"].tolist() == [[21, 0, 0], [0, 0, 0], [22, 23, 0]]
    # rollout_is_weights pads with a neutral 1.0 by default.
    assert out["rollout_is_weights"].tolist() == [[0.5, 1.0, 1.0], [1.0, 1.0, 1.0], [0.25, 0.75, 1.0]]
    assert DEFAULT_FIELD_PADS == {"rollout_is_weights": 1.0}


@pytest.mark.parametrize("path", ["reference", "vectorized", "triton", "dispatch"])
def test_position_ids_match_cumsum_convention(path, triton_device_or_cpu):
    device = triton_device_or_cpu(path if path == "triton" else "cpu")
    prompts, responses, _ = random_batch(5, 10, 12, 20, device=device)
    fn = densify_reference if path == "reference" else PATHS[path]
    out = fn(prompts, responses, max_prompt_len=12, max_response_len=20, pad_token_id=1)
    mask = out["attention_mask"]
    assert torch.equal(out["position_ids"], (mask.cumsum(-1) - 1).clamp(min=0))
    assert out["input_ids"][mask == 0].eq(1).all()  # every masked slot carries the pad id
    assert out["input_ids"].shape == (10, 32)  # configured widths, not batch maxima


@pytest.mark.parametrize("path", ["reference", "vectorized", "triton", "dispatch"])
@pytest.mark.parametrize("side", ["prompt", "response"])
def test_over_length_row_raises(path, side, triton_device_or_cpu):
    device = triton_device_or_cpu(path if path == "triton" else "cpu")
    prompts, responses, fields = random_batch(3, 8, 10, 12, device=device)
    fn = densify_reference if path == "reference" else PATHS[path]
    P, R = (9, 12) if side == "prompt" else (10, 11)
    limit = P if side == "prompt" else R
    lens = (prompts if side == "prompt" else responses).offsets().diff()
    row = int(torch.nonzero(lens > limit)[0, 0])
    msg = f"row {row}: {side} length {int(lens[row])} > max_{side}_len {limit}"
    with pytest.raises(ValueError, match=msg):
        fn(prompts, responses, max_prompt_len=P, max_response_len=R, pad_token_id=0, fields=fields)


@pytest.mark.parametrize("path", ["reference", "vectorized", "triton"])
def test_holey_njt_equals_compact(path, triton_device_or_cpu):
    """Rows taken with torch.nested.narrow have holes (lengths() is not None); the offsets alone would be wrong."""
    device = triton_device_or_cpu(path if path == "triton" else "cpu")
    g = torch.Generator().manual_seed(7)
    B, P, R = 6, 8, 10
    base_p = torch.randint(0, 1000, (B, 12), generator=g)
    base_r = torch.randint(0, 1000, (B, 14), generator=g)
    base_f = torch.randn(B, 14, generator=g)
    sp, lp = torch.tensor([0, 3, 1, 4, 0, 2]), torch.tensor([8, 0, 5, 8, 1, 3])
    sr, lr = torch.tensor([2, 0, 4, 0, 1, 3]), torch.tensor([10, 3, 0, 7, 10, 2])
    holey_p = torch.nested.narrow(base_p, 1, sp, lp, layout=torch.jagged)
    holey_r = torch.nested.narrow(base_r, 1, sr, lr, layout=torch.jagged)
    holey_f = torch.nested.narrow(base_f, 1, sr, lr, layout=torch.jagged)
    assert holey_p.lengths() is not None and holey_r.lengths() is not None
    compact_p = njt([base_p[b, sp[b] : sp[b] + lp[b]] for b in range(B)])
    compact_r = njt([base_r[b, sr[b] : sr[b] + lr[b]] for b in range(B)])
    compact_f = njt([base_f[b, sr[b] : sr[b] + lr[b]] for b in range(B)])
    kw = dict(max_prompt_len=P, max_response_len=R, pad_token_id=-1)
    ref = densify_reference(compact_p, compact_r, fields={"f": compact_f}, **kw)
    fn = densify_reference if path == "reference" else PATHS[path]
    out = fn(holey_p.to(device), holey_r.to(device), fields={"f": holey_f.to(device)}, **kw)
    assert_same({k: v.cpu() for k, v in out.items()}, ref)


def test_field_length_mismatch_names_the_field():
    prompts, responses, fields = random_batch(4, 6, 8, 8)
    lens = responses.offsets().diff().clone()
    lens[4] = (lens[4] + 1) % 9  # one row off by one
    fields["bad_field"] = njt([torch.zeros(int(n)) for n in lens])
    for fn in (densify_reference, densify_vectorized, densify):
        with pytest.raises(ValueError, match="field 'bad_field': row lengths differ"):
            fn(prompts, responses, max_prompt_len=8, max_response_len=8, pad_token_id=0, fields=fields)


@pytest.mark.parametrize(
    "fields_pads,match",
    [
        ({"response_mask": math.nan}, "not an integer"),
        ({"response_mask": 2.5}, "not an integer"),
        ({"loss_mask": 2}, "bool field"),
        ({"nope": 1.0}, "not in fields"),
    ],
    ids=["nan-int", "frac-int", "bool-2", "unknown-field"],
)
def test_bad_pads_raise(fields_pads, match):
    prompts, responses, fields = random_batch(4, 5, 4, 4)
    with pytest.raises(ValueError, match=match):
        densify(prompts, responses, max_prompt_len=4, max_response_len=4, pad_token_id=0, fields=fields,
                field_pads=fields_pads)  # fmt: skip


def test_reserved_field_name_and_types_raise():
    prompts, responses, _ = random_batch(4, 5, 4, 4)
    with pytest.raises(ValueError, match="collides"):
        densify(prompts, responses, max_prompt_len=4, max_response_len=4, pad_token_id=0,
                fields={"input_ids": responses})  # fmt: skip
    with pytest.raises(TypeError, match="jagged"):
        densify(torch.zeros(5, 4, dtype=torch.long), responses, max_prompt_len=4, max_response_len=4, pad_token_id=0)
    with pytest.raises(TypeError, match="integer token ids"):
        densify(prompts, njt([torch.zeros(2)] * 5), max_prompt_len=4, max_response_len=4, pad_token_id=0)


@pytest.mark.parametrize("path", ["vectorized", "triton"])
def test_dtypes(path, triton_device_or_cpu):
    """Token ids of any integer dtype widen to int64; every field keeps its dtype."""
    device = triton_device_or_cpu(path if path == "triton" else "cpu")
    prompts, responses, fields = random_batch(6, 7, 6, 9, id_dtype=torch.int32, device=device)
    kw = dict(max_prompt_len=6, max_response_len=9, pad_token_id=5, fields=fields)
    out = PATHS[path](prompts, responses, **kw)
    for k in KEYS:
        assert out[k].dtype == torch.int64, k
    for k, f in fields.items():
        assert out[k].dtype == f.dtype, k
    assert_same({k: v.cpu() for k, v in out.items()}, densify_reference(prompts.cpu(), responses.cpu(),
                **{**kw, "fields": {k: f.cpu() for k, f in fields.items()}}))  # fmt: skip


def test_triton_more_than_eight_fields(triton_device):
    """Fields beyond the 8 pointer slots of one launch go to a second launch; results are unchanged."""
    prompts, responses, _ = random_batch(8, 5, 8, 16, device=triton_device)
    lens = responses.offsets().diff().cpu()
    g = torch.Generator().manual_seed(9)
    fields = {f"f{i}": njt([torch.randn(int(n), generator=g) for n in lens]).to(triton_device) for i in range(11)}
    pads = {f"f{i}": float(-i) for i in range(11)}
    kw = dict(max_prompt_len=8, max_response_len=16, pad_token_id=0, fields=fields, field_pads=pads)
    out = densify_triton(prompts, responses, block=16, **kw)
    ref = densify_reference(prompts, responses, **kw)
    assert_same(out, ref)


def test_no_fields_and_all_empty_rows():
    empty = njt([torch.tensor([], dtype=torch.int64)] * 4)
    out = densify_vectorized(empty, empty, max_prompt_len=3, max_response_len=2, pad_token_id=9)
    assert_same(out, densify_reference(empty, empty, max_prompt_len=3, max_response_len=2, pad_token_id=9))
    assert out["input_ids"].eq(9).all() and out["attention_mask"].eq(0).all() and out["position_ids"].eq(0).all()


@pytest.mark.parametrize("path", ["vectorized", "triton"])
@pytest.mark.parametrize("P,R", [(0, 5), (6, 0)], ids=["no-prompt-width", "no-response-width"])
def test_zero_width_side(path, P, R, triton_device_or_cpu):
    device = triton_device_or_cpu(path if path == "triton" else "cpu")
    prompts, responses, fields = random_batch(12, 6, P, R, device=device)
    kw = dict(max_prompt_len=P, max_response_len=R, pad_token_id=4, fields=fields)
    assert_same(PATHS[path](prompts, responses, **kw), densify_reference(prompts, responses, **kw))
