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

``python -m arctic_platform.integrations.verl.compose_check <hydra overrides...>`` runs what ``main_ppo`` runs
before Ray starts (Hydra composition with the ``remote_backend`` group, the choice hook, the remote-backend guard,
``validate_config``), plus the remote-backend trainer's and the arctic adapter's start-up checks and the client
config mapping, then prints the resolved config. Used by the H200 launcher's ``--dry-run``.
"""

from __future__ import annotations

import sys

from omegaconf import OmegaConf

from .adapter import (
    build_client_config,
    refuse,
    settings_notes,
    settings_refusals,
    static_profile,
    validate_arctic_config,
)
from .options import compose_config, verl_defaults
from .settings import placement_note

__all__ = ["check", "compose_config", "main"]


def check(overrides: list[str], *, notes: list[str] | None = None):
    """Compose, then run every start-up check that needs no Ray and no job: verl's config checks, the remote-backend
    trainer's, the arctic options and the backend's capability profile (:mod:`.settings`; an ``onprem`` server is
    asked for its ``/health``). Returns the config; lines worth showing are appended to ``notes``.

    Raises:
        ValueError: the first failing check, or every setting the backend cannot honour (one line each).
    """
    from verl.trainer.ppo.utils import need_critic, need_reference_policy
    from verl.trainer.ppo.v1.trainer_remote_backend import validate_remote_backend_config
    from verl.utils.config import validate_config

    cfg = compose_config(overrides)
    name = cfg.trainer.get("remote_backend")
    if name != "arctic" or cfg.trainer.v1.trainer_mode != "remote_backend":
        raise ValueError(f"not an arctic remote-backend run: trainer.remote_backend={name!r}")
    validate_config(config=cfg, use_reference_policy=need_reference_policy(cfg), use_critic=need_critic(cfg))
    validate_remote_backend_config(cfg)
    opts = validate_arctic_config(cfg)
    build_client_config(cfg, opts)
    profile, source = static_profile(opts)
    refuse(settings_refusals(cfg, opts, profile), profile)
    if notes is not None:
        notes.append(f"backend profile: {profile.name} (from {source})")
        notes.extend(settings_notes(cfg, opts, profile))
        placement = placement_note(cfg, verl_defaults())
        if placement:
            notes.append(placement)
    return cfg


def main(argv: list[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    notes: list[str] = []
    try:
        cfg = check(argv, notes=notes)
    except Exception as e:  # a dry run reports any failure as one line
        print(f"compose_check: FAILED: {type(e).__name__}: {e}", file=sys.stderr)
        return 1
    print(OmegaConf.to_yaml(cfg, resolve=True))
    for note in notes:
        print(f"compose_check: {note}")
    print("compose_check: OK (config composed and validated; nothing launched)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
