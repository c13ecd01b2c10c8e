"""Every view of the results models, in one place: terminal (rich), Markdown and HTML.

The models are computed elsewhere in `accelkit.results` and judge there: `compare`
(`Comparison`), `nightly` (`NightlyVerdict`), `report` (`Report`, each run's `RunComparison`,
the history's `HistoryReport`), `differential` (`Differential`), `findings`
(`Exploration`). A module here turns a model into text and decides nothing:

- `text`: the words and numbers every view shares (a ratio and its interval, a verdict's
  band, a cell's value with its noise, how a perf metric was measured);
- `units`: values with SI prefixes (1.23 ms, 4.5 TFLOP/s);
- `terminal`: rich tables for `compare`, `report`, `diff` and `test --ab` (the CLI picks
  the console, `accelkit.cli.console`);
- `markdown`: the summaries for $GITHUB_STEP_SUMMARY of a comparison, a nightly, a report
  and a history, written through `step_summary` (escaped one-line cells, tables, the cap
  under GitHub's 1 MiB limit), and a seed exploration's findings.md (`findings`);
- `html`: the report as one self-contained page, with `plots` (matplotlib, inline SVG) and
  `sparkline` (a trend in text, and the range an SVG trend spreads over).

Nothing here prints except `terminal`, on the console it is given.
"""
