# Copyright (c) 2026, sparkfleet maintainers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

"""The canary's probe of one candidate, its result rows, table and decision.

Private to sparkfleet.serving. ``CandidateProbe`` drives one candidate engine
through the canary's phases (boot, exact, math, short count, decode runs,
stability) with the checks of ``_health`` (``HealthRunner.run_check``; the boot is
its health poll with the boot's clocks and an exit test) and counts the completions it got,
so that a death is a result ("died after 4 completions in decode run 2"), never
an exception. Everything else is pure: rows, the Markdown table and the
decision line, unit-tested without a server.
"""

from __future__ import annotations

PHASES = ("boot", "exact", "math", "short", "decode", "stability")
RESULT_COLUMNS = ("Profile", "Boot", "Exact / math", "c1 decode", "Stability")


class CandidateProbe:
    """Run the canary phases against one engine; never raises for a dead engine."""

    def __init__(
        self,
        runner,
        boot_timeout=1200,
        poll_interval=2,
        decode_runs=3,
        stability_requests=5,
        alive=None,
        boot_request_timeout=5,
    ):
        self.runner = runner
        # The boot's clocks and exit test, set on the runner for its health poll.
        self.boot_settings = {
            "timeout": boot_timeout,
            "poll_interval": poll_interval,
            "alive": alive,
            "poll_request_timeout": boot_request_timeout,
        }
        self.decode_runs = decode_runs
        self.stability_requests = stability_requests
        self.completions = 0
        self.died = None
        self.events = []

    # -- helpers ---------------------------------------------------------

    def _check(self, name, phase, label):
        """One HealthRunner check; returns its evidence. Records a death on a transport error."""
        evidence, _fatal = self.runner.run_check(name)
        evidence["phase"] = phase
        evidence["label"] = label
        # A stream that started (HTTP 200) but ended before [DONE] is a request the
        # engine never finished: the server died under it.
        cut = [r for r in evidence.get("runs") or [] if not r.get("complete", True)]
        if evidence["status"] == 200 and not cut:
            self.completions += 1
        elif self.died is None and (evidence["status"] is None or cut):
            self.died = {
                "phase": phase,
                "request": label,
                "after_completions": self.completions,
                # One decode run per check here: its "run 1: " prefix says nothing.
                "reason": _strip(evidence["detail"], "run 1: "),
            }
        self.events.append(evidence)
        return evidence

    # -- phases ----------------------------------------------------------

    def boot(self):
        """Wait for /health (or for the engine to exit: ``alive``), then the served model.

        The health check of ``_health`` with the boot's own clocks: polls of
        ``boot_request_timeout`` every ``poll_interval`` for up to ``boot_timeout``.
        """
        runner = self.runner
        with runner.settings(**self.boot_settings):
            health_check, _fatal = runner.run_check("health")
        waited = health_check["elapsed_s"]
        if not health_check["passed"]:
            return {"ok": False, "seconds": waited, "detail": health_check["detail"]}
        models, _fatal = runner.run_check("models")
        if not models["passed"]:
            return {"ok": False, "seconds": waited, "detail": models["detail"]}
        return {"ok": True, "seconds": waited, "detail": "ok"}

    def run(self):
        """All phases in order; stops at the first request the engine never answered."""
        result = {"boot": self.boot(), "exact": None, "math": None, "short": None}
        result.update({"decode_runs": [], "stability": [], "completions": 0, "died": None})
        if not result["boot"]["ok"]:
            return result
        steps = [("exact", "exact", "exact string"), ("math", "math", "17x19")]
        steps.append(("short", "short_max_tokens", "short count"))
        for key, check, label in steps:
            result[key] = _brief(self._check(check, key, label))
            if self.died:
                return self._finish(result)
        with self.runner.settings(decode_runs=1):
            for index in range(1, self.decode_runs + 1):
                evidence = self._check("decode", "decode", f"decode run {index}")
                run = (evidence.get("runs") or [{}])[0]
                result["decode_runs"].append(
                    {
                        "passed": evidence["passed"],
                        "tokens_per_s": run.get("tokens_per_s"),
                        "completion_tokens": run.get("completion_tokens"),
                        "detail": evidence["detail"],
                    }
                )
                if self.died:
                    return self._finish(result)
        for index in range(1, self.stability_requests + 1):
            check = "exact" if index % 2 else "math"
            evidence = self._check(check, "stability", f"stability request {index}")
            result["stability"].append(_brief(evidence))
            if self.died:
                break
        return self._finish(result)

    def _finish(self, result):
        result["completions"] = self.completions
        result["died"] = self.died
        return result


def _strip(text, prefix):
    return text[len(prefix) :] if text.startswith(prefix) else text


def _brief(evidence):
    return {
        "passed": evidence["passed"],
        "status": evidence["status"],
        "detail": evidence["detail"],
        "excerpt": evidence.get("excerpt", ""),
    }


# -- evidence ------------------------------------------------------------------

STACK_MARK = "watchdog timeout: Python stacks"
STACK_LINES = 400
MARKDOWN_STACK_LINES = 40


def _first(lines, *needles):
    for line in lines:
        low = line.lower()
        if any(n.lower() in low for n in needles):
            return line.strip()
    return ""


def evidence(head_lines, peer_lines=(), exit_status="", listen=None):
    """What the logs say about a candidate: watchdog line, SIGQUIT, peer, stack dump."""
    head_lines = [str(line) for line in head_lines or []]
    peer_lines = [str(line) for line in peer_lines or []]
    out = {
        "watchdog_line": _first(head_lines, "watchdog timeout (", "watchdog timeout("),
        "sigquit_line": _first(head_lines, "sigquit"),
        "peer_line": _first(peer_lines, "remote process exited", "sigquit"),
        "startup_error": _first(head_lines, "start-up failed", "Traceback", "Error:"),
        "exit_code": None,
        "status": "",
        "stack": [],
        "listen": {
            host: [line.split()[3] for line in lines if len(line.split()) > 3]
            for host, lines in (listen or {}).items()
        },
    }
    parts = str(exit_status or "").split()
    if parts:
        out["status"] = parts[0]
        if len(parts) > 1 and parts[1].lstrip("-").isdigit():
            out["exit_code"] = int(parts[1])
    for index, line in enumerate(head_lines):
        if STACK_MARK in line:
            for follow in head_lines[index : index + STACK_LINES]:
                if out["stack"] and "watchdog timeout (" in follow.lower():
                    break
                out["stack"].append(follow.rstrip())
            break
    if out["watchdog_line"]:
        out["cause"] = "scheduler watchdog timeout, SIGQUIT, process tree killed"
        if out["stack"]:
            out["cause"] += " (stack dump in the log)"
    elif out["startup_error"]:
        out["cause"] = out["startup_error"]
    else:
        out["cause"] = "no watchdog line: the request timed out or the engine exited"
    return out


# -- production's environment facts --------------------------------------------


def env_list(env):
    """KEY=VALUE strings of a compose ``environment`` (mapping or list) or an env list."""
    if isinstance(env, dict):
        return [f"{k}={'' if v is None else v}" for k, v in env.items()]
    return [str(item) for item in env or []]


def compose_envs(config):
    """[(service, [KEY=VALUE...])] of a parsed ``compose config`` document."""
    services = (config or {}).get("services") or {}
    return [
        (f"service {name}", env_list((svc or {}).get("environment")))
        for name, svc in services.items()
    ]


def env_problems(sources, facts):
    """What breaks ``facts`` ({KEY: VALUE}) in [(where, [KEY=VALUE...])]; [] when all hold."""
    problems = []
    if not sources:
        return ["nothing to check: no service / container found"]
    for where, env in sources:
        for key, value in (facts or {}).items():
            want = f"{key}={value}"
            if want in env:
                continue
            have = [item for item in env if item.split("=", 1)[0] == key]
            problems.append(f"{where} has {', '.join(have) or key + ' unset'}, wants {want}")
    return problems


# -- rows, table, decision ---------------------------------------------------


def median(values):
    values = sorted(v for v in values if v is not None)
    if not values:
        return None
    mid = len(values) // 2
    if len(values) % 2:
        return round(values[mid], 2)
    return round((values[mid - 1] + values[mid]) / 2, 2)


def candidate_row(profile, description, probe, evidence=None, refused=None):
    """One result row (dict) for a candidate from its probe result and death evidence."""
    row = {
        "profile": profile,
        "description": description,
        "boot_ok": False,
        "boot_s": None,
        "boot": "",
        "exact_ok": None,
        "math_ok": None,
        "exact_math": "-",
        "c1_tokens_per_s": None,
        "c1_runs": 0,
        "c1_decode": "-",
        "stable": False,
        "died": None,
        "completions": 0,
        "stability": "-",
        "evidence": evidence or {},
        "probe": probe,
    }
    if refused:
        row["boot"] = f"REFUSED: {refused}"
        row["stability"] = "not started"
        return row
    boot = (probe or {}).get("boot") or {"ok": False, "detail": "not probed", "seconds": None}
    row["boot_ok"] = bool(boot.get("ok"))
    row["boot_s"] = boot.get("seconds")
    if not row["boot_ok"]:
        row["boot"] = f"FAIL: {boot.get('detail')}"
        if (evidence or {}).get("startup_error"):
            row["boot"] += f": {evidence['startup_error']}"
        row["stability"] = "not started"
        return row
    row["boot"] = f"OK ({boot['seconds']:.1f} s)"
    exact, math = probe.get("exact"), probe.get("math")
    row["exact_ok"] = bool(exact and exact["passed"])
    row["math_ok"] = bool(math and math["passed"])
    failed = [name for name, ok in (("exact", row["exact_ok"]), ("math", row["math_ok"])) if not ok]
    row["exact_math"] = "OK" if not failed else "FAIL (" + ", ".join(failed) + ")"
    rates = [r["tokens_per_s"] for r in probe.get("decode_runs") or [] if r.get("passed")]
    row["c1_runs"] = len([r for r in rates if r is not None])
    row["c1_tokens_per_s"] = median(rates)
    if row["c1_tokens_per_s"] is not None:
        runs = "1 run" if row["c1_runs"] == 1 else f"median of {row['c1_runs']} runs"
        row["c1_decode"] = f"{row['c1_tokens_per_s']:.1f} tok/s ({runs})"
    row["completions"] = probe.get("completions", 0)
    died = probe.get("died")
    row["died"] = died
    stability = probe.get("stability") or []
    if died:
        cause = (evidence or {}).get("cause") or died.get("reason")
        row["stability"] = (
            f"DIED after {died['after_completions']} completions (in {died['request']}): {cause}"
        )
    elif stability and all(s["passed"] for s in stability):
        row["stable"] = True
        row["stability"] = f"OK ({len(stability)}/{len(stability)} sequential)"
    else:
        ok = len([s for s in stability if s["passed"]])
        row["stability"] = f"FAIL ({ok}/{len(stability)} sequential passed)"
    return row


def production_row(production, report):
    """The comparison row: production measured the same way before the canary."""
    checks = (report or {}).get("checks") or {}

    def ok(name):
        return bool((checks.get(name) or {}).get("passed"))

    rate = (report or {}).get("decode_tokens_per_s")
    runs = [r for r in (checks.get("decode") or {}).get("runs") or [] if r.get("tokens_per_s")]
    failed = [name for name in ("exact", "math") if not ok(name)]
    return {
        "profile": f"production: {production.get('name', 'production')}",
        "boot": "OK (running)" if ok("health") else "not healthy before the canary",
        "exact_math": "OK" if not failed else "FAIL (" + ", ".join(failed) + ")",
        "c1_tokens_per_s": rate,
        "c1_decode": "-" if rate is None else f"{rate:.1f} tok/s (median of {len(runs)} runs)",
        "stability": "production lane",
    }


def decision(rows, production):
    """(winner profile or None, one-line decision) for the run."""
    prod_rate = production.get("c1_tokens_per_s")
    prod_name = production["profile"].split(": ", 1)[-1]
    eligible = [
        r
        for r in rows
        if r["boot_ok"] and r["exact_ok"] and r["math_ok"] and r["stable"] and r["c1_tokens_per_s"]
    ]
    best = max(eligible, key=lambda r: r["c1_tokens_per_s"], default=None)
    if best is not None and prod_rate is not None and best["c1_tokens_per_s"] > prod_rate:
        return best["profile"], (
            f"Decision: candidate {best['profile']} beat production {prod_name}: "
            f"{best['c1_tokens_per_s']:.1f} vs {prod_rate:.1f} tok/s single-stream, stable, "
            "exact/math OK (same pair, same probes)."
        )
    if prod_rate is None:
        where = "production was not measured (not healthy before the canary)"
    else:
        where = f"production {prod_name} at {prod_rate:.1f} tok/s single-stream"
    if best is None:
        return None, (
            f"Decision: keep production: no candidate was stable with exact/math OK; {where}."
        )
    ratio = "" if prod_rate is None else f", {best['c1_tokens_per_s'] / prod_rate:.2f}x"
    return None, (
        f"Decision: keep production: best stable candidate {best['profile']} at "
        f"{best['c1_tokens_per_s']:.1f} tok/s{ratio}; {where}."
    )


def _cell(text):
    return str(text).replace("|", "\\|").replace("\n", " ")


def markdown(rows, production, decision_line, title="Canary results"):
    """The results table as Markdown (profile | boot | exact/math | c1 decode | stability)."""
    lines = [f"# {title}", ""]
    lines.append("| " + " | ".join(RESULT_COLUMNS) + " |")
    lines.append("|" + "---|" * len(RESULT_COLUMNS))
    for row in [*rows, production]:
        cells = [row["profile"], row["boot"], row["exact_math"], row["c1_decode"], row["stability"]]
        lines.append("| " + " | ".join(_cell(c) for c in cells) + " |")
    lines += ["", decision_line]
    deaths = [r for r in rows if r.get("died")]
    if deaths:
        lines += ["", "## Deaths", ""]
        for row in deaths:
            ev = row.get("evidence") or {}
            lines.append(f"### {row['profile']}")
            lines.append("")
            lines.append(
                f"- after {row['died']['after_completions']} completions, in "
                f"{row['died']['request']}: {row['died']['reason']}"
            )
            for key in ("watchdog_line", "sigquit_line", "peer_line", "exit_code"):
                if ev.get(key) not in (None, ""):
                    lines.append(f"- {key.replace('_', ' ')}: `{_cell(ev[key])}`")
            if ev.get("stack"):
                shown = ev["stack"][:MARKDOWN_STACK_LINES]
                if len(ev["stack"]) > len(shown):
                    shown.append(f"... {len(ev['stack']) - len(shown)} more lines in results.json")
                lines += ["", "```", *shown, "```"]
            lines.append("")
    return "\n".join(lines).rstrip() + "\n"
