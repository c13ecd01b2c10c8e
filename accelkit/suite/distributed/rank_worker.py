"""One rank of a multi-node rank session: what torchrun starts on every node
(`python -m torch.distributed.run ... -m accelkit.suite.distributed.rank_worker`).

torchrun gives the rank its place (RANK, WORLD_SIZE, LOCAL_RANK, GROUP_RANK and the process
group's MASTER_ADDR/MASTER_PORT); `ACCELKIT_RANK_JOB` (JSON, set by the node that started
torchrun: `accelkit.suite.distributed.multinode`) says which rank function to run and where
accelkit's
store is (the rendezvous endpoint, hosted by node 0). The rank

1. announces itself (`<job>/started/<rank>`: its accelkit node, local rank, pid, host);
2. joins the process group (env://, torchrun's store) with the session's init arguments,
   learns every rank's node (`ACCELKIT_RANK_NODES`, for `distributed.failure_domains`),
   runs the rank function and reports its value or traceback (`<job>/result/<rank>`);
3. leaves its Flight Recorder dump (`<job>/fr/<rank>`, torch's pickle, as torchfrtrace reads
   it) when its function ends, when node 0 asks for dumps (`<job>/dump-request`: a rank may
   be stuck inside a collective, so a thread answers), and when its node's torchrun agent
   stops it with SIGTERM (after another rank of the node failed). SIGTERM is blocked before
   torch starts any thread and received by one thread with `sigwait`: a Python handler would
   wait for the main thread, which may be inside a collective that never returns.
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import sys
import threading
import time
import traceback
from datetime import timedelta
from typing import Any

from accelkit.torch_import import freeze_loaded

JOB_ENV = "ACCELKIT_RANK_JOB"
_POLL_S = 0.3


def _store(address: str, timeout_s: float) -> Any:
    import torch.distributed as dist

    host, _, port = address.rpartition(":")
    return dist.TCPStore(  # type: ignore[attr-defined]
        host, int(port), is_master=False, timeout=timedelta(seconds=timeout_s)
    )


def _dump_bytes() -> bytes | None:
    try:
        import torch._C._distributed_c10d as c10d

        dump = c10d._dump_fr_trace  # type: ignore[attr-defined]  # private
        try:
            return bytes(dump(includeStackTraces=False))
        except TypeError:  # releases without the keyword
            return bytes(dump())
    except Exception:
        return None


class _Dumps:
    """Writes this rank's Flight Recorder dump to the store, from any thread."""

    def __init__(self, address: str, job: str, rank: int) -> None:
        self.address, self.job, self.rank = address, job, rank

    def write(self) -> None:
        data = _dump_bytes()
        if data is None:
            return
        # Each call its own client: a TCPStore client is not shared between threads.
        with contextlib.suppress(Exception):
            _store(self.address, 10.0).set(f"{self.job}/fr/{self.rank}", data)

    def serve_requests(self) -> None:
        def poll() -> None:
            try:
                store = _store(self.address, 10.0)
                while not store.check([f"{self.job}/dump-request"]):
                    time.sleep(_POLL_S)
            except Exception:
                return  # node 0 is gone: nobody to send a dump to
            self.write()

        threading.Thread(target=poll, name="accelkit-fr-request", daemon=True).start()

    def on_sigterm(self) -> None:
        def wait() -> None:
            signal.sigwait({signal.SIGTERM})
            self.write()
            os._exit(128 + signal.SIGTERM)

        threading.Thread(target=wait, name="accelkit-fr-sigterm", daemon=True).start()


def main() -> int:
    # Before torch (and its threads) exist: every thread inherits the blocked SIGTERM, so
    # only the sigwait thread receives it.
    signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGTERM})
    job_config = json.loads(os.environ[JOB_ENV])
    spec: dict[str, Any] = job_config["spec"]
    address, job = str(job_config["store"]), str(spec["job"])
    rank, world_size = int(os.environ["RANK"]), int(os.environ["WORLD_SIZE"])
    os.environ.update({str(k): str(v) for k, v in spec.get("env", {}).items()})
    dumps = _Dumps(address, job, rank)
    dumps.on_sigterm()
    store = _store(address, float(job_config.get("timeout_s", 300)))
    freeze_loaded()  # torch is loaded (the store is c10d's)
    place = {
        "node": int(job_config["node"]),
        "local": int(os.environ.get("LOCAL_RANK", 0)),
        "pid": os.getpid(),
        "host": os.uname().nodename,
    }
    store.set(f"{job}/started/{rank}", json.dumps(place))
    dumps.serve_requests()

    def report(status: str, value: Any) -> None:
        store.set(f"{job}/result/{rank}", json.dumps({"status": status, "value": value}))

    from accelkit.suite.distributed import multinode, ranks

    ranks.set_delivery(lambda value: report("ok", value))
    try:
        import torch.distributed as dist

        fn = multinode.load_function(spec["fn"], job_config["cases_root"])
        kwargs: dict[str, Any] = {"timeout": timedelta(seconds=float(spec["pg_timeout_s"]))}
        if spec.get("init"):
            kwargs.update(
                multinode.load_function(spec["init"], job_config["cases_root"])(rank, world_size)
            )
        dist.init_process_group(spec["backend"], **kwargs)
        nodes = [json.loads(store.get(f"{job}/started/{r}"))["node"] for r in range(world_size)]
        os.environ["ACCELKIT_RANK_NODES"] = ",".join(str(n) for n in nodes)
        try:
            value = fn(rank, world_size)
        finally:
            dumps.write()  # a rank that goes on and exits leaves its record
            dist.destroy_process_group()
        report("ok", value)
    except BaseException:
        report("error", traceback.format_exc(limit=8))
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
