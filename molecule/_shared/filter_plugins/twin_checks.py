"""Small helpers for the scenarios' side-effect playbooks (not collection code)."""

from __future__ import annotations


def sparkfleet_changed_paths(pair):
    """(after_lines, before_lines) of 'path hash' -> sorted paths whose hash differs."""
    after, before = (dict(line.split(" ", 1) for line in lines) for lines in pair)
    return sorted(path for path in after if after[path] != before.get(path))


class FilterModule:
    def filters(self):
        return {"sparkfleet_changed_paths": sparkfleet_changed_paths}
