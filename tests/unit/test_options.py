"""accelkit.options: what an `Opt` record becomes (the typer parameter, the argv, the parse),
for the kinds of option the commands declare: repeatable options, required options and
value names (metavars). The requests' own round trips are in tests/unit/test_requests.py."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import typer

from accelkit import options
from accelkit.errors import BadInput
from accelkit.options import Opt

OPTS = (
    Opt("file", (), Path, ..., "A file.", show_default=False),
    Opt("case", ("--case",), str, ..., "The case.", metavar="ID", show_default=False),
    Opt(
        "filters",
        ("--filter", "-f"),
        str,
        None,
        "Keep what matches (repeatable).",
        optional=True,
        multiple=True,
        metavar="KEY=VALUE",
        show_default=False,
    ),
    Opt("wheels", ("--torch-wheel",), Path, None, "A wheel (repeatable).", True, multiple=True),
    Opt("top", ("--top",), int, 30, "Cases to list."),
)


def _click(opts: tuple[Opt, ...]) -> Any:
    app = typer.Typer()
    app.command(name="cmd")(options.command(opts, lambda **params: None))

    @app.callback()
    def _group() -> None:
        return None

    return typer.main.get_command(app).commands["cmd"]  # type: ignore[attr-defined]


def test_repeatable_options_round_trip() -> None:
    values = {
        "file": Path("m.yaml"),
        "case": "perf/gemm",
        "filters": ["backend=cpu", "python=3.11"],
        "wheels": [Path("a.whl"), Path("b.whl")],
        "top": 30,
    }
    argv = options.to_argv(OPTS, values)
    assert argv == [
        "m.yaml",
        "--case",
        "perf/gemm",
        "--filter",
        "backend=cpu",
        "--filter",
        "python=3.11",
        "--torch-wheel",
        "a.whl",
        "--torch-wheel",
        "b.whl",
    ]
    parsed = options.parse(OPTS, argv, "accelkit cmd")
    assert {**parsed, "filters": list(parsed["filters"]), "wheels": list(parsed["wheels"])} == (
        values
    )


def test_a_repeatable_option_not_given_writes_nothing() -> None:
    parsed = options.parse(OPTS, ["m.yaml", "--case", "c"], "accelkit cmd")
    assert not parsed["filters"] and not parsed["wheels"]
    assert options.to_argv(OPTS, {**parsed, "filters": None, "wheels": []}) == [
        "m.yaml",
        "--case",
        "c",
    ]


def test_a_required_option_is_required() -> None:
    with pytest.raises(BadInput, match=r"^accelkit cmd: Missing option '--case'"):
        options.parse(OPTS, ["m.yaml"], "accelkit cmd")


def test_the_click_parameters_carry_metavar_and_multiple() -> None:
    params = {p.name: p for p in _click(OPTS).params}
    assert params["case"].metavar == "ID" and params["case"].required
    assert params["filters"].multiple and params["filters"].metavar == "KEY=VALUE"
    assert params["filters"].opts == ["--filter", "-f"]
    assert params["file"].metavar == "FILE"
    assert params["top"].metavar is None and not params["top"].multiple


@pytest.mark.parametrize(
    "bad",
    [
        {"type": bool, "default": False, "multiple": True},
        {"nargs": 2, "multiple": True},
    ],
)
def test_only_a_one_value_option_repeats(bad: dict[str, Any]) -> None:
    fields: dict[str, Any] = {
        "name": "x",
        "flags": ("--x",),
        "type": str,
        "default": None,
        "help": "x",
        **bad,
    }
    with pytest.raises(ValueError, match="only a one-value option can be repeated"):
        Opt(**fields)


VARIADIC = (
    Opt("inputs", (), Path, None, "Files.", True, metavar="RESULTS", multiple=True),
    Opt("html", ("--html",), Path, None, "Page.", True, metavar="PATH"),
)


def test_a_repeatable_positional_takes_every_remaining_value() -> None:
    values = {"inputs": [Path("a.json"), Path("b")], "html": Path("r.html")}
    argv = options.to_argv(VARIADIC, values)
    assert argv == ["a.json", "b", "--html", "r.html"]
    parsed = options.parse(VARIADIC, argv, "accelkit cmd")
    assert {**parsed, "inputs": list(parsed["inputs"])} == values
    assert not options.parse(VARIADIC, [], "accelkit cmd")["inputs"]
    assert options.to_argv(VARIADIC, {"inputs": None, "html": None}) == []
    params = {p.name: p for p in _click(VARIADIC).params}
    assert params["inputs"].nargs == -1 and params["inputs"].metavar == "RESULTS"
