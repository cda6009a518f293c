"""twin/playbooks/filter_plugins/sparksim.py: which containers and networks are in a
twin's way, so twins of different inventories can run side by side (make test runs
inventory/sim and inventory/sim-2node at once) while a leftover on the same names
or subnets is still removed."""

from __future__ import annotations

import importlib.util
import os
import re
import subprocess

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
_SPEC = importlib.util.spec_from_file_location(
    "sparksim_filters", os.path.join(ROOT, "twin", "playbooks", "filter_plugins", "sparksim.py")
)
sparksim = importlib.util.module_from_spec(_SPEC)
_SPEC.loader.exec_module(sparksim)

PAIR = ["sparksim-pair-mgmt", "sparksim-pair-roce"]
PAIR_SUBNETS = ["192.168.4.0/24", "10.0.40.0/24"]
PAIR_NAMES = ["sim2-spark-1", "sim2-spark-2"]


def lines(*rows):
    return ["\t".join(r) for r in rows]


def scope(read):
    return sparksim.sparksim_scope(read, "sim2", PAIR_NAMES, PAIR, PAIR_SUBNETS)


def test_a_twin_on_other_names_and_subnets_is_left_alone():
    read = lines(
        ("c", "spark-1", "running", "sim", "sparksim-mgmt,sparksim-roce"),
        ("c", "sparksim-sim-mirror", "running", "sim", "sparksim-mgmt"),
        ("n", "sparksim-mgmt", "192.168.3.0/24 "),
        ("n", "sparksim-roce", "10.0.30.0/24 "),
    )
    got = scope(read)
    assert got["in_the_way"] == []
    assert got["overlapping"] == []
    assert got["networks"] == ["sparksim-mgmt", "sparksim-roce"]


def test_a_leftover_on_this_twins_subnets_or_names_is_in_the_way():
    read = lines(
        ("c", "spark-7", "exited", "sim8", "sparksim-sim8-mgmt"),
        ("c", "sim2-spark-2", "running", "ssh", "sparksim-elsewhere"),
        ("c", "stray", "running", "demo", "sparksim-pair-roce"),
        ("c", "sim2-spark-1", "exited", "sim2", "sparksim-pair-mgmt,sparksim-pair-roce"),
        ("n", "sparksim-sim8-mgmt", "192.168.4.0/23 "),
        ("n", "sparksim-pair-mgmt", "192.168.4.0/24 "),
        ("n", "sparksim-elsewhere", "172.30.0.0/16 "),
    )
    got = scope(read)
    # Another twin holding a name, sitting on this twin's planes or on an overlapping network.
    assert got["in_the_way"] == ["spark-7", "sim2-spark-2", "stray"]
    # This twin's own planes are not "overlapping"; a /23 over its /24 is.
    assert got["overlapping"] == ["sparksim-sim8-mgmt"]
    own = [c for c in got["containers"] if c["cluster"] == "sim2"]
    assert own == [
        {
            "name": "sim2-spark-1",
            "state": "exited",
            "cluster": "sim2",
            "networks": ["sparksim-pair-mgmt", "sparksim-pair-roce"],
        }
    ]


def test_a_container_without_networks_or_label_parses():
    got = scope(lines(("c", "bare", "created", ""), ("n", "empty", "")))
    assert got["containers"] == [
        {"name": "bare", "state": "created", "cluster": "", "networks": []}
    ]
    assert got["in_the_way"] == []
    assert got["overlapping"] == []


def test_the_gateway_is_the_last_usable_address():
    assert sparksim.sparksim_gateway("192.168.4.0/24") == "192.168.4.254"


def test_lanes_run_side_by_side_prefix_their_output_and_fail_if_any_failed(tmp_path):
    marker = tmp_path / "both"
    # Each lane waits (up to 60 s) for the other's file and says whether it saw it: both see
    # the other's only when they run at the same time (one after the other, the first would
    # wait its minute alone). Asserted on what they saw, not on a wall-clock time.
    wait = "for i in $(seq 600); do [ -e {0} ] && echo saw && break; sleep 0.1; done"
    slow = f"touch {marker}.a; {wait.format(str(marker) + '.b')}; echo one"
    fast = f"touch {marker}.b; {wait.format(str(marker) + '.a')}; exit 3"
    res = subprocess.run(
        ["bash", os.path.join(ROOT, "tools", "lanes.sh"), "quad", slow, "pair", fast],
        capture_output=True,
        text=True,
        check=False,
        timeout=300,
    )
    # Each line: [lane HH:MM:SS] text (the wall clock, for a CI log's timings).
    stamp = re.compile(r"^\[(quad|pair) \d\d:\d\d:\d\d\] ")
    lines = res.stdout.splitlines()
    assert all(stamp.match(line) for line in lines if not line.startswith("=="))
    out = [stamp.sub(r"[\1] ", line) for line in lines]
    assert "[quad] saw" in out and "[pair] saw" in out
    assert res.returncode == 1
    assert "[quad] one" in out
    assert "== lane quad: ok" in res.stdout
    assert "== lane pair: FAILED" in res.stdout


def test_every_make_target_on_the_twin_can_read_its_vaulted_inventory():
    # create.yml and destroy.yml read the inventory's hosts (names, subnets), which renders
    # its vaulted variables: each make target running a playbook passes the vault password.
    with open(os.path.join(ROOT, "Makefile"), encoding="utf-8") as handle:
        lines = [line for line in handle if "ansible-playbook -i $(INVENTORY)" in line]
    assert lines
    assert [line for line in lines if "$(VAULT)" not in line] == []
