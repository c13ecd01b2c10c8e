"""Turn a JSON list of strings (a matrix leg's build_args, setup_args or test_args) into argv.

Workflows pass matrix values through `env:`, never through `${{ }}` inside a script, and
must not word-split them. This prints each argument followed by a NUL byte, which bash
reads into an array without splitting or globbing, also bash 3.2 on macOS runners:

    python .github/scripts/json_argv.py "$SETUP_ARGS" > "$RUNNER_TEMP/setup-args"
    setup_args=()
    while IFS= read -r -d '' arg; do setup_args+=("$arg"); done < "$RUNNER_TEMP/setup-args"

Anything but a list of non-empty strings without NUL bytes is rejected (exit 2), so a
malformed value fails the step instead of running a command with the wrong arguments.
"""

from __future__ import annotations

import json
import sys


def argv_from_json(text: str) -> list[str]:
    try:
        value = json.loads(text)
    except json.JSONDecodeError as error:
        raise ValueError(f"not JSON: {error}") from None
    if not isinstance(value, list):
        raise ValueError(f"expected a JSON list of strings, got {type(value).__name__}")
    for index, item in enumerate(value):
        if not isinstance(item, str) or not item or "\0" in item:
            raise ValueError(f"item {index} is not a non-empty string: {item!r}")
    return value


def main(argv: list[str]) -> int:
    if len(argv) != 2:
        print("usage: json_argv.py JSON_LIST", file=sys.stderr)
        return 2
    try:
        args = argv_from_json(argv[1])
    except ValueError as error:
        print(f"json_argv.py: {error}", file=sys.stderr)
        return 2
    sys.stdout.write("".join(f"{arg}\0" for arg in args))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
