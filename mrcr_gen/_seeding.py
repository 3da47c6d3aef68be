"""Seeds derived from structured keys, identical in every process (unlike the salted `hash()`)."""

from __future__ import annotations

import hashlib
import random


def derive_seed(*parts: object) -> int:
    digest = hashlib.blake2b(repr(parts).encode("utf-8"), digest_size=8).digest()
    return int.from_bytes(digest, "big")


def derived_rng(*parts: object) -> random.Random:
    return random.Random(derive_seed(*parts))
