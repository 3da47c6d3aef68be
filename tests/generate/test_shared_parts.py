"""How the shared writings are cut into work units: contiguous parts that cover every key once,
none larger than SHARED_PART_KEYS, and the last workers' worth cut small, so that the workers,
which all wait for the last part before their rows, finish the sharing close together."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from mrcr_gen.generate._share import SHARED_PART_KEYS, shared_parts


@given(n_keys=st.integers(0, 20 * SHARED_PART_KEYS), workers=st.integers(1, 16))
def test_parts_cover_every_key_once_and_end_small(n_keys: int, workers: int) -> None:
    parts = shared_parts(n_keys, workers)
    assert [k for start, stop in parts for k in range(start, stop)] == list(range(n_keys))
    assert all(0 < stop - start <= SHARED_PART_KEYS for start, stop in parts)
    tail = [stop - start for start, stop in parts if start >= max(0, n_keys - workers * SHARED_PART_KEYS)]
    # The keys of the last workers' worth of parts go in at most 4 parts per worker, each a quarter
    # of a part's keys at most.
    assert len(parts) - len(tail) == max(0, -(-(n_keys - workers * SHARED_PART_KEYS) // SHARED_PART_KEYS))
    assert len(tail) <= 4 * workers and all(size <= -(-SHARED_PART_KEYS // 4) for size in tail)


def test_the_1m_jobs_parts() -> None:
    # 438 asks x 8 variants: 16 parts of 2048, then 2272 keys in 8 parts of 284.
    parts = shared_parts(35040, 2)
    assert parts[:16] == [(s, s + 2048) for s in range(0, 32768, 2048)]
    assert parts[16:] == [(s, s + 284) for s in range(32768, 35040, 284)]


def test_every_part_is_queued_at_once(tmp_path, monkeypatch) -> None:
    # The parts finish in any order: a window behind the oldest part left a worker idle while the
    # other composed it. The engine is handed every part at once.
    from types import SimpleNamespace

    import mrcr_gen.generate._share as share_module
    from tests.engines.units import FewSharedKeysWriter

    windows: list[int | None] = []

    class RecordingEngine:
        workers = 2

        def map(self, fn, units, *, window=None, on_progress=None):
            units = list(units)
            windows.append(window)
            return (fn(*unit) for unit in units)

    monkeypatch.setattr(share_module, "PAIR_TOKENS", 1)  # any job is large enough to share
    rows = [(SimpleNamespace(max_tokens=65536),) * 4]
    store = share_module.share_writings(FewSharedKeysWriter(0), rows, RecordingEngine(), tmp_path)
    assert store is not None and windows == [len(shared_parts(3000, 2))] == [len(list(store.glob("*.arrow")))]
