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
"""Forward-only engine (job ``log_prob``): reference log-probs with the initial weights."""

from __future__ import annotations

from .base import EngineSpec, ForwardInterface, WeightSource, load_tokenizer
from .model_engine import EngineSettings, ModelEngine, copy_weights


class ForwardEngine(ModelEngine, ForwardInterface):
    """Forward-only engine (job ``log_prob``): reference log-probs with the initial weights."""

    kind = "log_prob"

    def __init__(self, settings: EngineSettings):
        super().__init__(settings, train=False)
        self._tokenizer = None

    @classmethod
    def from_spec(cls, spec: EngineSpec) -> ForwardEngine:
        return cls(spec.settings)

    def tokenizer(self):
        """The model folder's tokenizer (``/log-probs`` with text prompts)."""
        if self._tokenizer is None:
            self._tokenizer = load_tokenizer(self.settings.model_path)
        return self._tokenizer

    def load_weights_from(self, source: WeightSource) -> None:
        copy_weights(source, self.model)
