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
"""arctic_platform.kernels: Triton kernels with torch references (installed from the repo's kernels/ folder).

Never importable as a top-level ``kernels`` (Hugging Face's ``kernels`` distribution owns that name).

Public names load lazily (PEP 562), so ``import arctic_platform.kernels`` imports neither torch nor triton:

* :mod:`.densify`: ``densify_reference``, ``densify_vectorized``, ``densify_triton`` here; the dispatcher itself is
  ``from arctic_platform.kernels.densify import densify``. It is deliberately not re-exported: importing the
  submodule rebinds the package attribute ``densify`` to the module, so a package-level function of the same name
  would silently turn into a module depending on import order.
* :mod:`.cascade`: ``forest_cascade_attention``, ``forest_cascade_attention_reference``, ``build_forest_metadata``,
  ``merge_attn_states``, ``ForestMetadata`` (the vLLM FCA enablement rule is
  ``arctic_platform.integrations.verl.vllm_config.fca_engine_overrides``).

Triton chooses between compiler and interpreter when a kernel module is first imported (``TRITON_INTERPRET``), so
set ``TRITON_INTERPRET=1`` before the first access to a kernel to run the Triton paths on CPU.
"""

import importlib

_EXPORTS = {
    "densify_reference": "densify",
    "densify_vectorized": "densify",
    "densify_triton": "densify",
    "forest_cascade_attention": "cascade",
    "forest_cascade_attention_reference": "cascade",
    "build_forest_metadata": "cascade",
    "merge_attn_states": "cascade",
    "ForestMetadata": "cascade",
}

__all__ = sorted(_EXPORTS)


def __getattr__(name: str):  # PEP 562: import the op module on first use
    module = _EXPORTS.get(name)
    if module is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = getattr(importlib.import_module(f"{__name__}.{module}"), name)
    globals()[name] = value
    return value


def __dir__():
    return sorted(set(globals()) | set(__all__))
