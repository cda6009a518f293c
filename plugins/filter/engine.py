# Copyright (c) 2026, sparkfleet maintainers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

"""Filters that turn the engine profile into a node's launch command."""

from __future__ import annotations

from ansible.errors import AnsibleFilterError

from ansible_collections.sparkfleet.serving.plugins.module_utils._engine import (
    container_args,
    container_volumes,
    nccl_env,
    python_command,
    server_args,
)
from ansible_collections.sparkfleet.serving.plugins.module_utils._profile import (
    ProfileError,
    resolve,
)


def sglang_server_args(engine, node_rank, head_ipv4):
    """launch_server flags of one rank, in the seed's order."""
    try:
        return server_args(engine, node_rank, head_ipv4)
    except (TypeError, ValueError) as exc:
        raise AnsibleFilterError(f"sglang_server_args: {exc}") from exc


def sglang_container_args(engine):
    """docker run options from the profile's container section."""
    return container_args(engine)


def sglang_container_volumes(engine):
    """The profile's -v mounts."""
    return container_volumes(engine)


def sglang_nccl_env(
    head_ipv4, master_port, socket_ifname, hca, subnet, gid_mode, gid_index, roce_version=2
):
    """NCCL environment of one rank; no NCCL_IB_GID_INDEX in auto mode, never an empty one."""
    try:
        return nccl_env(
            head_ipv4, master_port, socket_ifname, hca, subnet, gid_mode, gid_index, roce_version
        )
    except ValueError as exc:
        raise AnsibleFilterError(f"sglang_nccl_env: {exc}") from exc


def sglang_python_command(engine, api_key_set=False):
    """Interpreter and entry of the engine command (the API-key shim when a key is set)."""
    return python_command(engine, bool(api_key_set))


def sglang_profile_resolve(preset, base=None, overrides=None, name="preset"):
    """A preset, the one preset it builds on, then sglang_profile_overrides."""
    try:
        return resolve(preset, base, overrides, name)
    except ProfileError as exc:
        raise AnsibleFilterError(str(exc)) from exc


class FilterModule:
    def filters(self):
        return {
            "sglang_server_args": sglang_server_args,
            "sglang_container_args": sglang_container_args,
            "sglang_container_volumes": sglang_container_volumes,
            "sglang_nccl_env": sglang_nccl_env,
            "sglang_python_command": sglang_python_command,
            "sglang_profile_resolve": sglang_profile_resolve,
        }
