"""The fault drills' own logic: the plan and every refusal (plugins/filter/drill.py), the
figures and files of a run (roles/drill/files/drill_report.py), the steady client against a
real HTTP server (roles/drill/files/sparkfleet_load.py). The watchdog's drill label:
test_watchdog_loop.py."""

from __future__ import annotations

import http.server
import importlib.util
import json
import pathlib
import sys
import threading

import pytest
from ansible.errors import AnsibleFilterError

from ansible_collections.sparkfleet.serving.plugins.filter import drill

ROOT = pathlib.Path(__file__).parents[3]
FILES = ROOT / "roles" / "drill" / "files"
LIB = ROOT / "plugins" / "module_utils"


def load(name, path):
    spec = importlib.util.spec_from_file_location(name, path)
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    spec.loader.exec_module(module)
    return module


report = load("drill_report", FILES / "drill_report.py")
client = load("sparkfleet_load", FILES / "sparkfleet_load.py")

WORKERS = ["spark-2", "spark-3", "spark-4"]


def status(**over):
    base = {
        "paused": None,
        "gave_up": None,
        "reboot_required": None,
        "held": None,
        "drill": None,
        "last_observation": {"kind": "healthy", "reason": "head answers /health 200", "time": 1.0},
        "max_restarts": 3,
        "restarts_counted_in_window": 0,
        "window_s": 3600,
        "now": 2.0,
    }
    base.update(over)
    return base


def problems(st=None, selected=("head_kill",), confirm="rack7", **kw):
    kw.setdefault("worker", "spark-4")
    kw.setdefault("workers", WORKERS)
    return drill.drill_problems(
        status() if st is None else st, list(selected), confirm, "rack7", **kw
    )


# --- the plan ------------------------------------------------------------------------------
def test_plan_runs_in_the_catalogue_order_on_the_right_nodes():
    plan = drill.drill_plan(["worker_restart", "head_kill", "head_freeze"], "spark-1", "spark-4")
    assert [(p["name"], p["node"], p["fault"]) for p in plan] == [
        ("head_kill", "spark-1", "kill"),
        ("head_freeze", "spark-1", "freeze"),
        ("worker_restart", "spark-4", "restart"),
    ]


def test_plan_refuses_an_unknown_drill():
    with pytest.raises(AnsibleFilterError, match=r"unknown drill.*head_crash"):
        drill.drill_plan(["head_crash"], "spark-1", "spark-4")


# --- refusals ------------------------------------------------------------------------------
def test_a_healthy_cluster_with_room_under_the_bound_may_be_drilled():
    assert problems(selected=["head_kill", "worker_kill", "head_freeze"]) == []


@pytest.mark.parametrize("confirm", ["", None, "rack8", "RACK7"])
def test_without_the_clusters_name_it_is_refused(confirm):
    (msg,) = problems(confirm=confirm)
    assert "-e drill_confirm=rack7" in msg


def test_a_reboot_needs_its_own_allowance():
    (msg,) = problems(selected=["worker_reboot"])
    assert "drill_allow_reboot=true" in msg
    assert problems(selected=["worker_reboot"], allow_reboot=True) == []


@pytest.mark.parametrize(
    ("field", "value", "words"),
    [
        ("paused", "2026-12-05 by tiger: maintenance", "sparkfleet-watchdog resume"),
        ("gave_up", "2026-12-05 3 restarts", "gave up"),
        ("reboot_required", "spark-3 short of memory", "needs a reboot"),
        ("held", {"by": "site.yml", "reason": "site.yml changes the cluster"}, "held"),
        ("drill", "20261205T000000Z/head_kill", "drill_cleanup_only"),
    ],
)
def test_a_watchdog_that_would_not_act_is_refused(field, value, words):
    out = problems(status(**{field: value}))
    assert len(out) == 1 and words in out[0]


def test_an_unhealthy_cluster_is_refused_with_the_watchdogs_view():
    obs = {"kind": "crash", "reason": "engine gone: spark-1 (rank 0) is exited", "time": 1.0}
    (msg,) = problems(status(last_observation=obs))
    assert "not healthy" in msg and "spark-1 (rank 0) is exited" in msg
    (msg,) = problems(healthy=False)
    assert "/health not 200" in msg


def test_a_cluster_the_watchdog_just_healed_may_be_drilled():
    """Right after a restart the last observation is still the crash; the decision is newer."""
    crash = {"kind": "crash", "reason": "engine gone", "time": 10.0}
    healed = {"decision": "recovered", "time": 18.0}
    assert problems(status(last_observation=crash, last_decision=healed)) == []
    before = {"decision": "recovered", "time": 5.0}
    assert problems(status(last_observation=crash, last_decision=before))
    assert problems(status(last_observation=crash, last_decision=healed), healthy=False)


def test_the_bound_says_how_many_drills_fit():
    (msg,) = problems(status(restarts_counted_in_window=2), selected=["head_kill", "worker_kill"])
    assert "only 1 fit" in msg and "watchdog_max_restarts=3" in msg and "2 already" in msg
    (msg,) = problems(status(restarts_counted_in_window=3))
    assert "only 0 fit" in msg


def test_a_worker_drill_needs_a_worker():
    (msg,) = problems(selected=["worker_kill"], worker="spark-1")
    assert "drill_worker 'spark-1' is not a worker" in msg


def test_an_unreadable_watchdog_state_is_refused():
    out = drill.drill_problems(None, ["head_kill"], "rack7", "rack7", workers=WORKERS)
    assert out and "cannot be read" in out[-1]


def test_repeats_and_unknown_names_are_refused():
    out = problems(selected=["head_kill", "head_kill", "head_crash"])
    assert any("repeats" in m for m in out) and any("head_crash" in m for m in out)


# --- the report ----------------------------------------------------------------------------
def ev(t0, t1, ok=True):
    return {"w": 0, "t0": t0, "t1": t1, "ok": ok, "status": 200 if ok else None, "error": ""}


ROW = {
    "name": "head_kill",
    "node": "spark-1",
    "fault": "kill",
    "what": "kill",
    "ready_at": 100.0,
    "fault_at": 110.0,
    "done_at": 140.0,
    "healed": True,
    "undone": "restarted by the watchdog",
    "error": "",
    "restarts": [
        {"time": 115.0, "detected_at": 112.0, "rc": 8, "transient": True, "booting": True},
        {
            "time": 120.0,
            "detected_at": 112.0,
            "rc": 0,
            "healthy_at": 130.0,
            "kind": "crash",
            "incident": "/var/log/sparkfleet/incidents/x",
        },
    ],
}


def test_figures_measure_from_the_fault_and_count_requests_in_the_drill():
    events = [ev(t, t + 0.5) for t in range(100, 110)]  # answered before the fault
    events += [ev(t, t + 0.1, ok=False) for t in range(111, 129)]  # failed in the blip
    events += [ev(t, t + 0.5) for t in range(131, 140)]  # answered after the heal
    events += [ev(50, 50.5, ok=False), ev(150, 150.5)]  # outside the drill's window
    f = report.drill_figures(ROW, events)
    # Detected and decided by the first attempt (deferred: a node still booting), healthy by
    # the attempt that healed.
    assert (f["detected_s"], f["decided_s"], f["healthy_s"]) == (2.0, 5.0, 20.0)
    assert (f["restarts"], f["deferred"], f["kind"]) == (1, 1, "crash")
    assert (f["sent"], f["answered"], f["failed"], f["lost_outside_blip"]) == (37, 19, 18, 0)
    # The last answer before the fault ended at 109.5, the first after it at 131.5.
    assert f["longest_gap_s"] == 22.0


def test_a_failure_outside_the_blip_is_a_lost_request():
    events = [ev(105, 105.2, ok=False), ev(131, 131.3, ok=False), ev(120, 120.1, ok=False)]
    assert report.drill_figures(ROW, events)["lost_outside_blip"] == 2


def test_a_drill_not_healed_counts_every_failure_as_lost():
    row = dict(ROW, healed=False, restarts=[], error="no healthy restart")
    f = report.drill_figures(row, [ev(120, 120.1, ok=False)])
    assert f["healthy_s"] is None and f["lost_outside_blip"] == 1
    assert "NOT healed" in report.summary_line(f)


def test_no_answer_at_all_is_a_gap_as_long_as_the_window():
    assert report.longest_gap([], 100.0, 140.0) == 40.0


def test_the_report_writes_json_markdown_and_png(tmp_path, monkeypatch, capsys):
    events = [ev(t, t + 0.5) for t in range(100, 110)] + [ev(131, 131.5)]
    data = {
        "run": {"run_id": "R1", "cluster": "rack7", "concurrency": 2},
        "drills": [ROW],
        "events": events,
    }
    monkeypatch.setattr(sys, "stdin", _Stdin(json.dumps(data)))
    assert report.main(["--out-dir", str(tmp_path)]) == 0
    saved = json.loads((tmp_path / "drill.json").read_text())
    assert saved["drills"][0]["healthy_s"] == 20.0 and saved["requests"] == 11
    md = (tmp_path / "drill.md").read_text()
    assert "| head_kill | spark-1 | yes | 2.0 | 5.0 | 20.0 | 1 |" in md
    assert "- head_kill: /var/log/sparkfleet/incidents/x" in md
    assert (tmp_path / "drill.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    out = capsys.readouterr().out
    assert "head_kill on spark-1: healed, crash decided 5.0 s and healthy 20.0 s" in out


class _Stdin:
    def __init__(self, text):
        self.text = text

    def read(self, *_):
        text, self.text = self.text, ""
        return text


# --- the steady client against a real HTTP server -------------------------------------------
class _Engine(http.server.BaseHTTPRequestHandler):
    """Answers chat completions, then an outage, then answers again, counted in requests (not
    in seconds: the suite runs beside the twins on a loaded machine); writes the client's stop
    file once it has served enough after the outage. Records the Authorization header."""

    plan = {"up": 6, "down": 4, "up_again": 6}
    served = []
    auth = []
    stop_file = None

    def do_POST(self):
        self.rfile.read(int(self.headers.get("Content-Length", 0)))
        _Engine.auth.append(self.headers.get("Authorization"))
        n = len(_Engine.served)
        plan = _Engine.plan
        down = plan["up"] <= n < plan["up"] + plan["down"]
        _Engine.served.append(503 if down else 200)
        if n + 1 >= sum(plan.values()) and _Engine.stop_file is not None:
            _Engine.stop_file.write_text("end\n")
        if down:
            self.send_response(503)
            self.end_headers()
            return
        body = json.dumps({"choices": [{"message": {"content": "one, two"}}]}).encode()
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *_):
        pass


def test_the_client_logs_every_outcome_until_stopped(tmp_path):
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), _Engine)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    key = tmp_path / "api-key"
    key.write_text("s3cret\n")
    out, stop = tmp_path / "requests.jsonl", tmp_path / "stop"
    _Engine.stop_file = stop
    try:
        rc = client.main(
            [
                f"--url=http://127.0.0.1:{server.server_address[1]}",
                "--model=m",
                f"--api-key-file={key}",
                "--concurrency=2",
                f"--out={out}",
                f"--stop-file={stop}",
                "--retry-s=0.05",
                f"--lib={LIB}",
                "--max-s=120",
            ]
        )
    finally:
        server.shutdown()
        _Engine.stop_file = None
    assert rc == 0
    events = [json.loads(line) for line in out.read_text().splitlines()]
    # Every request the server saw is logged, by both workers, in the order it ended.
    assert len(events) == len(_Engine.served) >= sum(_Engine.plan.values())
    assert {e["w"] for e in events} == {0, 1}
    assert sorted(e["status"] for e in events) == sorted(_Engine.served)
    assert [e for e in events if e["status"] == 503 and not e["ok"] and e["error"] == "HTTP 503"]
    assert all(e["ok"] for e in events if e["status"] == 200)
    assert all(e["t1"] >= e["t0"] for e in events)
    assert set(_Engine.auth) == {"Bearer s3cret"}
    # Stopped by its stop file (within one request per worker of it), not by --max-s.
    assert len(events) <= sum(_Engine.plan.values()) + 2
