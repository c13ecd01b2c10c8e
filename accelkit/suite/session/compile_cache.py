"""Inductor's caches kept between runs, keyed by the torch build (issue 44: the nightly at
full breadth compiles every op; an op unchanged since last night should not compile again).

`ACCELKIT_COMPILE_CACHE=DIR` in `accelkit test`'s environment (the nightly sets it to a
folder its self-hosted runners keep between jobs) makes every pytest process of the suite
compile with `TORCHINDUCTOR_CACHE_DIR=DIR/<key>` and `TRITON_CACHE_DIR=DIR/<key>/triton`,
where `<key>` names the torch build the process imports (`torch-2.14.1-cu130-5c48869085`):
another build never reads this one's entries. A value the caller set for either torch
variable wins. With `--image` the host folder is mounted into the container and the key
is the image's torch (`accelkit.suite.run.container`).

What the caches did is counted in every process that compiled (torch's own counters,
`torch._dynamo.utils.counters`: `inductor` `fxgraph_cache_hit`, `fxgraph_cache_miss`,
`fxgraph_cache_bypass`; `aot_autograd` `autograd_cache_hit`, `autograd_cache_miss`),
sent from each xdist worker with its `workeroutput`, summed by the controller and added to
the results file's `run.compile_cache` by `CacheCounts`, the pytest side (each pytest
session of a run adds its own; `accelkit merge` sums the shards'). Nothing here imports
torch: the key is read from torch's `version.py`, and the counters only where torch is
already loaded.
"""

from __future__ import annotations

import importlib.util
import json
import os
import re
import sys
from collections.abc import Mapping, MutableMapping
from pathlib import Path
from typing import Any

import pytest

ENV = "ACCELKIT_COMPILE_CACHE"
WORKER_OUTPUT = "accelkit_compile_cache"
#: (counters group, counter) -> the results file's field.
COUNTERS: dict[tuple[str, str], str] = {
    ("inductor", "fxgraph_cache_hit"): "hits",
    ("inductor", "fxgraph_cache_miss"): "misses",
    ("inductor", "fxgraph_cache_bypass"): "bypasses",
    ("aot_autograd", "autograd_cache_hit"): "autograd_hits",
    ("aot_autograd", "autograd_cache_miss"): "autograd_misses",
}


def torch_key(version_file: Path | None = None) -> str | None:
    """The installed torch build as a folder name: version and git hash from torch's
    `version.py` (`torch-2.14.1-cu130-5c48869085`); None without torch."""
    if version_file is None:
        spec = importlib.util.find_spec("torch")
        if spec is None or not spec.submodule_search_locations:
            return None
        version_file = Path(next(iter(spec.submodule_search_locations))) / "version.py"
    try:
        text = version_file.read_text()
    except OSError:
        return None
    fields = dict(
        re.findall(r"^(__version__|git_version)\s*(?::\s*\w+)?\s*=\s*'([^']*)'", text, re.M)
    )
    version = fields.get("__version__")
    if not version:
        return None
    key = f"torch-{version}-{fields.get('git_version', 'unknown')[:10]}"
    return re.sub(r"[^A-Za-z0-9._-]+", "-", key)


def configure(environ: MutableMapping[str, str] | None = None) -> str | None:
    """Point Inductor's and Triton's caches at `$ACCELKIT_COMPILE_CACHE/<torch key>` in
    `environ` (default: this process's) unless the caller set them; the folder, or None
    when the variable is unset or there is no torch."""
    env = os.environ if environ is None else environ
    base = env.get(ENV, "").strip()
    if not base:
        return None
    key = torch_key()
    if key is None:
        return None
    folder = Path(base) / key
    folder.mkdir(parents=True, exist_ok=True)
    env.setdefault("TORCHINDUCTOR_CACHE_DIR", str(folder))
    env.setdefault("TRITON_CACHE_DIR", str(folder / "triton"))
    return env["TORCHINDUCTOR_CACHE_DIR"]


def counts() -> dict[str, int]:
    """This process's cache counters so far ({} where torch was never loaded)."""
    if "torch._dynamo.utils" not in sys.modules:
        return {}
    from torch._dynamo.utils import counters

    out: dict[str, int] = {}
    for (group, name), field in COUNTERS.items():
        value = int(counters[group][name]) if group in counters else 0
        if value:
            out[field] = value
    return out


def add(total: MutableMapping[str, int], more: Mapping[str, Any]) -> None:
    for field in COUNTERS.values():
        value = more.get(field)
        if isinstance(value, int) and value:
            total[field] = total.get(field, 0) + value


class CacheCounts:
    """The pytest plugin (registered by `accelkit.suite.session.plugin` in every process of the
    suite): points the caches at their folder when it is made; at the session's end an
    xdist worker sends its counters with its `workeroutput`, and the controller adds its
    workers' and its own to the results file's `run.compile_cache` (what the run's earlier
    sessions recorded there included) before the results recorder finishes the file."""

    def __init__(self, config: pytest.Config) -> None:
        self._config = config
        self._folder = configure()
        self._received: dict[str, int] = {}

    @pytest.hookimpl(optionalhook=True)
    def pytest_testnodedown(self, node: Any, error: Any) -> None:
        sent = getattr(node, "workeroutput", {}).get(WORKER_OUTPUT)
        if sent:
            add(self._received, json.loads(sent))

    @pytest.hookimpl(tryfirst=True)
    def pytest_sessionfinish(self, session: pytest.Session) -> None:
        workeroutput = getattr(self._config, "workeroutput", None)
        if isinstance(workeroutput, dict):  # an xdist worker
            workeroutput[WORKER_OUTPUT] = json.dumps(counts())
            return
        recorder = self._config.pluginmanager.get_plugin("accelkit-recorder")
        writer = getattr(recorder, "writer", None)  # accelkit.suite.session.plugin.ResultsRecorder
        key = torch_key()
        if self._folder is None or writer is None or key is None:
            return
        from accelkit.results.model import CompileCache

        total = dict(self._received)
        add(total, counts())
        before = writer.results().run.compile_cache
        if before is not None:
            add(total, before.model_dump())
        writer.update_run(compile_cache=CompileCache(key=key, **total))
