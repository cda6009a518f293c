"""`sparkfleet-cluster stop` (roles/watchdog/files/sparkfleet_cluster_control.py): the head
first, then the workers; a failed wave ends the stop there and names what still runs (issue 44,
stop.yml)."""

from __future__ import annotations

import pathlib
import sys
import threading

import pytest

# The program's modules, imported by plain name from their directory (as its entry point,
# sparkfleet_cluster.py, does on the head).
FILES = str(pathlib.Path(__file__).parents[3] / "roles" / "watchdog" / "files")
if FILES not in sys.path:
    sys.path.insert(0, FILES)

import sparkfleet_cluster_common as common  # noqa: E402
import sparkfleet_cluster_control as control  # noqa: E402


class _Recorder(control.Cluster):
    """A Cluster whose verbs are recorded, in the order they were called, with fixed answers."""

    def __init__(self, hosts, tmp_path, answers=None, order="workers_first"):
        ranks = [{"rank": i, "host": h, "address": h} for i, h in enumerate(hosts)]
        cfg = {
            "ranks": ranks,
            "ssh": {"connect_timeout_s": 5},
            "lock_file": str(tmp_path / "cluster.lock"),
            "lock_wait_s": 1,
            "driver": {"kind": "compose", "program": "/bin/true", "order": order},
        }
        self.lines = []
        super().__init__(cfg, lambda msg, level="INFO": self.lines.append(msg))
        self.answers = answers or {}
        self.calls = []
        self.lock = threading.Lock()

    def run(self, rank, *verb, timeout=None):
        with self.lock:
            self.calls.append((rank["host"], verb))
        return self.answers.get(rank["host"], (0, "", ""))


@pytest.mark.parametrize(
    ("hosts", "waves"),
    [
        (["spark-1"], [["spark-1"]]),
        (["spark-1", "spark-2"], [["spark-1"], ["spark-2"]]),
        (
            ["spark-1", "spark-2", "spark-3", "spark-4"],
            [["spark-1"], ["spark-2", "spark-3", "spark-4"]],
        ),
    ],
)
@pytest.mark.parametrize("order", ["workers_first", "head_first"])
def test_stop_waves_are_the_head_then_every_worker(hosts, waves, order, tmp_path):
    cluster = _Recorder(hosts, tmp_path, order=order)
    assert [[r["host"] for r in wave] for wave in cluster.stop_waves()] == waves


def test_stop_takes_the_head_before_any_worker(tmp_path):
    cluster = _Recorder(["spark-1", "spark-2", "spark-3"], tmp_path)
    assert cluster.stop() == (0, "stopped")
    assert cluster.calls[0] == ("spark-1", ("stop",))
    assert sorted(cluster.calls[1:]) == [("spark-2", ("stop",)), ("spark-3", ("stop",))]
    assert cluster.lines[:2] == [
        "stopped spark-1 (rank 0)",
        "stopped spark-2 (rank 1), spark-3 (rank 2)",
    ]
    assert cluster.lines[-1] == "deliberate stop of every rank (compose driver)"


def test_a_head_that_fails_to_stop_leaves_the_workers_running_and_names_them(tmp_path):
    cluster = _Recorder(
        ["spark-1", "spark-2", "spark-3"], tmp_path, {"spark-1": (1, "", "docker: no such daemon")}
    )
    rc, msg = cluster.stop()
    assert rc == common.EX_FAILED
    assert cluster.calls == [("spark-1", ("stop",))]
    assert msg == "spark-1: docker: no such daemon; not stopped after that: spark-2, spark-3"


def test_a_worker_that_does_not_answer_is_a_transient_after_the_head_stopped(tmp_path):
    cluster = _Recorder(
        ["spark-1", "spark-2"], tmp_path, {"spark-2": (255, "", "ssh: connect: No route to host")}
    )
    rc, msg = cluster.stop()
    assert rc == common.EX_UNREACHABLE
    assert [c[0] for c in cluster.calls] == ["spark-1", "spark-2"]
    assert "cannot reach spark-2: ssh: connect: No route to host during the stop" in msg
