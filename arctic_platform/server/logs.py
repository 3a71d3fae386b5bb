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
"""The server's two loggers, named once: ``logger`` (diagnostics, INFO only with ``--verbose``) and ``events``
(lifecycle events: weight syncs, checkpoints, destroys; INFO even when the server is not verbose)."""

from __future__ import annotations

import logging

logger = logging.getLogger("arctic_platform.server")
events = logging.getLogger("arctic_platform.server.events")

__all__ = ["events", "logger"]
