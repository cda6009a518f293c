"""Tests for the scenarios' side-effect playbooks (not collection code)."""

from __future__ import annotations


def sparkfleet_restarted_once(node, before, after):
    """The node's rank container started again, and its launch log grew by one start."""
    old, new = before[node], after[node]
    return new["started"] != old["started"] and new["launches"] == old["launches"] + 1


class TestModule:
    def tests(self):
        return {"sparkfleet_restarted_once": sparkfleet_restarted_once}
