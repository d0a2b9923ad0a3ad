"""The docs' supported-op tables, generated from the registry and the tracer's tables.

``python tools/optable.py --write docs/operations.md`` refreshes the page between its
markers; tests/test_readme.py fails when the page is stale.
"""

from __future__ import annotations

import argparse
import re

from tracejit.ir import REGISTRY, Kind
from tracejit.trace.numpy_api import (
    accumulating_ufuncs,
    supported_functions,
    supported_ufuncs,
)

BEGIN, END = "<!-- optable:begin -->", "<!-- optable:end -->"


def op_table_markdown() -> str:
    """The table of IR ops by kind, generated so it can never drift from the registry."""
    lines = ["| kind | ops |", "|---|---|"]
    for kind in Kind:
        names = sorted(n for n, d in REGISTRY.items() if d.kind is kind)
        lines.append(f"| {kind.value} | {', '.join(f'`{n}`' for n in names)} |")
    return "\n".join(lines)


def markdown() -> str:
    ufuncs = ", ".join(f"`{n}`" for n in supported_ufuncs())
    funcs = ", ".join(f"`np.{n}`" for n in supported_functions())
    accumulating = ", ".join(f"`np.{n}.accumulate`" for n in accumulating_ufuncs())
    return "\n".join([
        "IR ops (one registry entry each: kind, shape/dtype rule, NumPy reference):",
        "",
        op_table_markdown(),
        "",
        f"NumPy ufuncs (calls, Python operators, `.reduce` and `.outer`): {ufuncs}.",
        "",
        f"Their `.accumulate` (along one axis): {accumulating}.",
        "",
        f"NumPy functions (also as ndarray methods where NumPy has them): {funcs}.",
    ])


def replace_section(text: str) -> str:
    pattern = re.compile(re.escape(BEGIN) + ".*?" + re.escape(END), re.S)
    return pattern.sub(lambda _: f"{BEGIN}\n{markdown()}\n{END}", text)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--write", metavar="PAGE",
                        help="rewrite the tables in this file (docs/operations.md)")
    args = parser.parse_args()
    if args.write:
        with open(args.write) as f:
            text = f.read()
        with open(args.write, "w") as f:
            f.write(replace_section(text))
    else:
        print(markdown())


if __name__ == "__main__":
    main()
