"""Filters for the twin's create playbook (not part of the collection)."""

from __future__ import annotations

import ipaddress


def sparksim_gateway(subnet):
    """Last usable address of a subnet: the docker bridge's address, kept away
    from the node addresses the inventory hands out from the bottom."""
    network = ipaddress.ip_network(subnet, strict=False)
    return str(network.broadcast_address - 1)


class FilterModule:
    def filters(self):
        return {"sparksim_gateway": sparksim_gateway}
