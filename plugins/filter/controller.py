# Copyright (c) 2026, sparkfleet maintainers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

"""The controller's own side of a run: plugins loaded once, before the workers fork."""

from __future__ import annotations

from ansible_collections.sparkfleet.serving.plugins.filter.converge import warm


def preload(value=None):
    """Return an empty string; calling it is the point.

    ansible-core looks a filter up by its collection name the first time a process
    templates it, which loads every filter file of the collection (and what they
    import). Task templates are rendered in forked workers, so without this each task
    on each host repeated that load: about 30 ms of controller CPU per task and host
    (playbooks/nodes.yml). A play name is rendered in the controller's main process:
    the first play of every playbook calls this filter in its name, the main process
    loads the collection's filters there once, and every worker inherits them, with the
    argument specs and file digests each stage's decision reads (converge.warm).
    """
    warm()
    return ""


class FilterModule:
    def filters(self):
        return {"preload": preload}
