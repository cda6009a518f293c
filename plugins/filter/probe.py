# Copyright (c) 2026, sparkfleet maintainers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

"""Filters for collected results (failed_when: false) and host requirements."""

from __future__ import annotations

from ansible.errors import AnsibleFilterError

from ansible_collections.sparkfleet.serving.plugins.module_utils._engine import (
    host_problems,
    host_requirements,
)
from ansible_collections.sparkfleet.serving.plugins.module_utils._netplan import netplan_problems
from ansible_collections.sparkfleet.serving.plugins.plugin_utils._probe import probe_error


def sparkfleet_probe_error(result, what="the probe"):
    """Why a collected result is not a real answer (host gone, module/binary missing, timeout)."""
    return probe_error(result, what)


def sglang_host_requirements(engine, offline=False):
    """Devices, mounted files and directories, GPUs and memory the profile needs on a node.

    ``offline``: the engine boots with HF_HUB_OFFLINE=1 (a hub-id draft must be cached)."""
    try:
        return host_requirements(engine, bool(offline))
    except ValueError as exc:
        raise AnsibleFilterError(f"sglang_host_requirements: {exc}") from exc


def sglang_host_problems(
    probe, host, engine, image_pull=False, check_paths=True, staged=None, offline=False, tools=None
):
    """What a node lacks for the profile, each naming host, what and the fix.

    ``staged``: host paths the weights stage of the same run provides (not required yet).
    ``offline``: the engine boots with HF_HUB_OFFLINE=1 (a hub-id draft must be cached).
    ``tools``: the host tools the run's stages rely on (programs, processes, sshd key login).
    """
    try:
        return host_problems(
            host,
            engine,
            probe,
            bool(image_pull),
            bool(check_paths),
            list(staged or []),
            bool(offline),
            list(tools or []),
        )
    except ValueError as exc:
        raise AnsibleFilterError(f"sglang_host_problems: {exc}") from exc


def roce_netplan_problems(netplan, host, ifaces, own_file, mtu):
    """What is wrong with the data-plane ports' profiles in netplan's output (the probe's)."""
    try:
        return netplan_problems(dict(netplan or {}), host, ifaces, own_file, int(mtu))
    except (KeyError, TypeError, ValueError) as exc:
        raise AnsibleFilterError(f"roce_netplan_problems: bad input {exc}") from exc


class FilterModule:
    def filters(self):
        return {
            "probe_error": sparkfleet_probe_error,
            "roce_netplan_problems": roce_netplan_problems,
            "sglang_host_requirements": sglang_host_requirements,
            "sglang_host_problems": sglang_host_problems,
        }
