"""Distributed sessions: ranks as real processes, on one host or across nodes.

Owns single-host rank sessions (`ranks`), what runs inside each rank (`checks`), multi-node
sessions through torchrun (`multinode`, `rank_worker`, `torchrun_node`, `rank_verdict`) and
where a hung rank stopped (`hang_forensics`, from Flight Recorder dumps).

May import, inside `accelkit.suite`: `session` only.
"""
