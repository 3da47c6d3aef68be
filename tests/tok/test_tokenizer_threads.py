"""A forked child counts on threads of its own: the parent's tokenizing threads do not exist in it,
so a pool inherited from the parent would take the child's texts and never run them."""

from __future__ import annotations

import os

import pytest

from mrcr_gen._tokens import tokenizer_threads


@pytest.mark.skipif(not hasattr(os, "fork"), reason="fork")
def test_a_forked_child_gets_its_own_tokenizing_threads() -> None:
    parent = tokenizer_threads()
    assert parent.submit(len, "abc").result(timeout=30) == 3
    reader, writer = os.pipe()
    pid = os.fork()
    if pid == 0:  # the child: answers over the pipe, never returns into pytest
        try:
            pool = tokenizer_threads()
            fresh = pool is not parent and pool.submit(len, "abcd").result(timeout=30) == 4
            os.write(writer, b"own" if fresh else b"inherited")
        finally:
            os._exit(0)
    os.close(writer)
    with os.fdopen(reader, "rb") as answer:
        said = answer.read()
    os.waitpid(pid, 0)
    assert said == b"own", said
    assert tokenizer_threads() is parent
