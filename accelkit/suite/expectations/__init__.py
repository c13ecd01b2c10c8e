"""Known failures per backend: `<backend>.yaml` beside this module.

Each file is a YAML list of `{id, reason, link, breadth}`. A listed case that fails is
reported as a known failure (status skipped, `known_failure: true`), not a failure; one that
passes is reported as an unexpected pass so the list shrinks. Entries name single cases: no
globs, no prefixes, so no list can hide a whole feature.

`breadth` (optional: "quick" or "full") limits an entry to runs of that `--breadth`: a case
whose failing sample only the full breadth runs (the quick breadth runs the first few samples
of a case) is listed with `breadth: full`, so that a quick run, where it passes, does not
report an unexpected pass. Runs of another breadth ignore the entry.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from accelkit.errors import ConfigError

BUNDLED = Path(__file__).resolve().parent
_KEYS = {"id", "reason", "link", "breadth"}
# The values of `accelkit test --breadth` (request.Breadth; this module imports no torch and
# nothing of the suite, so they are spelled here; tests/unit/suite/test_expectations.py checks
# that the two agree).
BREADTHS = ("quick", "full")
_ID = re.compile(r"^(conformance|perf)/[A-Za-z0-9_.\-]+(/[A-Za-z0-9_.\-\[\]]+)+$")
_LINK = re.compile(r"^https://\S+$")


@dataclass(frozen=True)
class Expectation:
    id: str
    reason: str
    link: str = ""
    breadth: str | None = None
    """The only `--breadth` whose runs the entry applies to (None: every run)."""

    def applies_to(self, breadth: str | None) -> bool:
        """Whether a run of `breadth` (None: any) expects this failure."""
        return breadth is None or self.breadth is None or self.breadth == breadth

    def describe(self) -> str:
        return f"{self.reason} ({self.link})" if self.link else self.reason


def load_expectations(
    backend: str, path: Path | None = None, breadth: str | None = None
) -> dict[str, Expectation]:
    """The known failures of `backend`: from `path`, else the bundled file (if any). With
    `breadth`, only the entries that apply to a run of that breadth (`Expectation.breadth`);
    every entry is validated either way."""
    import yaml

    source = path if path is not None else BUNDLED / f"{backend}.yaml"
    if path is None and not source.exists():
        return {}
    try:
        text = source.read_text(encoding="utf-8")
    except OSError as exc:
        raise ConfigError(
            f"cannot read expectations: {exc.strerror or exc}", path=str(source)
        ) from None
    try:
        root = yaml.compose(text, Loader=yaml.SafeLoader)
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        raise ConfigError(
            f"not valid YAML: {getattr(exc, 'problem', exc)}",
            path=str(source),
            line=mark.line + 1 if mark is not None else None,
        ) from None
    if root is None:
        return {}
    if not isinstance(root, yaml.SequenceNode):
        raise ConfigError(
            "expected a list of {id, reason, link}", path=str(source), line=root.start_mark.line + 1
        )
    out: dict[str, Expectation] = {}
    for node in root.value:
        line = node.start_mark.line + 1
        entry = _entry(node, str(source), line)
        if entry.id in out:
            raise ConfigError(f"{entry.id} is listed twice", path=str(source), line=line)
        out[entry.id] = entry
    return {k: v for k, v in out.items() if v.applies_to(breadth)}


def _entry(node: Any, source: str, line: int) -> Expectation:
    import difflib

    import yaml

    if not isinstance(node, yaml.MappingNode):
        raise ConfigError("each entry must be a mapping with id and reason", path=source, line=line)
    fields: dict[str, str] = {}
    for key_node, value_node in node.value:
        key = str(key_node.value)
        if key not in _KEYS:
            close = difflib.get_close_matches(key, sorted(_KEYS), n=1)
            hint = f" (did you mean {close[0]!r}?)" if close else ""
            raise ConfigError(
                f"unknown key {key!r}{hint}", path=source, line=key_node.start_mark.line + 1
            )
        if not isinstance(value_node, yaml.ScalarNode):
            raise ConfigError(
                f"{key} must be a string", path=source, line=value_node.start_mark.line + 1
            )
        fields[key] = str(value_node.value).strip()
    for required in ("id", "reason"):
        if not fields.get(required):
            raise ConfigError(f"entry without {required}", path=source, line=line)
    if not _ID.match(fields["id"]):
        raise ConfigError(
            f"id {fields['id']!r} must name one case (suite/group/case, no wildcards)",
            path=source,
            line=line,
        )
    if fields.get("link") and not _LINK.match(fields["link"]):
        raise ConfigError(
            f"link {fields['link']!r} must be an https:// URL", path=source, line=line
        )
    if "breadth" in fields and fields["breadth"] not in BREADTHS:
        raise ConfigError(
            f"{fields['id']}: breadth {fields['breadth']!r} must be one of "
            f"{', '.join(BREADTHS)} (or left out: every run)",
            path=source,
            line=line,
        )
    return Expectation(
        id=fields["id"],
        reason=fields["reason"],
        link=fields.get("link", ""),
        breadth=fields.get("breadth"),
    )
