# Copyright (c) 2026, sparkfleet maintainers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

"""Attribute descriptions shared by the collection's modules."""

from __future__ import annotations


class ModuleDocFragment:
    DOCUMENTATION = r"""
options: {}
attributes:
  check_mode:
    description:
      - Can run in C(check_mode) and return changed status prediction without modifying
        target.
  diff_mode:
    description:
      - Will return details on what has changed (or possibly needs changing in
        C(check_mode)), when in diff mode.
  idempotent:
    description:
      - When run twice in a row outside check mode, with the same arguments, the second
        invocation indicates no change.
      - This assumes that the system controlled/queried by the module has not changed in
        a relevant way.
"""

    INFO_MODULE = r"""
options: {}
attributes:
  check_mode:
    support: full
    details:
      - This action does not modify state.
  diff_mode:
    support: N/A
    details:
      - This action does not modify state.
  idempotent:
    support: full
"""

    # A module run by an action plugin on the controller.
    CONTROLLER = r"""
options: {}
attributes:
  action:
    support: full
    description: Runs on the controller as an action plugin.
"""

    # A module that changes the node, predicts its change in check mode and shows it as a diff.
    FULL_MODULE = r"""
options: {}
attributes:
  check_mode:
    support: full
  diff_mode:
    support: full
  idempotent:
    support: full
"""

    # A module that changes the node, predicts its change in check mode and has no diff.
    CHANGE_MODULE = r"""
options: {}
attributes:
  check_mode:
    support: full
  diff_mode:
    support: none
  idempotent:
    support: full
"""
