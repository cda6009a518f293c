# Copyright (c) 2026, sparkfleet maintainers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

"""The variables the offline inventory checks read, and what the collection owns.

The cluster variables with how far each may differ between hosts, the flags and environment
keys a profile may not set itself, and the variable prefixes of the collection's roles.
"""

from __future__ import annotations

from ansible_collections.sparkfleet.serving.plugins.module_utils._profile_schema import (
    owned_flags as schema_owned_flags,
)
from ansible_collections.sparkfleet.serving.plugins.plugin_utils import _register

# The cluster variables the checks read, with how far each may differ between hosts:
# "host" is set on every host and differs (identity), "node" may differ (a NIC name after a
# swap), "cluster" must be equal everywhere. Declared once, with their defaults and
# documentation, in the register (meta/variables.yml: scope); the role
# sparkfleet.serving.cluster owns most of them.
CLUSTER_VARS = _register.cluster_vars()
# The control paths among them (absolute paths, checked so).
CONTROL_PATHS = (
    "sglang_node_bin",
    "watchdog_cluster_bin",
    "watchdog_bin",
    "watchdog_config_file",
    "watchdog_lib_dir",
    "watchdog_state_dir",
    "cluster_production_bin",
)
CLUSTER_WIDE = tuple(var for var, scope in CLUSTER_VARS.items() if scope == "cluster")
# Flags the collection derives per node or from dedicated fields; an extra_args
# copy would fight the derived one. The profile schema marks which (owned_flags).
OTHER_OWNED_FLAGS = {"--api-key": "the vaulted variable sglang_api_key"}


def owned_flags():
    """SGLang flag -> what sets it, for every flag extra_args may not repeat."""
    return {**schema_owned_flags(), **OTHER_OWNED_FLAGS}


# Environment keys the collection sets for every rank, with what sets them: a copy
# in the profile's env would silently replace the derived value.
OWNED_ENV = {
    "NCCL_SOCKET_IFNAME": "the variable sglang_nccl_socket_ifname",
    "NCCL_IB_HCA": "the variables roce_hca and roce_hcas",
    "NCCL_IB_ADDR_RANGE": "the variables roce_subnet and roce_hcas",
    "NCCL_IB_GID_INDEX": "discovered per node by the roce role (roce_gid_mode)",
    "NCCL_IB_ROCE_VERSION_NUM": "discovered per node by the roce role",
    "MASTER_ADDR": "derived from rank 0's roce_ipv4",
    "MASTER_PORT": "the profile field dist_init_port",
    "GLOO_SOCKET_IFNAME": "the variable sglang_nccl_socket_ifname",
    "SGLANG_HOST_IP": "derived per node from the first IPv4 of sglang_nccl_socket_ifname",
    "HOST_IP": "SGLang's fallback for SGLANG_HOST_IP, derived per node",
    "PYTHONDONTWRITEBYTECODE": "set so patched sources recompile (seed Pitfall 6)",
    "SGLANG_API_KEY": "the vaulted variable sglang_api_key",
    "HF_ENDPOINT": "the profile field hf_endpoint",
    "HF_HUB_DISABLE_XET": "the profile field hf_disable_xet",
    "HF_TOKEN": "the vaulted variable sglang_hf_token",
    "SPARKFLEET_MODEL_REVISION": "the profile field model_revision (the staged weights' pin)",
}
# Every other HF_* key belongs to the collection's weights handling.
OWNED_ENV_PREFIXES = {
    "HF_": "owned by the collection's Hugging Face settings (hf_endpoint, hf_disable_xet, "
    "sglang_hf_token, weight staging)",
}


def owned_env_key(key):
    """What sets ``key`` when the collection owns it, else None."""
    key = str(key)
    if key in OWNED_ENV:
        return OWNED_ENV[key]
    for prefix, owner in OWNED_ENV_PREFIXES.items():
        if key.startswith(prefix):
            return owner
    return None


# Variables of the roles' own (not cluster variables) that name a URL when the inventory sets
# them; their defaults come from the profile, which is checked as sglang_engine.
URL_VARS = {
    "model_weights_hf_endpoint": "remove it to use the profile's hf_endpoint",
}
# The collection's variable prefixes. An inventory variable with one of them that the register
# does not declare (meta/variables.yml) is read by nothing: a typo (roce_mut), or the name of
# another version; it is refused, not silently ignored.
PREFIXES = ("spark_", "roce_", "sglang_", "model_weights_", "watchdog_", "canary_")
