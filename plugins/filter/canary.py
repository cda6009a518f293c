# Copyright (c) 2026, sparkfleet maintainers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

"""Filters that turn the canary's probes into its result rows, table and decision."""

from __future__ import annotations

from ansible_collections.sparkfleet.serving.plugins.module_utils import _canary


def canary_row(probe, profile, description="", evidence=None, refused=None):
    """One candidate's row from its canary_probe result and its death evidence."""
    return _canary.candidate_row(profile, description, probe, evidence, refused)


def canary_production_row(report, production):
    """The production comparison row from an sglang_health report taken before the canary."""
    return _canary.production_row(production, report)


def canary_decision(rows, production_row):
    """{'winner': profile or None, 'line': the decision line}."""
    winner, line = _canary.decision(rows, production_row)
    return {"winner": winner, "line": line}


def canary_markdown(rows, production_row, line, title="Canary results"):
    """The results table (profile | boot | exact/math | c1 decode | stability) as Markdown."""
    return _canary.markdown(rows, production_row, line, title)


def canary_evidence(head_lines, peer_lines=None, exit_status="", listen=None):
    """Evidence of a candidate's end from its engine logs, exit status and listening sockets."""
    return _canary.evidence(head_lines, peer_lines or [], exit_status, listen or {})


def canary_compose_envs(config):
    """[[service, [KEY=VALUE...]]] of a parsed compose config."""
    return [list(item) for item in _canary.compose_envs(config)]


def canary_env_problems(sources, facts):
    """Problems with the environment facts in [[where, [KEY=VALUE...]]] ([] when they hold)."""
    return _canary.env_problems([tuple(item) for item in sources or []], facts)


def canary_argv_env(argv):
    """KEY=VALUE strings of the -e/--env options of a docker run argv (one item per arg)."""
    out = []
    argv = list(argv or [])
    for index, arg in enumerate(argv[:-1]):
        if arg in ("-e", "--env"):
            out.append(str(argv[index + 1]))
    return out


class FilterModule:
    def filters(self):
        return {
            "canary_row": canary_row,
            "canary_production_row": canary_production_row,
            "canary_decision": canary_decision,
            "canary_markdown": canary_markdown,
            "canary_argv_env": canary_argv_env,
            "canary_evidence": canary_evidence,
            "canary_compose_envs": canary_compose_envs,
            "canary_env_problems": canary_env_problems,
        }
