"""No call on mrcr-eval's event loop takes long, however long the prompt (issue 23).

Reading a row, encoding its request and grading its reply are CPU work that must run beside the
event loop, not on it: while one call runs on the loop, no other request moves. openai's
`chat.completions.create` walked every message of the prompt on the loop (seconds for a prompt of
thousands of messages). asyncio's debug mode logs every callback that runs longer than
`slow_callback_duration`; the bound here is far above what a loaded machine adds to a short call.
A first run of a short row imports what the first request and reply import (once per process).
"""

from __future__ import annotations

import asyncio
import logging

from mrcr_gen import MrcrRow, run_eval_async, write_rows
from mrcr_gen.eval import EvalConfig
from tests.support.chat_server import ChatServer
from tests.support.rowkit import make_row

SLOW_S = 1.0


def test_no_call_on_the_event_loop_takes_long_with_a_prompt_of_thousands_of_messages(tmp_path, api_key, caplog):
    short, long = tmp_path / "short.parquet", tmp_path / "long.parquet"
    write_rows([MrcrRow(**make_row(seed=9, n_needles=2))], short)
    write_rows([MrcrRow(**make_row(seed=seed, n_needles=4, pairs=3000)) for seed in (1, 2)], long)  # 6,000 messages

    async def run(data, debug: bool) -> None:
        loop = asyncio.get_running_loop()
        loop.set_debug(debug)
        loop.slow_callback_duration = SLOW_S
        config = EvalConfig(data=[str(data)], model="test-model", out=str(tmp_path / data.stem), base_url=server.base_url)
        await run_eval_async(config)

    with ChatServer("oracle") as server:
        asyncio.run(run(short, debug=False))
        with caplog.at_level(logging.WARNING, logger="asyncio"):
            asyncio.run(run(long, debug=True))
        assert server.total_requests == 3
    slow = [record.getMessage() for record in caplog.records if " took " in record.getMessage()]
    assert slow == []
