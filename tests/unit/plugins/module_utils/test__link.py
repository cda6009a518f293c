"""Live NIC state and the plan to reach the wanted one."""

from __future__ import annotations

import json

import pytest

from ansible_collections.sparkfleet.serving.plugins.module_utils import _link


def ip_json(
    name="enp1s0f0np0", mtu=1500, flags=("BROADCAST", "UP", "LOWER_UP"), addrs=("10.0.30.1/24",)
):
    info = []
    for cidr in addrs:
        ip, prefix = cidr.split("/")
        info.append({"family": "inet", "local": ip, "prefixlen": int(prefix)})
    info.append({"family": "inet6", "local": "fe80::1", "prefixlen": 64})
    return json.dumps([{"ifname": name, "mtu": mtu, "flags": list(flags), "addr_info": info}])


def test_parse_reads_mtu_state_and_ipv4_in_kernel_order():
    state = _link.parse_ip_addr(ip_json(addrs=("10.0.22.1/24", "10.0.30.1/24")), "enp1s0f0np0")
    assert state == {
        "name": "enp1s0f0np0",
        "mtu": 1500,
        "up": True,
        "ipv4": ["10.0.22.1/24", "10.0.30.1/24"],
    }


@pytest.mark.parametrize("text", ["[]", ip_json(name="enP7s7")])
def test_parse_fails_on_a_missing_nic(text):
    with pytest.raises(_link.LinkError, match="no such network interface"):
        _link.parse_ip_addr(text, "enp1s0f0np0")


def test_parse_fails_on_garbage():
    with pytest.raises(_link.LinkError, match="cannot parse"):
        _link.parse_ip_addr("not json", "enp1s0f0np0")


@pytest.mark.parametrize(
    ("state", "mtu", "addresses", "steps"),
    [
        (
            dict(mtu=1500),
            9000,
            ["10.0.30.1/24"],
            [["link", "set", "dev", "enp1s0f0np0", "mtu", "9000"]],
        ),
        (dict(mtu=9000), 9000, ["10.0.30.1/24"], []),
        (
            dict(mtu=9000, addrs=()),
            9000,
            ["10.0.30.1/24"],
            [["addr", "add", "10.0.30.1/24", "dev", "enp1s0f0np0"]],
        ),
        (
            dict(mtu=9000, flags=("BROADCAST",)),
            9000,
            ["10.0.30.1/24"],
            [["link", "set", "dev", "enp1s0f0np0", "up"]],
        ),
        # The old cross-wire address stays: the collection does not own it.
        (dict(mtu=9000, addrs=("10.0.22.1/24", "10.0.30.1/24")), 9000, ["10.0.30.1/24"], []),
        (dict(mtu=9000), None, [], []),
    ],
)
def test_plan_does_only_what_differs(state, mtu, addresses, steps):
    current = _link.parse_ip_addr(ip_json(**state), "enp1s0f0np0")
    assert _link.plan(current, mtu, addresses) == steps


def test_plan_refuses_the_same_address_with_another_prefix():
    current = _link.parse_ip_addr(ip_json(addrs=("10.0.30.1/16",)), "enp1s0f0np0")
    expected = r"configured as 10\.0\.30\.1/16, not 10\.0\.30\.1/24"
    with pytest.raises(_link.LinkError, match=expected):
        _link.plan(current, 9000, ["10.0.30.1/24"])


def test_plan_refuses_an_address_without_prefix():
    current = _link.parse_ip_addr(ip_json(), "enp1s0f0np0")
    with pytest.raises(_link.LinkError, match="with its prefix length"):
        _link.plan(current, 9000, ["10.0.30.1"])


def test_predict_matches_what_the_plan_does():
    current = _link.parse_ip_addr(ip_json(mtu=1500, addrs=(), flags=("BROADCAST",)), "enp1s0f0np0")
    steps = _link.plan(current, 9000, ["10.0.30.1/24"])
    assert _link.predict(current, steps) == {
        "name": "enp1s0f0np0",
        "mtu": 9000,
        "up": True,
        "ipv4": ["10.0.30.1/24"],
    }


def test_plan_removes_only_the_absent_address_and_only_where_present():
    """The teardown's address: removed with its prefix, nothing else on the NIC touched."""
    current = _link.parse_ip_addr(
        ip_json(mtu=9000, addrs=("10.0.22.1/24", "10.0.30.1/24")), "enp1s0f0np0"
    )
    steps = _link.plan(current, 1500, [], False, ["10.0.30.1/24"])
    assert steps == [
        ["link", "set", "dev", "enp1s0f0np0", "mtu", "1500"],
        ["addr", "del", "10.0.30.1/24", "dev", "enp1s0f0np0"],
    ]
    assert _link.predict(current, steps)["ipv4"] == ["10.0.22.1/24"]
    # Gone already, or there with another prefix: nothing to remove.
    gone = _link.parse_ip_addr(ip_json(mtu=1500, addrs=("10.0.22.1/24",)), "enp1s0f0np0")
    assert _link.plan(gone, 1500, [], False, ["10.0.30.1/24"]) == []
    other = _link.parse_ip_addr(ip_json(mtu=1500, addrs=("10.0.30.1/16",)), "enp1s0f0np0")
    assert _link.plan(other, 1500, [], False, ["10.0.30.1/24"]) == []


def test_plan_refuses_an_address_both_wanted_and_absent():
    current = _link.parse_ip_addr(ip_json(), "enp1s0f0np0")
    with pytest.raises(_link.LinkError, match="both wanted and absent"):
        _link.plan(current, 9000, ["10.0.30.1/24"], True, ["10.0.30.1/24"])
    with pytest.raises(_link.LinkError, match="with its prefix length"):
        _link.plan(current, 9000, [], True, ["10.0.30.1"])
