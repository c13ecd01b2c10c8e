"""`accelkit report`: several results files side by side, as data, Markdown and HTML.

One module per step, each feeding the next:

- `discover`: the runs named by files and folders (a nightly's legs, a history of
  nightlies), legs that produced nothing included;
- `model`: the runs' cases and metrics lined up by case id (`Report`, `load_report`);
- `verdicts`: each run compared with its baseline (the first run of the same device), the
  canaries and the intervals the verdicts used;
- `markdown`: the summary for $GITHUB_STEP_SUMMARY, capped below 1 MiB;
- `plots`: bar charts per run and trends over history, drawn with matplotlib as SVG;
- `html`: one self-contained page (inline CSS and SVG; no script, no network).

Nothing here prints.
"""
