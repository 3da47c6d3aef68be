"""The planner's thread reads ahead of the sender: up to a wave's worth of steps (the concurrency),
fewer once those ahead hold PREFETCH_CHARS of prompt text, never none."""

from __future__ import annotations

import asyncio
import threading
import time
from types import SimpleNamespace

import pytest

from mrcr_gen.eval._pipeline import Prefetch, step_chars


def job(chars: int) -> tuple[str, list]:
    return ("job", [SimpleNamespace(messages=[{"role": "user", "content": "x" * chars}])])


class Plan:
    """Steps of `chars` characters each; counts those made, and says when the count changes."""

    def __init__(self, sizes: list[int]):
        self.sizes = sizes
        self.made = 0
        self.changed = threading.Condition()

    def __iter__(self):
        for chars in self.sizes:
            with self.changed:
                self.made += 1
                self.changed.notify_all()
            yield job(chars)

    def settled(self, expected: int) -> int:
        """The count once it reached `expected` (or after 10 s), then 0.3 s later: the thread has
        stopped there, not merely paused."""
        with self.changed:
            self.changed.wait_for(lambda: self.made >= expected, timeout=10)
        time.sleep(0.3)
        return self.made


def made_ahead(sizes: list[int], *, depth: int, budget: int, taken: int, expected: int) -> int:
    async def run() -> int:
        plan = Plan(sizes)
        prefetch = Prefetch(iter(plan), depth=depth, budget=budget)
        try:
            for _ in range(taken):
                assert await prefetch.next() is not None
            return await asyncio.to_thread(plan.settled, expected)
        finally:
            await prefetch.close()

    return asyncio.run(run())


def test_the_steps_ahead_are_bounded_by_the_depth():
    assert made_ahead([10] * 50, depth=8, budget=10**9, taken=0, expected=8) == 8
    # Each step taken makes room for one more.
    assert made_ahead([10] * 50, depth=8, budget=10**9, taken=5, expected=13) == 13


def test_the_steps_ahead_are_bounded_by_their_characters():
    # 400 characters each against a budget of 1,000: a third step is made (800 < 1,000), not a fourth.
    assert made_ahead([400] * 50, depth=64, budget=1000, taken=0, expected=3) == 3


def test_one_step_is_made_however_large():
    assert made_ahead([5000] * 5, depth=64, budget=1000, taken=0, expected=1) == 1
    assert made_ahead([5000] * 5, depth=64, budget=1000, taken=2, expected=3) == 3


def test_every_step_comes_in_order_then_none():
    async def run() -> list:
        prefetch = Prefetch(iter(Plan([1, 2, 3])), depth=2)
        try:
            return [await prefetch.next() for _ in range(4)]
        finally:
            await prefetch.close()

    steps = asyncio.run(run())
    assert [step_chars(step) for step in steps[:3]] == [1, 2, 3] and steps[3] is None


def test_an_exception_of_the_plan_is_raised_by_next():
    def plan():
        yield job(1)
        raise ValueError("row 1 is broken")

    async def run() -> None:
        prefetch = Prefetch(plan(), depth=4)
        try:
            await prefetch.next()
            await prefetch.next()
        finally:
            await prefetch.close()

    with pytest.raises(ValueError, match="row 1 is broken"):
        asyncio.run(run())


def test_close_ends_a_thread_waiting_for_room():
    async def run() -> Prefetch:
        plan = Plan([10] * 50)
        prefetch = Prefetch(iter(plan), depth=2)
        await asyncio.to_thread(plan.settled, 2)
        await asyncio.wait_for(prefetch.close(), timeout=10)
        return prefetch

    assert not asyncio.run(run())._thread.is_alive()


def test_step_chars_counts_the_prompt_text_of_a_job_and_of_a_reply_to_grade():
    item = SimpleNamespace(messages=[{"content": "abc"}, {"content": None}, {"content": "de"}])
    assert step_chars(("job", [item, item])) == 10
    assert step_chars(("grade", (item, {"reply": "..."}))) == 5
    assert step_chars(("skipped", {"row": 3})) == 0 and step_chars(None) == 0
