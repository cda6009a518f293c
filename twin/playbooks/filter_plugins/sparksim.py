"""Filters for the twin's create and destroy playbooks (not part of the collection)."""

from __future__ import annotations

import ipaddress


def sparksim_gateway(subnet):
    """Last usable address of a subnet: the docker bridge's address, kept away
    from the node addresses the inventory hands out from the bottom."""
    network = ipaddress.ip_network(subnet, strict=False)
    return str(network.broadcast_address - 1)


def sparksim_network(pair):
    """(network name, IPv4) -> a docker_container networks entry."""
    name, address = pair
    return {"name": name, "ipv4_address": address}


def sparksim_overlapping(networks, subnets):
    """Names of the networks (dicts with name and subnets, as read by
    tasks/scope.yml) holding an address range that overlaps one of subnets."""
    wanted = [ipaddress.ip_network(s, strict=False) for s in subnets]
    names = []
    for net in networks:
        for subnet in net.get("subnets", []):
            have = ipaddress.ip_network(subnet, strict=False)
            if any(have.version == w.version and have.overlaps(w) for w in wanted):
                names.append(net["name"])
                break
    return names


def sparksim_scope(lines, cluster, names, planes, subnets):
    """What on this machine is in the way of the twin `cluster` (tasks/scope.yml).

    lines: "c<TAB>name<TAB>state<TAB>twin label<TAB>networks" per twin container and
    "n<TAB>name<TAB>subnets" per twin network. Returns containers (dicts), overlapping
    (other twin networks whose subnets overlap subnets), networks (every twin network's
    name) and in_the_way (containers of
    another twin holding one of names, or on one of planes or the overlapping networks).
    """
    containers, networks = [], []
    for line in lines:
        fields = (line + "\t\t\t\t").split("\t")
        if fields[0] == "c":
            containers.append(
                {
                    "name": fields[1],
                    "state": fields[2],
                    "cluster": fields[3],
                    "networks": [n for n in fields[4].split(",") if n],
                }
            )
        elif fields[0] == "n":
            networks.append({"name": fields[1], "subnets": fields[2].split()})
    overlapping = sparksim_overlapping([n for n in networks if n["name"] not in planes], subnets)
    shared = set(planes) | set(overlapping)
    in_the_way = [
        c["name"]
        for c in containers
        if c["cluster"] != cluster and (c["name"] in names or shared.intersection(c["networks"]))
    ]
    return {
        "containers": containers,
        "networks": [n["name"] for n in networks],
        "overlapping": overlapping,
        "in_the_way": in_the_way,
    }


class FilterModule:
    def filters(self):
        return {
            "sparksim_gateway": sparksim_gateway,
            "sparksim_network": sparksim_network,
            "sparksim_scope": sparksim_scope,
        }
