"""Inside the pytest process: the plugin and what it records.

Owns the pytest plugin (`plugin`: device option, markers, metrics, results file, events),
stable case ids, recorded outputs for `accelkit diff`, failure details and the replay record
for `accelkit repro`, case parameters as JSON, sharding (`sharding`: which cases a shard runs,
decided from the ids and applied in the session), the compile-cache counters, the lockstep
between A/B sides, and the workers that live across a run's passes (`run_scoped`).

May import, inside `accelkit.suite`: `expectations` only. Every other room of the suite
builds on this one.
"""
