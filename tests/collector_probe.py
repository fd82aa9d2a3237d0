"""What the garbage collector finds of closed connections, inside a daphne process of tests/socket/test_collector.py.

Only that process imports this (`preload=["tests.collector_probe"]`), and its collector then runs only when asked
(`gc.disable()`), so that no pass of its own frees a cycle unseen. On SIGUSR2 it counts the connections' protocol
objects that still exist, then collects, keeping what the collector found in cycles (`gc.DEBUG_SAVEALL`), and writes
both to the file named by AGENTCHAT_TEST_COLLECTOR_REPORT: `{"existing": n, "collected": {type name: n}}`.
"""

from __future__ import annotations

import collections
import gc
import json
import os
import signal
from pathlib import Path

from autobahn.websocket.protocol import WebSocketProtocol
from twisted.web.http import HTTPChannel, Request

REPORT_ENV = "AGENTCHAT_TEST_COLLECTOR_REPORT"
KINDS = (WebSocketProtocol, HTTPChannel, Request)


def report(signum, frame) -> None:
    existing = sum(isinstance(obj, KINDS) for obj in gc.get_objects())
    gc.set_debug(gc.DEBUG_SAVEALL)
    gc.collect()
    gc.set_debug(0)
    collected = collections.Counter(type(obj).__qualname__ for obj in gc.garbage if isinstance(obj, KINDS))
    gc.garbage.clear()
    gc.collect()  # now freed for good
    path = Path(os.environ[REPORT_ENV])
    draft = path.with_name(path.name + ".tmp")
    draft.write_text(json.dumps({"existing": existing, "collected": collected}))
    draft.replace(path)


signal.signal(signal.SIGUSR2, report)
gc.disable()
