# Copyright (c) 2026, sparkfleet maintainers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

"""Filters of playbooks/upgrade.yml and rollback.yml: the verdict, the record, the result."""

from __future__ import annotations

from ansible.errors import AnsibleFilterError

from ansible_collections.sparkfleet.serving.plugins.plugin_utils import _upgrade


def upgrade_verdict(candidate_row, known_good_row, max_slowdown):
    """Kept or rolled back, why, and the decision line."""
    try:
        return _upgrade.verdict(known_good_row, candidate_row, max_slowdown)
    except (TypeError, ValueError) as exc:
        raise AnsibleFilterError(f"upgrade_verdict: upgrade_max_slowdown: {exc}") from exc


def upgrade_record_problems(record, where="the known-good record"):
    """What makes a known-good record unusable ([] when it is complete)."""
    return _upgrade.record_problems(record, where)


def upgrade_markdown(run, known_good_row, candidate_row, result, error=""):
    """The upgrade's result as Markdown."""
    return _upgrade.markdown(run, known_good_row, candidate_row, result, error)


def upgrade_problems(image, images, running_id, status, healthy, max_slowdown, archive=""):
    """Why this upgrade must not start (messages; [] when it may)."""
    return _upgrade.problems(image, images, running_id, status, healthy, max_slowdown, archive)


class FilterModule:
    def filters(self):
        return {
            "upgrade_verdict": upgrade_verdict,
            "upgrade_record_problems": upgrade_record_problems,
            "upgrade_markdown": upgrade_markdown,
            "upgrade_problems": upgrade_problems,
        }
