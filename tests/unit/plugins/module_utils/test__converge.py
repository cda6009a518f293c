# Copyright (c) 2026, sparkfleet maintainers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

"""_converge: when a stage skips, and every difference that makes it run again.

Stamps are written by the real converge_stamp module and read back by the real
spark_node_info module on real files; only docker, ip and ping are faked.
"""

from __future__ import annotations

import json
import os
import re
from pathlib import Path

import pytest
import yaml
from ansible.module_utils import basic
from ansible.module_utils.testing import patch_module_args

from ansible_collections.sparkfleet.serving.plugins.filter import converge as filters
from ansible_collections.sparkfleet.serving.plugins.module_utils import _converge
from ansible_collections.sparkfleet.serving.plugins.module_utils._node_state import path_record
from ansible_collections.sparkfleet.serving.plugins.modules import converge_stamp, spark_node_info

ROLES = Path(__file__).resolve().parents[4] / "roles"


class Exited(Exception):
    def __init__(self, payload):
        super().__init__(payload)
        self.payload = payload


@pytest.fixture
def module(monkeypatch):
    def exit_json(self, **kwargs):
        raise Exited(kwargs)

    def fail_json(self, msg, **kwargs):
        raise Exited(dict(kwargs, msg=msg, failed=True))

    monkeypatch.setattr(basic.AnsibleModule, "exit_json", exit_json)
    monkeypatch.setattr(basic.AnsibleModule, "fail_json", fail_json)


def run(main, args):
    with patch_module_args(args), pytest.raises(Exited) as info:
        main()
    return info.value.payload


def record(stamp, stage, paths, digest="d1", outputs=None, check=False):
    return run(
        converge_stamp.main,
        {
            "path": str(stamp),
            "stage": stage,
            "digest": digest,
            "paths": [str(p) for p in paths],
            "outputs": outputs or {},
            "_ansible_check_mode": check,
        },
    )


def probe(stamps):
    return run(spark_node_info.main, {"stamps": [str(s) for s in stamps]})


def reasons(stamp, stage="launch", digest="d1"):
    return filters.converge_reasons(probe([stamp]), str(stamp), stage, digest)


@pytest.fixture
def managed(tmp_path):
    """A stage's paths: a script, a secrets file, a directory, a link, one left absent."""
    script = tmp_path / "bin" / "launcher"
    script.parent.mkdir()
    script.write_text("#!/bin/sh\necho start\n")
    os.chmod(script, 0o755)
    secrets = tmp_path / "sglang.env"
    secrets.write_text("TOKEN=x\n")
    os.chmod(secrets, 0o600)
    link = tmp_path / "model"
    link.symlink_to("rev-a")
    return {
        "script": script,
        "secrets": secrets,
        "dir": script.parent,
        "link": link,
        "absent": tmp_path / "cron.d-entry",
    }


def test_a_stage_that_ran_is_skipped_until_something_differs(module, managed, tmp_path):
    stamp = tmp_path / "converge" / "launch.json"
    assert reasons(stamp) == ["never converged on this node"]
    first = record(stamp, "launch", managed.values(), outputs={"config_hash": "abc"})
    assert first["changed"] is True
    assert oct(os.stat(stamp).st_mode & 0o777) == "0o600"
    assert oct(os.stat(stamp.parent).st_mode & 0o777) == "0o700"
    assert reasons(stamp) == []
    # The same state recorded again is not a change; the outputs come back to a skipping run.
    assert (
        record(stamp, "launch", managed.values(), outputs={"config_hash": "abc"})["changed"]
        is False
    )
    assert filters.converge_outputs(probe([stamp]), str(stamp)) == {"config_hash": "abc"}
    assert reasons(stamp, digest="d2") == [
        "inputs of stage launch changed (its roles, the plugins or its variables)"
    ]


@pytest.mark.parametrize(
    "edit, expected",
    [
        (lambda m: m["script"].write_text("#!/bin/sh\necho edited\n"), "launcher: sha256"),
        (lambda m: os.chmod(m["script"], 0o700), "launcher: mode 0700 (was 0755)"),
        (lambda m: m["secrets"].unlink(), "sglang.env: missing"),
        (
            lambda m: m["absent"].write_text("* * * * * root true\n"),
            "present, the stage left it absent",
        ),
        (
            lambda m: (m["link"].unlink(), m["link"].symlink_to("/tmp")),
            "model: target /tmp (was rev-a)",
        ),
        (lambda m: os.chmod(m["dir"], 0o777), "bin: mode 0777 (was 0755)"),
    ],
    ids=["content", "mode", "deleted", "added", "link", "directory"],
)
def test_every_hand_edit_makes_the_stage_run(module, managed, tmp_path, edit, expected):
    stamp = tmp_path / "launch.json"
    os.chmod(managed["dir"], 0o755)
    record(stamp, "launch", managed.values())
    edit(managed)
    found = reasons(stamp)
    assert len(found) == 1 and expected in found[0], found


def test_owner_drift_is_seen(managed):
    before = {str(managed["script"]): path_record(str(managed["script"]))}
    after = {str(managed["script"]): dict(before[str(managed["script"])], owner="997")}
    assert _converge.path_drift(before, after) == [f"{managed['script']}: owner 997 (was root)"]


def test_a_directory_is_compared_without_its_content(managed):
    rec = path_record(str(managed["dir"]))
    (managed["dir"] / "log").write_text("grows\n")
    assert _converge.path_drift({"d": rec}, {"d": path_record(str(managed["dir"]))}) == []


def test_check_mode_writes_no_stamp(module, managed, tmp_path):
    stamp = tmp_path / "launch.json"
    assert record(stamp, "launch", managed.values(), check=True)["changed"] is True
    assert not stamp.exists()


def test_an_unreadable_or_foreign_stamp_runs_the_stage(module, tmp_path):
    stamp = tmp_path / "roce.json"
    stamp.write_text("{not json")
    assert reasons(stamp, "roce")[0].startswith("stamp unreadable")
    stamp.write_text(json.dumps({"version": 0, "digest": "d1", "paths": {}}))
    assert reasons(stamp, "roce") == ["stamp of another format"]


def test_digest_follows_values_and_code(tmp_path):
    tree = tmp_path / "role"
    (tree / "tasks").mkdir(parents=True)
    (tree / "tasks" / "main.yml").write_text("---\n")
    (tree / "README.md").write_text("docs only\n")
    values = {"roce_mtu": 9000, "sglang_engine": {"image": "a", "env": {"B": "1", "A": "2"}}}
    base = _converge.digest(values, [_converge.tree_digest(str(tree))])
    reordered = {"sglang_engine": {"env": {"A": "2", "B": "1"}, "image": "a"}, "roce_mtu": 9000}
    assert _converge.digest(reordered, [_converge.tree_digest(str(tree))]) == base
    assert _converge.digest(dict(values, roce_mtu=1500), [_converge.tree_digest(str(tree))]) != base
    (tree / "README.md").write_text("docs change nothing\n")
    assert _converge.digest(values, [_converge.tree_digest(str(tree))]) == base
    (tree / "tasks" / "main.yml").write_text("---\n- name: new task\n")
    assert _converge.digest(values, [_converge.tree_digest(str(tree))]) != base


def test_stage_inputs_are_the_options_the_specs_declare():
    names = set(filters.converge_inputs(["sglang_node:main"]))
    # What the launch reads from earlier stages is part of its digest.
    assert {"roce_node", "sglang_engine", "sglang_patches_node", "preflight_socket_ipv4"} <= names
    # What only the bring-up reads (restart.yml's force, a repair) does not re-render the launch.
    assert not {"sglang_node_force_restart", "model_weights_repaired"} & names
    assert {"sglang_node_force_restart", "model_weights_repaired"} <= set(
        filters.converge_inputs("sglang_node")
    )
    assert "roce_mtu" in filters.converge_inputs("roce")
    with pytest.raises(Exception, match="no entry point"):
        filters.converge_inputs("roce:nope")


def test_a_stage_takes_of_the_cluster_its_inputs_and_every_nodes_identity():
    nodes = [
        {
            "host": "spark-1",
            "spark_rank": 0,
            "ansible_host": "192.168.3.3",
            "roce_ipv4": "10.0.30.1",
            "roce_mtu": 9000,
            "sglang_profile_overrides": {"max_running_requests": 8},
        },
        {
            "host": "spark-2",
            "spark_rank": 1,
            "ansible_host": "192.168.3.13",
            "roce_ipv4": "10.0.30.2",
            "roce_mtu": 9000,
            "sglang_profile_overrides": {"max_running_requests": 8},
        },
    ]
    flag = [dict(n, sglang_profile_overrides={"max_running_requests": 6}) for n in nodes]
    moved = [dict(nodes[0]), dict(nodes[1], roce_ipv4="10.0.30.9")]
    mtu = [dict(n, roce_mtu=1500) for n in nodes]
    roce = filters.converge_inputs("roce:main")
    launch = filters.converge_inputs("sglang_node:main")

    def roce_digest(cluster):
        return filters.converge_digest(
            {"preflight_cluster": filters.converge_cluster_view(cluster, roce)}, "roce:main"
        )

    # A profile flag is not the data-plane stage's business; a peer's address and the MTU are.
    assert roce_digest(flag) == roce_digest(nodes)
    assert roce_digest(moved) != roce_digest(nodes)
    assert roce_digest(mtu) != roce_digest(nodes)
    # The launch reads the profile through its own resolved engine (the same on every node),
    # and of the others their identity.
    assert {"preflight_cluster", "sglang_engine"} <= set(launch)
    assert filters.converge_cluster_view(moved, launch)[1]["roce_ipv4"] == "10.0.30.9"
    assert "sglang_profile_overrides" not in filters.converge_cluster_view(flag, launch)[0]
    assert filters.converge_cluster_view({"ranks": {}}, roce) == {"ranks": {}}
    # The control stage declares what its cluster description is made of.
    assert {"preflight_cluster", "sglang_engine"} <= set(
        filters.converge_inputs("watchdog:control")
    )


def test_every_stages_engine_fields_are_profile_fields():
    from ansible_collections.sparkfleet.serving.plugins.action.converge_decide import STAGES
    from ansible_collections.sparkfleet.serving.plugins.module_utils._profile_schema import defaults

    fields = set(defaults())
    declared = {
        stage: table["engine_fields"] for stage, table in STAGES.items() if "engine_fields" in table
    }
    # A misspelt field would silently leave its stage out of a change that concerns it.
    assert set(declared) == {"weights", "patches", "control", "watchdog"}
    for stage, names in declared.items():
        assert set(names) <= fields, (stage, set(names) - fields)
    # Every entry point a stage digests exists, and every stage the roles call is in the table.
    called = set()
    for path in sorted(ROLES.glob("*/tasks/*.yml")):
        called.update(re.findall(r"converge_decide:\n\s+stage: (\w+)", path.read_text()))
    # ("all": every stage at once, as site.yml and the upgrade's passes decide first.)
    assert called - {"all"} == set(STAGES)
    # The probe reads the stamp of every stage the table decides, in its order.
    probe_vars = yaml.safe_load((ROLES / "converge" / "vars" / "main.yml").read_text())
    assert probe_vars["__converge_stages"] == list(STAGES)
    for table in STAGES.values():
        for item in table["roles"]:
            assert filters.converge_inputs(item), item


NIC_OK = {"exists": True, "mtu": 9000, "ipv4": ["10.0.22.1/24", "10.0.30.1/24"]}
GID_OK = {
    "found": True,
    "index": 3,
    "gid": "::ffff:10.0.30.1",
    "hca": "rocep1s0f0",
    "port": 1,
    "netdev": "enp1s0f0np0",
}
WANT = {
    "iface": "enp1s0f0np0",
    "mtu": 9000,
    "address": "10.0.30.1/24",
    "recorded": {
        "gid_index": "3",
        "gid": "::ffff:10.0.30.1",
        "hca": "rocep1s0f0",
        "gid_port": 1,
        "netdev": "enp1s0f0np0",
    },
}


@pytest.mark.parametrize(
    "probe_state, expected",
    [
        ({}, []),
        ({"nics": {"enp1s0f0np0": dict(NIC_OK, mtu=1500)}}, ["enp1s0f0np0: MTU 1500, want 9000"]),
        (
            {"nics": {"enp1s0f0np0": dict(NIC_OK, ipv4=["10.0.22.1/24"])}},
            ["enp1s0f0np0: 10.0.30.1/24 not assigned"],
        ),
        ({"nics": {"enp1s0f0np0": {"exists": False}}}, ["enp1s0f0np0: no such NIC"]),
        (
            {"gids": [dict(GID_OK, index=7)]},
            ["GID row moved: index 7 on rocep1s0f0, recorded 3 on rocep1s0f0"],
        ),
        ({"gids": [{"found": False}]}, ["no RoCE GID row for 10.0.30.1"]),
        # The rest of the row the stage publishes: a launch reads it as recorded otherwise.
        (
            {"gids": [dict(GID_OK, port=2)]},
            ["GID row moved: index 3 on rocep1s0f0, recorded 3 on rocep1s0f0"],
        ),
        (
            {"gids": [dict(GID_OK, netdev="enP2p1s0f0np0")]},
            ["GID row moved: index 3 on rocep1s0f0, recorded 3 on rocep1s0f0"],
        ),
        (
            {
                "peers": {
                    "10.0.30.2": {"ok": True},
                    "10.0.30.3": {"ok": False, "error": "no answer"},
                }
            },
            ["jumbo ping to 10.0.30.3: no answer"],
        ),
        # One profile for the port in netplan's output is the role's own; a second is drift.
        ({"netplan": {"ports": {"enp1s0f0np0": [{"id": "enp1s0f0np0"}]}}}, []),
        (
            {"netplan": {"ports": {"enp1s0f0np0": [{"id": "NM-5f0c"}, {"id": "enp1s0f0np0"}]}}},
            ["netplan gives enp1s0f0np0 2 profiles (NM-5f0c, enp1s0f0np0)"],
        ),
    ],
    ids=[
        "same",
        "mtu",
        "address",
        "nic",
        "gid-moved",
        "gid-gone",
        "port",
        "netdev",
        "ping",
        "netplan-one",
        "netplan-two",
    ],
)
def test_roce_live_reasons(probe_state, expected):
    state = {"nics": {"enp1s0f0np0": NIC_OK}, "gids": [GID_OK], "peers": {}}
    state.update(probe_state)
    assert filters.converge_live(state, "roce", WANT) == expected


def test_image_weights_and_rank_reasons():
    state = {
        "images": {"sglang:1": {"exists": True, "id": "sha256:" + "b" * 64}},
        "weights": {
            "org/model@c1": {"state": "present", "bad": []},
            "org/draft@c2": {"state": "bad", "bad": ["model.safetensors"]},
            "org/touched@c3": {"state": "present", "bad": [], "rehashed": True},
        },
        "containers": {
            "r0": {"running": True, "labels": {"sparkfleet.config": "h1"}},
            "r1": {"running": False, "status": "exited"},
        },
    }
    assert (
        filters.converge_live(
            state, "image", {"image": "sglang:1", "image_id": "sha256:" + "b" * 64}
        )
        == []
    )
    assert (
        "patches cut from"
        in filters.converge_live(
            state, "image", {"image": "sglang:1", "image_id": "sha256:" + "a" * 64}
        )[0]
    )
    assert filters.converge_live(state, "image", {"image": "sglang:2"}) == [
        "image sglang:2: not on this node"
    ]
    assert filters.converge_live(state, "weights") == [
        "weights org/draft@c2: bad (model.safetensors)",
        "weights org/touched@c3: files changed on disk verify, their record is out of date",
    ]
    assert filters.converge_live(state, "rank", {"container": "r0", "config_hash": "h1"}) == []
    assert filters.converge_live(state, "rank", {"container": "r0", "config_hash": "h2"}) == [
        "r0: runs configuration h1, current h2"
    ]
    assert filters.converge_live(state, "rank", {"container": "r1", "config_hash": "h1"}) == [
        "r1: exited"
    ]
    # The GID index a rank got from its launcher at its start: stale once the table moved.
    state["containers"]["r0"]["labels"]["sparkfleet.gid-index"] = "7"
    state["gids"] = [{"found": True, "index": 7}]
    assert filters.converge_live(state, "rank", {"container": "r0", "config_hash": "h1"}) == []
    state["gids"] = [{"found": True, "index": 9}]
    assert filters.converge_live(state, "rank", {"container": "r0", "config_hash": "h1"}) == [
        "r0: runs RoCE GID index 7, the table now holds the data-plane address at 9"
    ]
    # No row now (the port is down): nothing to move to, the roce stage says why.
    state["gids"] = [{"found": False}]
    assert filters.converge_live(state, "rank", {"container": "r0", "config_hash": "h1"}) == []


def test_roce_live_reasons_cover_every_function_of_the_port():
    """Both halves of the port (roce_hcas): each NIC, address and GID row is compared with
    what the stage recorded for that function."""
    second_gid = dict(GID_OK, gid="::ffff:10.0.31.1", hca="roceP2p1s0f0", netdev="enP2p1s0f0np0")
    recorded = dict(
        WANT["recorded"],
        functions=[
            WANT["recorded"],
            {"gid_index": "3", "gid": "::ffff:10.0.31.1", "hca": "roceP2p1s0f0", "gid_port": 1,
             "netdev": "enP2p1s0f0np0"},
        ],
    )  # fmt: skip
    want = {
        "mtu": 9000,
        "functions": [
            {"iface": "enp1s0f0np0", "address": "10.0.30.1/24"},
            {"iface": "enP2p1s0f0np0", "address": "10.0.31.1/24"},
        ],
        "recorded": recorded,
    }
    state = {
        "nics": {
            "enp1s0f0np0": NIC_OK,
            "enP2p1s0f0np0": {"exists": True, "mtu": 9000, "ipv4": ["10.0.31.1/24"]},
        },
        "gids": [GID_OK, second_gid],
    }
    assert filters.converge_live(state, "roce", want) == []
    state["nics"]["enP2p1s0f0np0"]["mtu"] = 1500
    state["gids"] = [GID_OK, dict(second_gid, index=5)]
    assert filters.converge_live(state, "roce", want) == [
        "enP2p1s0f0np0: MTU 1500, want 9000",
        "GID row moved: index 5 on roceP2p1s0f0, recorded 3 on roceP2p1s0f0",
    ]
    state["gids"] = [GID_OK, {"found": False}]
    assert "no RoCE GID row for 10.0.31.1" in filters.converge_live(state, "roce", want)
