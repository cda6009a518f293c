# Copyright (c) 2026, sparkfleet maintainers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

"""The cluster report of playbooks/status.yml.

Private to sparkfleet.serving. The play reads every node (the converge probe, the engine
launcher's ``status``), the head's API and watchdog, and the cluster's firing alerts
(the monitoring role's ``alerts`` entry point); here, pure and unit-tested, the text it
prints: one row per node (the head first), the API's health, the running and recorded
engine images, the watchdog's state and the alerts.

A value the report shows a placeholder for when it is absent (the MTU ``?``, the GID
index recorded ``none``, the one in the table now ``MISSING``, the engine ``not
provisioned``, the API ``no answer``, the watchdog ``not installed``, an image ``none``)
is optional; any other value the report prints is required: without it ``report``
raises ``ValueError`` naming it.
"""

from __future__ import annotations

import json
from collections.abc import Mapping

from ansible_collections.sparkfleet.serving.plugins.module_utils._engine import rank_container
from ansible_collections.sparkfleet.serving.plugins.plugin_utils._probe import probe_error

ROW = "%-10s %4s  %-15s %-13s %5s  %-9s %-9s %s"
# What the play registers on each node (the engine launcher) and on the head (API, watchdog).
ENGINE, API, WATCHDOG = "__status_engine", "__status_api", "__status_watchdog"

_ABSENT = object()


def _get(value, key):
    """``value.key`` as the report reads it: _ABSENT unless ``value`` is a mapping holding it."""
    if isinstance(value, Mapping):
        try:
            return value[key]
        except KeyError:
            return _ABSENT
    return _ABSENT


def _or(value, fallback, falsy=False):
    """``fallback`` when ``value`` is absent (or, with ``falsy``, empty, zero, None)."""
    if value is _ABSENT or (falsy and not value):
        return fallback
    return value


def _need(value, key, where):
    got = _get(value, key)
    if got is _ABSENT:
        raise ValueError(f"{where} has no {key}")
    return got


def _image_id(record, where):
    image_id = _need(record, "image_id", where)
    if not isinstance(image_id, str):
        raise ValueError(f"{where}: image_id {image_id!r} is not a string")
    return image_id[7:19]


def _int(value):
    """Jinja's ``int`` filter ("42.23" is 42, anything else unreadable 0)."""
    try:
        if isinstance(value, str):
            return int(value, 10)
        return int(value)
    except (TypeError, ValueError):
        try:
            return int(float(value))
        except (TypeError, ValueError):
            return 0


def _is_list(value):
    """Jinja's ``sequence`` test, strings excepted (a list of alerts, not an error)."""
    if isinstance(value, str):
        return False
    try:
        len(value)
        value.__getitem__  # noqa: B018
    except Exception:
        return False
    return True


def _node_row(name, hostvars):
    v = hostvars.get(name)
    if not isinstance(v, Mapping):
        raise ValueError(f"no variables for {name} (hostvars)")
    where = f"hostvars[{name!r}]"
    rank = _need(v, "spark_rank", where)
    address = _need(v, "ansible_host", where)
    iface = _need(v, "roce_iface", where)
    node = _or(_get(v, "converge_node"), {})
    recorded = _get(_get(_or(_get(v, "converge_recorded"), {}), "roce"), "roce_node")
    recorded = _or(recorded, {}, falsy=True)
    nic = _or(_get(_or(_get(node, "nics"), {}), iface), {})
    gid = _or(_get(node, "gids"), [{}], falsy=True)
    gid = gid[0] if isinstance(gid, (list, tuple)) else _ABSENT
    if _or(_get(gid, "found"), False):
        gid_now = _need(gid, "index", f"{name}'s GID row")
    else:
        gid_now = "MISSING"
    result = _need(v, ENGINE, where)
    error = probe_error(result)
    if "unreachable" in error:
        engine = error
    else:
        engine = _or(_get(result, "stdout"), "", falsy=True) or "not provisioned"
    return ROW % (
        name,
        rank,
        address,
        iface,
        _or(_get(nic, "mtu"), "?"),
        _or(_get(recorded, "gid_index"), "none"),
        gid_now,
        engine,
    )


def _api_line(head, headvars, engine):
    api = _or(_get(headvars, API), {})
    if _or(_get(api, "passed"), False):
        state = f"healthy, serving {_need(engine, 'served_model_name', 'sglang_engine')}"
    else:
        state = f"NOT HEALTHY ({_or(_get(api, 'msg'), 'no answer')})"
    host = _need(engine, "host", "sglang_engine")
    port = _need(engine, "port", "sglang_engine")
    return f"API {host}:{port} on {head}: {state}"


def _image_lines(names, hostvars, headvars, engine):
    container = _need(engine, "container_name", "sglang_engine")
    ids = []
    for name in names:
        v = hostvars[name]
        containers = _or(_get(_get(v, "converge_node"), "containers"), {})
        box = _or(_get(containers, rank_container(container, _need(v, "spark_rank", name))), {})
        image = _or(_get(box, "image"), "", falsy=True)
        ids.append(f"{name} {image[7:19] or 'none'}")
    held = _or(_get(headvars, "converge_engine"), {})
    pin = _or(_get(held, "pin"), {})
    good = _or(_get(held, "known_good"), {})
    pinned = ""
    if pin:
        where = "the head's engine pin"
        image, image_id = _need(pin, "image", where), _image_id(pin, where)
        pinned = f"; pinned on the head: {image} ({image_id}, {_need(pin, 'decision', where)})"
    image = _need(engine, "image", "sglang_engine")
    lines = [f"engine image running: {', '.join(ids)} (inventory: {image}){pinned}"]
    if good:
        where = "the last known-good"
        image, image_id = _need(good, "image", where), _image_id(good, where)
        at, run = _need(good, "recorded_at", where), _need(good, "run_id", where)
        lines.append(
            f"last known-good: {image} ({image_id}), recorded {at} by upgrade {run}; "
            "rollback.yml returns to it"
        )
    else:
        lines.append("last known-good: none recorded (no engine upgrade yet)")
    return lines


def _watchdog_lines(head, headvars):
    wd = _or(_get(headvars, WATCHDOG), {})
    if _or(_get(wd, "rc"), 1) != 0:
        return [f"watchdog: not installed on {head}"]
    where = "the watchdog's status"
    stdout = _need(wd, "stdout", where)
    try:
        w = json.loads(stdout)
    except (TypeError, ValueError) as exc:
        raise ValueError(f"{where} is not JSON: {exc}") from exc
    last = _need(w, "last_decision", where) or {}
    if _need(w, "paused", where):
        state = f"PAUSED ({w['paused']})"
    elif _need(w, "gave_up", where):
        state = f"GAVE UP ({w['gave_up']})"
    elif _or(_get(w, "reboot_required"), None):
        state = f"REBOOT REQUIRED ({w['reboot_required']})"
    else:
        state = "active"
    if last:
        decision, at, reason = (
            _need(last, key, "the watchdog's last decision") for key in ("decision", "at", "reason")
        )
        decision = f"{decision} at {at} ({reason})"
    else:
        decision = "none yet"
    window, restarts = _need(w, "window_s", where), _need(w, "restarts_in_window", where)
    lines = [
        f"watchdog: {state}; last decision: {decision}; restarts in the last {window} s: {restarts}"
    ]
    progress = _or(_get(w, "progress"), None)
    if progress and _need(progress, "running", "the watchdog's progress") > 0:
        seen = _get(_get(w, "last_observation"), "time")
        if seen is _ABSENT:
            seen = _need(progress, "seen", "the watchdog's progress")
        still = _int(round(seen - _need(progress, "moved", "the watchdog's progress"), 0))
        lines.append(
            f"watchdog: {_int(progress['running'])} request(s) running, no token generated for "
            f"{still} s (a stall past {_need(w, 'stall_s', where)} s is a wedge)"
        )
    stall = _or(_get(w, "last_stall"), None)
    if stall:
        at = _need(stall, "at", "the watchdog's last stall")
        reason = _need(stall, "reason", "the watchdog's last stall")
        lines.append(f"watchdog: last stall restart at {at}: {reason}")
    memory = _or(_get(w, "last_memory"), None)
    if memory:
        where_memory = "the watchdog's last memory check"
        at, reason = _need(memory, "at", where_memory), _need(memory, "reason", where_memory)
        outcome = f"passed ({reason})" if _need(memory, "ok", where_memory) else reason
        lines.append(f"watchdog: last memory check at {at}: {outcome}")
    gone = _or(_get(w, "unreachable"), {}, falsy=True)
    if not isinstance(gone, Mapping):
        raise ValueError(f"{where}: unreachable is not a mapping of nodes")
    for node, u in gone.items():
        where_node = f"the watchdog's unreachable {node}"
        since = _need(u, "since_at", where_node)
        for_s = _need(u, "for_s", where_node)
        error = _need(u, "error", where_node)
        if _or(_get(u, "past_bound"), False):
            then = (
                f"PAST watchdog_unreachable_s={_need(w, 'unreachable_s', where)} s: check the node "
                "(power, network, sshd); still waiting, not given up"
            )
        else:
            then = "waiting for it, no restart while it is gone"
        lines.append(f"watchdog: {node} unreachable since {since} ({for_s} s: {error}); {then}")
    return lines


def _alert_lines(alerts, url, error):
    if not _is_list(alerts):
        return [f"alerts: {error}"]
    firing = f"{len(alerts)} firing" if alerts else "none firing"
    lines = [f"alerts ({url}): {firing}"]
    for number, alert in enumerate(alerts, 1):
        where = f"alert {number}"
        name, severity = _need(alert, "name", where), _need(alert, "severity", where)
        node = _need(alert, "node", where)
        node = f" {node}" if node else ""
        since, summary = _need(alert, "since", where), _need(alert, "summary", where)
        lines.append(f"  {name} [{severity}]{node} since {since}: {summary}")
    return lines


def report(hostvars, bring_up_order, head, alerts, prometheus_url="", alerts_error=""):
    """The cluster report's text, one line per row (no trailing newline).

    ``hostvars``: each node's variables (``hostvars``): spark_rank, ansible_host,
    roce_iface, converge_node and converge_recorded (the converge probe's), the engine
    launcher's ``status`` result (``__status_engine``); on the head also sglang_engine,
    converge_engine, the API's and the watchdog's results (``__status_api``,
    ``__status_watchdog``). ``bring_up_order``: the nodes, head last (the report lists them
    head first). ``head``: the head's name. ``alerts``: the monitoring role's firing alerts
    (a list; anything else reports ``alerts_error``); ``prometheus_url``: where they were read.
    """
    names = list(reversed(list(bring_up_order)))
    lines = [ROW % ("host", "rank", "mgmt IP", "RoCE NIC", "MTU", "GID rec", "GID now", "engine")]
    lines += [_node_row(name, hostvars) for name in names]
    headvars = hostvars.get(head)
    if not isinstance(headvars, Mapping):
        raise ValueError(f"no variables for the head {head} (hostvars)")
    engine = _need(headvars, "sglang_engine", f"hostvars[{head!r}]")
    lines.append(_api_line(head, headvars, engine))
    lines += _image_lines(names, hostvars, headvars, engine)
    lines += _watchdog_lines(head, headvars)
    lines += _alert_lines(alerts, prometheus_url, alerts_error)
    return "\n".join(lines)
