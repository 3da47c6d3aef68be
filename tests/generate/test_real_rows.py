
import pytest

from mrcr_gen import bin_for_tokens, iter_rows, row_token_count
from tests.support import REAL_ROWS as REAL

from .structure import assert_mrcr_structure


@pytest.fixture(scope="module")
def real_rows():
    if not REAL.exists():
        pytest.skip("../shared/mrcr-real is not on this machine")
    return list(iter_rows(REAL))


def test_real_rows_pass_the_structural_checks(real_rows):
    assert len(real_rows) == 3
    for row in real_rows:
        assert_mrcr_structure(row)


def test_real_row_token_counts_match_the_published_figures(real_rows):
    import json

    counts = [row_token_count(json.loads(r.prompt), r.answer) for r in real_rows]
    assert counts == [146743, 148284, 144134]
    assert {str(bin_for_tokens(c)) for c in counts} == {"(131072, 262144]"}
