# Copyright (c) 2026, sparkfleet maintainers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

"""Filters that turn the engine profile into a node's launch command."""

from __future__ import annotations

import json
import os

import yaml
from ansible.errors import AnsibleFilterError
from ansible.module_utils.common.arg_spec import ArgumentSpecValidator

from ansible_collections.sparkfleet.serving.plugins.module_utils._engine import (
    container_args,
    container_volumes,
    nccl_env,
    python_command,
    rank_config,
    rank_container,
    roce_functions,
    server_args,
)
from ansible_collections.sparkfleet.serving.plugins.module_utils._profile_schema import (
    argument_spec,
)
from ansible_collections.sparkfleet.serving.plugins.plugin_utils._profile import (
    ProfileError,
    check_settings,
    expand_data_dir,
    is_profile_file,
    resolve,
)


def sglang_server_args(engine, node_rank, head_ipv4):
    """launch_server flags of one rank, in the seed's order."""
    try:
        return server_args(engine, node_rank, head_ipv4)
    except (TypeError, ValueError) as exc:
        raise AnsibleFilterError(f"sglang_server_args: {exc}") from exc


def sglang_rank_container(container_name, rank):
    """The engine container's name of one rank."""
    try:
        return rank_container(container_name, rank)
    except (TypeError, ValueError) as exc:
        raise AnsibleFilterError(f"sglang_rank_container: rank {rank!r}: {exc}") from exc


def sglang_container_args(engine):
    """docker run options from the profile's container section."""
    return container_args(engine)


def sglang_container_volumes(engine):
    """The profile's -v mounts."""
    return container_volumes(engine)


def sglang_rank_config(engine, rank, paths, env, patches, roce, command):
    """The launch configuration one rank's launcher reads (rendered as its JSON file)."""
    try:
        return rank_config(engine, rank, paths, env, patches, roce, command)
    except (KeyError, TypeError, ValueError) as exc:
        raise AnsibleFilterError(f"sglang_rank_config: missing or bad input {exc}") from exc


def sglang_nccl_env(head_ipv4, master_port, socket_ifname, hca, subnet, roce_version=2):
    """NCCL environment of one rank (NCCL_IB_GID_INDEX is the launcher's, found at each start).

    ``hca`` and ``subnet``: one, or the lists of every data-plane function's."""
    try:
        return nccl_env(head_ipv4, master_port, socket_ifname, hca, subnet, roce_version)
    except (TypeError, ValueError) as exc:
        raise AnsibleFilterError(f"sglang_nccl_env: {exc}") from exc


def sparkfleet_roce_functions(hcas, hca="", iface="", ipv4="", subnet=""):
    """The node's data-plane functions: roce_hcas, else the one roce_hca/roce_iface/roce_ipv4/
    roce_subnet name (each hca, iface, ipv4, subnet)."""
    if hcas and not isinstance(hcas, list):
        raise AnsibleFilterError(f"roce_functions: roce_hcas is {hcas!r}, not a list")
    try:
        return roce_functions(hcas or [], hca, iface, ipv4, subnet)
    except AttributeError as exc:
        raise AnsibleFilterError(
            f"roce_functions: an entry of roce_hcas is not a mapping ({exc})"
        ) from exc


def sparkfleet_roce_addresses(nodes):
    """Every data-plane address of each node, as {host, ipv4}: ``nodes`` are hostvars of
    other hosts (their inventory's roce_hcas or roce_ipv4; role vars are not in hostvars)."""
    out = []
    for node in nodes:
        hcas = node.get("roce_hcas") or []
        if hcas and not isinstance(hcas, list):
            raise AnsibleFilterError(f"roce_addresses: roce_hcas is {hcas!r}, not a list")
        host = node.get("inventory_hostname")
        for fn in roce_functions(hcas, "", "", node.get("roce_ipv4", ""), ""):
            out.append({"host": host, "ipv4": fn["ipv4"]})
    return out


def sglang_python_command(engine, api_key_set=False):
    """Interpreter and entry of the engine command (the API-key shim when a key is set)."""
    return python_command(engine, bool(api_key_set))


def sglang_rank_command(engine, node_rank, head_ipv4, api_key_set=False):
    """One rank's whole engine command: the interpreter and entry, then its launch flags.

    The one rule for what a rank runs: its launch configuration (sglang_node) and the engine's
    own parse of it before anything stops (the canary's candidates, an upgrade's new image).
    """
    return sglang_python_command(engine, api_key_set) + sglang_server_args(
        engine, node_rank, head_ipv4
    )


def sglang_profile_resolve(preset, base=None, overrides=None, name="preset"):
    """A preset, the one preset it builds on, then sglang_profile_overrides."""
    try:
        return expand_data_dir(resolve(preset, base, overrides, name))
    except ProfileError as exc:
        raise AnsibleFilterError(str(exc)) from exc


def _load_yaml(path):
    with open(path, encoding="utf-8") as handle:
        return yaml.safe_load(handle)


def _settings_checker(role_path):
    """check(name, overrides) -> (problems, resolved profile or None), each pair settled once.

    ``problems`` are (variable, problem, fix) triples: the settings' own (check_settings)
    and, for a profile that resolves, every value the profile schema refuses."""
    presets_dir = os.path.join(role_path, "files", "presets")
    presets = sorted(f[:-4] for f in os.listdir(presets_dir) if f.endswith(".yml"))
    # The profile schema (the role's entry point profile is written from it).
    schema = argument_spec()

    def read(name):
        return _load_yaml(
            name if is_profile_file(name) else os.path.join(presets_dir, f"{name}.yml")
        )

    settled = {}

    def check(name, overrides):
        key = json.dumps([name, overrides], sort_keys=True, default=str)
        if key not in settled:
            problems, profile = check_settings(name, overrides, presets, schema, read)
            if profile is not None:
                validation = ArgumentSpecValidator(schema).validate(dict(profile))
                for message in validation.error_messages:
                    problems.append(
                        (
                            "sglang_profile_overrides",
                            f"gives a profile that does not fit the schema: {message}",
                            "give the field a value of its type (ansible-doc, entry point profile)",
                        )
                    )
            settled[key] = (problems, None if problems else profile)
        return settled[key]

    return check


def sglang_profile_resolution(hosts, hostvars, role_path, profile, overrides):
    """Every host's profile settings checked and the profile resolved, in one pass.

    Returns ``{"problems": [line, ...], "profile": resolved or None}``: one line per
    problem of any host's ``sglang_profile``/``sglang_profile_overrides`` (hosts with the
    same problem joined, each line naming them, the variable, the problem and the fix), and
    the profile that ``profile`` and ``overrides`` (the calling host's) resolve to, None
    while there is a problem. Settings equal on every host are resolved once."""
    check = _settings_checker(role_path)
    by_problem = {}
    for host in hosts:
        hv = hostvars[host]
        problems, _profile = check(
            hv.get("sglang_profile", profile), hv.get("sglang_profile_overrides", overrides)
        )
        for variable, problem, fix in problems:
            by_problem.setdefault((variable, problem, fix), []).append(host)
    lines = [
        f"{', '.join(names)}: {variable} {problem}; fix: {fix}"
        for (variable, problem, fix), names in by_problem.items()
    ]
    problems, resolved = check(profile, overrides)
    for variable, problem, fix in problems if not lines else ():
        lines.append(f"{variable} {problem}; fix: {fix}")
    return {"problems": lines, "profile": None if lines else resolved}


def sglang_profile_problems(hosts, hostvars, role_path, default_profile, default_overrides):
    """The problems of sglang_profile_resolution (deprecated: call that, which also resolves)."""
    return sglang_profile_resolution(
        hosts, hostvars, role_path, default_profile, default_overrides
    )["problems"]


class FilterModule:
    def filters(self):
        return {
            "sglang_server_args": sglang_server_args,
            "sglang_container_args": sglang_container_args,
            "sglang_container_volumes": sglang_container_volumes,
            "sglang_nccl_env": sglang_nccl_env,
            "sglang_rank_config": sglang_rank_config,
            "sglang_rank_container": sglang_rank_container,
            "sglang_python_command": sglang_python_command,
            "sglang_rank_command": sglang_rank_command,
            "sglang_profile_resolve": sglang_profile_resolve,
            "sglang_profile_problems": sglang_profile_problems,
            "sglang_profile_resolution": sglang_profile_resolution,
            "roce_functions": sparkfleet_roce_functions,
            "roce_addresses": sparkfleet_roce_addresses,
        }
