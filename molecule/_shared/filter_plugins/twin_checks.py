"""Small helpers for the scenarios' side-effect playbooks (not collection code)."""

from __future__ import annotations


def sparkfleet_changed_paths(pair):
    """(after_lines, before_lines) of 'path hash' -> sorted paths whose hash differs."""
    after, before = (dict(line.split(" ", 1) for line in lines) for lines in pair)
    return sorted(path for path in after if after[path] != before.get(path))


def sparkfleet_epoch(text):
    """Docker's StartedAt (RFC 3339 with nanoseconds, UTC) as epoch seconds."""
    import datetime
    import re

    m = re.match(r"(\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d)(\.\d+)?Z$", str(text).strip())
    if not m:
        return 0.0
    base = datetime.datetime.fromisoformat(m.group(1) + "+00:00").timestamp()
    return base + (float("0" + m.group(2)) if m.group(2) else 0.0)


def sparkfleet_failures(report):
    """The json callback's report -> every failure message, a failed loop's per-item ones too.

    A looped task that fails says only "One or more items failed"; the message that names
    the host and the fix is on the failed item.
    """
    messages = []
    for play in report.get("plays", []):
        for task in play.get("tasks", []):
            for result in task.get("hosts", {}).values():
                if not result.get("failed"):
                    continue
                messages.append(str(result.get("msg", "")))
                messages.extend(
                    str(item.get("msg", ""))
                    for item in result.get("results", []) or []
                    if isinstance(item, dict) and item.get("failed")
                )
    return messages


def sparkfleet_task_msg(run, name):
    """A playbook run's (command result, json callback) message of the task ``name``, as lines.

    ``name`` as the task names itself (a role's task is listed as ``<role> : <name>``); the
    first host that has a message (a run_once report); [] when the task did not print.
    """
    import json

    report = json.loads(run.get("stdout") or "{}")
    for play in report.get("plays", []):
        for task in play.get("tasks", []):
            listed = task.get("task", {}).get("name", "")
            if listed != name and not listed.endswith(" : " + name):
                continue
            for result in task.get("hosts", {}).values():
                if "msg" in result:
                    return str(result["msg"]).splitlines()
    return []


def sparkfleet_delta(pair):
    """(later, earlier) -> later - earlier, in seconds."""
    return float(pair[0]) - float(pair[1])


def sparkfleet_drill_recovery(row):
    """One drill's figures (drill.json) as a recovery of .cache/watchdog-recovery.json."""
    fault = row["fault_at"]
    return {
        "fault": "drill " + row["drill"],
        "crash_at": fault,
        "detected_at": fault + row["detected_s"],
        "decision_at": fault + row["decided_s"],
        "healthy_at": fault + row["healthy_s"],
        "crash_to_decision_s": row["decided_s"],
        "crash_to_healthy_s": row["healthy_s"],
        "decision_to_healthy_s": round(row["healthy_s"] - row["decided_s"], 1),
    }


class FilterModule:
    def filters(self):
        return {
            "sparkfleet_changed_paths": sparkfleet_changed_paths,
            "sparkfleet_delta": sparkfleet_delta,
            "sparkfleet_drill_recovery": sparkfleet_drill_recovery,
            "sparkfleet_epoch": sparkfleet_epoch,
            "sparkfleet_failures": sparkfleet_failures,
            "sparkfleet_task_msg": sparkfleet_task_msg,
        }
