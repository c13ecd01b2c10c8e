"""`accelkit report`: several results files side by side, as data.

One module per step, each feeding the next:

- `discover`: the runs named by files and folders (a nightly's legs, a history of
  nightlies), legs that produced nothing included;
- `model`: the runs' cases and metrics lined up by case id (`Report`, `load_report`);
- `verdicts`: each run compared with its baseline (the first run of the same device), the
  canaries and the intervals the verdicts used;
- `trends`: a results history as a report (`HistoryReport`, `load_history`): each leg's
  state and metric verdicts per night, each perf metric's values over the nights.

The views (Markdown, HTML with plots, the terminal) are in `accelkit.results.render`.
Nothing here prints.
"""
