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
"""``arctic-verl launcher NAME``: print the path of a launcher script shipped in the wheel.

bash $(arctic-verl launcher gsm8k-h200) --dry-run
"""

from __future__ import annotations

import argparse
from pathlib import Path

EXAMPLES = Path(__file__).resolve().parent / "integrations" / "verl" / "examples"
LAUNCHERS = {
    "gsm8k-h200": EXAMPLES / "gsm8k_h200.sh",  # not Arctic-Platform's launcher name: a different interface
}


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("name", choices=sorted(LAUNCHERS), help="launcher to locate")


def run(args) -> int:
    print(LAUNCHERS[args.name])
    return 0
