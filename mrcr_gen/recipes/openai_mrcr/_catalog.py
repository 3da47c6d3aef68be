"""The catalog of entities and formats, read from the plain files in `entities/` and `formats/`."""

from __future__ import annotations

import hashlib
import json
from functools import lru_cache

from ..._models import Ask, FormatSpec, _Frozen
from ..._paths import _data_dir


class Catalog(_Frozen):
    entities: tuple[str, ...]
    formats: tuple[FormatSpec, ...]

    def format(self, name: str) -> FormatSpec:
        for spec in self.formats:
            if spec.name == name:
                return spec
        raise KeyError(name)

    def asks(self) -> list[Ask]:
        return list(_asks(self))

    @property
    def sha256(self) -> str:
        """Hash of the catalog's content, recorded in dataset cards."""
        return hashlib.sha256(self.model_dump_json().encode()).hexdigest()


@lru_cache(maxsize=4)
def _asks(catalog: Catalog) -> tuple[Ask, ...]:
    """A catalog's asks, made once per process: a generation worker receives its writer, with a
    copy of the catalog, with each work unit, and making the 4,380 asks took 12 ms."""
    return tuple(Ask(format=f.name, entity=e) for f in catalog.formats for e in catalog.entities)


@lru_cache(maxsize=1)
def load_catalog() -> Catalog:
    entities_file = _data_dir("entities") / "entities.txt"
    formats_file = _data_dir("formats") / "formats.json"
    entities = tuple(line.strip() for line in entities_file.read_text(encoding="utf-8").splitlines() if line.strip())
    formats = tuple(FormatSpec(**spec) for spec in json.loads(formats_file.read_text(encoding="utf-8")))
    return Catalog(entities=entities, formats=formats)


def writing_reference() -> dict[str, tuple[int, int, int]]:
    """Per format, the official GPT-4o writings' (median, p10, p90) tokens, as formats/formats.json records them."""
    return {f.name: (f.tokens.median, f.tokens.p10, f.tokens.p90) for f in load_catalog().formats}
