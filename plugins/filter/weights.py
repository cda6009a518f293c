# Copyright (c) 2026, sparkfleet maintainers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

"""Filters of the model_weights role (the logic lives in module_utils/_weights.py)."""

from __future__ import annotations

from ansible_collections.sparkfleet.serving.plugins.module_utils._weights import (
    disk_error,
    hf_token_sent,
    plan,
    scrub_lines,
    scrub_rows,
    tree_entries,
)


def model_weights_plan(engine):
    """Items to stage for a profile, the store directory, and input errors."""
    return plan(engine or {})


def model_weights_tree(tree):
    """Manifest entries of a mirror tree listing (the tree API's JSON)."""
    return tree_entries(tree)


def model_weights_disk_error(needed, free, node, where, headroom=0):
    """Error text when a filesystem cannot hold the download, else an empty string."""
    return disk_error(node, where, int(needed), int(free), int(headroom)) or ""


def model_weights_scrub_report(nodes, repair=False):
    """Report lines of a scrub from ``[[node, info results], ...]`` (playbooks/verify.yml)."""
    rows = []
    for node, results in nodes or []:
        rows.extend(scrub_rows(node, results))
    return scrub_lines(rows, bool(repair))


def hf_token_for(token, endpoint, trusted=None):
    """``token`` when it may be sent to ``endpoint`` (huggingface.co or a trusted one), else ''."""
    if not token or not hf_token_sent(endpoint, trusted or []):
        return ""
    return token


class FilterModule:
    def filters(self):
        return {
            "model_weights_plan": model_weights_plan,
            "hf_token_for": hf_token_for,
            "model_weights_tree": model_weights_tree,
            "model_weights_disk_error": model_weights_disk_error,
            "model_weights_scrub_report": model_weights_scrub_report,
        }
