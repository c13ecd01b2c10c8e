"""The run: how `accelkit test` turns a request into pytest processes and a results file.

Owns the request (`request`: options, validation, argv), the host runner and the image
runner (`runner`, `container`), the pytest child process, the run's environment, the plan
events the progress view reads, interleaved A/B runs (`ab`, with its sides; `interpreters`:
what may name a side, checked by the request) and the outcome every run ends with.

May import, inside `accelkit.suite`: `session` (what runs inside the pytest process),
`distributed` (multi-node sessions), `crosscompile` and `expectations`. Nothing in `session`,
`distributed`, `numerics` or `opinfo` imports it back.
"""
