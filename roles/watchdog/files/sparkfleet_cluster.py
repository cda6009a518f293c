# Copyright: sparkfleet maintainers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Cluster control and self-healing watchdog of one sparkfleet SGLang cluster.

Installed on the head (rank 0) by the role sparkfleet.serving.watchdog, with two
wrappers that run it as `python3 sparkfleet_cluster.py cluster|watchdog ARGS`:

  sparkfleet-cluster status|check|restart|stop|start
      The one ordered restart of the cluster: check that every rank can start
      (nothing is stopped otherwise), stop every rank, start the workers from
      rank N-1 down to 1, the head last, wait for the head's /health. The
      bring-up of site.yml, restart.yml and the watchdog all call it; the canary
      stops and starts its production engine with it (a compose driver when that
      engine is a compose project: SPARKFLEET_CLUSTER_DRIVER names a file with it).
      Workers are reached over SSH with a key that can run only their launcher's
      verbs (and the production program's).

  sparkfleet-watchdog run|status|pause|resume|hold|release|clear
      Run by cron every minute; observes the cluster several times inside its
      minute and restarts it (through the code above) after two consecutive bad
      observations: a crashed rank (container missing or exited), or a head that
      is up but has not answered /health for longer than the grace period (a
      wedge). A healthy or booting cluster, a deliberate stop, a paused watchdog,
      a hold (site.yml changing the cluster; it ends by itself) or a cluster
      operation in progress is left alone. So is a cluster with a
      node that does not answer (a reboot, a cut cable): it waits until every
      node answers again, then restarts what is gone; a node gone longer than a
      bound is reported, never given up on. A run keeps observing after a
      restart for the rest of its minute. Restarts back off and are bounded per
      window; past the bound, or when a launcher refuses to start, the watchdog
      gives up (a marker file) until an operator clears it. A refusal by a node
      that booted less than boot_window_s ago (its port not up yet) is a
      transient: backed off and retried, never given up on.

Every setting comes from one JSON file rendered by the role (see CONFIG).

This file is the entry point both commands run; the program is split by job into the
modules installed beside it:

  sparkfleet_cluster_common.py     what both share: clock, log, lock, JSON files, the
                                   description's settings, the driver, textfile, progress
  sparkfleet_cluster_control.py    the cluster control (Cluster, sparkfleet-cluster)
  sparkfleet_cluster_decisions.py  the watchdog's pure decisions
  sparkfleet_cluster_watchdog.py   the watchdog (Watchdog, sparkfleet-watchdog)
"""

from __future__ import annotations

import json
import os
import sys

# The program's modules (and the collection's helpers they import) are installed beside this
# file by the role: its directory first on sys.path, they are imported by plain name.
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from sparkfleet_cluster_common import file_stamp, with_driver
from sparkfleet_cluster_control import cluster_main
from sparkfleet_cluster_watchdog import watchdog_main

CONFIG = os.environ.get("SPARKFLEET_CLUSTER_CONFIG", "/etc/sparkfleet/cluster.json")
# A file of keys that replace the description's for one `sparkfleet-cluster` call: another
# engine on the same ranks (the canary's compose production). Only these keys
# (sparkfleet_cluster_common.DRIVER_KEYS).
DRIVER = os.environ.get("SPARKFLEET_CLUSTER_DRIVER", "")


def main(argv=None):
    argv = sys.argv[1:] if argv is None else argv
    if not argv or argv[0] not in ("cluster", "watchdog"):
        sys.stderr.write("usage: sparkfleet_cluster.py cluster|watchdog ARGS\n")
        return 2
    stamp = file_stamp(CONFIG)
    with open(CONFIG, encoding="utf-8") as fh:
        cfg = json.load(fh)
    if argv[0] == "watchdog":
        # The watchdog drives the collection's own cluster, never another engine.
        return watchdog_main(cfg, argv[1:], (CONFIG, stamp))
    try:
        cfg = with_driver(cfg, DRIVER)
    except (OSError, ValueError) as exc:
        sys.stderr.write(f"sparkfleet-cluster: SPARKFLEET_CLUSTER_DRIVER: {exc}\n")
        return 2
    return cluster_main(cfg, argv[1:])


if __name__ == "__main__":
    sys.exit(main())
