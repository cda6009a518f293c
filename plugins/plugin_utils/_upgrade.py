# Copyright (c) 2026, sparkfleet maintainers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

"""An engine upgrade's known-good record and its verdict.

Private to sparkfleet.serving. playbooks/upgrade.yml measures the running cluster (the
known-good) and the cluster restarted on the new image with the canary's probes
(``_canary.CandidateProbe`` through the canary_probe module: boot, exact, 17x19, short
count, decode runs, stability); both become canary rows (``_canary.candidate_row``).
Here, pure and unit-tested: whether the new image is kept, why, the record that makes the
last known-good one command away, and the result's Markdown.
"""

from __future__ import annotations

from ansible_collections.sparkfleet.serving.plugins.plugin_utils import _control

RECORD_VERSION = 1
# What a known-good record must hold to be returned to (rollback.yml refuses anything else).
RECORD_FIELDS = {
    "version": int,
    "cluster": str,
    "recorded_at": str,
    "run_id": str,
    "image": str,
    "image_id": str,
    "profile": dict,
    "ranks": dict,
}
RANK_FIELDS = {"config_hash": str, "patches": list}


def verdict(known_good, candidate, max_slowdown):
    """{'decision': 'kept' | 'rolled back', 'reasons': [...], 'line': str}.

    ``known_good`` and ``candidate`` are canary rows measured with the same probes. The new
    image is kept only if it booted, passed exact and math, survived the stability phase,
    and its single-stream decode is no more than ``max_slowdown`` (a fraction) below the
    known-good's. A known-good that could not be measured (no decode rate) does not excuse a
    slow candidate: the rate is then not compared, and the line says so.
    """
    max_slowdown = float(max_slowdown)
    if not 0 <= max_slowdown < 1:
        raise ValueError(f"max_slowdown must be a fraction in [0, 1), got {max_slowdown}")
    reasons = []
    if not candidate.get("boot_ok"):
        reasons.append(f"did not boot: {candidate.get('boot') or 'no answer'}")
    else:
        failed = [n for n in ("exact", "math") if not candidate.get(f"{n}_ok")]
        if failed:
            reasons.append(f"failed {' and '.join(failed)} ({candidate.get('exact_math')})")
        if candidate.get("died"):
            reasons.append(f"died: {candidate.get('stability')}")
        elif not candidate.get("stable"):
            reasons.append(f"not stable: {candidate.get('stability')}")
    new_rate, old_rate = candidate.get("c1_tokens_per_s"), known_good.get("c1_tokens_per_s")
    compared = ""
    if candidate.get("boot_ok") and not reasons:
        if new_rate is None:
            reasons.append("no decode rate measured")
        elif old_rate:
            floor = old_rate * (1 - max_slowdown)
            change = (new_rate - old_rate) / old_rate
            compared = f"{new_rate:.1f} vs {old_rate:.1f} tok/s single-stream ({change:+.1%})"
            if new_rate < floor:
                reasons.append(
                    f"slower: {compared}, more than upgrade_max_slowdown={max_slowdown:g} "
                    f"below the known-good (at least {floor:.1f} tok/s)"
                )
        else:
            compared = f"{new_rate:.1f} tok/s single-stream (the known-good was not measured)"
    if reasons:
        return {
            "decision": "rolled back",
            "reasons": reasons,
            "line": "Decision: rolled back to the known-good: " + "; ".join(reasons) + ".",
        }
    return {
        "decision": "kept",
        "reasons": [],
        "line": f"Decision: kept the new image: {compared}, stable, exact/math OK.",
    }


def record_problems(record, where="the known-good record"):
    """What makes ``record`` unusable to roll back to ([] when it is complete)."""
    if not isinstance(record, dict):
        return [f"{where} is not a JSON object"]
    problems = []
    for key, kind in RECORD_FIELDS.items():
        if key not in record:
            problems.append(f"{where} has no {key}")
        elif not isinstance(record[key], kind):
            problems.append(f"{where}: {key} is {type(record[key]).__name__}, not {kind.__name__}")
    if not problems and record["version"] != RECORD_VERSION:
        problems.append(
            f"{where} is version {record['version']}, this collection reads {RECORD_VERSION}"
        )
    if not problems and not record["image_id"].startswith("sha256:"):
        problems.append(f"{where}: image_id {record['image_id']!r} is not a sha256 image id")
    for host, rank in (record.get("ranks") or {}).items() if not problems else ():
        if not isinstance(rank, dict):
            problems.append(f"{where}: rank {host} is not an object")
            continue
        for key, kind in RANK_FIELDS.items():
            if not isinstance(rank.get(key), kind):
                problems.append(f"{where}: rank {host} has no {key}")
    return problems


def _cell(text):
    return str(text).replace("|", "\\|").replace("\n", " ")


def markdown(run, known_good_row, candidate_row, result, error=""):
    """The upgrade's result: what was tried, the two sets of figures, the decision (and the
    error that stopped the try, when one did)."""
    lines = [f"# Engine upgrade {run.get('run_id', '')} on {run.get('cluster', '')}".rstrip(), ""]
    lines.append(f"- known-good: `{run.get('from_image')}` ({run.get('from_image_id')})")
    lines.append(f"- tried: `{run.get('to_image')}` ({run.get('to_image_id')})")
    lines.append(f"- max slowdown: {float(run.get('max_slowdown', 0)):.0%}")
    lines += [
        "",
        "| Image | Boot | Exact / math | c1 decode | Stability |",
        "|---|---|---|---|---|",
    ]
    for label, row in (("known-good", known_good_row), ("new", candidate_row)):
        if not row:
            continue
        cells = [label, row.get("boot"), row.get("exact_math"), row.get("c1_decode")]
        cells.append(row.get("stability"))
        lines.append("| " + " | ".join(_cell(c if c is not None else "-") for c in cells) + " |")
    lines += ["", result["line"], ""]
    if error:
        lines += [f"The try stopped: {error.strip()}", ""]
    return "\n".join(lines)


def _short(image_id):
    return (image_id or "")[:19]


def offline_problems(image, max_slowdown):
    """What an upgrade refuses from its own variables alone (before any node is read)."""
    out = []
    if not image:
        out.append(
            "upgrade_image is not set: name the engine image to try, -e upgrade_image=<tag or id>"
        )
    try:
        bound = float(max_slowdown)
        if not 0 <= bound < 1:
            raise ValueError
    except (TypeError, ValueError):
        out.append(
            f"upgrade_max_slowdown={max_slowdown!r} is not a fraction in [0, 1): "
            "set it like 0.05 (5 %)"
        )
    return out


def problems(image, images, running_id, status, healthy, max_slowdown, archive=""):
    """Why this upgrade must not start (messages; empty when it may).

    image: upgrade_image. images: {host: {"exists": bool, "id": str}} of that image on every
    node (the converge probe's reading; {"exists": None, "error": str} when docker could not
    say). running_id: the image id the head's rank runs now. status:
    the head's `sparkfleet-watchdog status` (None: unreadable). healthy: the head's /health
    answered 200 just now. archive: upgrade_image_archive (a node without the image gets it
    from there).
    """
    out = offline_problems(image, max_slowdown)
    unread = sorted(h for h, i in (images or {}).items() if (i or {}).get("error"))
    for host in unread:
        out.append(
            f"{host}: docker could not say whether {image} is there ({images[host]['error']}): "
            "fix docker on that node and run again"
        )
    missing = sorted(
        h for h, i in (images or {}).items() if not (i or {}).get("exists") and h not in unread
    )
    if image and missing and not archive:
        for host in missing:
            out.append(
                f"{host}: the image {image} is not present (docker image inspect); pull it on "
                "every node, or give -e upgrade_image_archive=<a docker save tarball on the head>"
            )
    ids = {h: i.get("id") for h, i in (images or {}).items() if (i or {}).get("exists")}
    if len(set(ids.values())) > 1:
        listed = ", ".join(f"{h} {_short(i)}" for h, i in sorted(ids.items()))
        out.append(
            f"the image {image} is not the same on every node ({listed}): pull the same tag "
            "everywhere, or name the image by its id"
        )
    if image and ids and not missing and set(ids.values()) == {running_id}:
        out.append(f"the cluster already runs {image} ({_short(running_id)}): nothing to upgrade")
    if status is None:
        out.append(
            "the watchdog's state cannot be read on the head (sparkfleet-watchdog status): "
            "run ansible-playbook sparkfleet.serving.site -i <inventory> first"
        )
    else:
        for what, detail, fix in _control.blockers(status):
            out.append(f"{what} ({detail}): an upgrade pauses a watchdog that acts; {fix}")
    if not healthy:
        out.append(
            "the cluster is not healthy (the head's /health is not 200): an upgrade measures "
            "the running cluster as its known-good first; heal it (site.yml) and run again"
        )
    return out
