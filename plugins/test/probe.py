# Copyright (c) 2026, sparkfleet maintainers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

"""Test for collected results: is this not a real answer of the probed command?"""

from __future__ import annotations

from ansible_collections.sparkfleet.serving.plugins.plugin_utils._probe import probe_error


def probe_failed(result):
    """True when the host was gone, the module or binary did not run, or it timed out."""
    return bool(probe_error(result))


class TestModule:
    def tests(self):
        return {"probe_failed": probe_failed}
