"""Make the checkout importable as ansible_collections.sparkfleet.serving.

``make setup`` links the repository into .collections/; ansible-test units sets
up the same path on its own, in which case this is a no-op.
"""

from __future__ import annotations

import os
import sys

_ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))
_COLLECTIONS = os.path.join(_ROOT, ".collections")
if os.path.isdir(_COLLECTIONS) and _COLLECTIONS not in sys.path:
    sys.path.insert(0, _COLLECTIONS)
