# Copyright (c) 2026, sparkfleet maintainers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

"""The filter of playbooks/status.yml: the cluster report's text."""

from __future__ import annotations

from ansible.errors import AnsibleFilterError

from ansible_collections.sparkfleet.serving.plugins.plugin_utils import _status


def status_report(
    hostvars, bring_up_order, cluster_head, alerts, prometheus_url="", alerts_error=""
):
    """The cluster report: a row per node (head first), API, images, watchdog, alerts."""
    try:
        return _status.report(
            hostvars, bring_up_order, cluster_head, alerts, prometheus_url, alerts_error
        )
    except (KeyError, TypeError, ValueError) as exc:
        raise AnsibleFilterError(f"status_report: {exc}") from exc


class FilterModule:
    def filters(self):
        return {"status_report": status_report}
