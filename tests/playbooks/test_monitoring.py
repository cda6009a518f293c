"""The monitoring role's targets and alert rules, rendered by the role and run by promtool.

The role writes this cluster's file_sd targets and its alert rules on the Prometheus host
(here: the controller, into a temporary directory). promtool (Debian's, make setup) checks
the rules the way the role's validate does, and `promtool test rules` feeds series in and
reads the alerts out, with their `for:` delays: each alert fires on what it is for, and not
on what it must leave alone (a paused watchdog, a deliberate stop, an idle engine).
"""

from __future__ import annotations

import json
import shutil
import subprocess

import pytest
import yaml
from test_validate import mutate, run_playbook, write_inventory

# Installed by make setup (tools/host-deps.sh); without it these tests fail, never skip.
PROMTOOL = shutil.which("promtool") or "promtool"

PLAYBOOK = """
- name: Write the monitoring files of the cluster
  hosts: spark_nodes
  gather_facts: false
  roles:
    - role: sparkfleet.serving.sglang
    - role: sparkfleet.serving.monitoring
      vars:
        monitoring_prometheus_host: localhost
        ansible_connection: local
"""
CLUSTER = "rack7"
REPO_DASHBOARD = (
    __import__("pathlib").Path(__file__).resolve().parents[2]
    / "roles"
    / "monitoring"
    / "files"
    / "sparkfleet-dashboard.json"
)


def run_role(root, group, **variables):
    """Run the role for a 4-node inventory in root; its files go to root/prometheus."""
    hosts, group, extra = mutate(group=group)
    write_inventory(str(root), hosts, group, extra)
    (root / "play.yml").write_text(PLAYBOOK, encoding="utf-8")
    out = root / "prometheus"
    given = {
        "monitoring_file_sd_dir": str(out / "file_sd"),
        "monitoring_rules_dir": str(out / "rules"),
        "monitoring_promtool": PROMTOOL,
        **variables,
    }
    return (
        out,
        hosts,
        group,
        run_playbook(str(root), str(root / "play.yml"), "-e", json.dumps(given)),
    )


@pytest.fixture(scope="module")
def rendered(tmp_path_factory):
    root = tmp_path_factory.mktemp("monitoring")
    # The decode floor is the profile's own (its decode_floor_tps field).
    out, hosts, group, result = run_role(
        root,
        {"watchdog_stall_s": 90, "sglang_profile_overrides": {"decode_floor_tps": 20}},
        monitoring_cluster=CLUSTER,
        monitoring_grafana_dashboard_dir=str(root / "prometheus" / "dashboards"),
        monitoring_prometheus_config=str(root / "prometheus" / "prometheus.yml"),
        monitoring_scrape_interval="10s",
        monitoring_alertmanagers=["am1.example.org:9093", "am2.example.org:9093"],
    )
    assert result.returncode == 0, result.stdout + result.stderr
    return {"root": out, "hosts": hosts, "group": group}


def test_the_whole_configuration_reads_every_clusters_targets_and_rules(rendered):
    out = rendered["root"]
    path = out / "prometheus.yml"
    check = subprocess.run(
        [PROMTOOL, "check", "config", str(path)], capture_output=True, text=True, check=False
    )
    assert check.returncode == 0, check.stdout + check.stderr
    # promtool found the rule file and both target files through the globs.
    assert f"sparkfleet-{CLUSTER}.rules.yml" in check.stdout
    config = yaml.safe_load(path.read_text())
    assert config["global"] == {"scrape_interval": "10s", "evaluation_interval": "15s"}
    assert config["rule_files"] == [str(out / "rules" / "sparkfleet-*.rules.yml")]
    targets = config["alerting"]["alertmanagers"][0]["static_configs"][0]["targets"]
    assert targets == ["am1.example.org:9093", "am2.example.org:9093"]
    jobs = {j["job_name"]: j["file_sd_configs"][0]["files"] for j in config["scrape_configs"]}
    assert jobs == {
        "sparkfleet-sglang": [str(out / "file_sd" / "sparkfleet-*-sglang.json")],
        "sparkfleet-node": [str(out / "file_sd" / "sparkfleet-*-node.json")],
    }


@pytest.mark.parametrize(
    ("variable", "value"),
    [
        ("monitoring_reload_url", "localhost:9090/-/reload"),
        ("monitoring_alertmanagers", ["http://am.example.org:9093"]),
        ("monitoring_scrape_interval", "ten seconds"),
        ("monitoring_prometheus_config", "prometheus.yml"),
        ("monitoring_promtool", "/nonexistent/promtool"),
    ],
)
def test_unusable_monitoring_variables_are_refused_before_anything_is_written(
    tmp_path, variable, value
):
    out, _hosts, _group, result = run_role(tmp_path, {}, **{variable: value})
    assert result.returncode != 0
    assert not out.exists()
    if variable == "monitoring_promtool":
        assert (
            'localhost: monitoring_promtool "/nonexistent/promtool" does not run there'
            in result.stdout
        )
        assert "fix: install Prometheus' promtool on that host" in result.stdout
        return
    refused = "the monitoring variables are not usable"
    (line,) = [x for x in result.stdout.splitlines() if refused in x][:1]
    assert f"{variable} is {json.dumps(value)}; fix: " in line
    # Only the unusable variable is named.
    assert line.count("; fix: ") == 1


def test_targets_name_every_node_with_its_cluster_rank_and_port(rendered):
    out, hosts = rendered["root"], rendered["hosts"]
    sglang = json.loads((out / "file_sd" / f"sparkfleet-{CLUSTER}-sglang.json").read_text())
    node = json.loads((out / "file_sd" / f"sparkfleet-{CLUSTER}-node.json").read_text())
    assert [g["labels"]["node"] for g in sglang] == sorted(hosts)
    for group_ in sglang + node:
        host = group_["labels"]["node"]
        assert group_["labels"]["cluster"] == CLUSTER
        assert group_["labels"]["rank"] == str(hosts[host]["spark_rank"])
    assert {g["targets"][0] for g in node} == {f"{h['ansible_host']}:9100" for h in hosts.values()}
    assert len({g["targets"][0].rsplit(":", 1)[1] for g in sglang}) == 1


def test_the_rules_pass_promtool_check(rendered):
    rules = rendered["root"] / "rules" / f"sparkfleet-{CLUSTER}.rules.yml"
    result = subprocess.run(
        [PROMTOOL, "check", "rules", str(rules)], capture_output=True, text=True, check=False
    )
    assert result.returncode == 0, result.stdout + result.stderr
    names = [r["alert"] for g in yaml.safe_load(rules.read_text())["groups"] for r in g["rules"]]
    assert names == [
        "SparkfleetClusterDown",
        "SparkfleetWatchdogGaveUp",
        "SparkfleetRebootRequired",
        "SparkfleetWedgeDetected",
        "SparkfleetWatchdogStale",
        "SparkfleetWatchdogMissing",
        "SparkfleetNodeUnreachable",
        "SparkfleetRoceMtuLow",
        "SparkfleetRestartsNearBound",
        "SparkfleetDecodeSlow",
    ]
    for group_ in yaml.safe_load(rules.read_text())["groups"]:
        for rule in group_["rules"]:
            assert rule["annotations"]["runbook"].strip(), rule["alert"]


HEAD = {"cluster": CLUSTER, "instance": "192.168.3.3:9100", "node": "spark-1"}


def series(name, values, **labels):
    text = ",".join(f'{k}="{v}"' for k, v in sorted({**HEAD, **labels}.items()))
    return {"series": f"{name}{{{text}}}", "values": values}


def promtool_test(rendered, tmp_path, input_series, expectations, interval="1m"):
    """Run `promtool test rules`; expectations: [(eval_time, alertname, [labels...])]."""
    rules = rendered["root"] / "rules" / f"sparkfleet-{CLUSTER}.rules.yml"
    rule_list = [r for g in yaml.safe_load(rules.read_text())["groups"] for r in g["rules"]]
    by_name = {r["alert"]: r for r in rule_list}
    tests = []
    for eval_time, name, firing in expectations:
        rule = by_name[name]
        tests.append(
            {
                "eval_time": eval_time,
                "alertname": name,
                "exp_alerts": [
                    {"exp_labels": {**rule["labels"], **labels}, "exp_annotations": annotations}
                    for labels, annotations in firing
                ],
            }
        )
    spec = {
        "rule_files": [str(rules)],
        "evaluation_interval": "15s",
        "tests": [{"interval": interval, "input_series": input_series, "alert_rule_test": tests}],
    }
    path = tmp_path / "test.yml"
    path.write_text(yaml.safe_dump(spec), encoding="utf-8")
    result = subprocess.run(
        [PROMTOOL, "test", "rules", str(path)], capture_output=True, text=True, check=False
    )
    return result.returncode, result.stdout + result.stderr


def annotated(rendered, name, **values):
    """The rule's annotations as promtool expands them for the given $value / $labels text."""
    rules = rendered["root"] / "rules" / f"sparkfleet-{CLUSTER}.rules.yml"
    rule = next(
        r
        for g in yaml.safe_load(rules.read_text())["groups"]
        for r in g["rules"]
        if r["alert"] == name
    )
    out = {}
    for key, text in rule["annotations"].items():
        for placeholder, value in values.items():
            text = text.replace(placeholder, value)
        out[key] = text
    return out


def test_gave_up_and_reboot_required_fire_at_once_and_clear_with_the_marker(rendered, tmp_path):
    rc, out = promtool_test(
        rendered,
        tmp_path,
        [
            series("sparkfleet_watchdog_gave_up", "0 0 1 1 0"),
            series("sparkfleet_watchdog_reboot_required", "0 1 1 0 0"),
        ],
        [
            ("1m", "SparkfleetWatchdogGaveUp", []),
            (
                "2m",
                "SparkfleetWatchdogGaveUp",
                [(HEAD, annotated(rendered, "SparkfleetWatchdogGaveUp"))],
            ),
            ("4m", "SparkfleetWatchdogGaveUp", []),
            ("0m", "SparkfleetRebootRequired", []),
            (
                "1m",
                "SparkfleetRebootRequired",
                [(HEAD, annotated(rendered, "SparkfleetRebootRequired"))],
            ),
            ("3m", "SparkfleetRebootRequired", []),
        ],
    )
    assert rc == 0, out


def test_cluster_down_waits_its_for_and_spares_a_pause_or_a_deliberate_stop(rendered, tmp_path):
    # Healthy last at t=0 (timestamp 0): down past 300 s from 5m15s (evaluations every 15 s),
    # firing after its 1m `for:`, not before.
    down = annotated(
        rendered, "SparkfleetClusterDown", **{"{{ $value | humanizeDuration }}": "6m 30s"}
    )
    rc, out = promtool_test(
        rendered,
        tmp_path,
        [series("sparkfleet_watchdog_last_healthy_timestamp_seconds", "0x10")],
        [
            ("6m", "SparkfleetClusterDown", []),
            ("6m30s", "SparkfleetClusterDown", [(HEAD, down)]),
        ],
    )
    assert rc == 0, out
    rc, out = promtool_test(
        rendered,
        tmp_path,
        [
            series("sparkfleet_watchdog_last_healthy_timestamp_seconds", "0x10"),
            series("sparkfleet_watchdog_paused", "1x10"),
        ],
        [("8m", "SparkfleetClusterDown", [])],
    )
    assert rc == 0, out
    rc, out = promtool_test(
        rendered,
        tmp_path,
        [
            series("sparkfleet_watchdog_last_healthy_timestamp_seconds", "0x10"),
            series("sparkfleet_watchdog_observation", "1x10", kind="stopped"),
        ],
        [("8m", "SparkfleetClusterDown", [])],
    )
    assert rc == 0, out


def test_a_stall_fires_the_wedge_alert_before_the_watchdog_restarts(rendered, tmp_path):
    # watchdog_stall_s 90 in this inventory: the alert fires past 30 s of stall.
    wedge = annotated(rendered, "SparkfleetWedgeDetected")
    rc, out = promtool_test(
        rendered,
        tmp_path,
        [
            series("sparkfleet_watchdog_stalled_seconds", "0 0 20 40 0"),
            series("sparkfleet_watchdog_observation", "0 0 0 0 1", kind="wedged"),
        ],
        [
            ("2m", "SparkfleetWedgeDetected", []),
            ("3m", "SparkfleetWedgeDetected", [(HEAD, wedge)]),
            ("4m", "SparkfleetWedgeDetected", [({**HEAD, "kind": "wedged"}, wedge)]),
        ],
    )
    assert rc == 0, out


def test_a_watchdog_that_stopped_writing_is_stale_after_three_minutes(rendered, tmp_path):
    # Written at t=0 and t=60 s, then never again.
    stale = annotated(
        rendered, "SparkfleetWatchdogStale", **{"{{ $value | humanizeDuration }}": "3m 15s"}
    )
    rc, out = promtool_test(
        rendered,
        tmp_path,
        [series("sparkfleet_watchdog_last_run_timestamp_seconds", "0 60 60 60 60 60 60")],
        [
            ("3m", "SparkfleetWatchdogStale", []),
            ("4m15s", "SparkfleetWatchdogStale", [(HEAD, stale)]),
        ],
        interval="1m",
    )
    assert rc == 0, out


def test_no_watchdog_series_at_all_fires_after_ten_minutes(rendered, tmp_path):
    rc, out = promtool_test(
        rendered,
        tmp_path,
        [series("up", "1x20", job="node")],
        [
            ("9m", "SparkfleetWatchdogMissing", []),
            (
                "11m",
                "SparkfleetWatchdogMissing",
                [({"cluster": CLUSTER}, annotated(rendered, "SparkfleetWatchdogMissing"))],
            ),
        ],
    )
    assert rc == 0, out


def test_an_unreachable_node_mtu_and_restarts_near_the_bound(rendered, tmp_path):
    # The head's node_exporter target (node="spark-1") carries the series; the node it is
    # about is its own label, host (a textfile label named node would be renamed).
    gone = {**HEAD, "host": "spark-4"}
    rc, out = promtool_test(
        rendered,
        tmp_path,
        [
            series("sparkfleet_watchdog_node_unreachable_seconds", "30 90", host="spark-4"),
            series("node_network_mtu_bytes", "9000 1500", device="enp1s0f0np0", node="spark-3"),
            series("node_network_mtu_bytes", "1500 1500", device="enP7s7", node="spark-3"),
            series("sparkfleet_watchdog_restarts_in_window", "1 2"),
            series("sparkfleet_watchdog_max_restarts", "3 3"),
        ],
        [
            ("0m", "SparkfleetNodeUnreachable", []),
            (
                "1m",
                "SparkfleetNodeUnreachable",
                [
                    (
                        gone,
                        annotated(
                            rendered,
                            "SparkfleetNodeUnreachable",
                            **{
                                "{{ $labels.host }}": "spark-4",
                                "{{ $value | humanizeDuration }}": "1m 30s",
                            },
                        ),
                    )
                ],
            ),
            ("0m", "SparkfleetRoceMtuLow", []),
            (
                "1m",
                "SparkfleetRoceMtuLow",
                [
                    (
                        {**HEAD, "node": "spark-3", "device": "enp1s0f0np0"},
                        annotated(
                            rendered,
                            "SparkfleetRoceMtuLow",
                            **{
                                "{{ $labels.node }}": "spark-3",
                                "{{ $labels.device }}": "enp1s0f0np0",
                                "{{ $value }}": "1500",
                            },
                        ),
                    )
                ],
            ),
            ("0m", "SparkfleetRestartsNearBound", []),
            (
                "1m",
                "SparkfleetRestartsNearBound",
                [
                    (
                        # Matched on (cluster, instance): the alert carries those labels.
                        {"cluster": CLUSTER, "instance": HEAD["instance"]},
                        annotated(rendered, "SparkfleetRestartsNearBound", **{"{{ $value }}": "2"}),
                    )
                ],
            ),
        ],
    )
    assert rc == 0, out


def test_decode_below_the_profiles_floor_under_load_only(rendered, tmp_path):
    # 2 requests running; 60 tok/s in all (30 per request) for 10 minutes, then 20 (10 each).
    fast = "+3600x10"
    slow = "+1200x40"
    rc, out = promtool_test(
        rendered,
        tmp_path,
        [
            {
                "series": f'sglang:generation_tokens_total{{cluster="{CLUSTER}",node="spark-1"}}',
                "values": f"0{fast} 37200{slow}",
            },
            {
                "series": f'sglang:num_running_reqs{{cluster="{CLUSTER}",node="spark-1"}}',
                "values": "2x50",
            },
        ],
        [
            ("10m", "SparkfleetDecodeSlow", []),
            # Slow from 10m: the 10m window's average drops below the floor past 15m, and the
            # alert fires only after its `for:` (10m) of that.
            ("24m", "SparkfleetDecodeSlow", []),
            (
                "27m",
                "SparkfleetDecodeSlow",
                [
                    (
                        {"cluster": CLUSTER},
                        annotated(
                            rendered,
                            "SparkfleetDecodeSlow",
                            **{'{{ $value | printf "%.1f" }}': "10.0"},
                        ),
                    )
                ],
            ),
        ],
    )
    assert rc == 0, out
    # Idle (nothing running): never slow.
    rc, out = promtool_test(
        rendered,
        tmp_path,
        [
            {
                "series": f'sglang:generation_tokens_total{{cluster="{CLUSTER}",node="spark-1"}}',
                "values": "0x50",
            },
            {
                "series": f'sglang:num_running_reqs{{cluster="{CLUSTER}",node="spark-1"}}',
                "values": "0x50",
            },
        ],
        [("40m", "SparkfleetDecodeSlow", [])],
    )
    assert rc == 0, out


def test_every_dashboard_query_parses_and_uses_the_cluster_variable(rendered, tmp_path):
    shipped = REPO_DASHBOARD.read_text()
    written = rendered["root"] / "dashboards" / "sparkfleet-cluster.json"
    assert written.read_text() == shipped
    dashboard = json.loads(shipped)
    exprs = [t["expr"] for p in dashboard["panels"] for t in p["targets"]]
    assert len(exprs) >= 14
    # Every series the dashboard reads is this cluster's (the $cluster variable).
    assert all('cluster=~"$cluster"' in e for e in exprs)
    # promtool parses PromQL in rule files: one recording rule per query.
    rules = {
        "groups": [
            {
                "name": "dashboard",
                "rules": [
                    {"record": f"sparkfleet:dashboard_{i}", "expr": e} for i, e in enumerate(exprs)
                ],
            }
        ]
    }
    path = tmp_path / "dashboard.rules.yml"
    path.write_text(yaml.safe_dump(rules), encoding="utf-8")
    result = subprocess.run(
        [PROMTOOL, "check", "rules", str(path)], capture_output=True, text=True, check=False
    )
    assert result.returncode == 0, result.stdout + result.stderr
    titles = " ".join(p["title"] for p in dashboard["panels"])
    for what in (
        "Requests running",
        "token usage",
        "throughput",
        "first token",
        "output token",
        "Restarts",
        "Watchdog",
    ):
        assert what.lower() in titles.lower(), what
