# Copyright 2026 The arctic-verl Authors
# SPDX-License-Identifier: Apache-2.0
"""``python3 -m arctic_build <cmd>`` (with ``tools/`` on the path): what ``./build.sh`` runs."""

import sys

from .cli import main

sys.exit(main())
