
from pathlib import Path

# ../shared beside the checkout: real openai/mrcr rows for tests that skip where it is absent.
SHARED_REAL = Path(__file__).resolve().parents[2].parent / "shared" / "mrcr-real"
REAL_ROWS = SHARED_REAL / "mrcr_real_rows.parquet"
