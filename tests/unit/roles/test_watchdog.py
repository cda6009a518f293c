"""The watchdog's decisions (roles/watchdog/files/sparkfleet_cluster_decisions.py) and the
cluster control (sparkfleet_cluster_control.py, sparkfleet_cluster_common.py), as tables."""

from __future__ import annotations

import json
import pathlib
import sys

import pytest

# The program's modules, imported by plain name from their directory (as its entry point,
# sparkfleet_cluster.py, does on the head).
FILES = str(pathlib.Path(__file__).parents[3] / "roles" / "watchdog" / "files")
if FILES not in sys.path:
    sys.path.insert(0, FILES)

import sparkfleet_cluster_common as common  # noqa: E402
import sparkfleet_cluster_control as control  # noqa: E402
import sparkfleet_cluster_decisions as decisions  # noqa: E402

NOW = 1_800_000_000.0
CFG = {"window_s": 3600, "max_restarts": 3, "backoff_s": 60}


def obs(head="running current", health=200, age=1000, workers=("running current",) * 3):
    return {
        "head": {"host": "spark-1", "state": head, "started_at": NOW - age, "health": health},
        "workers": [
            {"host": f"spark-{i + 2}", "rank": i + 1, "state": s} for i, s in enumerate(workers)
        ],
    }


@pytest.mark.parametrize(
    ("observation", "kind", "words"),
    [
        (obs(), "healthy", "200"),
        (obs(head="running stale"), "healthy", "200"),
        (obs(head="exited", health=0), "crash", "engine gone: spark-1 (rank 0) is exited"),
        (obs(head="absent", health=0), "crash", "spark-1 (rank 0) is absent"),
        (
            obs(head="exited", health=0, workers=("running current", "exited", "running current")),
            "crash",
            "spark-1 (rank 0) is exited, spark-3 (rank 2) is exited",
        ),
        (
            obs(workers=("running current", "exited", "running current")),
            "crash",
            "spark-3 (rank 2)",
        ),
        (obs(workers=("absent",) * 3), "crash", "spark-2 (rank 1) is absent"),
        (obs(head="stopped", health=0), "stopped", "deliberately stopped on spark-1"),
        (obs(workers=("stopped", "exited", "exited")), "stopped", "spark-2"),
        (obs(workers=("unreachable: timeout",) * 3), "unreachable", "cannot reach"),
        # A node that does not answer comes first: its peers' ranks exit when it goes.
        (
            obs(head="exited", health=0, workers=("exited", "exited", "unreachable: No route")),
            "unreachable",
            "cannot reach spark-4 (No route); waiting for it to answer, no restart",
        ),
        (
            obs(workers=("stopped", "unreachable: Connection refused", "exited")),
            "unreachable",
            "spark-3 (Connection refused)",
        ),
        (obs(health=0, age=10), "booting", "within the 600 s grace"),
        (obs(health=503, age=10), "booting", "HTTP 503"),
        (obs(head="paused", health=0, age=10), "booting", "paused (frozen)"),
        (obs(health=0, age=601), "wedged", "past the 600 s grace"),
        (obs(head="paused", health=0, age=700), "wedged", "paused (frozen)"),
        (obs(head="restarting", health=0, age=700), "wedged", "past"),
    ],
)
def test_classify(observation, kind, words):
    got_kind, reason = decisions.classify(observation, 600, NOW)
    assert (got_kind, words in reason) == (kind, True), reason


def test_classify_unknown_age():
    o = obs(health=0)
    o["head"]["started_at"] = None
    assert decisions.classify(o, 600, NOW) == (
        "wedged",
        "head spark-1 up for an unknown time, /health no answer; past the 600 s grace",
    )


@pytest.mark.parametrize(
    ("ages", "verdict", "words"),
    [
        ([], "restart", "0 restart(s)"),
        ([4000], "restart", "0 restart(s)"),
        ([30], "backoff", "next allowed"),
        ([61], "restart", "1 restart(s)"),
        ([100, 61], "backoff", "2 restart(s)"),
        ([200, 121], "restart", "2 restart(s)"),
        ([300, 200, 100], "give-up", "3 restarts within 3600 s"),
        ([5000, 300, 200], "restart", "2 restart(s)"),
    ],
)
def test_gate_restart(ages, verdict, words):
    state = {"restarts": [{"time": NOW - a} for a in ages]}
    got, reason = decisions.gate_restart(state, CFG, NOW)
    assert (got, words in reason) == (verdict, True), reason


def test_bad_observations_count_across_runs_and_reset():
    state = {}
    assert decisions.note_observation(state, "crash", NOW, 10) == 1
    assert decisions.note_observation(state, "crash", NOW + 10, 10) == 2
    # a different kind starts again
    assert decisions.note_observation(state, "wedged", NOW + 20, 10) == 1
    # too long since the last bad one (a gap between runs): starts again
    assert decisions.note_observation(state, "wedged", NOW + 100, 10) == 1
    assert decisions.note_observation(state, "healthy", NOW + 110, 10) == 0
    assert "bad" not in state


@pytest.mark.parametrize(
    ("text", "epoch"),
    [
        ("2026-12-02T18:00:00.5Z", 1796234400.5),
        ("2026-12-02T18:00:00.123456789Z", 1796234400.123456789),
        ("2026-12-02T18:00:00Z", 1796234400.0),
        ("0001-01-01T00:00:00Z", None),
        ("garbage", None),
    ],
)
def test_parse_docker_time(text, epoch):
    got = control.parse_docker_time(text)
    assert got == pytest.approx(epoch) if epoch else got is None


def test_stack_section():
    lines = [
        "boot",
        "ok",
        "spark watchdog timeout: Python stacks of all 3 threads:",
        "  File x",
        "end",
    ]
    assert decisions.stack_section(lines) == lines[2:]
    assert decisions.stack_section(["nothing"]) == []


def test_state_file_is_replaced_atomically(tmp_path):
    path = tmp_path / "state.json"
    common.write_json(str(path), {"a": 1})
    common.write_json(str(path), {"a": 2})
    assert common.read_json(str(path), {}) == {"a": 2}
    assert [p.name for p in tmp_path.iterdir()] == ["state.json"]


def test_flock_is_exclusive(tmp_path):
    lock = str(tmp_path / "x.lock")
    with common.flocked(lock) as first, common.flocked(lock) as second:
        assert (first, second) == (True, False)


@pytest.mark.parametrize(
    ("bad", "pause"),
    [
        (None, 10),
        ({"kind": "crash", "count": 1}, 2),
        ({"kind": "wedged", "count": 1}, 2),
        ({"kind": "crash", "count": 2}, 10),
        ({"kind": "booting", "count": 1}, 10),
    ],
)
def test_a_first_bad_observation_is_confirmed_soon(bad, pause):
    state = {"bad": bad} if bad else {}
    assert (
        decisions.next_pause(state, {"interval_s": 10, "confirm": 2, "confirm_after_s": 2}) == pause
    )


def test_confirm_delay_never_exceeds_the_interval():
    state = {"bad": {"kind": "crash", "count": 1}}
    assert decisions.next_pause(state, {"interval_s": 5, "confirm": 2, "confirm_after_s": 30}) == 5


class _Answers(control.Cluster):
    """A Cluster whose launcher calls return fixed (rc, out, err) per host."""

    def __init__(self, answers):
        ranks = [{"rank": i, "host": h, "address": h} for i, h in enumerate(answers)]
        super().__init__({"ranks": ranks, "ssh": {"connect_timeout_s": 5}}, lambda *a: None)
        self.answers = answers

    def run(self, rank, *verb, timeout=None):
        return self.answers[rank["host"]]


def test_a_worker_that_fails_ssh_or_times_out_is_unreachable_the_head_is_not():
    cluster = _Answers(
        {
            "spark-1": (124, "", "timed out after 15 s: status"),
            "spark-2": (255, "", "ssh: connect to host x port 22: No route to host"),
            "spark-3": (124, "", "timed out after 15 s: status"),
            "spark-4": (0, "exited", ""),
        }
    )
    assert cluster.states() == {
        "spark-1": "unknown: rc=124 timed out after 15 s: status",
        "spark-2": "unreachable: ssh: connect to host x port 22: No route to host",
        "spark-3": "unreachable: timed out after 15 s: status",
        "spark-4": "exited",
    }
    refusals, results, booting = cluster.check()
    # the head's launcher runs locally: its timeout is not a node that went away
    assert refusals == ["spark-1: timed out after 15 s: status"]
    assert not booting
    rc, msg = cluster.unreached("check", results)
    assert rc == common.EX_UNREACHABLE
    assert msg.startswith(
        "cannot reach spark-2: ssh: connect to host x port 22: No route to host; "
    )
    assert "spark-3: timed out" in msg and "nothing stopped" in msg


def test_a_refusal_is_told_apart_from_a_node_that_does_not_answer():
    cluster = _Answers(
        {
            "spark-1": (0, "ok", ""),
            "spark-2": (1, "", "x[y]: REFUSED: enp1s0f0np0 MTU is 1500, below 9000"),
            "spark-3": (255, "", "ssh: connect to host x port 22: Connection timed out"),
        }
    )
    refusals, results, booting = cluster.check()
    assert refusals == ["spark-2: enp1s0f0np0 MTU is 1500, below 9000"]
    assert cluster.unreached("check", results)[0] == common.EX_UNREACHABLE
    assert not booting


@pytest.mark.parametrize(
    ("uptimes", "window", "booting"),
    [
        ({"spark-2": 30}, 600, True),
        ({"spark-2": 30, "spark-3": 40}, 600, True),
        # One node refusing long after its boot is a real refusal, whatever the other says.
        ({"spark-2": 30, "spark-3": 4000}, 600, False),
        ({"spark-2": 30, "spark-3": None}, 600, False),
        ({"spark-2": 30}, 0, False),
    ],
)
def test_a_refusal_within_the_boot_window_is_a_transient(uptimes, window, booting):
    answers = {"spark-1": (0, "ok", "")}
    for host, uptime in uptimes.items():
        out = "" if uptime is None else f"uptime_s={uptime}\n"
        answers[host] = (1, out, "x[y]: REFUSED: enp1s0f0np0 MTU is 1500, below 9000")
    cluster = _Answers(answers)
    cluster.cfg["boot_window_s"] = window
    refusals, _results, got = cluster.check()
    assert got is booting
    assert len(refusals) == len(uptimes)
    if booting:
        assert refusals[0] == "spark-2: enp1s0f0np0 MTU is 1500, below 9000 (booted 30 s ago)"


def test_head_health_uses_the_collections_api_client():
    """The watchdog's /health probe is the sglang_health module's client (module_utils/_health)."""
    import http.server
    import threading

    codes = iter([200, 503])

    class Handler(http.server.BaseHTTPRequestHandler):
        def do_GET(self):
            self.send_response(next(codes) if self.path == "/health" else 404)
            self.end_headers()

        def log_message(self, *args):
            pass

    server = http.server.HTTPServer(("127.0.0.1", 0), Handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        url = f"http://127.0.0.1:{server.server_address[1]}/health"
        cluster = control.Cluster(
            {"ranks": [{"rank": 0, "host": "h"}], "health_url": url, "health_timeout_s": 5},
            log=None,
        )
        assert cluster.head_health() == 200
        assert cluster.head_health() == 503
    finally:
        server.shutdown()
        server.server_close()
    assert control._health.SGLangClient.__module__.endswith("_health")
    # Nothing answers: 0, never an exception.
    assert cluster.head_health() == 0


def _compose(order="workers_first", hosts=("spark-1", "spark-2", "spark-3")):
    ranks = [{"rank": i, "host": h, "address": f"10.0.0.{i + 1}"} for i, h in enumerate(hosts)]
    return {
        "ranks": ranks,
        "launcher": "/usr/local/sbin/sparkfleet-sglang",
        "driver": {
            "kind": "compose",
            "program": "/usr/local/sbin/sparkfleet-production",
            "order": order,
        },
        "ssh": {
            "user": "sparkfleet",
            "key": "/etc/sparkfleet/ssh/control_ed25519",
            "known_hosts": "/etc/sparkfleet/ssh/known_hosts",
            "connect_timeout_s": 5,
        },
        "command_timeout_s": 30,
    }


def test_the_compose_driver_runs_the_production_program_here_and_production_verbs_remotely(
    monkeypatch,
):
    calls = []

    def fake_run(argv, **_kw):
        calls.append(argv)
        return control.subprocess.CompletedProcess(argv, 0, "stopped\n", "")

    monkeypatch.setattr(control.subprocess, "run", fake_run)
    monkeypatch.setattr(control, "which", lambda name: "/usr/bin/" + name)
    cluster = control.Cluster(_compose(), lambda *a, **k: None)
    assert cluster.run(cluster.head, "stop") == (0, "stopped", "")
    assert cluster.run(cluster.workers[1], "start") == (0, "stopped", "")
    assert calls[0] == ["/usr/local/sbin/sparkfleet-production", "stop"]
    # The worker's forced command gets "production start": the launcher is never named.
    assert calls[1][0] == "/usr/bin/ssh" and calls[1][-2:] == [
        "sparkfleet@10.0.0.3",
        "production start",
    ]
    # The collection's own driver: the launcher here, the bare verb over SSH.
    cfg = {**_compose(), "driver": {"kind": "launcher"}}
    own = control.Cluster(cfg, lambda *a, **k: None)
    own.run(own.head, "status")
    own.run(own.workers[0], "status")
    assert calls[2] == ["/usr/local/sbin/sparkfleet-sglang", "status"]
    assert calls[3][-1] == "status"


@pytest.mark.parametrize(
    ("order", "started"),
    [
        ("workers_first", ["spark-3", "spark-2", "spark-1"]),
        ("head_first", ["spark-1", "spark-2", "spark-3"]),
    ],
)
def test_start_brings_ranks_up_one_at_a_time_in_the_drivers_order(tmp_path, order, started):
    cfg = {**_compose(order), "lock_file": str(tmp_path / "lock"), "lock_wait_s": 1}
    log = []
    cluster = _Answers({h: (0, "", "") for h in ("spark-1", "spark-2", "spark-3")})
    cluster.cfg, cluster.log = cfg, lambda msg, level="INFO": log.append(msg)
    cluster.driver, cluster.program, cluster.remote_prefix, cluster.order = common.driver_of(cfg)
    rc, msg = cluster.start(0)
    assert rc == 0, msg
    assert [line.split()[1] for line in log if line.startswith("started ")] == started
    assert " -> ".join(started) in msg


def test_start_stops_at_the_first_rank_that_fails_and_names_it(tmp_path):
    cfg = {**_compose(), "lock_file": str(tmp_path / "lock"), "lock_wait_s": 1}
    answers = {
        "spark-1": (0, "", ""),
        "spark-2": (1, "", "no such service"),
        "spark-3": (0, "", ""),
    }
    cluster = _Answers(answers)
    cluster.cfg = cfg
    cluster.driver, cluster.program, cluster.remote_prefix, cluster.order = common.driver_of(cfg)
    started = []
    cluster.log = lambda msg, level="INFO": started.append(msg)
    rc, msg = cluster.start(0)
    assert (rc, msg) == (common.EX_FAILED, "start of spark-2 (rank 1) failed: no such service")
    # spark-3 (rank 2) went first; the head never started after spark-2 failed.
    assert [m for m in started if m.startswith("started")] == ["started spark-3 (rank 2)"]


def test_the_compose_driver_refuses_the_launcher_checks_and_a_restart(tmp_path):
    cfg = {**_compose(), "lock_file": str(tmp_path / "lock"), "lock_wait_s": 1}
    cluster = control.Cluster(cfg, lambda *a, **k: None)
    rc, msg = cluster.restart("operator", 0)
    assert rc == common.EX_REFUSED and "stops and starts its engine only" in msg


@pytest.mark.parametrize(
    ("driver", "words"),
    [
        ({"kind": "systemd"}, "driver 'systemd' is not one of launcher, compose"),
        ({"kind": "compose", "program": "/x", "order": "random"}, "order 'random'"),
    ],
)
def test_an_unknown_driver_or_order_is_refused(driver, words):
    with pytest.raises(ValueError, match=words):
        common.driver_of({"launcher": "/x", "driver": driver})


def test_a_driver_file_replaces_only_the_driver_keys(tmp_path):
    own = _compose()
    own.pop("driver")
    path = tmp_path / "driver.json"
    path.write_text(json.dumps({"driver": _compose()["driver"], "command_timeout_s": 210}))
    cfg = common.with_driver(own, str(path))
    assert cfg["driver"]["kind"] == "compose" and cfg["command_timeout_s"] == 210
    assert cfg["ranks"] is own["ranks"] and cfg["ssh"] is own["ssh"]
    assert common.with_driver(own, "") is own
    path.write_text(json.dumps({"ranks": []}))
    with pytest.raises(ValueError, match="ranks not one of driver, command_timeout_s, health_url"):
        common.with_driver(own, str(path))


class _Clock:
    """Time that moves only when slept (monotonic and wall together)."""

    def __init__(self):
        self.now = NOW

    def time(self):
        return self.now

    def monotonic(self):
        return self.now - NOW

    def sleep(self, seconds):
        self.now += seconds


class _Starting(control.Cluster):
    """Two ranks whose launcher starts, reports and tails from a script; the head answers
    /health once `healthy_after` seconds passed since the last start (None: never)."""

    def __init__(self, tmp_path, exits=None, healthy_after=None):
        cfg = {
            "ranks": [
                {"rank": 0, "host": "spark-1", "address": "127.0.0.1"},
                {"rank": 1, "host": "spark-2", "address": "127.0.0.2"},
            ],
            "ssh": {"connect_timeout_s": 5},
            "lock_file": str(tmp_path / "run" / "cluster.lock"),
            "lock_wait_s": 0,
            "run_dir": str(tmp_path / "run"),
            "cluster_log": "/var/log/sparkfleet/cluster.log",
        }
        self.lines = []
        super().__init__(cfg, lambda msg, level="INFO": self.lines.append(msg), _Clock())
        self.exits = exits or {}  # host -> seconds after its start when its container exits
        self.healthy_after = healthy_after
        self.started_at, self.calls = {}, []
        self.seen = []  # the progress file as it was at each /health probe

    def run(self, rank, *verb, timeout=None):
        host = rank["host"]
        self.calls.append((host, *verb))
        if verb[0] == "start":
            self.started_at[host] = self.clock.time()
            return 0, "", ""
        if verb[0] == "status":
            since = self.clock.time() - self.started_at.get(host, self.clock.time())
            exit_after = self.exits.get(host)
            return (
                0,
                "exited" if exit_after is not None and since >= exit_after else "running current",
                "",
            )
        if verb[0] == "tail":
            count = int(verb[1])
            log = [f"{host} engine line {i}" for i in range(1, 51)]
            return 0, "\n".join(log[-count:]), ""
        return 0, "ok", ""

    def each(self, ranks, *verb, timeout=None):
        return {r["host"]: self.run(r, *verb, timeout=timeout) for r in ranks}

    def memory(self):
        return []

    def head_health(self):
        self.seen.append(json.loads(pathlib.Path(self.progress_path()).read_text()))
        last = max(self.started_at.values())
        up = self.healthy_after is not None and self.clock.time() - last >= self.healthy_after
        return 200 if up else 0


def test_a_rank_that_exits_during_the_wait_ends_the_restart_at_once_with_its_log(tmp_path):
    cluster = _Starting(tmp_path, exits={"spark-2": 12})
    rc, msg = cluster.restart("restart.yml", 900)
    assert rc == common.EX_FAILED
    # Seen at the first look after it exited (every RANK_WATCH_S), not after 900 s.
    assert cluster.clock.now - NOW <= 12 + control.RANK_WATCH_S + 1
    first, *tail = msg.splitlines()
    assert first == (
        "spark-2 (rank 1) is exited while the head's /health was awaited; "
        "the last 20 lines of its engine log:"
    )
    assert tail == [f"spark-2 engine line {i}" for i in range(31, 51)]
    assert ("spark-2", "tail", "20") in cluster.calls
    assert ("spark-1", "tail", "20") not in cluster.calls  # only the rank that exited
    assert msg in cluster.lines  # the cluster log says it too
    done = json.loads(pathlib.Path(cluster.progress_path()).read_text())
    assert (done["phase"], done["rc"], done["message"]) == ("failed", common.EX_FAILED, msg)


def test_a_slow_rank_that_stays_up_is_waited_for(tmp_path):
    cluster = _Starting(tmp_path, healthy_after=400)
    rc, msg = cluster.restart("restart.yml", 900)
    assert rc == 0, msg
    assert 400 <= cluster.clock.now - NOW <= 402
    # It kept reading every rank's state while it waited, and tailed nothing.
    looks = [c for c in cluster.calls if c == ("spark-2", "status")]
    assert len(looks) >= 400 // control.RANK_WATCH_S - 1
    assert not [c for c in cluster.calls if c[1] == "tail"]
    # The progress it wrote meanwhile: every rank stopped and started, waiting on the head.
    waiting = cluster.seen[-1]
    assert (waiting["phase"], waiting["stopped"], waiting["started"]) == (
        "wait",
        ["spark-2", "spark-1"],
        ["spark-2", "spark-1"],
    )
    assert common.progress_line(waiting, waiting["waiting_since"] + 42) == (
        "restart (restart.yml), 42 s: 2/2 ranks stopped, 2/2 started (spark-2, spark-1); "
        "waiting for spark-1's /health for 42 s (up to 900 s); "
        "follow /var/log/sparkfleet/cluster.log on spark-1"
    )


def test_a_head_that_never_answers_still_times_out_unhealthy(tmp_path):
    cluster = _Starting(tmp_path)
    rc, msg = cluster.restart("operator", 30)
    assert (rc, msg) == (
        common.EX_UNHEALTHY,
        "started every rank, but the head did not answer /health within 30 s",
    )


BEGAN = {
    "op": "restart",
    "reason": "site.yml",
    "pid": 1,
    "began": NOW,
    "head": "spark-1",
    "ranks": ["spark-3", "spark-2", "spark-1"],
    "stopped": [],
    "started": [],
    "log": "/var/log/sparkfleet/cluster.log",
}


@pytest.mark.parametrize(
    ("changes", "alive", "line"),
    [
        ({}, True, "no cluster operation recorded yet"),
        (
            {**BEGAN, "phase": "check"},
            True,
            "restart (site.yml), 7 s: 0/3 ranks stopped, 0/3 started; checking every rank's "
            "launcher (nothing stopped yet); follow /var/log/sparkfleet/cluster.log on spark-1",
        ),
        (
            {
                **BEGAN,
                "phase": "start",
                "stopped": ["spark-1", "spark-2", "spark-3"],
                "started": ["spark-3"],
                "starting": "spark-2",
            },
            False,
            "restart (site.yml), 7 s: 3/3 ranks stopped, 1/3 started (spark-3); starting "
            "spark-2; its process 1 is gone (killed?); follow /var/log/sparkfleet/cluster.log "
            "on spark-1",
        ),
        (
            {**BEGAN, "op": "stop", "reason": "", "phase": "stop", "log": ""},
            True,
            "stop, 7 s: 0/3 ranks stopped; stopping every rank",
        ),
        (
            {**BEGAN, "phase": "failed", "rc": 5, "message": "no /health", "ended": NOW + 5},
            True,
            "restart (site.yml) FAILED (rc 5) after 5 s: no /health",
        ),
        (
            {**BEGAN, "phase": "done", "rc": 0, "message": "healthy", "ended": NOW + 3},
            True,
            "restart (site.yml) ended after 3 s: healthy",
        ),
    ],
)
def test_progress_line(changes, alive, line):
    assert common.progress_line(changes, NOW + 7, alive) == line


def test_the_progress_verb_reads_the_file_and_a_missing_one(tmp_path):
    path = tmp_path / "cluster-progress.json"
    assert common.read_progress(str(path), NOW)["line"] == "no cluster operation recorded yet"
    common.write_json(str(path), {**BEGAN, "phase": "stop", "pid": 2**22 + 7})
    got = common.read_progress(str(path), NOW + 1)
    # No process of that id: the line says the writer is gone.
    assert got["alive"] is False and "is gone" in got["line"]
