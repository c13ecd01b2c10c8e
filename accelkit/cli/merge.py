"""`accelkit merge SHARD.json... -o LEG.json`: the shards of one run (`accelkit test
--shard I/N`) as one leg result."""

from __future__ import annotations

from pathlib import Path

from accelkit import options
from accelkit.cli.app import app
from accelkit.options import Opt

MERGE_OPTIONS: tuple[Opt, ...] = (
    Opt(
        "shards",
        (),
        Path,
        ...,
        "The results file of every shard of the run (accelkit test --shard I/N "
        "--json ...), in any order.",
        show_default=False,
        metavar="SHARD",
        multiple=True,
    ),
    Opt("output", ("--output", "-o"), Path, ..., "Write the merged results here.", metavar="PATH"),
)


def merge_command(shards: list[Path], output: Path) -> None:
    """Merge the shards of one run into one results file; refuses shards of different runs,
    devices or torch builds, and a missing or overlapping shard (exit 2)."""
    # Lazy imports: pydantic is heavy, and `accelkit --help` must stay fast.
    from rich.console import Console

    from accelkit.results.io import check_output_path, load_results, write_results
    from accelkit.results.shards import merge_shards

    check_output_path(output, flag="--output")
    parts = [(str(path), load_results(path)) for path in shards]
    merged = merge_shards(parts)
    write_results(merged, output)
    summary = ", ".join(f"{n} {s}" for s, n in merged.summary.model_dump().items() if n)
    Console(highlight=False, soft_wrap=True).print(
        f"merged {merged.run.shards} shards: {len(merged.cases)} cases ({summary or 'none'}) "
        f"-> {output}"
    )


app.command("merge")(options.command(MERGE_OPTIONS, merge_command))
