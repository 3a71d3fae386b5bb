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
"""Compose and validate a full ``verl.trainer.main_ppo`` config for the arctic backend without launching anything.

``python -m arctic_platform.integrations.verl.compose_check [--profile NAME] <hydra overrides...>`` runs exactly
what ``main_ppo`` runs before Ray starts: Hydra composition with the ``remote_backend`` group, the choice hook,
``check_remote_backend_config`` (the trainer mode, the remote-backend trainer's limits and the arctic backend's
start-up check: every refusal at once, against the backend's profile) and verl's ``validate_config``; then the client
config mapping, and prints the resolved config. ``--profile`` checks against a named profile instead of the one the
config's backend gives (``embedded`` or ``arctic-platform-main``: a dry run for a server not started yet). Used by
the H200 launcher's ``--dry-run``.
"""

from __future__ import annotations

import argparse
import sys
from typing import Optional

from omegaconf import OmegaConf

from arctic_platform.backend_profile import BackendProfile

from .options import compose_config, read_options
from .settings import placement_note

__all__ = ["PROFILES", "check", "compose_config", "main"]


def _embedded() -> BackendProfile:
    from arctic_platform.server.capabilities import server_profile

    return server_profile()


def _arctic_platform_main() -> BackendProfile:
    from arctic_platform.backend_profile import ARCTIC_PLATFORM_MAIN

    return ARCTIC_PLATFORM_MAIN


PROFILES = {"embedded": _embedded, "arctic-platform-main": _arctic_platform_main}
"""``--profile`` names: the embedded server of this environment, Arctic-Platform main's measured profile."""


def check(overrides: list[str], *, notes: Optional[list[str]] = None, profile: Optional[BackendProfile] = None):
    """Compose, then run every start-up check ``main_ppo`` runs before Ray starts (the same functions, in its
    order), and the client config mapping. Returns the config; lines worth showing are appended to ``notes``.

    Args:
        overrides: Hydra overrides, as for ``main_ppo``.
        notes: receives the profile line, the settings' notes and the placement line.
        profile: check against this profile instead of the config's backend's (:data:`PROFILES`).

    Raises:
        ValueError: the run is not a remote-backend arctic run, or every refusal of it (one line each).
    """
    from verl.trainer.ppo.utils import need_critic, need_reference_policy
    from verl.trainer.ppo.v1.trainer_remote_backend import check_remote_backend_config
    from verl.utils.config import validate_config

    from .adapter import build_client_config, check_config, settings_notes, static_profile

    cfg = compose_config(overrides)
    if cfg.trainer.get("remote_backend") != "arctic":
        raise ValueError(
            f"trainer.remote_backend={cfg.trainer.get('remote_backend')!r}: compose_check checks remote_backend=arctic "
            "runs; add remote_backend=arctic actor_rollout_ref.rollout.name=arctic"
        )
    # main_ppo's own pre-Ray check (the arctic backend's check_config included), against `profile` when given
    check_remote_backend_config(cfg, None if profile is None else (lambda c: check_config(c, profile)))
    validate_config(config=cfg, use_reference_policy=need_reference_policy(cfg), use_critic=need_critic(cfg))
    opts, _ = read_options(cfg)
    build_client_config(cfg, opts)
    if notes is not None:
        src_profile, source = (profile, "--profile") if profile is not None else static_profile(opts)[:2]
        notes.append(f"backend profile: {src_profile.name} (from {source})")
        notes.extend(settings_notes(cfg, opts, src_profile))
        placement = placement_note(cfg)
        if placement:
            notes.append(placement)
    return cfg


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="compose_check", description=__doc__.splitlines()[0])
    parser.add_argument("--profile", choices=sorted(PROFILES), default=None)
    args, overrides = parser.parse_known_args(sys.argv[1:] if argv is None else argv)
    notes: list[str] = []
    try:
        profile = PROFILES[args.profile]() if args.profile else None
        cfg = check(overrides, notes=notes, profile=profile)
    except Exception as e:  # a dry run reports any failure, each refusal on its own line
        print(f"compose_check: FAILED: {type(e).__name__}: {e}", file=sys.stderr)
        return 1
    print(OmegaConf.to_yaml(cfg, resolve=True))
    for note in notes:
        print(f"compose_check: {note}")
    print("compose_check: OK (config composed and validated; nothing launched)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
