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


class FilterModule:
    def filters(self):
        return {
            "sparkfleet_changed_paths": sparkfleet_changed_paths,
            "sparkfleet_epoch": sparkfleet_epoch,
        }
