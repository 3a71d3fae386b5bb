# Copyright 2026 The arctic-verl Authors
# SPDX-License-Identifier: Apache-2.0
"""Drives Arctic-Platform's own Cortex transport, unmodified, against fake SnowAPIs (test helper, its own process).

Run with ``PYTHONPATH=<an Arctic-Platform checkout>``: the ``arctic_platform`` package imported here is the
reference's (this project's package has the same name, so the two never share a process). Only the reference's
public client API is used (``SyncArcticRLClient`` on the requests path, ``ArcticRLClient`` on the aiohttp path); the
one setting made from outside is the module constant ``_MAX_OCTET_BYTES`` (to get several chunks without 60 MiB
frames). ``argv[1]`` is a JSON object ``{scenario: fake URL}``; one JSON object of outcomes is printed.
"""

from __future__ import annotations

import asyncio
import json
import sys
import time
import traceback

import torch

import arctic_platform
import arctic_platform.client.transports.cortex as cx
from arctic_platform.client import (
    ArcticRLClient,
    ArcticRLClientConfig,
    CortexConfig,
    SyncArcticRLClient,
    TrainingConfig,
)


def _config(url: str, **kw) -> ArcticRLClientConfig:
    base = dict(
        model_name="Qwen/Qwen3-0.6B",
        max_seq_len=64,
        training_gpus=1,
        sampling_gpus=1,
        job_ready_timeout=60.0,
        request_timeout=60.0,
        training=TrainingConfig(
            ds_config={"train_batch_size": 4, "optimizer": {"type": "AdamW", "params": {"lr": 1e-3}}}
        ),
        backend=CortexConfig(base_url=url, database="DB", schema="SCH", max_retries=3),
    )
    base.update(kw)
    return ArcticRLClientConfig(**base)


def _fwd_bwd_batch(n: int) -> dict:
    g = torch.Generator().manual_seed(0)
    ids = torch.randint(1, 300, (2, n), generator=g)
    return {
        "args": [ids],
        "kwargs": {"attention_mask": torch.ones_like(ids)},
        "context": {"advantages": torch.ones(2, n)},
    }


def _error(e: BaseException) -> dict:
    return {"type": type(e).__name__, "message": str(e)[:400], "where": traceback.format_exc().splitlines()[-3:]}


def agree(url: str) -> dict:
    """The calls the reference makes on a healthy service: lifecycle, generate, step, save, a chunked fwd-bwd."""
    out: dict = {}
    cx._MAX_OCTET_BYTES = 20_000
    c = SyncArcticRLClient(_config(url))
    out["jobs"] = [c.jobs.training, c.jobs.sampling]
    out["generate"] = c.generate([[1, 2, 3], [4]], {"max_tokens": 2000})  # several result chunks
    out["step"] = c.step(learning_rate=1e-4)
    out["fwd_bwd"] = c.fwd_bwd(_fwd_bwd_batch(1000))
    c.shutdown()
    return out


def save(url: str) -> dict:
    """``save_checkpoint()`` with its defaults."""
    c = SyncArcticRLClient(_config(url))
    try:
        return {"result": c.save_checkpoint()}
    except Exception as e:
        return {"raised": _error(e)}
    finally:
        c.shutdown()


def lost_reply(url: str) -> dict:
    """A forward-backward under the chunk cap whose reply is lost once (the fake drops it after running it)."""
    c = SyncArcticRLClient(_config(url))
    out = {"fwd_bwd": c.fwd_bwd(_fwd_bwd_batch(8))}
    c.shutdown()
    return out


def lost_reply_async(url: str) -> dict:
    """The same on the aiohttp path (the verl adapter's)."""

    async def run():
        c = ArcticRLClient(_config(url))
        try:
            return {
                "fwd_bwd": await c.fwd_bwd(_fwd_bwd_batch(8)),
                "generate": await c.generate([[5, 6]], {"max_tokens": 3}),
            }
        finally:
            await c.shutdown()

    return asyncio.run(run())


def terminated(url: str) -> dict:
    """A job that ends ``terminated``: how long until the reference gives up."""
    t0 = time.monotonic()
    try:
        SyncArcticRLClient(_config(url, job_ready_timeout=4.0))
        return {"raised": None}
    except Exception as e:
        return {"raised": _error(e), "elapsed_s": round(time.monotonic() - t0, 2)}


def sync_weights(url: str) -> dict:
    """``sync_weights()`` (wake, weight-sync, wake, reset-prefix-cache, which the service answers inline)."""
    c = SyncArcticRLClient(_config(url))
    try:
        return {"result": c.sync_weights()}
    except Exception as e:
        return {"raised": _error(e)}
    finally:
        c.shutdown()


def sync_weights_async(url: str) -> dict:
    async def run():
        c = ArcticRLClient(_config(url))
        try:
            return {"result": await c.sync_weights()}
        except Exception as e:
            return {"raised": _error(e)}
        finally:
            await c.shutdown()

    return asyncio.run(run())


SCENARIOS = {
    f.__name__: f for f in (agree, save, lost_reply, lost_reply_async, terminated, sync_weights, sync_weights_async)
}


def main() -> int:
    urls = json.loads(sys.argv[1])
    report = {"reference": arctic_platform.__file__, "noop_ops": sorted(getattr(cx, "_NOOP_OPS", ()))}
    for name, url in urls.items():
        try:
            report[name] = SCENARIOS[name](url)
        except Exception as e:
            report[name] = {"raised": _error(e)}
    print(json.dumps(report, default=lambda o: o.tolist() if isinstance(o, torch.Tensor) else repr(o)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
