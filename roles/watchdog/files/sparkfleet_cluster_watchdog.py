# Copyright: sparkfleet maintainers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The self-healing watchdog, `sparkfleet-watchdog run|status|pause|resume|hold|release|clear`
(see sparkfleet_cluster.py): observes the cluster several times inside its cron minute and
heals a crash or a wedge through the ordered restart of sparkfleet_cluster_control.py; its
pure decisions are in sparkfleet_cluster_decisions.py.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import shutil
import time

from sparkfleet_cluster_common import (
    EX_BOOTING,
    EX_BUSY,
    EX_MEMORY,
    EX_REFUSED,
    EX_UNREACHABLE,
    RERUN_SITE,
    Clock,
    Log,
    file_stamp,
    flocked,
    iso,
    read_json,
    setting,
    write_json,
    write_metrics,
)
from sparkfleet_cluster_control import Cluster
from sparkfleet_cluster_decisions import (
    BAD,
    KINDS,
    REBOOT,
    UNREACHABLE,
    WEDGED,
    classify,
    gate_restart,
    next_pause,
    note_observation,
    restarts_in_window,
    settle_left,
    stack_section,
    track_progress,
    track_unreachable,
    unreachable_hosts,
)


class Watchdog:
    def __init__(self, cfg, log, cluster=None, clock=Clock, config=None, make_cluster=None):
        self.log, self.clock = log, clock
        # (path, stamp) of the cluster description in use: when site.yml rewrites it (another
        # profile, port, node or bound), the run observes with the new one from its next
        # observation on, never judging the new cluster by the old description.
        self.config = config
        self.make_cluster = make_cluster or (
            lambda c: Cluster(c, Log(c["cluster_log"], "sparkfleet-cluster"), clock)
        )
        self.configure(cfg, cluster)

    def configure(self, cfg, cluster=None):
        self.cfg = cfg
        self.cluster = cluster or self.make_cluster(cfg)
        wd = cfg["watchdog"]
        self.unreachable_s = setting(wd, "unreachable_s")
        self.wd = wd
        self.state_file = os.path.join(wd["state_dir"], "state.json")
        self.paused = os.path.join(wd["state_dir"], "paused")
        self.held = os.path.join(wd["state_dir"], "held")
        self.gave_up = os.path.join(wd["state_dir"], "gave-up")
        self.reboot = os.path.join(wd["state_dir"], REBOOT)
        # Written by playbooks/drill.yml while it injects a fault: the restarts that heal it
        # are labelled as a drill's (state.json, the log), not counted as the cluster's own.
        self.drill = os.path.join(wd["state_dir"], "drill")

    def observe(self):
        head = self.cluster.head
        states = self.cluster.states()
        health = self.cluster.head_health()
        obs = {
            "head": {
                "host": head["host"],
                "state": states[head["host"]],
                # Read only when it counts: the grace after a start of a head that does not
                # answer /health 200 (one docker call less per healthy observation).
                "started_at": self.cluster.head_started_at() if health != 200 else None,
                "health": health,
                # Read only from a head that answers /health: what /health hides.
                "progress": self.cluster.head_progress()
                if health == 200 and setting(self.wd, "stall_s") > 0
                else None,
            },
            "workers": [
                {"host": w["host"], "rank": w["rank"], "state": states[w["host"]]}
                for w in self.cluster.workers
            ],
        }
        return obs

    def save(self, state):
        os.makedirs(self.wd["state_dir"], mode=0o755, exist_ok=True)
        # An operator's clear while this run observed (or restarted) holds: what this
        # run remembers from before it is dropped, not written back over it.
        cleared = read_json(self.state_file, {}).get("cleared_at")
        if cleared and cleared > state.get("cleared_at", 0):
            state["cleared_at"] = cleared
            state["restarts"] = [r for r in state.get("restarts", []) if r["time"] > cleared]
            if (state.get("bad") or {}).get("last", 0) <= cleared:
                state.pop("bad", None)
        state["restarts"] = state.get("restarts", [])[-50:]
        write_json(self.state_file, state)
        self.export(state)

    def decide(self, state, decision, reason, now, **extra):
        state["last_decision"] = dict(
            {"time": now, "at": iso(now), "decision": decision, "reason": reason}, **extra
        )
        level = (
            "ERROR"
            if decision in ("give-up", "restart-failed", REBOOT)
            else "WARNING"
            if decision == "restart"
            else "INFO"
        )
        self.log(f"decision={decision}: {reason}", level)

    def evidence(self, kind, reason, obs, now):
        """Every rank's engine log tail and the patched watchdog's stack dumps."""
        root = self.wd["incident_dir"]
        path = os.path.join(root, time.strftime("%Y%m%dT%H%M%SZ", time.gmtime(now)) + "-" + kind)
        os.makedirs(path, mode=0o750, exist_ok=True)
        write_json(
            os.path.join(path, "observation.json"),
            {"kind": kind, "reason": reason, "observation": obs},
            0o640,
        )
        tails = self.cluster.each(self.cluster.ranks, "tail", str(self.wd["log_tail_lines"]))
        for host, (rc, out, err) in tails.items():
            with open(
                os.open(os.path.join(path, host + ".log"), os.O_WRONLY | os.O_CREAT, 0o640), "w"
            ) as fh:
                fh.write(out + "\n" if rc == 0 else f"could not read the log: rc={rc} {err}\n")
            stacks = stack_section(out.splitlines()) if rc == 0 else []
            if stacks:
                with open(
                    os.open(os.path.join(path, host + ".stacks"), os.O_WRONLY | os.O_CREAT, 0o640),
                    "w",
                ) as fh:
                    fh.write("\n".join(stacks) + "\n")
        incidents = sorted(d for d in os.listdir(root) if os.path.isdir(os.path.join(root, d)))
        for old in incidents[: max(0, len(incidents) - self.wd["incidents_keep"])]:
            shutil.rmtree(os.path.join(root, old), ignore_errors=True)
        return path

    def run(self):
        wd = self.wd
        with flocked(os.path.join(self.cfg["run_dir"], "watchdog.lock")) as got:
            if not got:
                self.log(f"another watchdog run holds the lock; this one exits (rc {EX_BUSY})")
                return EX_BUSY
            start, started = self.clock.monotonic(), self.clock.time()
            while True:
                if not self.reload():
                    return 0
                # Read afresh each time: an operator's clear between two observations holds.
                state = read_json(self.state_file, {})
                rc = self.once(state)
                if rc is not None:
                    return rc
                pause = next_pause(state, wd)
                if not self.time_left(start, started, pause):
                    return 0
                self.clock.sleep(pause)

    def reload(self):
        """Take up a rewritten cluster description; False when it cannot be read (the run ends)."""
        if self.config is None:
            return True
        path, stamp = self.config
        now = file_stamp(path)
        if now == stamp:
            return True
        try:
            with open(path, encoding="utf-8") as fh:
                cfg = json.load(fh)
            if not isinstance(cfg, dict) or not isinstance(cfg.get("watchdog"), dict):
                raise ValueError("no watchdog settings in it")
        except (OSError, ValueError) as exc:
            self.log(f"{path} changed and cannot be read ({exc}); this run ends", "WARNING")
            return False
        self.config = (path, now)
        self.configure(cfg)
        self.log(f"{path} changed (site.yml): observing with the new description from now on")
        return True

    def time_left(self, start, started, pause):
        """Is there budget for one more observation after pause?

        Within the minute cron started this run in: run_budget_s from its start. A run
        that went past a minute boundary (a restart took its time) turned that
        minute's cron run away (busy), so it observes for it: until run_budget_s into
        the current minute, then the next cron run takes over.
        """
        now = self.clock.time()
        budget = self.wd["run_budget_s"]
        if now // 60 == started // 60:
            return self.clock.monotonic() - start + pause <= budget
        return now % 60 + pause <= budget

    def once(self, state):
        """One observation and its decision; returns an exit code to end the run, or None."""
        now = self.clock.time()
        if self.left_alone(state, now):
            self.save(state)
            return None
        obs, kind, reason, count, stall = self.judge(state, now)
        # A stall is confirmed by its own duration (stall_s without a token).
        confirmed = count >= self.wd["confirm"] or stall is not None
        if kind not in BAD or not confirmed or settle_left(state, now, self.wd) > 0:
            self.save(state)
            return None
        if self.gate(state, reason, now):
            self.heal(state, obs, kind, reason, count, stall, now)
        # Observe on for the rest of the run's budget: a second fault soon after a
        # recovery is seen within one interval, not at the next cron minute.
        return None

    def left_alone(self, state, now):
        """A marker, a hold or a cluster operation in progress: noted, and True (nothing is
        observed, the caller saves the state); False when the cluster is to be observed.

        Given up or paused: the run reads the marker again every interval (no node is
        asked anything), so an operator's clear or resume is acted on within one
        interval, not at the next cron minute.
        """
        if os.path.exists(self.gave_up):
            self.note(
                state,
                "gave-up",
                f"gave up earlier: {_first_line(self.gave_up)}; "
                "clear with: sparkfleet-watchdog clear",
                now,
            )
            return True
        if os.path.exists(self.reboot):
            self.note(
                state,
                REBOOT,
                f"{_first_line(self.reboot)}; after the reboot: sparkfleet-watchdog clear",
                now,
            )
            return True
        if os.path.exists(self.paused):
            self.note(
                state,
                "paused",
                f"paused ({_first_line(self.paused)}); resume with: sparkfleet-watchdog resume",
                now,
            )
            return True
        return self.held_or_busy(state, now)

    def held_or_busy(self, state, now):
        """A hold in force or the cluster lock taken: noted, and True; else False."""
        hold = self.hold(now)
        if hold:
            # What was bad before the hold is not counted on after it: the run that
            # held the watchdog changed the cluster meanwhile.
            state.pop("bad", None)
            self.note(
                state,
                "held",
                f"held by {hold['by']} until {iso(hold['until'])}: {hold['reason']}; "
                "ends then by itself, or with: sparkfleet-watchdog release",
                now,
                key=f"{hold['by']}: {hold['reason']}",
            )
            return True
        with flocked(self.cfg["lock_file"]) as free:
            busy = not free
        if busy:
            self.note(
                state,
                "busy",
                "a cluster operation (site.yml, restart.yml) holds the lock; not observing",
                now,
            )
        return busy

    def judge(self, state, now):
        """Observe the cluster and name what is seen, counted and noted in state.

        Returns (observation, kind, reason, consecutive bad count, stall reason or None).
        """
        wd = self.wd
        obs = self.observe()
        kind, reason = classify(obs, wd["grace_s"], now)
        stall = track_progress(
            state,
            obs["head"].get("progress") if kind == "healthy" else None,
            now,
            setting(wd, "stall_s"),
            wd["interval_s"],
        )
        if stall:
            kind, reason = WEDGED, f"head {obs['head']['host']} {stall}"
        elif kind == "healthy":
            state["last_healthy"] = now
        lost = unreachable_hosts(obs)
        for level, msg in track_unreachable(state, lost, now, self.unreachable_s):
            self.log(msg, level)
        count = note_observation(state, kind, now, wd["interval_s"])
        self.note(state, kind, reason, now, key=sorted(lost) if lost else None)
        return obs, kind, reason, count, stall

    def gate(self, state, reason, now):
        """May a confirmed bad observation be healed now? False after a backoff (noted, saved)
        or a give-up."""
        verdict, why = gate_restart(state, self.wd, now)
        if verdict == "backoff":
            # Logged once per backoff, then observed on: the restart follows within
            # one interval of the backoff's end, in this run or the next.
            if (state.get("last_decision") or {}).get("decision") != "backoff":
                self.decide(state, "backoff", f"{reason}: {why}", now)
            self.save(state)
            return False
        if verdict == "give-up":
            self.give_up(state, f"{reason}: {why}", now)
            return False
        return True

    def incident(self, state, kind, reason, obs, now):
        """Where the evidence of this restart is: a retry after a node refused within its boot
        window keeps that attempt's (the incident is the same one, and a port coming up late
        is not a new crash); else it is collected now."""
        last = (state.get("restarts") or [{}])[-1]
        return (
            last.get("incident")
            if last.get("booting")
            and now - last.get("time", 0) < int(setting(self.cfg, "boot_window_s"))
            and os.path.isdir(last.get("incident") or "")
            else None
        ) or self.evidence(kind, reason, obs, now)

    def heal(self, state, obs, kind, reason, count, stall, now):
        """The restart decided, made through the ordered restart, and its outcome recorded."""
        first = state["bad"]["first"]
        incident = self.incident(state, kind, reason, obs, now)
        if stall:
            state["last_stall"] = {"time": now, "at": iso(now), "reason": reason}
        drill = _first_line(self.drill) if os.path.exists(self.drill) else None
        self.decide(
            state,
            "restart",
            f"{reason} ({count} bad observations since {iso(first)}); evidence in {incident}"
            + (f" [drill {drill}]" if drill else ""),
            now,
            kind=kind,
            detected_at=first,
        )
        self.save(state)
        rc, msg = self.cluster.restart("watchdog: " + kind, self.wd["boot_wait_s"])
        done = self.clock.time()
        entry = {
            "time": now,
            "at": iso(now),
            "kind": kind,
            "reason": reason,
            "detected_at": first,
            "rc": rc,
            "incident": incident,
        }
        if drill:
            entry["drill"] = drill
        state.pop("bad", None)
        state.pop("progress", None)
        if rc not in (EX_UNREACHABLE, EX_BOOTING):
            state["restarts_total"] = state.get("restarts_total", 0) + 1
        self.outcome(state, entry, rc, msg, done)

    def outcome(self, state, entry, rc, msg, done):
        """Record how the restart of entry ended (rc, msg at done), and save the state."""
        now, first = entry["time"], entry["detected_at"]
        if rc == EX_REFUSED:
            self.give_up(state, f"a launcher refused to start: {msg}", done)
            return
        if rc == EX_MEMORY:
            state["last_memory"] = {"time": done, "at": iso(done), "ok": False, "reason": msg}
            self.reboot_required(state, msg, entry["incident"], done)
            state.setdefault("restarts", []).append(entry)
            self.save(state)
            return
        if rc in (EX_UNREACHABLE, EX_BOOTING):
            # Not a refusal and not counted towards the give-up bound: the next
            # observations see the node unreachable and wait for it, or (a node that
            # refused within its boot window) retry after the backoff.
            entry["transient"] = True
            if rc == EX_BOOTING:
                entry["booting"] = True
            self.decide(state, "restart-deferred", msg, done, rc=rc)
        elif rc == 0:
            # Every rank started, so every node passed the memory check after the stop.
            state["last_memory"] = {
                "time": done,
                "at": iso(done),
                "ok": True,
                "reason": "every node had the memory its rank needs",
            }
            entry["healthy_at"] = done
            entry["decision_to_healthy_s"] = round(done - now, 1)
            entry["detection_to_healthy_s"] = round(done - first, 1)
            self.decide(
                state,
                "recovered",
                f"{msg}; {done - now:.1f} s after the decision, "
                f"{done - first:.1f} s after the first bad observation",
                done,
            )
        else:
            self.decide(state, "restart-failed", msg, done, rc=rc)
        state.setdefault("restarts", []).append(entry)
        self.save(state)

    def note(self, state, kind, reason, now, key=None):
        """Log an observation when it differs from the previous one.

        Differs: another kind, or for a bad or odd kind another reason (for
        unreachable: another set of nodes, key, not another SSH error text).
        """
        last = state.get("last_observation", {})
        key = reason if key is None else key
        if last.get("kind") != kind or (
            kind not in ("healthy", "booting", "busy")
            and last.get("key", last.get("reason")) != key
        ):
            level = "WARNING" if kind in BAD or kind in (UNREACHABLE, "unknown") else "INFO"
            self.log(f"observed {kind}: {reason}", level)
        state["last_observation"] = {
            "time": now,
            "at": iso(now),
            "kind": kind,
            "reason": reason,
            "key": key,
        }

    def give_up(self, state, reason, now):
        os.makedirs(self.wd["state_dir"], mode=0o755, exist_ok=True)
        with open(self.gave_up, "w", encoding="utf-8") as fh:
            fh.write(
                f"{iso(now)} {reason}\n"
                f"fix the cause (re-run {RERUN_SITE}), then: sparkfleet-watchdog clear\n"
            )
        self.decide(
            state,
            "give-up",
            "GAVE UP, no more restarts until an operator clears it: " + reason,
            now,
        )
        self.save(state)

    def reboot_required(self, state, reason, incident, now):
        """Stopped, and a node lacks the memory to start: no start until an operator clears."""
        os.makedirs(self.wd["state_dir"], mode=0o755, exist_ok=True)
        with open(self.reboot, "w", encoding="utf-8") as fh:
            fh.write(f"{iso(now)} {reason}\n")
        with open(
            os.open(os.path.join(incident, "memory.txt"), os.O_WRONLY | os.O_CREAT, 0o640), "w"
        ) as fh:
            fh.write(reason + "\n")
        self.decide(state, REBOOT, reason, now)

    def clear(self, who):
        """An operator's clear: the give-up or reboot-required marker and the restart history go."""
        had = False
        for marker in (self.gave_up, self.reboot):
            if os.path.exists(marker):
                os.unlink(marker)
                had = True
        state = read_json(self.state_file, {})
        state["restarts"] = []
        state.pop("bad", None)
        state["cleared_at"] = self.clock.time()
        self.save(state)
        self.log(f"{'give-up and ' if had else ''}restart history cleared by {who}")

    def hold(self, now, settle=True):
        """The hold in force (a dict), or None; one that has ended is removed and logged.

        A hold is what a run that changes the cluster (site.yml) takes before its first
        change and releases after its bring-up: the watchdog would otherwise judge a
        cluster half-way through a change (containers renamed, launch rendered but not
        started). It carries its own end, so a run killed half-way holds nothing for long.
        """
        hold = read_json(self.held, None)
        if hold is None and not os.path.exists(self.held):
            return None
        if isinstance(hold, dict) and isinstance(hold.get("until"), (int, float)):
            if now < hold["until"]:
                return {
                    "by": hold.get("by", "?"),
                    "reason": hold.get("reason", ""),
                    "until": hold["until"],
                }
            why = "held by {} ({}) until {}: ended without a release".format(
                hold.get("by", "?"), hold.get("reason", ""), iso(hold["until"])
            )
        else:
            why = f"{self.held} is not a hold this program wrote"
        if not settle:
            return None
        self.log(f"{why}; observing again", "WARNING")
        with contextlib.suppress(FileNotFoundError):
            os.unlink(self.held)
        return None

    def take_hold(self, seconds, who, reason):
        """Hold every action for `seconds` from now (written whole, then renamed)."""
        now = self.clock.time()
        before = self.hold(now, settle=False)
        os.makedirs(self.wd["state_dir"], mode=0o755, exist_ok=True)
        hold = {"until": now + seconds, "at": iso(now), "by": who, "reason": reason}
        tmp = self.held + ".tmp"
        with open(tmp, "w", encoding="utf-8") as fh:
            json.dump(hold, fh)
        os.replace(tmp, self.held)
        # Logged when taken, not at every renewal of the same hold.
        if not before or (before["by"], before["reason"]) != (who, reason):
            self.log(f"held by {who} for {seconds} s: {reason}")

    def release(self, who):
        hold = read_json(self.held, None)
        with contextlib.suppress(FileNotFoundError):
            os.unlink(self.held)
            self.log(
                "hold released by {}{}".format(
                    who, f" ({hold.get('reason', '')})" if isinstance(hold, dict) else ""
                )
            )

    def export(self, state):
        """The watchdog's state as a node_exporter textfile (written whole, then renamed)."""
        directory = setting(self.wd, "textfile_dir")
        if not directory:
            return
        now = self.clock.time()
        write_metrics(
            directory,
            "sparkfleet_watchdog.prom",
            self.seen_families(state, now)
            + self.restart_families(state, now)
            + self.marker_families(now)
            + self.timing_families(state, now),
            "sparkfleet_watchdog_",
            self.log,
        )

    @staticmethod
    def seen_families(state, now):
        """The textfile's first families: this write, the last observation, the last healthy."""
        last = state.get("last_observation") or {}
        return [
            (
                "last_run_timestamp_seconds",
                "gauge",
                "When the watchdog last wrote this file.",
                [({}, now)],
            ),
            (
                "observation",
                "gauge",
                "1 for the kind of the last observation, else 0.",
                [({"kind": k}, int(last.get("kind") == k)) for k in KINDS],
            ),
            (
                "last_observation_timestamp_seconds",
                "gauge",
                "When the cluster was last observed.",
                [({}, last.get("time", 0))],
            ),
            (
                "last_healthy_timestamp_seconds",
                "gauge",
                "When the cluster was last seen healthy.",
                [({}, state.get("last_healthy", 0))],
            ),
        ]

    def restart_families(self, state, now):
        """The restarts made, those counted in the window, and the bound."""
        return [
            (
                "restarts_total",
                "counter",
                "Restarts the watchdog made (a restart that could "
                "not reach a node is not counted).",
                [({}, state.get("restarts_total", 0))],
            ),
            (
                "restarts_in_window",
                "gauge",
                "Restarts counted against the bound now.",
                [({}, len(restarts_in_window(state, self.wd["window_s"], now)))],
            ),
            (
                "max_restarts",
                "gauge",
                "The bound (watchdog_max_restarts) per window.",
                [({}, self.wd["max_restarts"])],
            ),
        ]

    def marker_families(self, now):
        """Whether the watchdog gave up, waits for a reboot, is paused or held."""
        return [
            (
                "gave_up",
                "gauge",
                "1 when the watchdog gave up and waits for an operator.",
                [({}, int(os.path.exists(self.gave_up)))],
            ),
            (
                "reboot_required",
                "gauge",
                "1 when a node lacked the memory to start after a stop: it needs a reboot.",
                [({}, int(os.path.exists(self.reboot)))],
            ),
            (
                "paused",
                "gauge",
                "1 while an operator's pause holds every action.",
                [({}, int(os.path.exists(self.paused)))],
            ),
            (
                "held",
                "gauge",
                "1 while a run changing the cluster holds the watchdog.",
                [({}, int(self.hold(now, settle=False) is not None))],
            ),
        ]

    @staticmethod
    def timing_families(state, now):
        """The nodes gone and for how long, the stall, the last detection and recovery."""
        restarts = state.get("restarts", [])
        done = [r for r in restarts if "detection_to_healthy_s" in r]
        lost = state.get(UNREACHABLE, {})
        prog = state.get("progress") or {}
        return [
            ("unreachable_nodes", "gauge", "Nodes that do not answer now.", [({}, len(lost))]),
            (
                "node_unreachable_seconds",
                "gauge",
                "How long each unreachable node (host) has not answered.",
                [({"host": h}, now - e["since"]) for h, e in sorted(lost.items())],
            ),
            (
                "stalled_seconds",
                "gauge",
                "How long the head has generated no token with "
                "requests running (0: it progresses or nothing runs).",
                [({}, now - prog["moved"] if prog.get("running", 0) > 0 else 0)],
            ),
            (
                "last_detection_seconds",
                "gauge",
                "From the first bad observation to the restart decision, last restart.",
                [({}, r["time"] - r["detected_at"]) for r in restarts[-1:]],
            ),
            (
                "last_recovery_seconds",
                "gauge",
                "From the first bad observation to healthy again, last recovered restart.",
                [({}, r["detection_to_healthy_s"]) for r in done[-1:]],
            ),
        ]

    def summary(self):
        state = read_json(self.state_file, {})
        now = self.clock.time()
        lost = state.get(UNREACHABLE, {})
        return {
            "unreachable": {
                host: dict(entry, for_s=round(now - entry["since"])) for host, entry in lost.items()
            },
            "unreachable_past_bound": sorted(h for h, e in lost.items() if e.get("past_bound")),
            "unreachable_s": self.unreachable_s,
            "paused": _first_line(self.paused) if os.path.exists(self.paused) else None,
            "held": self.hold(now, settle=False),
            "gave_up": _first_line(self.gave_up) if os.path.exists(self.gave_up) else None,
            "reboot_required": _first_line(self.reboot) if os.path.exists(self.reboot) else None,
            "drill": _first_line(self.drill) if os.path.exists(self.drill) else None,
            "max_restarts": self.wd["max_restarts"],
            "restarts_counted_in_window": len(
                [
                    r
                    for r in restarts_in_window(state, self.wd["window_s"], now)
                    if not r.get("transient")
                ]
            ),
            "now": now,
            "stall_s": setting(self.wd, "stall_s"),
            "progress": state.get("progress"),
            "last_stall": state.get("last_stall"),
            "last_memory": state.get("last_memory"),
            "last_observation": state.get("last_observation"),
            "last_decision": state.get("last_decision"),
            "restarts_in_window": len(restarts_in_window(state, self.wd["window_s"], now)),
            "window_s": self.wd["window_s"],
            "restarts": state.get("restarts", [])[-5:],
        }


def _first_line(path):
    try:
        with open(path, encoding="utf-8") as fh:
            return fh.readline().strip() or "no reason given"
    except OSError:
        return "unreadable"


def watchdog_main(cfg, argv, config=None):
    parser = argparse.ArgumentParser(
        prog="sparkfleet-watchdog", description="Self-healing watchdog (cron)."
    )
    sub = parser.add_subparsers(dest="cmd", required=True)
    sub.add_parser("run", help="observe for up to a minute and act (cron)")
    sub.add_parser("status", help="paused, gave-up, last decision, restarts in the window (JSON)")
    pause = sub.add_parser("pause", help="hold every action until resume")
    pause.add_argument("reason", nargs="*")
    sub.add_parser("resume", help="remove the pause file")
    hold = sub.add_parser(
        "hold", help="hold every action for SECONDS (a run changing the cluster); ends by itself"
    )
    hold.add_argument("seconds", type=int)
    hold.add_argument("reason", nargs="*")
    sub.add_parser("release", help="end a hold")
    sub.add_parser("clear", help="clear a give-up and the restart history (after fixing the cause)")
    args = parser.parse_args(argv)
    wd = Watchdog(cfg, Log(cfg["watchdog"]["log_file"], "sparkfleet-watchdog"), config=config)
    if args.cmd == "run":
        return wd.run()
    if args.cmd == "status":
        print(json.dumps(wd.summary(), indent=2, sort_keys=True))
        return 0
    os.makedirs(cfg["watchdog"]["state_dir"], mode=0o755, exist_ok=True)
    who = os.environ.get("SUDO_USER") or os.environ.get("USER") or "root"
    if args.cmd == "pause":
        with open(wd.paused, "w", encoding="utf-8") as fh:
            fh.write(
                "{} by {}: {}\n".format(iso(Clock.time()), who, " ".join(args.reason) or "operator")
            )
        wd.log("paused by {}: {}".format(who, " ".join(args.reason) or "operator"))
    elif args.cmd == "hold":
        if args.seconds <= 0:
            parser.error("hold: SECONDS must be positive")
        wd.take_hold(args.seconds, who, " ".join(args.reason) or "operator")
    elif args.cmd == "release":
        wd.release(who)
    elif args.cmd == "resume":
        if os.path.exists(wd.paused):
            os.unlink(wd.paused)
            wd.log(f"resumed by {who}")
    else:
        wd.clear(who)
    return 0
