# Copyright (c) 2026, sparkfleet maintainers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

"""What the head's watchdog says about runs that act on the cluster under it.

Private to sparkfleet.serving. A fault drill and an engine upgrade both need a watchdog that
acts (not paused, given up, waiting for a reboot, held by another run, or busy with a
drill): one list of those states, read from ``sparkfleet-watchdog status``, with the fix.
"""

from __future__ import annotations

# (status key, what it means, the operator's fix).
BLOCKERS = (
    ("paused", "the watchdog is paused", "sparkfleet-watchdog resume"),
    ("gave_up", "the watchdog gave up", "fix the cause, then sparkfleet-watchdog clear"),
    ("reboot_required", "a node needs a reboot", "reboot it, then sparkfleet-watchdog clear"),
    ("held", "the watchdog is held by a run changing the cluster", "let that run finish"),
    (
        "drill",
        "a fault drill is marked as running",
        "ansible-playbook sparkfleet.serving.drill -i <inventory> -e drill_cleanup_only=true",
    ),
)


def blockers(status):
    """[(what, detail, fix)] for each state in ``status`` that stops such a run."""
    out = []
    for key, what, fix in BLOCKERS:
        value = (status or {}).get(key)
        if value:
            detail = value if isinstance(value, str) else value.get("reason", "")
            out.append((what, detail, fix))
    return out


def confirm_problem(what, var, confirm, cluster):
    """The refusal of a run that acts on the whole cluster without its name given back.

    ``what``: what the run does ("drills inject faults into"); ``var``: the variable that
    carries the confirmation (drill_confirm). None when ``confirm`` is the cluster's name.
    """
    if confirm and str(confirm) == str(cluster):
        return None
    return (
        f"refused: {what} the cluster {cluster!r}; run again with "
        f"-e {var}={cluster} ({var} is {confirm or 'not set'!s})"
    )
