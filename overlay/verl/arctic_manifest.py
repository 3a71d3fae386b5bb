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
"""Build manifest of this verl distribution (arctic-verl): upstream pin, patches and overlay it was built from.

``verl.__version__`` stays the upstream version; the distribution version is ``<upstream>+arctic.<N>``.
``python -m verl.arctic_manifest`` prints the manifest.
"""

import json
import os
from functools import lru_cache
from typing import Any

MANIFEST_FILE = os.path.join(os.path.dirname(os.path.abspath(__file__)), "arctic_build_manifest.json")


@lru_cache(maxsize=1)
def manifest() -> dict[str, Any]:
    """Return the build manifest written by ``./build.sh`` (upstream sha256, patch and overlay sha256s, N).

    Raises:
        FileNotFoundError: this verl tree was not produced by the arctic-verl build.
    """
    with open(MANIFEST_FILE) as f:
        return json.load(f)


def version() -> str:
    """The distribution version, ``<upstream>+arctic.<N>``."""
    return manifest()["version"]


if __name__ == "__main__":
    print(json.dumps(manifest(), indent=2, sort_keys=True))
