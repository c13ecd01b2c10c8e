"""The shared suite: the cases every backend runs, and what runs them.

Rooms, each a subpackage whose docstring says what it owns and may import (the
architecture test holds them to it: tests/unit/test_architecture.py, `SUITE_ROOMS`):

- `run/`: `accelkit test` as a request, the host and image runners, A/B runs, the outcome;
- `session/`: inside the pytest process: the plugin, case ids, sharding, what a case records;
- `distributed/`: rank sessions on one host or across nodes, and where a hung rank stopped;
- `numerics/`: the float64 reference and the strict numerics mode cases run in;
- `opinfo/`: OpInfo breadth and its verdict;
- `crosscompile/` and `zoo.py`: compile-only conformance and the compile cases' models;
- `expectations/`: each backend's known failures;
- `conformance/` and `perf/`: the cases themselves (pytest folders; `perf/` also holds the
  timing loop and the harness).
"""
