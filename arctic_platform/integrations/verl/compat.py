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
"""The one adapter point for verl internals that move between the upstream releases this wheel is built for.

The plugin otherwise uses verl's registries and hooks. An internal it cannot avoid is imported here, once, keyed by
the upstream version (never a scattered ``try/except ImportError``), and listed in ``INTERNALS`` with the module that
needs it; ``arctic-verl doctor`` imports this module and names the missing upstream symbol when an upstream bump
removed or moved one. See docs/upstream-bump.md ("the compat module").
"""

from packaging.version import Version

import verl

VERL_VERSION = Version(verl.__version__)

# upstream name -> the arctic_platform module that needs it (what doctor reports when the name is missing)
INTERNALS: dict[str, str] = {
    "verl.trainer.ppo.padding_utils.SYNTHETIC_PADDING_SEQ_LEN": "arctic_platform.integrations.verl.v1.worker",
}

# Rows verl adds with ``upsample_batch_to_divisible_size`` carry a fixed prompt length: 0.9.1 aligns them to
# SYNTHETIC_PADDING_SEQ_LEN (127 prompt + 1 response token); 0.9.0 builds a minimal 1 + 1 token template.
if VERL_VERSION >= Version("0.9.1"):
    from verl.trainer.ppo.padding_utils import SYNTHETIC_PADDING_SEQ_LEN

    SYNTHETIC_PADDING_PROMPT_LEN = SYNTHETIC_PADDING_SEQ_LEN - 1
else:
    SYNTHETIC_PADDING_PROMPT_LEN = 1

__all__ = ["INTERNALS", "SYNTHETIC_PADDING_PROMPT_LEN", "VERL_VERSION"]
