"""Imported first by a local pool's fork server, so every worker starts with o200k loaded (and
shares its pages copy-on-write instead of each loading its own copy)."""

from __future__ import annotations

from .._tokens import o200k, token_counter
from ._files import check_rows  # noqa: F401  (imported so workers start warm)

o200k()
token_counter()
