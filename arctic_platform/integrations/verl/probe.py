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
"""``arctic-verl probe``: a preflight of an Arctic RL backend for one verl config, before a long run.

``arctic-verl probe [--url URL] [hydra overrides as for main_ppo ...]`` composes the config as ``main_ppo`` would
(``remote_backend=arctic``, with ``backend.type=onprem`` and the URL when ``--url`` is given, else the config's own
backend: ``local`` starts the embedded server), then, one line per call with the server's own words:

1. ``/health`` and the capability check (every refusal listed; the probe goes on so the data plane is seen too);
2. the three ``/initialize`` calls with the plugin's real bodies (the driver's own ``from_config`` path);
3. through the plugin's real forwarder (:class:`ArcticV1ActorRolloutRefWorker`) on a tiny two-row batch built from
   the model's vocabulary: one update (``/forward-backward`` + ``/step``), policy and reference log-probs
   (``/forward``), a weight sync; one ``/generate`` through the client; ``/destroy`` of the jobs.

It exits 1 when any call failed or any setting was refused, else 0. Nothing here is specific to the embedded server.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import sys
import time
import traceback
from typing import Any, Callable

__all__ = ["add_arguments", "main", "probe", "run"]


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--url", default=None, help="an Arctic RL server (sets backend.type=onprem); default: the config's"
    )
    parser.add_argument(
        "--model", default=None, help="model path (actor_rollout_ref.model.path) if the overrides lack it"
    )
    parser.add_argument("overrides", nargs="*", help="Hydra overrides, as for verl.trainer.main_ppo")


def run(args) -> int:
    overrides = list(args.overrides)
    if args.url:
        overrides += ["remote_backend.arctic.backend.type=onprem", f"remote_backend.arctic.backend.url={args.url}"]
    if args.model:
        overrides.append(f"actor_rollout_ref.model.path={args.model}")
    return probe(overrides, out=print)


class _Lines:
    """One line per call; counts failures."""

    def __init__(self, out: Callable[[str], Any]):
        self.out, self.failed = out, 0

    def call(self, what: str, fn: Callable[[], Any], describe: Callable[[Any], str] = lambda r: "ok"):
        t0 = time.monotonic()
        try:
            result = fn()
        except Exception as e:  # every failure is a line with the server's words, then a non-zero exit
            self.failed += 1
            self.out(f"FAIL {what} ({time.monotonic() - t0:.1f}s): {_words(e)}")
            return None
        self.out(f"ok   {what} ({time.monotonic() - t0:.1f}s): {describe(result)}")
        return result

    async def acall(self, what: str, awaitable, describe: Callable[[Any], str] = lambda r: "ok"):
        t0 = time.monotonic()
        try:
            result = await awaitable
        except Exception as e:  # as call()
            self.failed += 1
            self.out(f"FAIL {what} ({time.monotonic() - t0:.1f}s): {_words(e)}")
            return None
        self.out(f"ok   {what} ({time.monotonic() - t0:.1f}s): {describe(result)}")
        return result


def _words(e: BaseException) -> str:
    return " ".join(f"{type(e).__name__}: {e}".split())[:1500]


def _defaults(overrides: list[str]) -> list[str]:
    """What a probe needs on top of the user's overrides (only when the user left them unset): the arctic backend,
    a critic-free estimator, one short step of a tiny batch, nothing saved. Every setting that decides what the
    backend runs (rollout parallelism, job sizes, forwarder count) stays the user's effective value."""
    given = {o.split("=", 1)[0].lstrip("+~") for o in overrides}
    wanted = {
        "remote_backend": "arctic",
        "actor_rollout_ref.rollout.name": "arctic",
        "algorithm.adv_estimator": "grpo",
        "trainer.save_freq": "-1",
        "trainer.resume_mode": "disable",
        "trainer.total_training_steps": "1",
        "data.train_batch_size": "1",
        "actor_rollout_ref.actor.ppo_mini_batch_size": "1",
        "actor_rollout_ref.rollout.n": "2",
        "actor_rollout_ref.actor.ppo_micro_batch_size_per_gpu": "2",
        "actor_rollout_ref.rollout.log_prob_micro_batch_size_per_gpu": "2",
    }
    return [f"{k}={v}" for k, v in wanted.items() if k not in given] + overrides


def _tiny_batch(cfg, vocab: int, temperature: float, update: bool):
    """Two rows (one prompt, rollout_n=2) of token ids inside the model's vocabulary, as verl's V1 trainer hands
    them to the forwarder (nested-jagged TensorDict)."""
    import torch
    from tensordict import TensorDict

    from verl.utils import tensordict_utils as tu

    P = min(4, int(cfg.data.max_prompt_length))
    R = min(3, int(cfg.data.max_response_length))
    n = int(cfg.actor_rollout_ref.rollout.n)
    g = torch.Generator().manual_seed(0)
    low = min(3, vocab - 1)
    prompt = torch.randint(low, vocab, (P,), generator=g).tolist()
    responses = [torch.randint(low, vocab, (R - (i % 2),), generator=g).tolist() for i in range(n)]

    def nested(rows, dtype):
        return torch.nested.nested_tensor([torch.tensor(r, dtype=dtype) for r in rows], layout=torch.jagged)

    fields = {
        "prompts": nested([prompt] * n, torch.int64),
        "responses": nested(responses, torch.int64),
        "input_ids": nested([prompt + r for r in responses], torch.int64),
        "response_mask": nested([[1] * len(r) for r in responses], torch.int64),
        "old_log_probs": nested(
            [[-float(torch.log(torch.tensor(float(vocab))))] * len(r) for r in responses], torch.float32
        ),
        "advantages": nested([[1.0 if i % 2 == 0 else -1.0] * len(r) for i, r in enumerate(responses)], torch.float32),
    }
    if cfg.actor_rollout_ref.actor.use_kl_loss:
        fields["ref_log_prob"] = fields["old_log_probs"]
    td = TensorDict(fields, batch_size=[n])
    extra = {"temperature": temperature, "calculate_entropy": not update}
    if update:
        extra.update(mini_batch_size=n, global_batch_size=n, epochs=1, seed=0, dataloader_kwargs={"shuffle": False})
    for k, v in extra.items():
        tu.assign_non_tensor_data(td, k, v)
    return td, prompt


def probe(overrides: list[str], out: Callable[[str], Any] = print) -> int:
    """Run the preflight (module docstring); returns the exit code."""
    for k, v in {"WORLD_SIZE": "1", "RANK": "0", "MASTER_ADDR": "127.0.0.1", "MASTER_PORT": "29611"}.items():
        os.environ.setdefault(k, v)  # verl's Worker reads them (a Ray worker group would set them)
    lines = _Lines(out)
    refusals: list[str] = []
    try:
        _probe(overrides, lines, refusals, out)
    finally:
        failed = lines.failed + len(refusals)
        out(f"probe: {'OK' if not failed else 'FAILED'} ({lines.failed} failed call(s), {len(refusals)} refusal(s))")
    return 0 if not failed else 1


def _probe(overrides: list[str], lines: _Lines, refusals: list[str], out: Callable[[str], Any]) -> None:
    from arctic_platform.client import ArcticRLClient

    from .adapter import build_client_config, settings_notes, settings_refusals, validate_arctic_config
    from .options import compose_config
    from .settings import placement_note

    cfg = lines.call(
        "compose the verl config", lambda: compose_config(_defaults(overrides)), lambda c: c.trainer.v1.trainer_mode
    )
    if cfg is None:
        return
    from verl.trainer.ppo.v1.trainer_remote_backend import RemoteBackendConfigError, check_remote_backend_config

    try:  # main_ppo's pre-Ray check of the trainer; the backend's own check runs below against its live /health
        check_remote_backend_config(cfg, backend_check=lambda c: None)
    except RemoteBackendConfigError as e:
        for line in e.lines:
            refusals.append(line)
            out(f"REFUSED {line}")
    opts = lines.call("arctic options", lambda: validate_arctic_config(cfg), lambda o: f"backend.type={o.backend.type}")
    if opts is None:
        return
    client = ArcticRLClient(build_client_config(cfg, opts))
    try:
        cortex = str(opts.backend.type) == "cortex"
        health = lines.call(
            "connect (Cortex has no /health: its fixed profile)" if cortex else "GET /health",
            lambda: _health(client, cortex),
            lambda h: (
                f"status={h.get('status')!r} capabilities={h.get('capabilities', [])} -> profile: "
                f"{client.backend_profile.name}"
            ),
        )
        if health is None:
            return
        refusals.extend(settings_refusals(cfg, opts, client.backend_profile))
        for r in refusals:
            out(f"REFUSED {r}")
        out(f"capability check: {len(refusals)} refusal(s) by {client.backend_profile.name}")
        for note in settings_notes(cfg, opts, client.backend_profile):
            out(f"NOTE {note}")
        placement = placement_note(cfg)
        if placement:
            out(f"NOTE {placement}")
        bodies = {jt: client.job_body(jt) for jt in ("sampling", "log_prob", "training") if client.config.job_gpus(jt)}
        for jt, body in bodies.items():
            keys = ", ".join(k for k in body if k not in ("model_name", "job_type"))
            out(f"     /initialize {jt} body keys: {keys}")
        if lines.call("POST /initialize x3 (the plugin's bodies)", client.start, lambda c: _jobs(c)) is None:
            return
        _data_plane(cfg, client, lines)
    finally:
        lines.call("POST /destroy (the jobs this probe created)", lambda: _close(client))


def _health(client, cortex: bool) -> dict:
    """``GET /health`` of an Arctic RL server; on Cortex (SnowAPI has no such route) the fixed profile the client
    uses there, in the same shape."""
    client.connect()
    if cortex:
        held = [k for k, v in client.backend_profile.model_dump().items() if v is True]
        return {"status": "no /health on Cortex", "capabilities": held}
    return client.health()


def _close(client) -> None:
    """``client.close()``, failing when a job may still be running (a leaked job makes the next start a 409)."""
    leaked = client.close()
    if leaked:
        raise RuntimeError("; ".join(leaked))


def _jobs(client) -> str:
    parts = []
    for jt in ("sampling", "log_prob", "training"):
        jid = getattr(client, f"{jt}_job_id")
        if jid is not None:
            info = client.job_info(jid)
            parts.append(f"{jt}={jid} {info.get('status')}")
    return ", ".join(parts)


def _data_plane(cfg, client, lines: _Lines) -> None:
    from .v1.worker import ArcticV1ActorRolloutRefWorker

    handle = dict(client.reconnect_handle())
    handle["profile"] = client.backend_profile.model_dump(mode="json")
    worker = lines.call(
        "the plugin's forwarder (re-attached)",
        lambda: _worker(ArcticV1ActorRolloutRefWorker, cfg, handle),
        lambda w: f"pad_token_id={w.pad_token_id}",
    )
    if worker is None:
        return
    from transformers import AutoConfig

    vocab = int(AutoConfig.from_pretrained(str(client.config.model_name)).vocab_size)
    temperature = float(cfg.actor_rollout_ref.rollout.temperature)
    asyncio.run(_forwarder_calls(cfg, client, worker, lines, vocab, temperature))


async def _forwarder_calls(cfg, client, worker, lines: _Lines, vocab: int, temperature: float) -> None:
    """The forwarder's data-plane calls, in one event loop (its async client lives on that loop)."""
    from verl.utils import tensordict_utils as tu

    def metrics(td) -> str:
        m = tu.get(td, "metrics", default={}) or {}
        keep = ("loss", "grad_norm", "lr", "pg_loss")
        return ", ".join(f"{k}={_scalar(v):.6g}" for k, v in m.items() if k in keep)

    def batch(update: bool):
        return _tiny_batch(cfg, vocab, temperature, update)[0]

    try:
        await lines.acall(
            "update_actor: POST /forward-backward + POST /step", worker.update_actor(batch(True)), metrics
        )
        await lines.acall(
            "compute_log_prob: POST /forward (training job)",
            worker.compute_log_prob(batch(False)),
            lambda td: f"log_probs {list(td['log_probs'].values().shape)}, entropy={'entropy' in td.keys()}",
        )
        if client.log_prob_job_id is not None:
            await lines.acall(
                "compute_ref_log_prob: POST /forward (log_prob job)",
                worker.compute_ref_log_prob(batch(False)),
                lambda td: f"log_probs {list(td['log_probs'].values().shape)}",
            )
        _, prompt = _tiny_batch(cfg, vocab, temperature, False)
        backend_client = await worker.backend.client()
        await lines.acall(
            "generate: POST /generate",
            backend_client.generate([prompt], {"max_tokens": 4, "temperature": temperature, "seed": 0}),
            lambda r: f"{len(r[0]['token_ids'])} token(s), finish_reason={r[0].get('finish_reason')}",
        )
        await lines.acall(
            "update_weights: weight sync training -> sampling",
            worker.update_weights(global_steps=1),
            lambda _r: f"policy_version={worker.policy_version}",
        )
    finally:
        await worker.backend.aclose()


def _worker(cls, cfg, handle):
    w = cls(config=cfg.actor_rollout_ref, role="actor_rollout_ref", main_config=cfg, backend_handle=handle)
    w.init_model()
    return w


def _scalar(v) -> float:
    if isinstance(v, (list, tuple)):
        v = v[-1]
    return float(getattr(v, "value", v))


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="arctic-verl probe", description=__doc__.splitlines()[0])
    add_arguments(parser)
    try:
        return run(parser.parse_args(argv))
    except Exception:  # a preflight prints what broke and fails
        traceback.print_exc()
        return 1


if __name__ == "__main__":
    sys.exit(main())
