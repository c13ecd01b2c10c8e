"""Command options declared once, as data: the typer command, `to_argv` and `from_argv` all
derive from the same `Opt` records (nox declares its options once the same way).

A request module (`accelkit.suite.run.request`, `accelkit.setup.request`,
`accelkit.wheels.request`) declares its command's options; the CLI builds its typer command
from them (`command`), the container path and the matrix rehearsal turn a request back into
an argv (`to_argv`) and parse a leg's arguments with the command's real click parser
(`parse`). There is no second parser: a round-trip test (`tests/unit/test_requests.py`) proves
`parse(to_argv(values)) == values` for every command.

Example: `Opt("seed", ("--seed",), int, 0, "Base random seed.")` becomes the typer option
`seed: Annotated[int, typer.Option("--seed", help=...)] = 0`, `to_argv` writes
`["--seed", "3"]` for a seed of 3 and nothing for the default, and `parse(["--seed", "3"])`
returns `{"seed": 3, ...}`. A repeatable option (`multiple=True`) takes a list:
`Opt("filters", ("--filter",), str, None, "...", True, multiple=True)` writes
`["--filter", "a=1", "--filter", "b=2"]` for `["a=1", "b=2"]`; a repeatable positional
argument takes every remaining value (`accelkit merge SHARD...`).

Commands that no other command rebuilds (bisect, repro, diff, matrix, doctor) declare their
options the same way, beside the core they call, so every command has one options model.
"""

from __future__ import annotations

import inspect
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Annotated, Any

from accelkit.errors import BadInput

_SCALARS = (str, int, float, bool, Path)


@dataclass(frozen=True)
class Opt:
    """One option (or, with no `flags`, one positional argument) of a command."""

    name: str
    """The Python parameter name, which is also the request's field name."""
    flags: tuple[str, ...]
    """Its spellings, long first ("--device", "-d"); empty for a positional argument."""
    type: type
    default: Any
    help: str
    optional: bool = False
    """The value may be None (`default` is then usually None)."""
    negative: str | None = None
    """For a bool: the flag that sets it False ("--no-triton")."""
    show_default: bool = True
    nargs: int = 1
    """Values the option takes after its flag (`--ab A B`: 2); more than 1: the value is a
    tuple of that many, or None (`optional`)."""
    metavar: str | None = None
    """The value's name in help (`--wheels DIR`); default: typer's (the type, or for a
    positional argument its name in capitals)."""
    multiple: bool = False
    """Repeatable (`--filter A --filter B`; a positional argument: every remaining value):
    the value is a list of `type`, or None (`optional`) when the option is not given."""

    def __post_init__(self) -> None:
        if self.nargs < 1 or (self.nargs > 1 and (self.type is bool or not self.flags)):
            raise ValueError(f"option {self.name}: nargs {self.nargs} needs a non-bool option")
        if self.multiple and (self.type is bool or self.nargs > 1):
            raise ValueError(f"option {self.name}: only a one-value option can be repeated")
        if self.type not in _SCALARS:
            raise ValueError(f"option {self.name}: unsupported type {self.type!r}")
        if self.negative is not None and self.type is not bool:
            raise ValueError(f"option {self.name}: only a bool has a negative flag")
        if not self.flags and self.type is bool:
            raise ValueError(f"argument {self.name}: a positional argument cannot be a bool")

    @property
    def positional(self) -> bool:
        return not self.flags

    @property
    def flag(self) -> str:
        """The canonical (first) spelling, used by `to_argv`."""
        return self.flags[0]

    def annotation(self) -> Any:
        import typer

        kind: Any = self.type if self.nargs == 1 else tuple[(self.type,) * self.nargs]  # type: ignore[misc]
        if self.multiple:
            kind = list[kind]
        if self.optional:
            kind = kind | None
        if self.positional:
            return Annotated[
                kind,
                typer.Argument(
                    help=self.help,
                    metavar=self.metavar or self.name.upper(),
                    show_default=self.show_default,
                ),
            ]
        decls = list(self.flags)
        if self.negative is not None:
            decls = [f"{self.flags[0]}/{self.negative}", *self.flags[1:]]
        return Annotated[
            kind,
            typer.Option(
                *decls, help=self.help, show_default=self.show_default, metavar=self.metavar
            ),
        ]


def command(opts: Sequence[Opt], body: Callable[..., Any]) -> Callable[..., Any]:
    """A function typer can register, whose parameters are `opts` and which calls `body`
    with them as keywords. Its name and docstring are `body`'s."""

    def callback(**params: Any) -> Any:
        return body(**params)

    parameters = [
        inspect.Parameter(
            opt.name,
            inspect.Parameter.POSITIONAL_OR_KEYWORD
            if opt.positional
            else inspect.Parameter.KEYWORD_ONLY,
            default=inspect.Parameter.empty
            if opt.positional and opt.default is ...
            else opt.default,
            annotation=opt.annotation(),
        )
        for opt in _ordered(opts)
    ]
    callback.__signature__ = inspect.Signature(parameters)  # type: ignore[attr-defined]
    callback.__annotations__ = {p.name: p.annotation for p in parameters}
    callback.__name__ = body.__name__
    callback.__qualname__ = body.__qualname__
    callback.__doc__ = body.__doc__
    callback.__module__ = body.__module__
    return callback


def to_argv(
    opts: Sequence[Opt], values: Mapping[str, Any], *, always: Sequence[str] = ()
) -> list[str]:
    """The canonical argv for `values`: positional arguments first, then every option whose
    value differs from its default (or is named in `always`), in declaration order, each as
    `FLAG VALUE` (a bool as its flag or its negative flag)."""
    argv: list[str] = []
    for opt in _ordered(opts):
        if opt.name not in values:
            continue
        value = values[opt.name]
        if opt.positional:
            argv += [_text(item) for item in value or ()] if opt.multiple else [_text(value)]
            continue
        if value == opt.default and type(value) is type(opt.default) and opt.name not in always:
            continue
        if value is None:
            raise ValueError(f"{opt.flag}: None is not the default and has no spelling")
        if opt.type is bool:
            if value:
                argv.append(opt.flag)
            elif opt.negative is not None:
                argv.append(opt.negative)
            continue
        if opt.multiple:
            for item in value:
                argv += [opt.flag, _text(item)]
        elif opt.nargs > 1:
            argv += [opt.flag, *(_text(item) for item in value)]
        else:
            argv += [opt.flag, _text(value)]
    return argv


def parse(opts: Sequence[Opt], argv: Sequence[str], prog: str) -> dict[str, Any]:
    """`argv` parsed by the command's click parser into {name: value}; BadInput (one line,
    exit 2) for anything click rejects. Nothing runs."""
    import typer

    app = typer.Typer(add_completion=False)

    def _parse_only(**params: Any) -> None:  # never called: the context is only made
        return None

    app.command(name="cmd")(command(opts, _parse_only))

    @app.callback()
    def _group() -> None:  # a group, so the command is reached by name as in the real CLI
        return None

    group: Any = typer.main.get_command(app)
    click_command = group.commands["cmd"]
    try:
        context = click_command.make_context(prog, list(argv), resilient_parsing=False)
    except typer.Exit as exc:  # --help
        raise BadInput(f"{prog}: {' '.join(argv)}: asks for help, not a run") from exc
    except Exception as exc:
        message = getattr(exc, "format_message", None)
        text = message() if callable(message) else str(exc)
        raise BadInput(f"{prog}: {text}") from None
    return dict(context.params)


def defaults(opts: Sequence[Opt]) -> dict[str, Any]:
    return {opt.name: opt.default for opt in opts if opt.default is not ...}


def _ordered(opts: Sequence[Opt]) -> list[Opt]:
    return [o for o in opts if o.positional] + [o for o in opts if not o.positional]


def _text(value: Any) -> str:
    if isinstance(value, float):
        return repr(value) if value != int(value) else f"{value:g}"
    return str(value)
