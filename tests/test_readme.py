"""The README's op tables are generated from the registry and must be current."""

from pathlib import Path

import optable

README = Path(__file__).resolve().parents[1] / "README.md"


def test_readme_op_tables_are_current():
    text = README.read_text()
    assert optable.BEGIN in text and optable.END in text
    assert optable.replace_section(text) == text, (
        "README op tables are stale: run `python tools/optable.py --write README.md`"
    )
