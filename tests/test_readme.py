"""The README stays a newcomer's page that CI can read, and the op tables stay current.

The README's and the docs' examples run in tests/test_docs.py.
"""

import re
from pathlib import Path

import optable

ROOT = Path(__file__).resolve().parents[1]
OPERATIONS = ROOT / "docs" / "operations.md"


def test_op_tables_are_current():
    text = OPERATIONS.read_text()
    assert optable.BEGIN in text and optable.END in text
    assert optable.replace_section(text) == text, (
        "docs/operations.md op tables are stale: "
        "run `python tools/optable.py --write docs/operations.md`")


def test_readme_keeps_the_ci_test_command():
    """.ci/run runs the first ```sh block after the ci:test marker, verbatim."""
    text = (ROOT / "README.md").read_text()
    after = text.split("<!-- ci:test -->\n", 1)[1]
    command = re.match(r"```sh\n(.*?)\n```", after, re.S)[1]
    assert command == ("python3 -m venv .venv && .venv/bin/pip install -q -e '.[test]' "
                       "&& .venv/bin/python -m pytest")


def test_readme_links_reach_files():
    text = (ROOT / "README.md").read_text()
    targets = re.findall(r"\]\(([^)#:]+)(?:#[^)]*)?\)", text)
    assert any(t.startswith("docs/") for t in targets)
    missing = [t for t in targets if not (ROOT / t).exists()]
    assert not missing, f"README links to files that do not exist: {missing}"
