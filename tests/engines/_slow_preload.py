"""Preloaded by a fork server in tests/engines/test_fork_server_exit.py: a preload that takes a
minute, so that a test can act while the server is still preloading."""

from __future__ import annotations

import time

time.sleep(60)
