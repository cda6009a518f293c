# Copyright (c) 2026, sparkfleet maintainers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

"""Tell a probe's expected failure from a probe that never ran.

Tasks that collect a result (``failed_when: false``) and let the next task explain
it must not explain a host that is gone, a module that never started, a binary
that is missing or a timeout as the failure they expect (a NIC that is absent,
a peer that does not answer). ``probe_error`` returns why a result is not a real
answer of the probed command, or "" when it is one (whatever its exit code).
"""

from __future__ import annotations

# Exit codes a shell gives for a command it could not run, and timeout(1)'s.
_RC_MEANING = {
    124: "timed out",
    126: "is not executable",
    127: "is not installed (command not found)",
}


def _first_line(text):
    text = str(text or "").strip()
    return text.splitlines()[0] if text else ""


def probe_error(result, what="the probe"):
    """Why ``result`` is not a real answer of the probed command; "" when it is."""
    if not isinstance(result, dict):
        return f"{what} left no result"
    if result.get("skipped"):
        return ""
    msg = str(result.get("msg") or "")
    if result.get("unreachable"):
        return f"host unreachable ({_first_line(msg)})"
    if "module_stderr" in result or "module_stdout" in result or msg.startswith("MODULE FAILURE"):
        detail = _first_line(result.get("module_stderr")) or _first_line(
            result.get("module_stdout")
        )
        return (
            "the module did not run on the host, which is unreachable or gone "
            f"({detail or _first_line(msg)})"
        )
    if "rc" not in result:
        # A module (not a command) that answered: its result is the answer.
        if result.get("failed") is False:
            return ""
        return f"{what} did not run ({_first_line(msg) or 'no exit code'})"
    if msg.startswith("[Errno") or msg == "Error executing command.":
        binary = str(result.get("cmd") or "").split(" ", 1)[0] or "its binary"
        return f"{binary} could not be run on the host ({_first_line(msg)}): is it installed?"
    if result.get("timedout") or "timed out" in msg.lower():
        return f"{what} timed out ({_first_line(msg)})"
    rc = result.get("rc")
    if rc in _RC_MEANING and "cmd" in result:
        binary = str(result.get("cmd") or "").split(" ", 1)[0] or what
        return (
            f"{binary} {_RC_MEANING[rc]} ({_first_line(result.get('stderr')) or 'rc ' + str(rc)})"
        )
    return ""
