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
"""Arctic-Platform's own verl plugin's settings, understood: its ``remote_backend.*`` keys translated to this
plugin's, or refused with a way out (docs/arctic-platform-scripts.md).

Arctic-Platform's plugin reads its settings one level up (``remote_backend.colocate``, ``.training_gpus``,
``.train.zorro_train.enable``, ``.comms.protocol``, ...), where this plugin has ``remote_backend.arctic.*``. The
packaged ``arctic.yaml`` declares every key of theirs (null = not set), so a script written for their plugin composes
as it is; :func:`translate` then runs first in the start-up check (before the options are read) and

* writes each key the script set into the setting of ours that means the same (:data:`KEYS`), one line each
  ``their key -> our key``; two spellings of one setting that disagree are refused;
* for a script that sets any of them (a script written for their plugin), applies their default where the script
  leaves a key unset and their default differs from ours (colocate on, ZeRO 0, seed 42, sampling TP 1), stated in the
  same lines;
* ``sampling_tp_size`` is verl's rollout TP here (a rollout TP of 1 beside it is what their plugin needed on verl's
  side, so ``sampling_tp_size`` wins over it); ``comms.protocol=ray`` (their plugin starts their server in the
  job's cluster) is the embedded server this plugin starts (``backend.type=local``); ``http`` (their plugin spawns
  their HTTP server) is refused with the way out;
* ``trainer.use_legacy_worker_impl`` (Snowflake's verl fork): ``disable`` is what verl 0.9.1 does anyway, anything
  else is refused;
* a key under ``remote_backend`` that neither plugin has (a typo, added with ``+``) is refused by name, with the
  closest known key.

The translation happens in place (the config ``main_ppo`` hands to Ray is the translated one) and is idempotent: the
driver's backend runs it again and finds nothing to change. :meth:`Translation.retarget` rewrites a later refusal of
a translated setting to name the key the script wrote, so its fix applies to that key.
"""

from __future__ import annotations

import difflib
import functools
import re
from dataclasses import dataclass, field
from typing import Any

from omegaconf import DictConfig, OmegaConf, open_dict
from pydantic import ValidationError

from .refusal import Refusal, shown

__all__ = ["KEYS", "THEIRS", "Key", "Translation", "platform_keys_set", "translate"]

RB = "remote_backend"
OURS = f"{RB}.arctic"
TP = "actor_rollout_ref.rollout.tensor_model_parallel_size"
LEGACY = "trainer.use_legacy_worker_impl"
THEIRS = "Arctic-Platform's verl plugin"
"""Who a translation line names as the other side."""


@dataclass(frozen=True)
class Key:
    """One key of Arctic-Platform's ``arctic.yaml`` and the setting of ours that means the same."""

    theirs: str
    """Its path under ``remote_backend``."""
    ours: str
    """Our setting's full path."""
    default: Any = None
    """Their default (their ``arctic.yaml``, main and the V1 branch alike); None: the same as ours."""


KEYS: tuple[Key, ...] = (
    Key("colocate", f"{OURS}.colocate", True),
    Key("training_gpus", f"{OURS}.training_gpus", 1),
    Key("sampling_gpus", f"{OURS}.sampling_gpus", 1),
    Key("log_prob_gpus", f"{OURS}.log_prob_gpus", 1),
    Key("weight_sync.cuda_ipc", f"{OURS}.weight_sync.cuda_ipc", False),
    Key("weight_sync.low_memory", f"{OURS}.weight_sync.low_memory", False),
    Key("train.load_balancer", f"{OURS}.train.load_balancer", True),
    Key("train.zorro_train.enable", f"{OURS}.train.zorro_train.enable", False),
    Key("train.zorro_train.max_rollouts", f"{OURS}.train.zorro_train.max_rollouts"),  # both: rollout.n
    Key("train.logits.optimization", f"{OURS}.train.logits.optimization", "none"),
    Key("train.logits.optimization_peak_mem_size_in_gib", f"{OURS}.train.logits.optimization_peak_mem_size_in_gib", 4),
    Key("train.logits.compute_in_fp32", f"{OURS}.train.logits.compute_in_fp32", False),
    Key("train.logits.compute_from_fp32_inputs", f"{OURS}.train.logits.compute_from_fp32_inputs", False),
    Key("train.determinism.full", f"{OURS}.train.determinism.full", False),
    Key("train.determinism.seed", f"{OURS}.seed", 42),
    Key("train.deepspeed.zero_optimization.stage", f"{OURS}.train.deepspeed.zero_optimization.stage", 0),
    Key(
        "train.deepspeed.zero_optimization.offload_optimizer.device",
        f"{OURS}.train.deepspeed.zero_optimization.offload_optimizer.device",
        "none",
    ),
    Key(
        "train.deepspeed.zero_optimization.offload_param.device",
        f"{OURS}.train.deepspeed.zero_optimization.offload_param.device",
        "none",
    ),
    Key("train.deepspeed.log_level", f"{OURS}.train.deepspeed.log_level", "INFO"),
    Key("rollout.zorro_inference.enable", f"{OURS}.rollout.zorro_inference.enable", False),
    Key("rollout.speculative_decoding.model", f"{OURS}.rollout.speculative_decoding.model", ""),
    Key("comms.drop_position_ids", f"{OURS}.log_prob.drop_position_ids", True),
)
"""Their keys that mean the same as one of ours (``sampling_tp_size`` and ``comms.protocol`` are handled on their
own; other keys a script adds under ``train.deepspeed`` pass into ``ds_config`` in both plugins)."""

SPECIAL = ("sampling_tp_size", "comms.protocol")
HTTP_SERVER = "python -m arctic_platform.common.http_server --port 7000"
"""How Arctic-Platform's own HTTP server starts (what its plugin spawns for ``comms.protocol=http``)."""


def _plain(v: Any) -> Any:
    return OmegaConf.to_container(v, resolve=True) if OmegaConf.is_config(v) else v


def _get(cfg: DictConfig, path: str) -> Any:
    return _plain(OmegaConf.select(cfg, path, default=None))


def _value(v: Any) -> str:
    """``v`` as the right-hand side of an override."""
    if v is None:
        return "null"
    return str(v).lower() if isinstance(v, bool) else str(v)


def _leaves(d: Any, prefix: str = ""):
    if isinstance(d, dict) and d:
        for k, v in d.items():
            yield from _leaves(v, f"{prefix}.{k}" if prefix else str(k))
    elif prefix:
        yield prefix, d


@functools.lru_cache(maxsize=1)
def _our_defaults() -> dict:
    """Our packaged defaults, by full path (``remote_backend.arctic.*``)."""
    from .options import ArcticOptions

    return {f"{OURS}.{k}": v for k, v in _leaves(ArcticOptions().model_dump())}


def _group(cfg: DictConfig) -> dict:
    group = cfg.get(RB, None)
    return _plain(group) if group is not None else {}


def platform_keys_set(cfg: DictConfig) -> dict[str, Any]:
    """Their keys the config sets (not null), by path under ``remote_backend``."""
    own = ("name", "custom_backend_module", "async_rollout", "arctic")
    group = {k: v for k, v in _group(cfg).items() if k not in own}
    return {k: v for k, v in _leaves(group) if v is not None}


@dataclass
class Translation:
    """What :func:`translate` did: the lines to log, the refusals, and which of our settings came from which of their
    keys."""

    lines: list[str] = field(default_factory=list)
    refusals: list[Refusal] = field(default_factory=list)
    origin: dict[str, str] = field(default_factory=dict)
    """Our setting -> the key the script wrote (or left to their default)."""

    def retarget(self, refusal: Refusal) -> Refusal:
        """``refusal`` naming the script's key where it names a setting translated from one (its fix too)."""
        if not self.origin:
            return refusal

        def sub(text: str) -> str:
            for ours, theirs in self.origin.items():
                if theirs not in refusal.setting:  # a line naming both spellings already says which is which
                    text = re.sub(rf"(?<![\w.]){re.escape(ours)}(?![\w])", theirs, text)
            return text

        parts = (refusal.setting, refusal.backend, refusal.why, refusal.way_out, [sub(f) for f in refusal.fix])
        new = Refusal(sub(parts[0]), parts[1], parts[2], sub(parts[3]), parts[4])
        return refusal if new == refusal and new.fix == refusal.fix else new


def _set(cfg: DictConfig, path: str, value: Any) -> None:
    with open_dict(cfg):
        OmegaConf.update(cfg, path, value, merge=False, force_add=True)


def _unknown_keys(cfg: DictConfig) -> tuple[list[Refusal], list[str]]:
    """Keys under ``remote_backend`` (outside ``arctic``, which :func:`.options.read_options` validates) that neither
    plugin has, or values of the wrong type, one refusal each naming the closest known key; and their paths under
    ``remote_backend``."""
    from .options import GroupKeys

    data = {k: v for k, v in _group(cfg).items() if k != "arctic"}
    try:
        GroupKeys.model_validate(data)
        return [], []
    except ValidationError as e:
        errors = e.errors()
    known = [f"{RB}.{k}" for k, _ in _leaves(GroupKeys().model_dump())] + [f"{RB}.arctic"]
    out, bad = [], []
    for err in errors:
        path = ".".join([RB, *(str(x) for x in err["loc"])])
        bad.append(".".join(str(x) for x in err["loc"]))
        if err["type"] == "extra_forbidden":
            close = difflib.get_close_matches(path, known, n=1, cutoff=0.6)
            hint = f" (did you mean {close[0]}?)" if close else ""
            out.append(
                Refusal(
                    shown(path, err["input"]),
                    "the arctic backend",
                    f"has no such option, and neither has {THEIRS}{hint}",
                    "remove it, or spell the key as arctic.yaml does",
                    [f"~{path}"],
                )
            )
        else:
            out.append(
                Refusal(
                    shown(path, err["input"]),
                    "the arctic backend",
                    f"refuses it: {err['msg']}",
                    "unset it (null) or give a valid value",
                    [f"{path}=null"],
                )
            )
    return out, bad


def _verl_tp_default(cfg: DictConfig) -> Any:
    from .options import verl_defaults

    return _get(verl_defaults(str(cfg.model_engine)), TP)


def translate(cfg: DictConfig) -> Translation:
    """Translate Arctic-Platform's plugin keys and the verl fork's keys of ``cfg`` in place (module docstring)."""
    t = Translation()
    _legacy_worker_impl(cfg, t)
    unknown, bad = _unknown_keys(cfg)
    t.refusals += unknown
    # a key of a wrong name or value is refused, the others are translated (every refusal at once)
    given = {k: v for k, v in platform_keys_set(cfg).items() if not any(k == b or k.startswith(f"{b}.") for b in bad)}
    if not given:
        return t
    ours_default = _our_defaults()
    for key in KEYS:
        theirs = f"{RB}.{key.theirs}"
        v, cur = given.get(key.theirs), _get(cfg, key.ours)
        pkg = ours_default.get(key.ours)
        if v is not None:
            t.origin[key.ours] = theirs
            if cur != v and cur != pkg:
                t.refusals.append(
                    Refusal(
                        f"{shown(theirs, v)}, {shown(key.ours, cur)}",
                        "the arctic backend",
                        f"reads both as one setting ({theirs} is {THEIRS}'s spelling of {key.ours}), and they disagree",
                        f"keep one of the two (or set both to {_value(v)})",
                        [f"{key.ours}={_value(v)}"],
                    )
                )
                continue
            if cur != v:
                _set(cfg, key.ours, v)
            t.lines.append(f"{theirs}={_value(v)} -> {key.ours}={_value(v)}")
        elif key.default is not None and cur == pkg and pkg != key.default:
            t.origin[key.ours] = theirs
            _set(cfg, key.ours, key.default)
            t.lines.append(
                f"{theirs} not set: {THEIRS}'s default {_value(key.default)} -> {key.ours}={_value(key.default)}"
            )
        elif key.default is not None and cur == key.default and pkg != key.default:
            t.origin[key.ours] = theirs  # translated before (main_ppo's check): a refusal still names their key
    _deepspeed_extras(cfg, given, t)
    _sampling_tp(cfg, given, t)
    _protocol(cfg, given, t)
    return t


def _deepspeed_extras(cfg: DictConfig, given: dict, t: Translation) -> None:
    """Keys a script added under their ``train.deepspeed`` (both plugins pass the block into ``ds_config``)."""
    named = {k.theirs for k in KEYS}
    for path, v in given.items():
        if not path.startswith("train.deepspeed.") or path in named:
            continue
        ours = f"{OURS}.{path}"
        t.origin[ours] = f"{RB}.{path}"
        _set(cfg, ours, v)
        t.lines.append(f"{RB}.{path}={_value(v)} -> {ours}={_value(v)}")


def _sampling_tp(cfg: DictConfig, given: dict, t: Translation) -> None:
    theirs = f"{RB}.sampling_tp_size"
    v, tp, verl_default = given.get("sampling_tp_size"), _get(cfg, TP), _verl_tp_default(cfg)
    if v is not None:
        t.origin[TP] = theirs
        # verl's rollout TP 1 is what that plugin needed on verl's side (one forwarder), so it means "not set" there
        if tp != v and tp not in (verl_default, 1):
            t.refusals.append(
                Refusal(
                    f"{shown(theirs, v)}, {shown(TP, tp)}",
                    "the arctic backend",
                    f"samples at verl's rollout TP ({theirs} is {THEIRS}'s spelling of it), and the two disagree",
                    f"keep one of the two (or set both to {v})",
                    [f"{TP}={v}"],
                )
            )
            return
        if tp != v:
            _set(cfg, TP, v)
        t.lines.append(f"{theirs}={v} -> {TP}={v}")
    elif tp == 1:
        t.origin[TP] = theirs  # their default (or translated before)
    elif tp == verl_default:
        t.origin[TP] = theirs
        _set(cfg, TP, 1)
        t.lines.append(f"{theirs} not set: {THEIRS}'s default 1 -> {TP}=1 (verl's default {verl_default} unused there)")
    elif tp != 1:
        t.refusals.append(
            Refusal(
                f"{shown(TP, tp)} with {theirs} unset",
                THEIRS,
                f"samples at {theirs} (default 1) and never reads verl's rollout TP, so this script sampled at TP 1 "
                "there",
                f"set {theirs}={tp} to sample at TP {tp}, or the rollout TP to 1 as that plugin ran it",
                [f"{theirs}={tp}"],
            )
        )


def _protocol(cfg: DictConfig, given: dict, t: Translation) -> None:
    """``comms.protocol``: ray = the plugin starts the backend for the run (ours: the embedded server), http = their
    plugin spawns their HTTP server on localhost:7000 (ours cannot: refused, unless a server URL is given)."""
    theirs = f"{RB}.comms.protocol"
    v = given.get("comms.protocol")
    kind, url = _get(cfg, f"{OURS}.backend.type"), _get(cfg, f"{OURS}.backend.url")
    said = f"{theirs}={v}" if v is not None else f"{theirs} not set: {THEIRS}'s default ray"
    if kind == "cortex":
        if v is not None:
            t.lines.append(f"{said}: not used with Cortex ({OURS}.backend.type=cortex), as in {THEIRS}")
        return
    if (v or "ray") == "ray":
        if kind == "local":
            t.lines.append(
                f"{said} (that plugin starts Arctic-Platform's server in the job's Ray cluster) -> "
                f"{OURS}.backend.type=local (this plugin starts its embedded server for the run)"
            )
        elif v is not None:
            t.refusals.append(
                Refusal(
                    f"{shown(theirs, v)}, {shown(f'{OURS}.backend.type', kind)}",
                    "the arctic backend",
                    "would start a server for the run (comms.protocol=ray), but the run names a running one "
                    f"({OURS}.backend.url={url!r})",
                    "remove comms.protocol (the server at the URL is used)",
                    [f"{theirs}=null"],
                )
            )
        return
    if kind == "onprem" and url:
        t.lines.append(f"{said} -> {OURS}.backend.type=onprem ({OURS}.backend.url={url})")
        return
    t.refusals.append(
        Refusal(
            shown(theirs, v),
            "the arctic backend",
            f"does not spawn Arctic-Platform's HTTP server ({THEIRS} starts one on localhost:7000 for comms.protocol="
            "http)",
            f"start that server yourself ({HTTP_SERVER}, from Arctic-Platform's environment) and set "
            f"{OURS}.backend.type=onprem {OURS}.backend.url=http://localhost:7000, or set {theirs}=ray to run on "
            "this wheel's embedded server",
            [f"{theirs}=ray"],
        )
    )


def _legacy_worker_impl(cfg: DictConfig, t: Translation) -> None:
    """``trainer.use_legacy_worker_impl`` (verl <= 0.7.1, kept by Snowflake's verl fork): verl 0.9.1 has only the new
    worker implementation, which ``disable`` selects."""
    v = _get(cfg, LEGACY)
    if v is None:
        return
    if v == "disable":
        t.lines.append(f"{LEGACY}=disable: verl 0.9.1 has only the new workers (what disable selects): no change")
        return
    t.refusals.append(
        Refusal(
            shown(LEGACY, v),
            "verl 0.9.1",
            "has no legacy worker implementation (removed after 0.7; its new workers are what disable selects)",
            "set it to disable (or remove it)",
            [f"{LEGACY}=disable"],
        )
    )
