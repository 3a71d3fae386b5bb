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
"""arctic_platform: the verl V1 "arctic" plugin, its Arctic RL client, the embedded Arctic RL server and kernels.

Ships inside the arctic-verl ``verl`` wheel. Nothing heavy is imported here; subpackages load on first use.
"""

import importlib

__all__ = ["client", "integrations", "kernels", "protocol", "server"]


def __getattr__(name: str):  # PEP 562: lazy subpackages
    if name in __all__:
        return importlib.import_module(f"{__name__}.{name}")
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
