"""Where the tests find the repository and the captured tool outputs (tests/fixtures/)."""

from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
FIXTURES = REPO / "tests" / "fixtures"
