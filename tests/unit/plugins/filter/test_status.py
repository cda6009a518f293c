"""status_report: the text of playbooks/status.yml's cluster report.

Each expected text below was rendered, from the same inputs, by the Jinja template that built
the report inside playbooks/status.yml before this filter (ansible-core's Templar, commit
f3c4231): the move changed no character of the report.
"""

from __future__ import annotations

import json
import pathlib

import pytest
import yaml
from ansible.errors import AnsibleFilterError

from ansible_collections.sparkfleet.serving.plugins.filter.status import (
    FilterModule,
    status_report,
)

REPO = pathlib.Path(__file__).parents[4]
NAMES = ("spark-1", "spark-2", "spark-3", "spark-4")
ORDER = ["spark-4", "spark-3", "spark-2", "spark-1"]  # preflight_cluster.bring_up_order
HEAD = "spark-1"
URL = "http://192.168.3.251:9090"
NIC = "enp1s0f0np0"
RUNNING = "sha256:3f2a9c1d7e4b5a6f8091a2b3c4d5e6f708192a3b4c5d6e7f8091a2b3c4d5e6f7"
NEW = "sha256:9e8d7c6b5a4f3e2d1c0b9a8f7e6d5c4b3a2f1e0d9c8b7a6f5e4d3c2b1a0f9e8d"
GONE = "Failed to connect to the host via ssh: ssh: connect to host 192.168.3.23 port 22: No route"
NOT_CONFIGURED = "no Prometheus configured (monitoring_prometheus_url)"


def status(**fields):
    """The watchdog's ``status`` (its JSON) as the play registers it."""
    state = {
        "unreachable": {},
        "unreachable_past_bound": [],
        "unreachable_s": 900,
        "paused": None,
        "held": None,
        "gave_up": None,
        "reboot_required": None,
        "drill": None,
        "max_restarts": 3,
        "restarts_counted_in_window": 0,
        "now": 1796630400.0,
        "stall_s": 300,
        "progress": None,
        "last_stall": None,
        "last_memory": None,
        "last_observation": None,
        "last_decision": None,
        "restarts_in_window": 0,
        "window_s": 3600,
        "restarts": [],
    }
    state.update(fields)
    return {"rc": 0, "stdout": json.dumps(state), "stderr": "", "changed": False}


def node(rank):
    """A provisioned, healthy node's variables as the play leaves them."""
    return {
        "spark_rank": rank,
        "ansible_host": f"192.168.3.{3 + 10 * rank}",
        "roce_iface": NIC,
        "converge_node": {
            "changed": False,
            "nics": {NIC: {"mtu": 9000, "ipv4": [f"10.10.0.{rank + 1}/24"]}},
            "gids": [{"address": f"10.10.0.{rank + 1}", "found": True, "index": 3}],
            "containers": {f"sglang-r{rank}": {"image": RUNNING, "running": True}},
        },
        "converge_recorded": {"roce": {"roce_node": {"gid_index": 3}}, "sglang_node": {}},
        "__status_engine": {
            "rc": 0,
            "stdout": "running current",
            "stderr": "",
            "cmd": ["/usr/local/bin/sparkfleet-sglang-node", "status"],
            "changed": False,
        },
    }


def cluster(**head):
    """Four healthy nodes; ``head`` replaces the head's own values."""
    hostvars = {name: node(rank) for rank, name in enumerate(NAMES)}
    hostvars[HEAD].update(
        {
            "sglang_engine": {
                "host": "0.0.0.0",
                "port": 30000,
                "served_model_name": "qwen3-8b",
                "container_name": "sglang",
                "image": "sparkfleet-twin/sglang:0.5.9",
            },
            "converge_engine": {"pin": {}, "known_good": {}},
            "__status_api": {"passed": True, "changed": False, "msg": "healthy"},
            "__status_watchdog": status(),
        }
    )
    hostvars[HEAD].update(head)
    return hostvars


def unreachable_node():
    hostvars = cluster(
        __status_watchdog=status(
            unreachable={
                "spark-3": {
                    "since": 1796630280.0,
                    "since_at": "2026-12-07T08:58:00Z",
                    "error": "ssh: connect to host 192.168.3.23 port 22: No route to host",
                    "for_s": 120,
                }
            },
            last_decision={
                "time": 1796630280.0,
                "at": "2026-12-07T08:58:00Z",
                "decision": "wait",
                "reason": "spark-3 unreachable",
            },
        )
    )
    gone = {"unreachable": True, "msg": GONE + "\nmore", "changed": False}
    hostvars["spark-3"].update(converge_node=gone, converge_recorded={}, __status_engine=gone)
    return hostvars


def gid_moved():
    hostvars = cluster()
    hostvars["spark-2"]["converge_node"]["gids"] = [{"found": True, "index": 5}]
    hostvars["spark-4"]["converge_node"]["gids"] = [{"found": False}]
    return hostvars


def watchdog_paused():
    return cluster(
        __status_watchdog=status(
            paused="ops: maintenance window",
            last_decision={
                "time": 1796630000.0,
                "at": "2026-12-07T08:53:20Z",
                "decision": "restart",
                "reason": "head spark-1 /health 503",
            },
            restarts_in_window=1,
            last_memory={
                "time": 1796629990.0,
                "at": "2026-12-07T08:53:10Z",
                "ok": True,
                "reason": "every node has the container's 100 GiB",
            },
        )
    )


def watchdog_gave_up():
    return cluster(
        __status_watchdog=status(
            gave_up="3 restarts in 3600 s (watchdog_max_restarts=3)",
            last_decision={
                "time": 1796630300.0,
                "at": "2026-12-07T08:58:20Z",
                "decision": "give up",
                "reason": "restart bound reached",
            },
            restarts_in_window=3,
            progress={"running": 2.0, "tokens": 640.0, "seen": 1796630390.0, "moved": 1796630250.0},
            last_observation={"time": 1796630395.5, "kind": "wedged"},
            last_stall={
                "time": 1796630300.0,
                "at": "2026-12-07T08:58:20Z",
                "reason": "head spark-1 answers /health 200 but generated no token for 300 s",
            },
            last_memory={
                "time": 1796630290.0,
                "at": "2026-12-07T08:58:10Z",
                "ok": False,
                "reason": "spark-3: 12.0 GiB available, 100.0 GiB needed; fix: reboot spark-3",
            },
            unreachable={
                "spark-4": {
                    "since_at": "2026-12-07T08:40:00Z",
                    "error": "ssh: timeout",
                    "for_s": 1000,
                    "past_bound": True,
                },
                "spark-2": {
                    "since_at": "2026-12-07T08:59:00Z",
                    "error": "ssh: refused",
                    "for_s": 60,
                    "past_bound": False,
                },
            },
        )
    )


def reboot_required():
    return cluster(
        __status_watchdog=status(reboot_required="spark-3: memory short (reboot spark-3)")
    )


def missing_values():
    """What a node or the head may lack: each shows its placeholder."""
    hostvars = cluster(__status_api={"passed": False}, converge_engine=None)
    del hostvars[HEAD]["__status_watchdog"]
    hostvars["spark-2"]["converge_node"]["nics"] = {}
    del hostvars["spark-2"]["converge_recorded"]
    hostvars["spark-3"]["converge_node"] = {"changed": False, "nics": {NIC: {}}, "gids": []}
    hostvars["spark-3"]["__status_engine"] = {"rc": 3, "stdout": "", "cmd": ["x", "status"]}
    hostvars["spark-4"]["converge_recorded"] = {"roce": {"roce_node": None}}
    hostvars["spark-4"]["converge_node"]["containers"] = {"sglang-r3": {"image": None}}
    hostvars["spark-4"]["__status_engine"] = {
        "failed": True,
        "msg": "[Errno 2] No such file or directory: b'/usr/local/bin/sparkfleet-sglang-node'",
        "rc": 2,
        "cmd": "/usr/local/bin/sparkfleet-sglang-node status",
    }
    return hostvars


def upgraded():
    return cluster(
        __status_api={"passed": False, "msg": "HTTP 503 from http://0.0.0.0:30000/health"},
        converge_engine={
            "pin": {"image": "sparkfleet-twin/sglang:0.6.0", "image_id": NEW, "decision": "kept"},
            "known_good": {
                "image": "sparkfleet-twin/sglang:0.5.9",
                "image_id": RUNNING,
                "recorded_at": "2026-12-06T21:14:03Z",
                "run_id": "20261206-211403",
            },
        },
    )


ALERTS = [
    {
        "name": "SparkfleetRoceMtuLow",
        "severity": "critical",
        "node": "spark-4",
        "since": "2026-12-07T08:01:00Z",
        "summary": "spark-4: data-plane MTU 1500, below 9000",
    },
    {
        "name": "SparkfleetWatchdogGaveUp",
        "severity": "critical",
        "node": "",
        "since": "2026-12-07T08:00:00Z",
        "summary": "the watchdog gave up",
    },
]

# name: (hostvars, alerts, alerts_error)
CASES = {
    "healthy": (cluster, [], ""),
    "unreachable node": (unreachable_node, [], ""),
    "GID index moved": (gid_moved, [], ""),
    "watchdog paused": (watchdog_paused, [], ""),
    "watchdog gave up": (watchdog_gave_up, [], ""),
    "reboot required": (reboot_required, [], ""),
    "alerts firing": (cluster, ALERTS, ""),
    "no Prometheus": (cluster, "", NOT_CONFIGURED),
    "Prometheus did not answer": (cluster, None, f"{URL} did not answer: Connection refused"),
    "missing values": (missing_values, [], ""),
    "upgraded, head unhealthy": (upgraded, [], ""),
}

# The template's text for each case (commit f3c4231's playbooks/status.yml).
HEADER = "host       rank  mgmt IP         RoCE NIC        MTU  GID rec   GID now   engine"
ROWS = [
    "spark-1       0  192.168.3.3     enp1s0f0np0    9000  3         3         running current",
    "spark-2       1  192.168.3.13    enp1s0f0np0    9000  3         3         running current",
    "spark-3       2  192.168.3.23    enp1s0f0np0    9000  3         3         running current",
    "spark-4       3  192.168.3.33    enp1s0f0np0    9000  3         3         running current",
]
API_HEALTHY = "API 0.0.0.0:30000 on spark-1: healthy, serving qwen3-8b"
IMAGES = (
    "engine image running: spark-1 3f2a9c1d7e4b, spark-2 3f2a9c1d7e4b, spark-3 3f2a9c1d7e4b, "
    "spark-4 3f2a9c1d7e4b (inventory: sparkfleet-twin/sglang:0.5.9)"
)
NO_KNOWN_GOOD = "last known-good: none recorded (no engine upgrade yet)"
WATCHDOG_ACTIVE = "watchdog: active; last decision: none yet; restarts in the last 3600 s: 0"
NO_ALERTS = "alerts (http://192.168.3.251:9090): none firing"
EXPECTED = {
    "healthy": "\n".join(
        [
            HEADER,
            *ROWS,
            API_HEALTHY,
            IMAGES,
            NO_KNOWN_GOOD,
            WATCHDOG_ACTIVE,
            NO_ALERTS,
        ]
    ),
    "unreachable node": "\n".join(
        [
            HEADER,
            ROWS[0],
            ROWS[1],
            (
                "spark-3       2  192.168.3.23    enp1s0f0np0       ?  none      MISSING   host "
                "unreachable (Failed to connect to the host via ssh: ssh: connect to host "
                "192.168.3.23 port 22: No route)"
            ),
            ROWS[3],
            API_HEALTHY,
            (
                "engine image running: spark-1 3f2a9c1d7e4b, spark-2 3f2a9c1d7e4b, spark-3 none, "
                "spark-4 3f2a9c1d7e4b (inventory: sparkfleet-twin/sglang:0.5.9)"
            ),
            NO_KNOWN_GOOD,
            (
                "watchdog: active; last decision: wait at 2026-12-07T08:58:00Z (spark-3 "
                "unreachable); restarts in the last 3600 s: 0"
            ),
            (
                "watchdog: spark-3 unreachable since 2026-12-07T08:58:00Z (120 s: ssh: connect "
                "to host 192.168.3.23 port 22: No route to host); waiting for it, no restart "
                "while it is gone"
            ),
            NO_ALERTS,
        ]
    ),
    "GID index moved": "\n".join(
        [
            HEADER,
            ROWS[0],
            (
                "spark-2       1  192.168.3.13    enp1s0f0np0    9000  3         5         "
                "running current"
            ),
            ROWS[2],
            (
                "spark-4       3  192.168.3.33    enp1s0f0np0    9000  3         MISSING   "
                "running current"
            ),
            API_HEALTHY,
            IMAGES,
            NO_KNOWN_GOOD,
            WATCHDOG_ACTIVE,
            NO_ALERTS,
        ]
    ),
    "watchdog paused": "\n".join(
        [
            HEADER,
            *ROWS,
            API_HEALTHY,
            IMAGES,
            NO_KNOWN_GOOD,
            (
                "watchdog: PAUSED (ops: maintenance window); last decision: restart at "
                "2026-12-07T08:53:20Z (head spark-1 /health 503); restarts in the last 3600 s: 1"
            ),
            (
                "watchdog: last memory check at 2026-12-07T08:53:10Z: passed (every node has the "
                "container's 100 GiB)"
            ),
            NO_ALERTS,
        ]
    ),
    "watchdog gave up": "\n".join(
        [
            HEADER,
            *ROWS,
            API_HEALTHY,
            IMAGES,
            NO_KNOWN_GOOD,
            (
                "watchdog: GAVE UP (3 restarts in 3600 s (watchdog_max_restarts=3)); last "
                "decision: give up at 2026-12-07T08:58:20Z (restart bound reached); restarts in "
                "the last 3600 s: 3"
            ),
            (
                "watchdog: 2 request(s) running, no token generated for 146 s (a stall past 300 "
                "s is a wedge)"
            ),
            (
                "watchdog: last stall restart at 2026-12-07T08:58:20Z: head spark-1 answers "
                "/health 200 but generated no token for 300 s"
            ),
            (
                "watchdog: last memory check at 2026-12-07T08:58:10Z: spark-3: 12.0 GiB "
                "available, 100.0 GiB needed; fix: reboot spark-3"
            ),
            (
                "watchdog: spark-4 unreachable since 2026-12-07T08:40:00Z (1000 s: ssh: "
                "timeout); PAST watchdog_unreachable_s=900 s: check the node (power, network, "
                "sshd); still waiting, not given up"
            ),
            (
                "watchdog: spark-2 unreachable since 2026-12-07T08:59:00Z (60 s: ssh: refused); "
                "waiting for it, no restart while it is gone"
            ),
            NO_ALERTS,
        ]
    ),
    "reboot required": "\n".join(
        [
            HEADER,
            *ROWS,
            API_HEALTHY,
            IMAGES,
            NO_KNOWN_GOOD,
            (
                "watchdog: REBOOT REQUIRED (spark-3: memory short (reboot spark-3)); last "
                "decision: none yet; restarts in the last 3600 s: 0"
            ),
            NO_ALERTS,
        ]
    ),
    "alerts firing": "\n".join(
        [
            HEADER,
            *ROWS,
            API_HEALTHY,
            IMAGES,
            NO_KNOWN_GOOD,
            WATCHDOG_ACTIVE,
            "alerts (http://192.168.3.251:9090): 2 firing",
            (
                "  SparkfleetRoceMtuLow [critical] spark-4 since 2026-12-07T08:01:00Z: spark-4: "
                "data-plane MTU 1500, below 9000"
            ),
            (
                "  SparkfleetWatchdogGaveUp [critical] since 2026-12-07T08:00:00Z: the watchdog "
                "gave up"
            ),
        ]
    ),
    "no Prometheus": "\n".join(
        [
            HEADER,
            *ROWS,
            API_HEALTHY,
            IMAGES,
            NO_KNOWN_GOOD,
            WATCHDOG_ACTIVE,
            "alerts: no Prometheus configured (monitoring_prometheus_url)",
        ]
    ),
    "Prometheus did not answer": "\n".join(
        [
            HEADER,
            *ROWS,
            API_HEALTHY,
            IMAGES,
            NO_KNOWN_GOOD,
            WATCHDOG_ACTIVE,
            "alerts: http://192.168.3.251:9090 did not answer: Connection refused",
        ]
    ),
    "missing values": "\n".join(
        [
            HEADER,
            ROWS[0],
            (
                "spark-2       1  192.168.3.13    enp1s0f0np0       ?  none      3         "
                "running current"
            ),
            (
                "spark-3       2  192.168.3.23    enp1s0f0np0       ?  3         MISSING   not "
                "provisioned"
            ),
            (
                "spark-4       3  192.168.3.33    enp1s0f0np0    9000  none      3         not "
                "provisioned"
            ),
            "API 0.0.0.0:30000 on spark-1: NOT HEALTHY (no answer)",
            (
                "engine image running: spark-1 3f2a9c1d7e4b, spark-2 3f2a9c1d7e4b, spark-3 none, "
                "spark-4 none (inventory: sparkfleet-twin/sglang:0.5.9)"
            ),
            NO_KNOWN_GOOD,
            "watchdog: not installed on spark-1",
            NO_ALERTS,
        ]
    ),
    "upgraded, head unhealthy": "\n".join(
        [
            HEADER,
            *ROWS,
            "API 0.0.0.0:30000 on spark-1: NOT HEALTHY (HTTP 503 from http://0.0.0.0:30000/health)",
            (
                "engine image running: spark-1 3f2a9c1d7e4b, spark-2 3f2a9c1d7e4b, spark-3 "
                "3f2a9c1d7e4b, spark-4 3f2a9c1d7e4b (inventory: sparkfleet-twin/sglang:0.5.9); "
                "pinned on the head: sparkfleet-twin/sglang:0.6.0 (9e8d7c6b5a4f, kept)"
            ),
            (
                "last known-good: sparkfleet-twin/sglang:0.5.9 (3f2a9c1d7e4b), recorded "
                "2026-12-06T21:14:03Z by upgrade 20261206-211403; rollback.yml returns to it"
            ),
            WATCHDOG_ACTIVE,
            NO_ALERTS,
        ]
    ),
}


def report(case):
    hostvars, alerts, error = CASES[case]
    return status_report(hostvars(), ORDER, HEAD, alerts, URL, error)


def test_the_filter_is_registered():
    assert FilterModule().filters() == {"status_report": status_report}


@pytest.mark.parametrize("case", CASES)
def test_the_report_is_the_templates_text(case):
    assert report(case) == EXPECTED[case]


def test_the_playbook_prints_the_filters_report():
    plays = yaml.safe_load((REPO / "playbooks" / "status.yml").read_text())
    (task,) = [t for t in plays[-1]["tasks"] if t["name"] == "Print the cluster report"]
    assert "sparkfleet.serving.status_report(" in task["ansible.builtin.debug"]["msg"]
    assert task["run_once"] is True


def test_a_moved_gid_index_shows_both_and_a_missing_row_says_so():
    rows = {line.split()[0]: line.split() for line in report("GID index moved").splitlines()[1:5]}
    # host, rank, mgmt IP, NIC, MTU, GID recorded, GID now, engine
    assert rows["spark-2"][5:7] == ["3", "5"]
    assert rows["spark-4"][5:7] == ["3", "MISSING"]


def test_an_unreachable_node_is_a_row_saying_why_not_a_failure():
    (row,) = [
        line for line in report("unreachable node").splitlines() if line.startswith("spark-3")
    ]
    assert row.endswith(f"host unreachable ({GONE})")


@pytest.mark.parametrize(
    ("change", "message"),
    [
        (lambda hv: hv["spark-3"].pop("ansible_host"), "hostvars['spark-3'] has no ansible_host"),
        (lambda hv: hv["spark-3"].pop("__status_engine"), "has no __status_engine"),
        (lambda hv: hv.pop(HEAD), "no variables for spark-1 (hostvars)"),
        (
            lambda hv: hv[HEAD].update(converge_engine={"pin": {"image": "x", "decision": "kept"}}),
            "the head's engine pin has no image_id",
        ),
        (
            lambda hv: hv[HEAD].update(__status_watchdog={"rc": 0, "stdout": "Traceback"}),
            "the watchdog's status is not JSON",
        ),
        (
            lambda hv: hv[HEAD].update(__status_watchdog={"rc": 0, "stdout": "{}"}),
            "the watchdog's status has no last_decision",
        ),
    ],
)
def test_a_value_the_report_prints_without_a_placeholder_fails_naming_it(change, message):
    hostvars = cluster()
    change(hostvars)
    with pytest.raises(AnsibleFilterError, match="status_report: ") as raised:
        status_report(hostvars, ORDER, HEAD, [], URL, "")
    assert message in str(raised.value)


def test_an_alert_without_its_fields_fails_naming_it():
    with pytest.raises(AnsibleFilterError, match="alert 2 has no severity"):
        status_report(cluster(), ORDER, HEAD, [ALERTS[0], {"name": "X"}], URL, "")
