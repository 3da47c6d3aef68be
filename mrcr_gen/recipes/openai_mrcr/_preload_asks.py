"""Imported by generation's fork server once o200k is loaded (see `_workers.worker_preload`): the
default catalog's asks (4,380 validated models) and their facts (`_assembler.ask_facts`: keys, o200k
token counts, JSON openings) worked out once, for the up-front check and every worker."""

from __future__ import annotations

from ..._tokens import DEFAULT_TOKENIZER
from ._assembler import ask_facts
from ._catalog import load_catalog

ask_facts(tuple(load_catalog().asks()), DEFAULT_TOKENIZER)
