"""torchrun on one node, with its failures as data: `python -m
accelkit.suite.distributed.torchrun_node
FAILURES.json TORCHRUN-ARGS...` runs `torch.distributed.run` (torchrun's own parser and
launcher, in this process) and, when a rank fails, writes which ranks failed and how
(`ChildFailedError.failures`: local rank, pid, exit code, signal) to FAILURES.json, so the
node can say "rank 3 was killed by SIGKILL" instead of reading torchrun's log.

Exit code: 0 when every rank of the node finished, 1 when one failed, 143 when the agent
was stopped (SIGTERM: node 0 ends the job).
"""

from __future__ import annotations

import json
import os
import sys


def main(argv: list[str]) -> int:
    failures_path, args = argv[0], argv[1:]
    from torch.distributed.elastic.multiprocessing.api import SignalException
    from torch.distributed.elastic.multiprocessing.errors import ChildFailedError
    from torch.distributed.run import parse_args, run

    try:
        run(parse_args(args))  # type: ignore[no-untyped-call]
    except ChildFailedError as exc:
        failures = {
            str(rank): {
                "local_rank": failure.local_rank,
                "pid": failure.pid,
                "exitcode": failure.exitcode,
                "signal": failure.signal_name() if failure.exitcode < 0 else None,
            }
            for rank, failure in exc.failures.items()
        }
        partial = f"{failures_path}.partial"
        with open(partial, "w", encoding="utf-8") as handle:
            json.dump(failures, handle)
        os.replace(partial, failures_path)
        return 1
    except SignalException:
        return 143
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
