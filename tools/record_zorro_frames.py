# Copyright 2026 The arctic-verl Authors
# SPDX-License-Identifier: Apache-2.0
"""Record what the REFERENCE verl adapter sends with ZoRRo training on (test data for our plugin; not a test).

Arctic-Platform's own adapter (``arctic_platform/integrations/verl/adapter.py``) and client are RUN here, never copied:
the reference-engine harness (``../shared/tools/reference-engine``: ``ref_adapter.py``, ``grpo_case.py``,
``cpu_shims.py``, imported from there) builds the adapter with its real ``__init__`` from a verl-shaped config and
captures, at the client boundary, the payloads ``update_actor`` / ``compute_log_prob(ref=False/True)`` hand to the
client for ``grpo_case``'s GRPO mini-batch (2 prompts x rollout_n 2, P=8, R=6). This script changes only the
remote_backend yaml knobs (wrapping the harness's ``verl_config``) and turns each payload into the request the
reference's on-prem HTTP client would post: the reference ``_fwd_bwd_request`` / ``_fwd_no_grad_request`` build the
body and the reference ``HttpTransport._http_args`` encodes it (``wire.dumps``, DSSST1), the same path that wrote
``shared/fixtures/arctic-platform/engine/*.dssst1``.

Knobs on top of the harness's ``verl_config`` (arctic.yaml as shipped, ``comms.protocol=http``, eager attention):
ZeRO stage 3 (as the engine fixtures), ``train.zorro_train.enable=True`` (``max_rollouts`` stays
``${actor_rollout_ref.rollout.n}`` = 2) and ``actor_rollout_ref.rollout.temperature`` = the batch temperature; the
``_memory`` variant adds ``train.logits.optimization=memory`` and ``train.logits.compute_from_fp32_inputs=True``.
``--zorro-off`` records the same with ZoRRo off instead (a self-check: those frames and bodies must equal
``engine/``'s byte for byte).

Writes into OUT (default ``tests/arctic_platform/conformance/zorro_frames``), per variant V in ("", "_memory"):
``initialize_bodies{V}.json`` (the three ``/initialize`` bodies ``cfg.to_onprem(job_type)`` the client posts,
validated with the reference ``JobConfig``, paths replaced by ``<model_path>`` / ``<checkpoint_path>``),
``update_T1{V}``, ``update_T0.7{V}``, ``forward_T1{V}``, ``forward_ref_T1{V}`` as ``.dssst1`` (frame bytes) and
``.json`` (the tree the reference ``wire.loads`` returns, in the notation of ``fixtures/arctic-platform/dssst1/``).

Recorded from Arctic-Platform ``main`` at 586438082833d9f599bf8567cd1c1405b144dc6e (2026-08-22). Run with a
reference venv (python3.11: ``pip install torch==2.13.0`` first, then, constrained to that torch,
``DS_BUILD_OPS=0 pip install deepspeed==0.19.8 pydantic safetensors psutil numpy omegaconf "transformers>=4.57,<5"
ray==2.60.0 requests aiohttp``; the adapter's import pulls in deepspeed and ray) and the transformers-4 tiny model
(``arctic-verl tiny-model T && python ../shared/tools/reference-engine/tiny4.py make T T4``)::

    git --git-dir=<Arctic-Platform.git> archive main | tar -x -C AP
    <ref venv>/bin/python tools/record_zorro_frames.py --ap-dir AP --ap-commit <sha of main> --model T4
"""

from __future__ import annotations

import argparse
import json
import math
import os
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
HARNESS = ROOT.parent / "shared" / "tools" / "reference-engine"
DEFAULT_OUT = ROOT / "tests" / "arctic_platform" / "conformance" / "zorro_frames"
CKPT = "/nonexistent/arctic-zorro-record/ckpt"  # only its text reaches the body (then replaced by a placeholder)
ZERO_STAGE = 3
VARIANTS = {"": {}, "_memory": {"optimization": "memory", "compute_from_fp32_inputs": True}}
# frame name -> (the harness's capture key, the reference client's op)
FRAMES = {
    "update": ("fwd_bwd", "forward-backward"),
    "forward": ("fwd_no_grad", "forward"),
    "forward_ref": ("fwd_no_grad_ref", "forward"),
}
JOB_IDS = {"training": "<training_job_id>", "sampling": "<sampling_job_id>", "log_prob": "<log_prob_job_id>"}


def load_harness(ap_dir: str, model: str):
    """Import the harness (and through it the reference adapter) from the reference tree `ap_dir`."""
    os.environ["REF_AP_DIR"] = ap_dir
    os.environ["REF_MODEL"] = model
    sys.path[:0] = [ap_dir, str(HARNESS)]
    import ref_adapter as RA

    RA.ZERO_STAGE = ZERO_STAGE
    return RA


def set_knobs(RA, zorro: bool, logits: dict, temperature: float) -> None:
    """Wrap the harness's verl_config (make_wrapper looks it up by name at call time) with the knobs above."""
    base = getattr(RA, "_verl_config_unwrapped", RA.verl_config)
    RA._verl_config_unwrapped = base

    def verl_config(ckpt_dir, attn="eager"):
        cfg = base(ckpt_dir, attn)
        cfg.remote_backend.train.zorro_train.enable = zorro
        for k, v in logits.items():
            cfg.remote_backend.train.logits[k] = v
        cfg.actor_rollout_ref.rollout.temperature = temperature
        return cfg

    RA.verl_config = verl_config


def initialize_bodies(RA, model: str) -> dict:
    from arctic_platform.common.utils.server_models import JobConfig

    RA.make_wrapper(None, CKPT)
    cfg = RA.BUILT[-1]
    bodies = {}
    for jt in ("training", "sampling", "log_prob"):
        body = cfg.to_onprem(jt)  # what HttpTransport._start posts to /initialize
        assert JobConfig(**body).model_dump(exclude_unset=True) == body, jt  # what http_server accepts from it
        bodies[jt] = body
    text = json.dumps(bodies).replace(model, "<model_path>").replace(CKPT, "<checkpoint_path>")
    return json.loads(text)


def frames(RA, temperature: float) -> dict:
    """name -> (frame bytes, op, query params) for the three calls the adapter makes for the mini-batch."""
    from arctic_platform.client import client as C
    from arctic_platform.client.transport import JobHandles
    from arctic_platform.client.transports.onprem_http import HttpTransport

    payloads = RA.adapter_payloads(CKPT, temperature)
    cfg = RA.BUILT[-1]
    cfg = cfg.model_copy(update={"backend": cfg.backend.model_copy(update={"launch_local_server": False})})
    transport = HttpTransport(cfg)
    jobs = JobHandles(**JOB_IDS)
    out = {}
    for name, (key, op) in FRAMES.items():
        if key == "fwd_bwd":  # ArcticRLClient.fwd_bwd(payload): processing/router_replay left None
            req = C._fwd_bwd_request(jobs, payloads[key])
        else:  # ArcticRLClient.fwd_no_grad(payload, reference_model=...)
            req = C._fwd_no_grad_request(jobs, payloads[key], reference_model=key.endswith("_ref"))
        url, kw = transport._http_args(req)
        assert req.op == op and url.endswith("/" + op) and kw["headers"]["Content-Type"] == "application/octet-stream"
        out[name] = (kw["data"], op, kw["params"])
    return out


def tree(x):
    """A decoded DSSST1 tree as JSON (the notation of fixtures/arctic-platform/dssst1/)."""
    import torch

    if torch.is_tensor(x):
        t = x.detach().cpu()
        vals = t.reshape(-1).to(torch.float64 if t.is_floating_point() else t.dtype).tolist()
        return {
            "__tensor__": {
                "dtype": str(t.dtype).removeprefix("torch."),
                "shape": list(t.shape),
                "values": [_num(v) for v in vals],
            }
        }
    if isinstance(x, dict):
        return {k: tree(v) for k, v in x.items()}
    if isinstance(x, tuple):
        return {"__tuple__": [tree(v) for v in x]}
    if isinstance(x, list):
        return [tree(v) for v in x]
    return _num(x)


def _num(v):
    if isinstance(v, float) and not math.isfinite(v):
        return {"__float__": "nan" if math.isnan(v) else ("inf" if v > 0 else "-inf")}
    return v


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    ap.add_argument("--ap-dir", required=True, help="Arctic-Platform source tree (git archive of main)")
    ap.add_argument("--ap-commit", help="its commit (default: AP_DIR/.extracted, as the harness's setup.sh writes)")
    ap.add_argument("--model", required=True, help="the transformers-4 tiny model (tiny4.py make)")
    ap.add_argument("--out", default=str(DEFAULT_OUT))
    ap.add_argument("--zorro-off", action="store_true", help="record with ZoRRo off (check against engine/)")
    a = ap.parse_args()
    ap_dir, model = os.path.abspath(a.ap_dir), os.path.abspath(a.model)
    commit = a.ap_commit or (Path(ap_dir) / ".extracted").read_text().strip()
    RA = load_harness(ap_dir, model)
    from arctic_platform import wire

    os.makedirs(a.out, exist_ok=True)
    for suffix, logits in VARIANTS.items():
        for temperature, names in ((1.0, ("update", "forward", "forward_ref")), (0.7, ("update",))):
            set_knobs(RA, not a.zorro_off, logits, temperature)
            if temperature == 1.0:
                body_file = os.path.join(a.out, f"initialize_bodies{suffix}.json")
                with open(body_file, "w") as f:
                    json.dump(initialize_bodies(RA, model), f, indent=1)
                    f.write("\n")
            tag = "T1" if temperature == 1.0 else f"T{temperature:g}"
            for name, (frame, op, params) in frames(RA, temperature).items():
                if name not in names:
                    continue
                stem = os.path.join(a.out, f"{name}_{tag}{suffix}")
                with open(stem + ".dssst1", "wb") as f:
                    f.write(frame)
                with open(stem + ".json", "w") as f:
                    json.dump(tree(wire.loads(frame)), f, indent=1)
                    f.write("\n")
                print(f"{stem}.dssst1: POST /{op} {params} {len(frame)} bytes", file=sys.stderr)
    print(f"recorded from Arctic-Platform {commit} into {a.out}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
