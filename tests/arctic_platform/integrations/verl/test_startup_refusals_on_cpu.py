# Copyright 2026 The arctic-verl Authors
# SPDX-License-Identifier: Apache-2.0
"""One test per finding of issue 27's table (verl's own scripts tried as a new user would): each either is honoured
now, or is refused at start-up, before Ray, in the one form ``<setting>=<value>: <backend> <why>; <way out>``, with
every refusal of the config at once.

Cheap by design: compositions and the start-up check; the one HTTP round trip (a key vLLM rejects, named in the
server's 422) uses one module-scoped embedded server and creates no engine.
"""

from __future__ import annotations

import json
import math

import pytest

from arctic_platform.backend_profile import ARCTIC_PLATFORM_MAIN, embedded_profile

EMBEDDED = embedded_profile(attn_implementations=("eager", "sdpa"))
A = "actor_rollout_ref.actor"
R = "actor_rollout_ref.rollout"
BASE = [
    "remote_backend=arctic",
    "actor_rollout_ref.rollout.name=arctic",
    "algorithm.adv_estimator=grpo",
    "data.train_batch_size=4",
    f"{A}.ppo_mini_batch_size=2",
    f"{A}.ppo_micro_batch_size_per_gpu=2",
    f"{R}.log_prob_micro_batch_size_per_gpu=2",
    "actor_rollout_ref.ref.log_prob_micro_batch_size_per_gpu=2",
    f"{R}.n=2",
    f"{R}.tensor_model_parallel_size=1",
    "trainer.n_gpus_per_node=1",
    "trainer.nnodes=1",
    "trainer.save_freq=-1",
    "trainer.resume_mode=disable",
    "trainer.total_training_steps=10",
    "actor_rollout_ref.model.path=/nonexistent/model",
]


@pytest.fixture(scope="module")
def compose():
    from arctic_platform.integrations.verl.options import compose_config

    return lambda overrides=(): compose_config([*BASE, *overrides])


def refusals(compose, overrides, profile=EMBEDDED):
    """Every refusal of the config, as main_ppo's pre-Ray check (the arctic part) gives them."""
    from arctic_platform.integrations.verl.adapter import ArcticConfigError, check_config

    try:
        check_config(compose(overrides), profile)
    except ArcticConfigError as e:
        return e.refusals
    return []


def passes(compose, overrides, profile=EMBEDDED) -> bool:
    return refusals(compose, overrides, profile) == []


def _only(rs, start: str):
    assert len(rs) == 1 and rs[0].startswith(start), [str(r) for r in rs]
    return rs[0]


# ------------------------------------------------------------------------------------------------ the rows


def _megatron_lr(step: int, *, lr, min_lr, init, warmup, decay, style) -> float:
    """Megatron-core's ``OptimizerParamScheduler.get_lr`` (megatron/core/optimizer_param_scheduler.py), the oracle:
    linear warmup from ``init`` over ``warmup`` steps (inclusive), then constant or a half cosine to ``min_lr``."""
    if warmup > 0 and step <= warmup:
        return init + (lr - init) * step / warmup
    if style == "constant":
        return lr
    ratio = (step - warmup) / (decay - warmup)
    return min_lr + 0.5 * (math.cos(math.pi * ratio) + 1.0) * (lr - min_lr)


@pytest.mark.parametrize("style", ["cosine", "constant"])
def test_row_megatron_schedule_is_the_one_the_backend_runs(compose, style):
    """Row 1: ``model_engine=megatron`` with ``optim.lr_decay_style=cosine``, ``min_lr``, ``lr_warmup_init`` is no
    longer sent as a constant rate: the client's schedule, run through verl's own schedule function, gives Megatron's
    rate at every step; the DeepSpeed scheduler for a reference server is the same cosine."""
    import torch

    from arctic_platform.integrations.verl.adapter import build_client_config
    from arctic_platform.integrations.verl.options import arctic_options
    from verl.utils.torch_functional import get_constant_schedule_with_warmup, get_cosine_schedule_with_warmup

    lr, min_lr, init, warmup, total = 1e-3, 1e-4, 2e-4 if style == "cosine" else 0.0, 3, 10
    given = [
        "model_engine=megatron",
        f"{A}.optim.lr_decay_style={style}",
        f"{A}.optim.lr={lr}",
        f"{A}.optim.min_lr={min_lr}",
        f"{A}.optim.lr_warmup_init={init}",
        f"{A}.optim.lr_warmup_steps={warmup}",
        f"trainer.total_training_steps={total}",
    ]
    cfg = compose(given)
    assert refusals(compose, given, EMBEDDED) == []
    c = build_client_config(cfg, arctic_options(cfg))
    s = c.training.lr_schedule
    assert s.kind == style and s.horizon == total and s.warmup() == warmup
    opt = torch.optim.SGD([torch.nn.Parameter(torch.zeros(1))], lr=lr)
    if style == "cosine":
        assert (s.min_lr_ratio, s.init_lr_ratio) == (pytest.approx(min_lr / lr), pytest.approx(init / lr))
        sched = get_cosine_schedule_with_warmup(
            opt, warmup, total, min_lr_ratio=s.min_lr_ratio, init_lr_ratio=s.init_lr_ratio
        )
        ds = c.training_ds_config()["scheduler"]
        assert ds["type"] == "WarmupCosineLR" and ds["params"]["cos_min_ratio"] == pytest.approx(min_lr / lr)
    else:
        sched = get_constant_schedule_with_warmup(opt, warmup)
    for step in range(total + 1):
        want = _megatron_lr(step, lr=lr, min_lr=min_lr, init=init, warmup=warmup, decay=total, style=style)
        assert opt.param_groups[0]["lr"] == pytest.approx(want, rel=1e-12), step  # float64 arithmetic both sides
        opt.step()
        sched.step()


def test_row_megatron_decay_styles_the_backend_lacks_are_refused(compose):
    r = _only(
        refusals(compose, ["model_engine=megatron", f"{A}.optim.lr_decay_style=linear"]), f"{A}.optim.lr_decay_style"
    )
    assert r.fix == (f"{A}.optim.lr_decay_style=cosine",)
    assert passes(compose, ["model_engine=megatron", *r.fix])


def test_row_engine_kwargs_reach_vllm_config(compose):
    """Row 2: ``rollout.engine_kwargs.vllm.*`` goes into the sampling job's vllm_config; another engine's is noted."""
    from arctic_platform.integrations.verl.adapter import build_client_config
    from arctic_platform.integrations.verl.options import arctic_options
    from arctic_platform.integrations.verl.settings import settings_notes

    cfg = compose(
        [
            f"+{R}.engine_kwargs.vllm.max_num_batched_tokens=8192",
            f"+{R}.engine_kwargs.sglang.attention_backend=flashinfer",
            "remote_backend.arctic.device=cuda",
        ]
    )
    c = build_client_config(cfg, arctic_options(cfg))
    assert c.job_config("sampling")["vllm_config"]["max_num_batched_tokens"] == 8192
    notes = settings_notes(cfg, arctic_options(cfg), EMBEDDED)
    assert f"{R}.engine_kwargs.sglang.attention_backend: the embedded arctic-verl server samples with vLLM" in notes[0]


@pytest.fixture(scope="module")
def server(tiny_model_dir, tmp_path_factory, serve_server):
    work = tmp_path_factory.mktemp("refusals")
    with serve_server(work, "--model", str(tiny_model_dir)) as srv:
        srv.work = work
        yield srv


def test_row_a_key_vllm_rejects_is_named_by_the_servers_422(compose, server, tiny_model_dir):
    """Row 2: a key vLLM does not take reaches the server, whose 422 names it (before any engine starts)."""
    from arctic_platform.client.errors import ArcticRLError
    from arctic_platform.integrations.verl.adapter import ArcticRemoteBackend

    cfg = compose(
        [
            f"actor_rollout_ref.model.path={tiny_model_dir}",
            f"trainer.default_local_dir={server.work / 'ckpt'}",
            "remote_backend.arctic.backend.type=onprem",
            f"remote_backend.arctic.backend.url={server.url}",
            f"+{R}.engine_kwargs.vllm.not_an_engine_arg=1",
        ]
    )
    with pytest.raises(ArcticRLError) as e:
        ArcticRemoteBackend.from_config(cfg)
    assert "422" in str(e.value) and "not_an_engine_arg" in str(e.value), e.value


def test_row_profiler_settings_are_honoured_or_noted(compose):
    """Row 3: verl's profiler settings: actor.profiler.enable gates the backend's trace (the forwarder's test shows
    it); contents, discrete and schedule the backend does not apply, and the rollout profiler, are start-up notes."""
    from arctic_platform.integrations.verl.options import arctic_options
    from arctic_platform.integrations.verl.settings import settings_notes

    cfg = compose(
        [
            "global_profiler.steps=[1]",
            f"{A}.profiler.enable=true",
            f"{A}.profiler.tool_config.torch.contents=[cuda,memory,stack]",
            f"{A}.profiler.tool_config.torch.discrete=true",
            f"{A}.profiler.tool_config.torch.schedule.active=2",
        ]
    )
    notes = settings_notes(cfg, arctic_options(cfg), EMBEDDED)
    actor = [n for n in notes if n.startswith(f"{A}.profiler.tool_config.torch")]
    assert len(actor) == 1 and "contents ['memory', 'stack']" in actor[0] and "discrete=True" in actor[0]
    assert "schedule (wait=0, warmup=0, active=2)" in actor[0]
    assert any(n.startswith(f"{R}.profiler.enable=True") for n in notes), notes


def test_row_megatron_adam_is_adamw(compose):
    """Row 4: Megatron's default ``optim.optimizer=adam`` (Megatron-core's adam is AdamW) is no longer refused."""
    assert passes(compose, ["model_engine=megatron"])
    r = _only(refusals(compose, ["model_engine=megatron", f"{A}.optim.optimizer=sgd"]), f"{A}.optim.optimizer='sgd'")
    assert passes(compose, ["model_engine=megatron", *r.fix])


def test_row_remax_is_refused(compose):
    """Row 5: V1 never computes ReMax's greedy baseline: refused before Ray (it failed 66 s in)."""
    r = _only(refusals(compose, ["algorithm.adv_estimator=remax"]), "algorithm.adv_estimator='remax'")
    assert "reward_baselines" in r and r.backend.startswith("verl's V1 trainer")
    assert passes(compose, ["algorithm.adv_estimator=remax", *r.fix])


@pytest.mark.parametrize("sum_pi_squared", [True, False])
def test_row_optimal_token_baseline_is_refused_either_way(compose, sum_pi_squared):
    """Row 6: with calculate_sum_pi_squared=false verl asserts at step 1 asking for true, and true is not computed:
    the estimator is refused whatever the flag says, and the way out is another estimator."""
    given = ["algorithm.adv_estimator=optimal_token_baseline", f"{A}.calculate_sum_pi_squared={sum_pi_squared}"]
    rs = refusals(compose, given)
    assert rs[0].startswith("algorithm.adv_estimator='optimal_token_baseline'") and "sum_pi_squared" in rs[0]
    assert len(rs) == (2 if sum_pi_squared else 1)
    assert passes(compose, [*given, *(f for r in rs for f in r.fix)])


def test_row_multimodal_models_and_data_are_refused(compose, tmp_path, tiny_model_dir):
    """Row 7: a model that reads images, or data with images, on a backend whose sampler takes text only."""
    import pandas as pd

    vlm = tmp_path / "vlm"
    vlm.mkdir()
    config = json.loads((tiny_model_dir / "config.json").read_text())
    (vlm / "config.json").write_text(json.dumps({**config, "vision_config": {"depth": 1}}))
    data = tmp_path / "geo.parquet"
    pd.DataFrame({"prompt": [[{"role": "user", "content": "x"}]], "images": [[{"bytes": b"png"}]]}).to_parquet(data)
    rs = refusals(compose, [f"actor_rollout_ref.model.path={vlm}", f"data.train_files={data}"])
    assert [r.setting.split("=")[0] for r in rs] == ["actor_rollout_ref.model.path", "data.train_files"]
    assert "vision_config" in rs[0] and "'images'" in rs[1] and all("generates from text only" in r for r in rs)
    text = tmp_path / "text.parquet"
    pd.DataFrame({"prompt": [[{"role": "user", "content": "x"}]], "images": [None]}).to_parquet(text)
    assert passes(compose, [f"actor_rollout_ref.model.path={tiny_model_dir}", f"data.train_files={text}"])


@pytest.mark.parametrize("job", ["training", "sampling"])
def test_row_a_job_the_run_needs_cannot_be_sized_zero(compose, job):
    """Row 8: training_gpus=0 passed the check and every update failed ("No training job initialized")."""
    r = _only(refusals(compose, [f"remote_backend.arctic.{job}_gpus=0"]), f"remote_backend.arctic.{job}_gpus=0")
    assert passes(compose, [f"remote_backend.arctic.{job}_gpus=0", *r.fix])


def test_row_refusals_read_as_one_sentence(repo_root):
    """Row 9: every refusal in docs/settings.md has the one form, the backend named once (the 13 garbled lines read
    "the embedded arctic-verl server the arctic backend does not compute it")."""
    doc = (repo_root / "docs" / "settings.md").read_text()
    cells = [
        c.strip()[len("refused: ") :]
        for line in doc.splitlines()
        for c in line.split(" | ")
        if c.strip().startswith("refused: ")
    ]
    assert len(cells) > 50
    for cell in cells:
        for line in cell.split("<br>"):
            assert "the arctic backend the" not in line and "server the arctic backend" not in line, line
            setting, _, rest = line.partition(": ")
            assert setting and "; " in rest, line
            backends = [b for b in (EMBEDDED.name, ARCTIC_PLATFORM_MAIN.name) if b in rest.split(";")[0]]
            assert len(backends) <= 1, line
    for setting in ("lora_adapter_path", "calculate_sum_pi_squared", "async_save", "quantization"):
        assert any(c.startswith("actor_rollout_ref.") and setting in c.split(":")[0] for c in cells), setting


@pytest.mark.parametrize(
    "override, line",
    [
        (
            "trainer.v1.trainer_mode=colocate_async",
            "trainer.v1.trainer_mode=colocate_async: remote_backend=arctic runs with trainer.v1.trainer_mode="
            "remote_backend only",
        ),
        ("trainer.use_v1=False", "trainer.use_v1=False: remote_backend=arctic runs on verl's V1 trainer only"),
    ],
)
def test_row_compose_check_and_main_ppo_agree_on_the_trainer_mode(override, line, capsys):
    """Rows 10 and 11: the message names the setting and the fix; compose_check refuses what main_ppo refuses
    (both run check_remote_backend_config: tests/verl/trainer/test_hydra_choice_hook_on_cpu.py runs main_ppo)."""
    from arctic_platform.integrations.verl import compose_check

    assert compose_check.main([*BASE, override]) == 1
    err = capsys.readouterr().err
    assert line in err, err
    assert "drop the override" in err or "set trainer.use_v1=true" in err


def test_row_a_typed_value_is_refused_by_name(compose):
    """Row 12: ``zero_optimization.stage=three`` was "invalid literal for int() with base 10: 'three'"."""
    key = "remote_backend.arctic.train.deepspeed.zero_optimization.stage"
    r = _only(refusals(compose, [f"{key}=three"]), f"{key}='three': the arctic backend needs a valid integer")
    assert r.fix == (f"{key}=3",) and passes(compose, [f"{key}=three", *r.fix])
    verl_typed = _only(refusals(compose, [f"{A}.ppo_epochs=two"]), f"{A}.ppo_epochs='two': verl 0.9.1 declares it")
    assert passes(compose, [f"{A}.ppo_epochs=two", *verl_typed.fix])


def test_row_an_unreachable_server_is_named_as_such(compose):
    """Row 13: ``--url`` to nothing: the first line says the server was not reached and which profile was assumed."""
    from arctic_platform.integrations.verl.adapter import ArcticConfigError, check_config

    onprem = ["remote_backend.arctic.backend.type=onprem", "remote_backend.arctic.backend.url=http://127.0.0.1:9"]
    with pytest.raises(ArcticConfigError) as e:
        check_config(compose([*onprem, f"{A}.use_dynamic_bsz=true"]))
    first = e.value.refusals[0]
    assert first.startswith("remote_backend.arctic.backend.url='http://127.0.0.1:9': the Arctic RL server did not")
    assert "checked against Arctic-Platform main's profile, assumed" in first
    assert "not reached" in str(e.value).splitlines()[0] and len(e.value.refusals) == 2


@pytest.mark.parametrize(
    "overrides, count",
    [
        ([f"{A}.use_dynamic_bsz=true", f"{R}.log_prob_micro_batch_size_per_gpu=null"], 1),
        (["algorithm.rollout_correction.rollout_is=token", "algorithm.rollout_correction.bypass_mode=true"], 2),
    ],
    ids=["dynamic-bsz-was-three-tries", "rollout-is-then-bypass"],
)
def test_row_every_refusal_at_once_and_the_fixes_together_pass(compose, overrides, count):
    """Row 14: the user learns every problem in one try, and the way out of each, applied together, passes."""
    rs = refusals(compose, overrides, ARCTIC_PLATFORM_MAIN)
    assert len(rs) == count, [str(r) for r in rs]
    assert passes(compose, [*overrides, *(f for r in rs for f in r.fix)], ARCTIC_PLATFORM_MAIN)
