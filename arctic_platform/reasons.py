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
"""One-line reasons of exceptions, as error replies and job reasons carry them (``{"detail": "<one line>"}``)."""

from __future__ import annotations


def one_line(e: BaseException, limit: int = 2000, *, with_type: bool = True) -> str:
    """``"<Type>: <message>"`` with all white space folded to single spaces, cut to ``limit`` characters.

    Args:
        e: the exception.
        limit: the most characters returned.
        with_type: prefix the exception's class name (``False``: the folded message alone).
    """
    text = " ".join(str(e).split())
    return (f"{type(e).__name__}: {text}" if with_type else text)[:limit]
