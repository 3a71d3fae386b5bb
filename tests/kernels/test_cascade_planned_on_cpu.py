# Copyright 2026 The arctic-verl Authors
# SPDX-License-Identifier: Apache-2.0
"""The capturable forest cascade attention path (make_fca_plan + fca_plan_update + forest_cascade_attention_planned)
on CPU: the same kernel launch as on the GPU, interpreted, against the torch reference.

Covers head dim 128 and 256 with few tokens (interpreter budget, docs/kernels.md §5), one plan reused across
batches of different group structure (padded with empty groups, as inside a CUDA graph), the empty tail of the
fixed grid, the debug-mode checks, and the device-side tile plan against the host planner. The CUDA-graph replay
itself is GPU-only: test_cascade_graph.py.
"""

import dataclasses

import pytest
import torch

from arctic_platform.kernels.cascade import (
    _plan_tiles,
    fca_launch_config,
    fca_plan_update,
    forest_cascade_attention,
    forest_cascade_attention_planned,
    make_fca_plan,
)

DTYPES = [pytest.param(torch.float32, id="fp32"), pytest.param(torch.bfloat16, id="bf16")]


def padded_starts(sizes, max_groups, device):
    """group_starts for ``sizes`` padded with empty groups to a fixed ``max_groups`` (fixed shape across steps)."""
    starts = [0]
    for s in sizes:
        starts.append(starts[-1] + s)
    starts += [starts[-1]] * (max_groups - len(sizes))
    return torch.tensor(starts, dtype=torch.int32, device=device)


def padded_kw(case, max_groups):
    """The case's metadata with the prefix tables padded to ``max_groups`` rows (padding rows: length 0)."""
    kw = dict(case.kw)
    G = kw["prefix_lens"].numel()
    pad = max_groups - G
    kw["prefix_lens"] = torch.cat([kw["prefix_lens"], kw["prefix_lens"].new_zeros(pad)])
    kw["prefix_block_tables"] = torch.cat(
        [kw["prefix_block_tables"], kw["prefix_block_tables"].new_zeros((pad, kw["prefix_block_tables"].shape[1]))]
    )
    kw["group_starts"] = padded_starts(case.sizes, max_groups, kw["group_starts"].device)
    return kw


def run_planned(plan, case, max_groups, debug=True):
    kw = padded_kw(case, max_groups)
    gs = kw.pop("group_starts")
    fca_plan_update(plan, gs, debug=debug)
    return forest_cascade_attention_planned(case.q, case.k, case.v, plan, **kw, debug=debug, group_starts=gs)


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("D", [128, 256])
@pytest.mark.parametrize("splits", [1, 2])
def test_planned_matches_reference(fca, triton_device, D, dtype, splits):
    case = fca.build_case((3, 1), 16, suffix_lens=[5, 17, 0, 9], Hkv=1, qpk=4, D=D, dtype=dtype, device=triton_device)
    plan = make_fca_plan(max_batch=4, max_groups=3, num_heads=4, num_kv_heads=1, head_dim=D, block_size=16,
                         dtype=dtype, device=triton_device, num_splits=splits, block_n=16)  # fmt: skip
    out, lse = run_planned(plan, case, 3)
    assert out.shape == case.q.shape and out.dtype == dtype and out.data_ptr() == plan.out.data_ptr()
    fca.assert_close(out, lse, case, what=f"planned D={D} splits={splits}")  # rule: conftest.assert_attention_close


def test_one_plan_serves_batches_of_different_shapes(fca, triton_device):
    """One plan (fixed buffers and grid) for successive batches: different group counts, sizes and batch rows."""
    plan = make_fca_plan(max_batch=6, max_groups=4, num_heads=8, num_kv_heads=2, head_dim=64, block_size=16,
                         dtype=torch.float32, device=triton_device, num_splits=2, block_n=16)  # fmt: skip
    addresses = [t.data_ptr() for t in (plan.out, plan.lse, plan.tile_size, plan.part_o)]
    for seed, (sizes, plen) in enumerate((((4, 2), 32), ((1, 1, 1, 2), 16), ((3,), 0))):
        case = fca.build_case(sizes, plen, suffix_max=20, seed=seed, device=triton_device)
        out, lse = run_planned(plan, case, 4)
        fca.assert_close(out, lse, case, what=f"batch {sizes}")
    assert [t.data_ptr() for t in (plan.out, plan.lse, plan.tile_size, plan.part_o)] == addresses


def test_rows_outside_every_group_are_untouched(fca, triton_device):
    """A batch smaller than the plan: the unused tiles do nothing, the rows past the batch keep their values."""
    plan = make_fca_plan(max_batch=8, max_groups=4, num_heads=8, num_kv_heads=2, head_dim=64, block_size=16,
                         dtype=torch.float32, device=triton_device, num_splits=1, block_n=16)  # fmt: skip
    plan.out.fill_(7.0)
    case = fca.build_case((2, 1), 16, suffix_max=10, device=triton_device)
    q8 = torch.cat([case.q, torch.randn(5, 8, 64, device=triton_device)])
    kw = padded_kw(case, 4)
    gs = kw.pop("group_starts")
    kw["suffix_block_tables"] = torch.cat([kw["suffix_block_tables"], kw["suffix_block_tables"][:1].repeat(5, 1)])
    kw["suffix_lens"] = torch.cat([kw["suffix_lens"], kw["suffix_lens"].new_full((5,), 3)])
    fca_plan_update(plan, gs)
    out, lse = forest_cascade_attention_planned(q8, case.k, case.v, plan, **kw)
    assert torch.equal(out[3:], torch.full_like(out[3:], 7.0)) and torch.isneginf(lse[3:]).all()
    fca.assert_close(out[:3], lse[:3], case)


@pytest.mark.parametrize("sizes", [(4, 1, 3), (1,), (9, 2), (5, 5, 5, 1), (0, 3, 0)])
@pytest.mark.parametrize("mpt", [1, 4])
def test_device_tile_plan_equals_host_planner(sizes, mpt):
    # QPK 16: M = 16 x members, so members_per_tile = mpt for mpt in {1, 4} (m_max 64)
    cfg = fca_launch_config(num_heads=16, num_kv_heads=1, head_dim=32, block_size=16, max_group_size=mpt,
                            interpreted=True, block_n=16)  # fmt: skip
    assert cfg.members_per_tile == mpt
    B, max_groups = sum(sizes), len(sizes) + 2
    plan = make_fca_plan(max_batch=max(B, max_groups), max_groups=max_groups, num_heads=cfg.QPK, num_kv_heads=1,
                         head_dim=32, block_size=16, dtype=torch.float32, device="cpu", num_splits=1, block_n=16,
                         max_group_size=mpt)  # fmt: skip
    starts = padded_starts(sizes, max_groups, "cpu")
    fca_plan_update(plan, starts, debug=True)
    tg, ts, tn = _plan_tiles(starts.tolist(), mpt, "cpu")
    T = tg.numel()
    assert T <= plan.max_tiles
    live = plan.tile_size > 0
    assert live.sum() == T and not live[T:].any()
    assert plan.tile_group[:T].tolist() == tg.tolist() and plan.tile_start[:T].tolist() == ts.tolist()
    assert plan.tile_size[:T].tolist() == tn.tolist()


def test_launch_config_is_shared_by_batches_of_different_group_sizes():
    """Group size and split count are runtime values: one compiled variant per M bucket, not one per batch."""
    kw = dict(num_heads=32, num_kv_heads=8, head_dim=128, block_size=16, interpreted=False)
    configs = {fca_launch_config(max_group_size=n, **kw) for n in (16, 17, 30, 64, 100)}
    assert len(configs) == 1 and next(iter(configs)).M == 64  # capped by m_max: larger groups become more tiles
    buckets = {fca_launch_config(max_group_size=n, **kw).M for n in range(1, 65)}
    assert buckets == {16, 32, 64}
    assert fca_launch_config(max_group_size=16, **{**kw, "head_dim": 256}).num_warps == 8
    assert "num_splits" in forest_cascade_attention.__code__.co_varnames
    assert dataclasses.is_dataclass(next(iter(configs)))


def test_debug_mode_checks_values(fca, triton_device):
    case = fca.build_case((2, 1), 16, suffix_max=10, device=triton_device)
    plan = make_fca_plan(max_batch=4, max_groups=2, num_heads=8, num_kv_heads=2, head_dim=64, block_size=16,
                         dtype=torch.float32, device=triton_device, num_splits=1, block_n=16)  # fmt: skip
    kw = padded_kw(case, 2)
    gs = kw.pop("group_starts")
    fca_plan_update(plan, gs)
    bad = dict(kw, suffix_lens=kw["suffix_lens"] + 1000)
    with pytest.raises(ValueError, match="suffix_lens must lie in"):
        forest_cascade_attention_planned(case.q, case.k, case.v, plan, **bad, debug=True)
    with pytest.raises(ValueError, match="group_starts must rise"):
        fca_plan_update(plan, torch.tensor([0, 3, 2], dtype=torch.int32, device=triton_device), debug=True)
    with pytest.raises(ValueError, match="max_groups=2"):
        fca_plan_update(plan, torch.tensor([0, 1, 2, 3], dtype=torch.int32, device=triton_device))
    with pytest.raises(ValueError, match="does not fit the plan"):
        forest_cascade_attention_planned(case.q.double(), case.k, case.v, plan, **kw)
    with pytest.raises(ValueError, match="need 1 <= max_groups <= max_batch"):
        make_fca_plan(max_batch=2, max_groups=3, num_heads=8, num_kv_heads=2, head_dim=64, block_size=16,
                      dtype=torch.float32, device=triton_device)  # fmt: skip
    with pytest.raises(ValueError, match="tl.dot needs D >= 16"):
        make_fca_plan(max_batch=2, max_groups=1, num_heads=8, num_kv_heads=2, head_dim=8, block_size=16,
                      dtype=torch.float32, device=triton_device)  # fmt: skip


def test_plan_device_is_a_concrete_device():
    """A plan made for "cuda" must accept tensors on "cuda:0" (devices are compared exactly); same for "cpu"."""
    plan = make_fca_plan(max_batch=2, max_groups=1, num_heads=4, num_kv_heads=1, head_dim=16, block_size=16,
                         dtype=torch.float32, device="cpu", num_splits=1, block_n=16)  # fmt: skip
    assert plan.device == torch.empty(0).device and plan.out.device == plan.device
    if torch.cuda.is_available():
        plan = make_fca_plan(max_batch=2, max_groups=1, num_heads=4, num_kv_heads=1, head_dim=16, block_size=16,
                             dtype=torch.float32, device="cuda", num_splits=1, block_n=16)  # fmt: skip
        assert plan.device == torch.empty(0, device="cuda").device and plan.device.index is not None
