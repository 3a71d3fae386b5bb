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
"""Sampling routes: /generate (through the per-job :class:`..batcher.GenerateBatcher`), /sleep-inference,
/wake-inference, /reset-prefix-cache, and /log-probs (job ``log_prob``).
"""

from __future__ import annotations

import asyncio

import torch
from fastapi import APIRouter, Request

from ...endpoints import endpoint
from ...protocol import GenerateRequest, LogProbsRequest, ResetPrefixCacheRequest, SleepRequest
from ..batcher import GenerateBatcher
from ..engine_calls import call_locked, in_thread
from ..engines.base import SamplingInterface
from ..engines.sampling_engine import GenerateItem
from ..errors import RequestError
from ..logs import logger
from . import inference_ops
from .bodies import content_type, frame_reply, parse_model, read_frame, read_json
from .context import Ctx, LogProbJob, SamplingJob

router = APIRouter()


@router.post(endpoint("generate").path)
async def generate(request: Request, ctx: Ctx, job: SamplingJob):
    ct = content_type(request)
    if ct == "application/json":
        tree = await read_json(request, required=True)
    else:
        tree = await read_frame(request, ctx.settings)
    if not isinstance(tree, dict):
        raise RequestError("the generate body must be an object {prompts, sampling_params}", 422)
    engine: SamplingInterface = job.engine
    engine.require_ready()
    items = _generate_items(GenerateRequest.model_validate(tree), engine)
    if job.batcher is None:
        job.batcher = GenerateBatcher(job, ctx.registry, ctx.settings.batch_wait_ms / 1000.0)
    try:
        results, version = await job.batcher.submit(items)
    except (asyncio.TimeoutError, TimeoutError):
        raise RequestError(f"generation did not finish within {ctx.timeout:.0f}s (engine_timeout_s)", 504) from None
    out = {"job_id": job.job_id, "results": results, "policy_version": version}
    return out if ct == "application/json" else frame_reply(out)


@router.post(endpoint("sleep_inference").path)
async def sleep_inference(request: Request, ctx: Ctx, job_id: int | None = None, level: int = 1):
    body = await read_json(request)
    if body is not None:
        level = parse_model(SleepRequest, body).level
    return await inference_ops.sleep_inference(ctx, job_id, level)


@router.post(endpoint("wake_inference").path)
async def wake_inference(request: Request, ctx: Ctx, job_id: int | None = None):
    return await inference_ops.wake_inference(ctx, job_id, await read_json(request))


@router.post(endpoint("reset_prefix_cache_route").path)
async def reset_prefix_cache(request: Request, ctx: Ctx, job_id: int | None = None):
    parse_model(ResetPrefixCacheRequest, await read_json(request))
    return await inference_ops.reset_prefix_cache(ctx, job_id)


@router.post(endpoint("log_probs").path)
async def log_probs(request: Request, ctx: Ctx, job: LogProbJob):
    req = parse_model(LogProbsRequest, await read_json(request, required=True))
    if req.completions is not None and len(req.completions) != len(req.prompts):
        raise RequestError(f"completions has {len(req.completions)} items, prompts {len(req.prompts)}", 422)
    if not req.prompts:
        raise RequestError("prompts is empty", 422)

    def do():
        job.engine.require_awake()
        return job.engine.log_probs_text(job.engine.tokenizer(), req.prompts, req.completions, req.top_k)

    results = await in_thread(call_locked, job, do, ctx.timeout)
    return frame_reply({"job_id": job.job_id, "results": results})


def _generate_items(req: GenerateRequest, engine: SamplingInterface) -> list[GenerateItem]:
    """A validated :class:`GenerateRequest` as per-prompt engine items (422 naming the prompt, 400 over
    max_seq_len: never truncated)."""
    sp = req.sampling_params
    unsupported = sp.unsupported()
    if unsupported:  # with strict=true the request model refused them
        logger.info("generate: ignoring unsupported sampling_params %s (send strict=true to refuse)", unsupported)
    prompts: list[list[int]] = []
    texts: list[str | None] = []
    for i, p in enumerate(req.prompts):
        if isinstance(p, str):
            prompts.append(list(engine.tokenizer().encode(p, add_special_tokens=False)))
            texts.append(p)
        elif isinstance(p, torch.Tensor) and p.dim() == 1 and not p.dtype.is_floating_point:
            prompts.append(p.long().tolist())
            texts.append(None)
        elif isinstance(p, (list, tuple)) and all(isinstance(t, int) and not isinstance(t, bool) for t in p):
            prompts.append(list(p))
            texts.append(None)
        else:
            raise RequestError(f"prompts[{i}] must be a list of token ids or a string", 422)
    max_seq = engine.settings.max_seq_len
    stop = tuple(sp.stop_token_ids or ())
    items = []
    for i, p in enumerate(prompts):
        if not p:
            raise RequestError(f"prompts[{i}] is empty", 422)
        if len(p) > max_seq:
            raise RequestError(
                f"prompts[{i}] has {len(p)} tokens, more than max_seq_len {max_seq} (never truncated)", 400
            )
        if min(p) < 0 or max(p) >= engine.vocab_size:
            raise RequestError(f"prompts[{i}] holds token ids outside [0, {engine.vocab_size})", 422)
        room = max_seq - len(p)
        max_tokens = room if sp.max_tokens is None else min(sp.max_tokens, room)
        if sp.min_tokens > max_tokens:
            raise RequestError(
                f"sampling_params.min_tokens={sp.min_tokens} is more than the {max_tokens} tokens prompts[{i}] may "
                "generate (max_tokens, and max_seq_len minus the prompt)",
                422,
            )
        items.append(
            GenerateItem(
                prompt=p,
                temperature=sp.temperature,
                top_p=sp.top_p,
                top_k=sp.top_k if sp.top_k > 0 else 0,
                max_tokens=max_tokens,
                stop_token_ids=stop,
                ignore_eos=sp.ignore_eos,
                logprobs=sp.logprobs,
                seed=sp.seed,
                text=texts[i],
                repetition_penalty=sp.repetition_penalty,
                presence_penalty=sp.presence_penalty,
                frequency_penalty=sp.frequency_penalty,
                min_p=sp.min_p,
                min_tokens=sp.min_tokens,
            )
        )
    return items
