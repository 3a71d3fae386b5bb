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
"""Hydra search-path plugin for the arctic plugin's config folder (registered through Hydra's public Plugins API)."""

from pathlib import Path

from hydra.core.config_search_path import ConfigSearchPath
from hydra.plugins.search_path_plugin import SearchPathPlugin

CONFIG_DIR = Path(__file__).resolve().parent / "config"


class ArcticSearchPathPlugin(SearchPathPlugin):
    """Appends ``arctic_platform/integrations/verl/config`` so ``remote_backend=arctic`` needs no searchpath flag."""

    def manipulate_search_path(self, search_path: ConfigSearchPath) -> None:
        search_path.append(provider="arctic-verl", path=f"file://{CONFIG_DIR}")
