"""The watchdog's decision loop (Watchdog.once/run) against a fake clock and a fake cluster.

The real Cluster (ordered restart, check, SSH classification) runs on top of a
fake `run` that answers each launcher verb from an in-memory model of four nodes;
time is a fake clock whose sleep fires scheduled faults. No SSH, no sleeps.
"""

from __future__ import annotations

import heapq
import json
import pathlib
import sys

import pytest
from prometheus_client.parser import text_string_to_metric_families

# The program's modules, imported by plain name from their directory (as its entry point,
# sparkfleet_cluster.py, does on the head).
FILES = str(pathlib.Path(__file__).parents[3] / "roles" / "watchdog" / "files")
if FILES not in sys.path:
    sys.path.insert(0, FILES)

import sparkfleet_cluster_common as common  # noqa: E402
import sparkfleet_cluster_control as control  # noqa: E402
import sparkfleet_cluster_decisions as decisions  # noqa: E402
import sparkfleet_cluster_watchdog as watchdog  # noqa: E402

T0 = 1_800_000_000.0
HOSTS = ["spark-1", "spark-2", "spark-3", "spark-4"]


class FakeClock:
    """Wall and monotonic time that move only when slept; sleeping fires due events."""

    def __init__(self):
        self.now = T0
        self.events = []
        self.seq = 0

    def time(self):
        return self.now

    def monotonic(self):
        return self.now - T0

    def at(self, when, action):
        """Run action() once the clock reaches T0 + when."""
        heapq.heappush(self.events, (T0 + when, self.seq, action))
        self.seq += 1

    def sleep(self, seconds):
        self.advance(seconds)

    def advance(self, seconds):
        end = self.now + seconds
        while self.events and self.events[0][0] <= end:
            when, _seq, action = heapq.heappop(self.events)
            self.now = max(self.now, when)
            action()
        self.now = end


class World:
    """Four nodes: each up or not, its rank's launcher state and start time."""

    def __init__(self, clock):
        self.clock = clock
        self.up = dict.fromkeys(HOSTS, True)
        self.state = dict.fromkeys(HOSTS, "running current")
        self.started = dict.fromkeys(HOSTS, T0 - 3600)
        self.refuse = {}
        self.booted = dict.fromkeys(HOSTS, T0 - 86400)  # when each node last booted
        self.port_up_after_s = 0  # a rebooted node's data plane is ready this long after its boot
        self.short = {}  # host -> why its memcheck refuses (after the stop)
        self.memchecks = []
        self.progress = None  # the head's /metrics reading ({"running", "tokens"}) or None
        self.starts = []  # (time, host) of every launcher start
        self.stops = []

    # faults
    def power_off(self, host):
        """The node goes (a reboot of minutes); its peers' ranks exit, as NCCL ranks do."""
        self.up[host] = False
        for other in HOSTS:
            if other != host and self.state[other].startswith("running"):
                self.state[other] = "exited"

    def power_on(self, host):
        self.up[host] = True
        self.state[host] = "exited"
        self.booted[host] = self.clock.time()

    def late_port(self, host):
        """Why this node's launcher refuses now: its port is not up yet after the boot."""
        if self.clock.time() - self.booted[host] < self.port_up_after_s:
            return "enp1s0f0np0 MTU is 1500, below 9000"
        return None

    def kill(self, host):
        self.state[host] = "exited"

    def healthy(self):
        return all(self.up.values()) and all(s == "running current" for s in self.state.values())


class FakeCluster(control.Cluster):
    """The real Cluster, whose launcher calls land on the World instead of SSH."""

    start_s = 1.0  # one rank's start
    boot_s = 5.0  # from the head's start to its /health 200

    def __init__(self, cfg, world, clock):
        super().__init__(cfg, lambda msg, level="INFO": None, clock)
        self.world = world

    def run(self, rank, *verb, timeout=None):
        host, w = rank["host"], self.world
        if not w.up[host]:
            return 255, "", f"ssh: connect to host {rank['address']} port 22: No route to host"
        if verb[0] == "status":
            return 0, w.state[host], ""
        if verb[0] == "check":
            why = w.refuse.get(host) or w.late_port(host)
            if why:
                # The launcher says how long ago its node booted, then why it refuses.
                uptime = f"uptime_s={self.clock.time() - w.booted[host]:.0f}\n"
                return 1, uptime, f"sparkfleet-sglang[x]: REFUSED: {why}"
            return 0, "ok", ""
        if verb[0] == "stop":
            w.state[host] = "absent"
            w.stops.append((self.clock.time(), host))
            return 0, "", ""
        if verb[0] == "start":
            self.clock.advance(self.start_s)
            if host == HOSTS[0] and w.progress is not None:
                w.progress = {"running": 0.0, "tokens": 0.0}  # a new engine: counters from 0
            w.state[host] = "running current"
            w.started[host] = self.clock.time()
            w.starts.append((self.clock.time(), host))
            return 0, "", ""
        if verb[0] == "tail":
            return 0, "engine log line", ""
        if verb[0] == "memcheck":
            w.memchecks.append((self.clock.time(), host))
            if host in w.short:
                return 1, "", f"sparkfleet-sglang[x]: REFUSED: {w.short[host]}"
            return 0, "ok", ""
        raise AssertionError(verb)

    def each(self, ranks, *verb, timeout=None):
        # In order, not in threads: the fake clock is not thread-safe.
        return {r["host"]: self.run(r, *verb, timeout=timeout) for r in ranks}

    def head_health(self):
        w, head = self.world, self.head["host"]
        up = w.healthy() and self.clock.time() - w.started[head] >= self.boot_s
        return 200 if up else 0

    def head_started_at(self):
        return self.world.started[self.head["host"]]

    def head_progress(self):
        return self.world.progress


@pytest.fixture
def rig(tmp_path):
    clock = FakeClock()
    world = World(clock)
    cfg = {
        "ranks": [
            {"rank": i, "host": h, "address": f"192.168.3.{3 + 10 * i}"}
            for i, h in enumerate(HOSTS)
        ],
        "ssh": {"connect_timeout_s": 5},
        "lock_file": str(tmp_path / "run" / "cluster.lock"),
        "lock_wait_s": 0,
        "boot_window_s": 600,
        "run_dir": str(tmp_path / "run"),
        "cluster_log": str(tmp_path / "cluster.log"),
        "watchdog": {
            "state_dir": str(tmp_path / "state"),
            "log_file": str(tmp_path / "watchdog.log"),
            "incident_dir": str(tmp_path / "incidents"),
            "incidents_keep": 20,
            "log_tail_lines": 10,
            "interval_s": 10,
            "confirm": 2,
            "confirm_after_s": 2,
            "run_budget_s": 55,
            "grace_s": 600,
            "boot_wait_s": 900,
            "backoff_s": 60,
            "max_restarts": 3,
            "window_s": 3600,
            "unreachable_s": 900,
        },
    }
    cluster = FakeCluster(cfg, world, clock)
    log = common.Log(cfg["watchdog"]["log_file"], "sparkfleet-watchdog")
    dog = watchdog.Watchdog(cfg, log, cluster=cluster, clock=clock)
    return Rig(clock, world, dog, tmp_path)


class Rig:
    def __init__(self, clock, world, dog, tmp_path):
        self.clock, self.world, self.dog, self.tmp = clock, world, dog, tmp_path

    def cron(self, minutes):
        """`minutes` cron runs, one a minute, as cron starts them."""
        rcs = []
        for _minute in range(minutes):
            start = self.clock.now
            rcs.append(self.dog.run())
            self.clock.advance(max(0.0, start + 60 - self.clock.now))
        return rcs

    def state(self):
        return json.loads((self.tmp / "state" / "state.json").read_text())

    def log(self):
        path = self.tmp / "watchdog.log"
        return path.read_text().splitlines() if path.exists() else []

    def lines(self, words):
        return [line for line in self.log() if words in line]

    def gave_up(self):
        return (self.tmp / "state" / "gave-up").exists()


def test_a_healthy_cluster_is_observed_for_the_whole_budget_and_left_alone(rig):
    assert rig.cron(3) == [0, 0, 0]
    assert rig.world.starts == []
    assert rig.state()["last_observation"]["kind"] == "healthy"
    # one line for the first healthy observation, none for the 17 that followed
    assert len(rig.lines("observed healthy")) == 1


def test_a_stopped_worker_is_waited_for_then_the_cluster_restarts_workers_first(rig):
    rig.clock.at(5, lambda: rig.world.power_off("spark-4"))
    rig.clock.at(185, lambda: rig.world.power_on("spark-4"))
    assert rig.cron(3) == [0, 0, 0]
    # while it is gone: unreachable, nothing restarted, no give-up, since when recorded
    state = rig.state()
    assert state["last_observation"]["kind"] == "unreachable"
    assert state["unreachable"]["spark-4"]["since"] == T0 + 10
    assert "No route to host" in state["unreachable"]["spark-4"]["error"]
    assert rig.world.starts == [] and rig.world.stops == []
    assert not rig.gave_up()
    rig.cron(2)
    state = rig.state()
    assert "unreachable" not in state
    assert state["returned"]["host"] == "spark-4"
    # one restart, decided after the return, every rank once, workers first
    assert [h for _t, h in rig.world.starts] == ["spark-4", "spark-3", "spark-2", "spark-1"]
    (restart,) = state["restarts"]
    assert restart["kind"] == "crash" and restart["rc"] == 0
    assert T0 + 185 <= restart["time"] <= T0 + 185 + 25
    assert restart["healthy_at"] - (T0 + 185) < 120
    assert state["last_observation"]["kind"] == "healthy"
    assert not rig.gave_up()
    # logged once per change: 18 observations while it was gone, one line each below
    assert len(rig.lines("observed unreachable")) == 1
    assert len(rig.lines("spark-4 answers again after 18")) == 1
    assert len(rig.lines("decision=restart:")) == 1


def test_a_crash_first_seen_right_after_a_return_is_confirmed_an_interval_later(rig):
    rig.clock.at(5, lambda: rig.world.power_off("spark-4"))
    rig.clock.at(25, lambda: rig.world.power_on("spark-4"))
    rig.cron(1)
    state = rig.state()
    (restart,) = state["restarts"]
    # gone at 10 and 20, back at 30 (crash, count 1), confirmed at 40, not at 32
    assert restart["detected_at"] == T0 + 30
    assert restart["time"] == T0 + 40


def test_a_crash_seen_by_the_next_cron_run_right_after_a_return_waits_for_the_node_to_settle(rig):
    # the node answers again in the last observation of one run; the next run's
    # first observation comes 5 s later: still too soon to act on
    rig.clock.at(5, lambda: rig.world.power_off("spark-4"))
    rig.clock.at(49, lambda: rig.world.power_on("spark-4"))
    rig.dog.run()  # observes at 0, 10, ..., 50
    state = rig.state()
    assert state["returned"]["time"] == T0 + 50 and state["restarts"] == []
    rig.clock.advance(T0 + 55 - rig.clock.now)
    rig.dog.run()
    (restart,) = rig.state()["restarts"]
    assert restart["time"] == T0 + 60


def test_every_node_unreachable_then_back(rig):
    for host in HOSTS[1:]:
        rig.clock.at(5, lambda h=host: rig.world.power_off(h))
        rig.clock.at(65, lambda h=host: rig.world.power_on(h))
    rig.cron(1)
    assert sorted(rig.state()["unreachable"]) == ["spark-2", "spark-3", "spark-4"]
    assert len(rig.lines("observed unreachable")) == 1
    rig.cron(1)
    assert [h for _t, h in rig.world.starts] == ["spark-4", "spark-3", "spark-2", "spark-1"]
    assert len(rig.lines("answers again")) == 3


def test_an_unreachable_node_past_the_bound_is_reported_once_and_never_given_up(rig):
    rig.dog.unreachable_s = 120
    rig.clock.at(5, lambda: rig.world.power_off("spark-3"))
    rig.cron(4)
    state = rig.state()
    entry = state["unreachable"]["spark-3"]
    assert entry["past_bound"] is True and entry["for_s"] >= 120
    assert len(rig.lines("spark-3 has not answered for 120 s")) == 1
    assert "past watchdog_unreachable_s=120" in rig.lines("has not answered")[0]
    summary = rig.dog.summary()
    assert summary["unreachable_past_bound"] == ["spark-3"]
    assert summary["unreachable"]["spark-3"]["for_s"] >= 190
    assert summary["gave_up"] is None and not rig.gave_up()
    assert rig.world.starts == []


def test_the_bound_is_not_reported_before_it_is_reached(rig):
    rig.clock.at(5, lambda: rig.world.power_off("spark-3"))
    rig.cron(2)
    assert "past_bound" not in rig.state()["unreachable"]["spark-3"]
    assert rig.dog.summary()["unreachable_past_bound"] == []
    assert rig.lines("has not answered") == []


def test_a_node_lost_during_the_restart_check_is_a_transient_not_a_refusal(rig):
    # The head crashes; spark-4 goes just after the crash is confirmed, before the check.
    rig.clock.at(5, lambda: rig.world.kill("spark-1"))
    rig.clock.at(12.5, lambda: rig.world.power_off("spark-4"))
    original = rig.dog.cluster.check

    def check_after_a_moment():
        rig.clock.advance(1)
        return original()

    rig.dog.cluster.check = check_after_a_moment
    rig.cron(1)
    state = rig.state()
    assert not rig.gave_up()
    (deferred,) = state["restarts"]
    assert deferred["rc"] == common.EX_UNREACHABLE and deferred["transient"] is True
    assert rig.world.stops == []  # nothing stopped
    assert len(rig.lines("decision=restart-deferred: cannot reach spark-4")) == 1
    assert "nothing stopped" in rig.lines("decision=restart-deferred")[0]
    assert state["last_observation"]["kind"] == "unreachable"
    # back: restarted (after the backoff), workers first
    rig.dog.cluster.check = original
    rig.clock.at(130, lambda: rig.world.power_on("spark-4"))
    rig.cron(3)
    state = rig.state()
    assert not rig.gave_up()
    assert [h for _t, h in rig.world.starts] == ["spark-4", "spark-3", "spark-2", "spark-1"]
    assert [r["rc"] for r in state["restarts"]] == [common.EX_UNREACHABLE, 0]


def test_transient_restarts_never_add_up_to_a_give_up(rig):
    now = T0
    state = {
        "restarts": [
            {"time": now - s, "rc": common.EX_UNREACHABLE, "transient": True}
            for s in (900, 600, 300)
        ]
    }
    assert decisions.gate_restart(state, rig.dog.wd, now)[0] == "restart"
    state["restarts"].append({"time": now - 100, "rc": 0})
    verdict, why = decisions.gate_restart(state, rig.dog.wd, now)
    assert verdict == "backoff" and "4 restart(s)" in why


def test_a_node_lost_during_the_stop_or_start_is_a_transient(rig):
    cluster = rig.dog.cluster
    rig.clock.at(0.5, lambda: rig.world.power_off("spark-3"))
    original = cluster.run

    def run(rank, *verb, timeout=None):
        if verb[0] == "stop":
            rig.clock.advance(1)
        return original(rank, *verb, timeout=timeout)

    cluster.run = run
    rc, msg = cluster.restart("test", 0)
    assert rc == common.EX_UNREACHABLE
    assert "cannot reach spark-3" in msg and "during the stop" in msg
    rig.world.power_on("spark-3")

    def run_losing_spark_2(rank, *verb, timeout=None):
        out = original(rank, *verb, timeout=timeout)
        if verb[0] == "start" and rank["host"] == "spark-4":
            rig.world.power_off("spark-2")
        return out

    cluster.run = run_losing_spark_2
    rc, msg = cluster.restart("test", 0)
    assert (rc, "cannot reach spark-2" in msg, "during the start" in msg) == (
        common.EX_UNREACHABLE,
        True,
        True,
    ), msg
    assert [h for _t, h in rig.world.starts] == ["spark-4", "spark-3"]


def test_a_real_launcher_refusal_still_gives_up_at_once(rig):
    rig.world.refuse["spark-4"] = "enp1s0f0np0 MTU is 1500, below 9000"
    rig.clock.at(5, lambda: rig.world.kill("spark-1"))
    rig.cron(2)
    assert rig.gave_up()
    text = (rig.tmp / "state" / "gave-up").read_text()
    assert "launcher refused" in text and "spark-4: enp1s0f0np0 MTU is 1500" in text
    assert rig.world.stops == [] and rig.world.starts == []
    assert rig.state()["last_observation"]["kind"] == "gave-up"


def test_a_node_whose_port_is_late_after_its_boot_is_retried_not_given_up_on(rig):
    """A rebooted worker's launcher refuses for 200 s (MTU not yet applied): a transient
    inside the boot window, backed off and retried until the port is up, then healed."""
    rig.world.port_up_after_s = 200
    rig.clock.at(5, lambda: rig.world.power_off("spark-3"))
    rig.clock.at(65, lambda: rig.world.power_on("spark-3"))
    # Retried every backoff_s (60 s, not doubled: the port is expected): refused until the
    # port is up at 265 s, healed at the next try.
    rig.cron(6)
    state = rig.state()
    assert not rig.gave_up()
    deferred = [r for r in state["restarts"] if r.get("transient")]
    assert deferred and all(r["rc"] == common.EX_BOOTING for r in deferred)
    assert state["restarts"][-1]["rc"] == 0
    # Retried before the port came up, healed after it, never given up, never counted.
    assert deferred[0]["time"] < T0 + 65 + 200 <= state["restarts"][-1]["time"]
    assert state["restarts"][-1]["time"] < T0 + 65 + 200 + 60 + 15
    assert all(b["time"] - a["time"] < 60 + 15 for a, b in zip(deferred, deferred[1:]))
    # One incident for the retries of one boot (its evidence is kept, not repeated).
    assert len({r["incident"] for r in state["restarts"]}) == 1
    assert len(list((rig.tmp / "incidents").iterdir())) == 1
    assert state["restarts_total"] == 1
    assert rig.world.healthy() and state["last_observation"]["kind"] == "healthy"
    assert [h for t, h in rig.world.starts if t < T0 + 65 + 200] == []
    text = "\n".join(rig.lines("not ready after a boot"))
    assert "spark-3: enp1s0f0np0 MTU is 1500, below 9000 (booted" in text
    assert "a transient (boot_window_s=600): retried" in text


def test_a_refusal_outside_the_boot_window_gives_up(rig):
    """The same refusal by a node that booted long ago is a broken node: given up on."""
    rig.world.port_up_after_s = 10**9
    rig.clock.at(5, lambda: rig.world.kill("spark-3"))
    rig.cron(1)
    assert rig.gave_up()
    assert "booted" not in (rig.tmp / "state" / "gave-up").read_text()


def test_too_many_restarts_in_the_window_give_up(rig):
    # A head that crashes again 30 s after every recovery.
    def crash_again_later():
        rig.world.kill("spark-1")
        rig.clock.at(rig.clock.monotonic() + 300, crash_again_later)

    rig.clock.at(5, crash_again_later)
    rig.cron(20)
    state = rig.state()
    assert rig.gave_up()
    assert "3 restarts within 3600 s" in (rig.tmp / "state" / "gave-up").read_text()
    assert len(state["restarts"]) == 3
    # backoff doubled between them: 60 s, then 120 s at least
    times = [r["time"] for r in state["restarts"]]
    assert times[1] - times[0] >= 60 and times[2] - times[1] >= 120


def test_a_second_crash_soon_after_a_recovery_is_decided_in_the_same_run(rig):
    rig.dog.wd["backoff_s"] = 0
    rig.clock.at(3, lambda: rig.world.kill("spark-1"))
    recovered = []

    def second_crash_20_s_after_the_recovery():
        done = rig.state()["restarts"][0]["healthy_at"]
        recovered.append(done)
        rig.clock.at(done + 20 - T0, lambda: rig.world.kill("spark-3"))

    rig.clock.at(25, second_crash_20_s_after_the_recovery)
    assert rig.dog.run() == 0  # one cron run
    first, second = rig.state()["restarts"]
    crash_2 = recovered[0] + 20
    assert first["healthy_at"] == recovered[0]
    assert second["time"] - crash_2 <= 12  # within one interval plus the confirmation
    assert second["time"] < T0 + 55  # by the run that restarted the first time


def test_a_run_whose_restart_crossed_the_minute_observes_for_the_cron_run_it_turned_away(rig):
    rig.dog.wd["backoff_s"] = 0
    FakeCluster.boot_s = 15.0  # the restart ends past the minute boundary
    rig.clock.at(45, lambda: rig.world.kill("spark-1"))  # seen at 50, restarted at 52
    rig.clock.at(85, lambda: rig.world.kill("spark-2"))
    try:
        assert rig.dog.run() == 0
    finally:
        FakeCluster.boot_s = 5.0
    first, second = rig.state()["restarts"]
    assert first["time"] == T0 + 52 and first["healthy_at"] > T0 + 60
    # the cron run at T0 + 60 found this one busy: this one saw the second crash
    assert second["time"] - (T0 + 85) <= 12
    assert rig.clock.now <= T0 + 120


def test_a_backoff_is_logged_once_and_the_restart_follows_when_it_ends(rig):
    rig.clock.at(3, lambda: rig.world.kill("spark-1"))
    rig.clock.at(45, lambda: rig.world.kill("spark-2"))
    rig.cron(2)
    state = rig.state()
    first, second = state["restarts"]
    # the second crash waits for the 60 s backoff, then restarts within one interval
    assert first["time"] + 60 <= second["time"] <= first["time"] + 60 + 12
    assert len(rig.lines("decision=backoff")) == 1


def test_paused_leaves_a_crash_alone(rig):
    (rig.tmp / "state").mkdir()
    (rig.tmp / "state" / "paused").write_text("canary\n")
    rig.clock.at(5, lambda: rig.world.kill("spark-1"))
    assert rig.cron(2) == [0, 0]
    assert rig.world.starts == []
    assert rig.state()["last_observation"]["kind"] == "paused"


def test_a_resume_is_acted_on_within_an_interval(rig):
    (rig.tmp / "state").mkdir()
    (rig.tmp / "state" / "paused").write_text("maintenance\n")
    rig.clock.at(5, lambda: rig.world.kill("spark-1"))
    rig.clock.at(22, (rig.tmp / "state" / "paused").unlink)
    rig.cron(1)
    (restart,) = rig.state()["restarts"]
    # The paused run read the marker on: the crash was confirmed and restarted in the same
    # cron minute, within two intervals of the resume, not at the next cron run.
    assert T0 + 22 <= restart["detected_at"] <= T0 + 22 + 10
    assert restart["time"] <= T0 + 22 + 10 + 2
    assert [h for _t, h in rig.world.starts] == ["spark-4", "spark-3", "spark-2", "spark-1"]
    assert len(rig.lines("observed paused")) == 1


def test_a_clear_after_a_give_up_is_acted_on_in_the_same_run(rig):
    rig.world.refuse["spark-4"] = "enp1s0f0np0 MTU is 1500, below 9000"
    rig.clock.at(5, lambda: rig.world.kill("spark-1"))

    def fixed_and_cleared():
        rig.world.refuse.clear()
        rig.dog.clear("operator")

    rig.clock.at(30, fixed_and_cleared)
    rig.cron(1)
    assert not rig.gave_up()
    (restart,) = rig.state()["restarts"]
    assert T0 + 30 <= restart["time"] <= T0 + 30 + 10 + 2
    assert restart["rc"] == 0
    assert len(rig.lines("GAVE UP")) == 1


def test_a_busy_lock_holds_observation(rig):
    rig.clock.at(5, lambda: rig.world.kill("spark-1"))
    with common.flocked(rig.dog.cfg["lock_file"]) as got:
        assert got
        rig.cron(1)
    assert rig.world.starts == []
    assert rig.state()["last_observation"]["kind"] == "busy"
    assert len(rig.lines("observed busy")) == 1
    rig.cron(1)
    assert [h for _t, h in rig.world.starts] == ["spark-4", "spark-3", "spark-2", "spark-1"]


def test_a_frozen_head_is_restarted_only_past_the_grace(rig):
    rig.dog.wd["grace_s"] = 120
    rig.world.started["spark-1"] = T0 - 30  # started 30 s ago, never answered
    rig.world.state["spark-1"] = "paused"  # docker pause: frozen
    rig.cron(2)
    (restart,) = rig.state()["restarts"]
    assert restart["kind"] == "wedged"
    assert restart["detected_at"] >= T0 + 90  # 120 s after the head's start
    assert len(rig.lines("observed booting")) == 1


def test_an_operators_clear_during_a_run_holds(rig):
    rig.clock.at(3, lambda: rig.world.kill("spark-1"))
    # cleared while this run restarts (it holds the state in memory meanwhile)
    rig.clock.at(15, lambda: rig.dog.clear("operator"))
    rig.clock.at(35, lambda: rig.world.kill("spark-2"))
    rig.cron(1)
    state = rig.state()
    assert state["cleared_at"] == T0 + 15
    # without the clear holding, the second crash would wait for the backoff
    assert [r["time"] > T0 + 35 for r in state["restarts"]] == [True]
    assert rig.lines("decision=backoff") == []
    assert len(rig.lines("restart history cleared by operator")) == 1
    # a later clear holds too (the newer clear wins over the one on disk)
    rig.clock.advance(10)
    rig.dog.clear("operator")
    assert rig.state()["cleared_at"] == rig.clock.now
    assert rig.state()["restarts"] == []


def test_a_run_takes_up_a_rewritten_cluster_description_at_its_next_observation(rig):
    # site.yml renders a new description while a run observes (here: another interval and
    # another bound). The run goes on with it: the next observation is made by a cluster built
    # from the new description, and its settings hold from then on.
    config = rig.tmp / "cluster.json"
    config.write_text(json.dumps(rig.dog.cfg))
    rig.dog.config = (str(config), common.file_stamp(str(config)))
    built = []

    def make_cluster(cfg):
        built.append((rig.clock.now, cfg))
        return FakeCluster(cfg, rig.world, rig.clock)

    rig.dog.make_cluster = make_cluster
    new_cfg = json.loads(config.read_text())
    new_cfg["watchdog"]["interval_s"] = 5
    new_cfg["watchdog"]["unreachable_s"] = 120

    def rewrite():
        tmp = rig.tmp / "cluster.json.new"
        tmp.write_text(json.dumps(new_cfg))
        tmp.replace(config)

    rig.clock.at(25, rewrite)
    assert rig.dog.run() == 0
    ((when, cfg),) = built
    assert T0 + 25 <= when <= T0 + 25 + 10
    assert cfg["watchdog"]["interval_s"] == 5
    assert rig.dog.unreachable_s == 120 and rig.dog.wd["interval_s"] == 5
    assert len(rig.lines("changed (site.yml): observing with the new description")) == 1
    assert rig.world.starts == [] and rig.world.stops == []
    # The same run observed on until its budget: last observation within 5 s of its end.
    assert rig.clock.now - rig.state()["last_observation"]["time"] <= 5


def test_a_rewritten_description_that_does_not_parse_ends_the_run(rig):
    config = rig.tmp / "cluster.json"
    config.write_text(json.dumps(rig.dog.cfg))
    rig.dog.config = (str(config), common.file_stamp(str(config)))
    rig.clock.at(25, lambda: config.write_text('{"ranks": [half written'))
    rig.clock.at(26, lambda: rig.world.kill("spark-1"))
    start = rig.clock.now
    assert rig.dog.run() == 0
    assert rig.clock.now - start < 40
    assert rig.world.starts == []
    assert len(rig.lines("changed and cannot be read")) == 1


def test_a_hold_leaves_a_crash_alone_until_its_release(rig):
    # site.yml holds the watchdog before its first change and releases it after its
    # bring-up: a cluster half-way through a change is not judged, a crash after is.
    rig.dog.take_hold(1800, "site.yml", "converge run on ansible-host")
    rig.clock.at(5, lambda: rig.world.kill("spark-1"))
    assert rig.cron(2) == [0, 0]
    assert rig.world.starts == []
    state = rig.state()
    assert state["last_observation"]["kind"] == "held"
    assert "bad" not in state
    assert rig.dog.summary()["held"]["by"] == "site.yml"
    # renewed (the next stage that changes something): logged once, not once per renewal
    rig.dog.take_hold(1800, "site.yml", "converge run on ansible-host")
    rig.cron(1)
    assert len(rig.lines("observed held")) == 1
    assert len(rig.lines("held by site.yml for 1800 s")) == 1
    rig.dog.release("site.yml")
    assert rig.dog.summary()["held"] is None
    rig.cron(1)
    assert [h for _t, h in rig.world.starts] == ["spark-4", "spark-3", "spark-2", "spark-1"]
    assert len(rig.lines("hold released by site.yml")) == 1


def test_a_hold_left_by_a_killed_run_ends_by_itself(rig):
    rig.dog.take_hold(90, "site.yml", "converge run")
    rig.clock.at(5, lambda: rig.world.kill("spark-1"))
    rig.cron(1)
    assert rig.world.starts == []
    # the summary reads it without ending it
    assert rig.dog.summary()["held"]["until"] == T0 + 90
    rig.cron(1)  # the hold ends at 90 s: observed and restarted in the same minute
    (restart,) = rig.state()["restarts"]
    assert T0 + 90 <= restart["detected_at"] <= T0 + 90 + 10
    assert not (rig.tmp / "state" / "held").exists()
    assert len(rig.lines("ended without a release; observing again")) == 1


def test_a_hold_file_it_did_not_write_is_removed_not_obeyed(rig):
    (rig.tmp / "state").mkdir()
    (rig.tmp / "state" / "held").write_text("forever\n")
    rig.clock.at(5, lambda: rig.world.kill("spark-1"))
    rig.cron(1)
    assert len(rig.state()["restarts"]) == 1
    assert len(rig.lines("is not a hold this program wrote")) == 1


def test_the_hold_and_release_commands(rig, monkeypatch):
    cfg = rig.dog.cfg
    monkeypatch.setattr(common.Clock, "time", staticmethod(lambda: T0))
    monkeypatch.setenv("SUDO_USER", "ops")
    assert watchdog.watchdog_main(cfg, ["hold", "600", "site.yml", "converge"]) == 0
    held = json.loads((rig.tmp / "state" / "held").read_text())
    assert held["by"] == "ops" and held["reason"] == "site.yml converge"
    assert held["until"] == T0 + 600
    assert watchdog.watchdog_main(cfg, ["release"]) == 0
    assert not (rig.tmp / "state" / "held").exists()
    with pytest.raises(SystemExit):
        watchdog.watchdog_main(cfg, ["hold", "0"])


# --- a wedge that /health hides: requests running, no token generated ----------------------


def test_a_head_answering_health_but_generating_nothing_is_restarted_in_stall_plus_interval(rig):
    rig.dog.wd["stall_s"] = 120
    rig.world.progress = {"running": 2.0, "tokens": 500.0}
    # The counter moves until T0 + 25, then nothing more comes out; /health stays 200.
    rig.clock.at(25, lambda: rig.world.progress.update(tokens=640.0))
    rig.cron(4)
    state = rig.state()
    (restart,) = state["restarts"]
    assert restart["kind"] == "wedged" and restart["rc"] == 0
    assert "generated no token for" in restart["reason"]
    assert "2 request(s) running (watchdog_stall_s=120)" in restart["reason"]
    # The counter was last seen moving at the observation after T0 + 25 (T0 + 30).
    assert T0 + 30 + 120 <= restart["time"] <= T0 + 30 + 120 + rig.dog.wd["interval_s"]
    # One observation is enough (its duration is the evidence), workers first.
    assert restart["detected_at"] == restart["time"]
    assert [h for _t, h in rig.world.starts] == ["spark-4", "spark-3", "spark-2", "spark-1"]
    assert len(rig.lines("observed wedged: head spark-1 answers /health 200 but generated")) == 1
    # status.yml shows the last stall decision, with its figures.
    last = rig.dog.summary()["last_stall"]
    assert last["time"] == restart["time"] and last["reason"] == restart["reason"]


def test_a_stall_is_timed_from_the_first_reading_that_saw_the_request_running(rig):
    rig.dog.wd["stall_s"] = 60
    rig.world.progress = {"running": 0.0, "tokens": 500.0}  # idle, then a request that stalls
    rig.clock.at(23, lambda: rig.world.progress.update(running=1.0))
    rig.cron(3)
    (restart,) = rig.state()["restarts"]
    # Seen running first at T0 + 30 (not at the idle reading at T0 + 20): 60 s from then.
    assert restart["time"] == T0 + 30 + 60
    assert "no token for 60 s with 1 request(s) running" in restart["reason"]


@pytest.mark.parametrize(
    ("what", "progress", "moves"),
    [
        ("idle: nothing runs", {"running": 0.0, "tokens": 500.0}, False),
        ("busy and generating", {"running": 3.0, "tokens": 500.0}, True),
        ("metrics off", None, False),
    ],
)
def test_a_head_that_makes_progress_or_has_nothing_to_do_is_left_alone(rig, what, progress, moves):
    rig.dog.wd["stall_s"] = 60
    rig.world.progress = progress
    if moves:
        for second in range(0, 300, 7):
            rig.clock.at(
                second, lambda: rig.world.progress.update(tokens=rig.world.progress["tokens"] + 9)
            )
    rig.cron(5)
    assert rig.world.starts == [], what
    assert rig.state()["last_observation"]["kind"] == "healthy", what


def test_the_stall_clock_starts_afresh_after_a_gap_in_the_observations():
    state = {}
    assert decisions.track_progress(state, {"running": 1.0, "tokens": 5.0}, 1000.0, 60, 10) is None
    # Ten minutes without an observation (paused, held): no evidence of a stall.
    assert decisions.track_progress(state, {"running": 1.0, "tokens": 5.0}, 1600.0, 60, 10) is None
    assert state["progress"]["moved"] == 1600.0
    for now in range(1610, 1660, 10):
        assert (
            decisions.track_progress(state, {"running": 1.0, "tokens": 5.0}, float(now), 60, 10)
            is None
        )
    reason = decisions.track_progress(state, {"running": 1.0, "tokens": 5.0}, 1660.0, 60, 10)
    assert reason.endswith("for 60 s with 1 request(s) running (watchdog_stall_s=60)")
    # A counter that went back (the engine restarted) moved; so did one that went on.
    assert decisions.track_progress(state, {"running": 1.0, "tokens": 0.0}, 1670.0, 60, 10) is None
    assert state["progress"]["moved"] == 1670.0
    # Switched off, or no reading: nothing kept.
    assert decisions.track_progress(state, {"running": 1.0, "tokens": 0.0}, 1680.0, 0, 10) is None
    assert "progress" not in state


# --- memory before a restart ----------------------------------------------------------------

SHORT = (
    "spark-3: the container's memory limit (container.memory 100g) needs 100.0 GiB but 12.0 GiB "
    "is available (MemAvailable of /proc/meminfo with the rank stopped); fix: reboot spark-3"
)


def test_a_node_without_the_memory_gets_nothing_started_and_the_watchdog_says_reboot_required(rig):
    rig.world.short["spark-3"] = SHORT
    rig.clock.at(3, lambda: rig.world.kill("spark-2"))
    rig.cron(3)
    state = rig.state()
    # Stopped every rank, checked the memory of each, started none.
    assert sorted(h for _t, h in rig.world.stops) == sorted(HOSTS)
    assert rig.world.starts == []
    assert min(t for t, _h in rig.world.memchecks) >= max(t for t, _h in rig.world.stops)
    (restart,) = state["restarts"]
    assert restart["rc"] == common.EX_MEMORY
    assert state["last_decision"]["decision"] == "reboot-required"
    marker = (rig.tmp / "state" / "reboot-required").read_text()
    assert "REBOOT REQUIRED, nothing started: spark-3: the container's memory limit" in marker
    assert "needs 100.0 GiB but 12.0 GiB" in marker
    (incident,) = (rig.tmp / "incidents").iterdir()
    assert "spark-3" in (incident / "memory.txt").read_text()
    # Later observations change nothing: no second stop, the state says why.
    assert len(rig.world.stops) == len(HOSTS)
    assert state["last_observation"]["kind"] == "reboot-required"
    assert "after the reboot: sparkfleet-watchdog clear" in state["last_observation"]["reason"]
    assert "spark-3" in rig.dog.summary()["reboot_required"]
    memory = rig.dog.summary()["last_memory"]
    assert memory["ok"] is False and "needs 100.0 GiB but 12.0 GiB" in memory["reason"]
    assert rig.dog.summary()["last_stall"] is None
    assert len(rig.lines("decision=reboot-required")) == 1
    # The node rebooted (memory back), the operator clears: the cluster is started in order.
    del rig.world.short["spark-3"]
    rig.dog.clear("operator")
    rig.cron(1)
    assert not (rig.tmp / "state" / "reboot-required").exists()
    assert [h for _t, h in rig.world.starts] == ["spark-4", "spark-3", "spark-2", "spark-1"]
    assert rig.state()["last_observation"]["kind"] == "healthy"
    assert rig.dog.summary()["last_memory"]["ok"] is True


# --- what Prometheus reads: the node_exporter textfile -----------------------------------------


# The labels the monitoring role's scrape targets carry (and Prometheus' own): a textfile
# label of the same name would reach Prometheus renamed exported_<name>.
TARGET_LABELS = {"cluster", "node", "rank", "instance", "job"}


def read_textfile(rig):
    text = (rig.tmp / "textfile" / "sparkfleet_watchdog.prom").read_text()
    samples = {}
    for family in text_string_to_metric_families(text):
        for sample in family.samples:
            assert not TARGET_LABELS & set(sample.labels), sample
            key = sample.name + "".join(f"{{{k}={v}}}" for k, v in sorted(sample.labels.items()))
            samples[key] = sample.value
    return samples


def test_the_textfile_says_what_the_watchdog_saw_and_did(rig):
    rig.dog.wd["textfile_dir"] = str(rig.tmp / "textfile")
    rig.clock.at(3, lambda: rig.world.kill("spark-2"))
    rig.cron(2)
    state = rig.state()
    got = read_textfile(rig)
    (restart,) = state["restarts"]
    assert got["sparkfleet_watchdog_restarts_total"] == 1
    assert got["sparkfleet_watchdog_restarts_in_window"] == 1
    assert got["sparkfleet_watchdog_max_restarts"] == 3
    assert got["sparkfleet_watchdog_observation{kind=healthy}"] == 1
    assert sum(v for k, v in got.items() if k.startswith("sparkfleet_watchdog_observation{")) == 1
    assert got["sparkfleet_watchdog_last_healthy_timestamp_seconds"] == state["last_healthy"]
    assert got["sparkfleet_watchdog_last_observation_timestamp_seconds"] == pytest.approx(
        state["last_observation"]["time"]
    )
    assert got["sparkfleet_watchdog_last_recovery_seconds"] == restart["detection_to_healthy_s"]
    assert (
        got["sparkfleet_watchdog_last_detection_seconds"]
        == restart["time"] - restart["detected_at"]
    )
    for flag in ("gave_up", "reboot_required", "paused", "held", "unreachable_nodes"):
        assert got[f"sparkfleet_watchdog_{flag}"] == 0, flag
    mode = (rig.tmp / "textfile" / "sparkfleet_watchdog.prom").stat().st_mode & 0o777
    assert mode == 0o644
    # Written whole and renamed: nothing else is left in the directory.
    assert sorted(p.name for p in (rig.tmp / "textfile").iterdir()) == [
        "sparkfleet_cluster.prom",
        "sparkfleet_watchdog.prom",
    ]


def read_cluster_textfile(rig):
    text = (rig.tmp / "textfile" / "sparkfleet_cluster.prom").read_text()
    got = [
        (sample.name, dict(sample.labels), sample.value)
        for family in text_string_to_metric_families(text)
        for sample in family.samples
    ]
    assert all(not TARGET_LABELS & set(labels) for _n, labels, _v in got), got
    return got


def test_each_ordered_restart_leaves_its_outcome(rig):
    rig.dog.wd["textfile_dir"] = str(rig.tmp / "textfile")
    rig.clock.at(3, lambda: rig.world.kill("spark-3"))
    rig.cron(1)
    (restart,) = rig.state()["restarts"]
    got = read_cluster_textfile(rig)
    assert ("sparkfleet_cluster_last_restart_timestamp_seconds", {}, restart["time"]) in got
    assert ("sparkfleet_cluster_last_restart_exit_code", {"by": "watchdog"}, 0) in got
    (took,) = [v for n, _l, v in got if n == "sparkfleet_cluster_last_restart_duration_seconds"]
    assert took == pytest.approx(restart["healthy_at"] - restart["time"], abs=0.01)
    # No rank is asked anything more for it (FakeCluster.run refuses any other verb).
    # A restart that started nothing says so.
    rig.dog.clear("operator")
    rig.world.short["spark-2"] = SHORT
    rig.clock.advance(5)
    rig.world.kill("spark-1")
    rig.cron(1)
    got = read_cluster_textfile(rig)
    assert ("sparkfleet_cluster_last_restart_exit_code", {"by": "watchdog"}, 7) in got


def test_the_textfile_names_a_node_gone_and_a_give_up(rig):
    rig.dog.wd["textfile_dir"] = str(rig.tmp / "textfile")
    rig.clock.at(5, lambda: rig.world.power_off("spark-4"))
    rig.cron(2)
    got = read_textfile(rig)
    assert got["sparkfleet_watchdog_unreachable_nodes"] == 1
    assert got["sparkfleet_watchdog_node_unreachable_seconds{host=spark-4}"] >= 100
    assert got["sparkfleet_watchdog_observation{kind=unreachable}"] == 1
    rig.world.power_on("spark-4")
    rig.world.refuse["spark-2"] = "MTU 1500 on enp1s0f0np0, not 9000"
    rig.cron(1)
    got = read_textfile(rig)
    assert got["sparkfleet_watchdog_gave_up"] == 1
    assert got["sparkfleet_watchdog_unreachable_nodes"] == 0


def test_a_drills_restart_is_labelled_with_it_and_the_summary_gives_the_bound(rig):
    """playbooks/drill.yml marks its drill; the restart that heals it carries the label."""
    (rig.tmp / "state").mkdir(exist_ok=True)
    (rig.tmp / "state" / "drill").write_text("R1/head_kill\n")
    rig.clock.at(5, lambda: rig.world.kill("spark-1"))
    rig.cron(1)
    (restart,) = rig.state()["restarts"]
    assert restart["drill"] == "R1/head_kill" and restart["rc"] == 0
    assert len(rig.lines("[drill R1/head_kill]")) == 1
    summary = rig.dog.summary()
    assert summary["drill"] == "R1/head_kill"
    assert (summary["max_restarts"], summary["restarts_counted_in_window"]) == (3, 1)
    # Unmarked, the next restart is the cluster's own.
    (rig.tmp / "state" / "drill").unlink()
    rig.clock.advance(120)
    rig.clock.at(rig.clock.now - T0 + 5, lambda: rig.world.kill("spark-2"))
    rig.cron(1)
    assert "drill" not in rig.state()["restarts"][-1]
    assert rig.dog.summary()["drill"] is None
