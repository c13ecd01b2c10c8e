"""accelkit.suite.session.compile_cache and `run.compile_cache`: the torch key, the folders a run
compiles into, the counters summed over shards, and the hit rate in the nightly summary.
A real second run that hits: tests/integration/test_compile_cache.py."""

from __future__ import annotations

from pathlib import Path

from accelkit.results.model import CompileCache, Results
from accelkit.results.nightly import judge_nightly
from accelkit.results.render.markdown import nightly_markdown
from accelkit.results.shards import merge_shards
from accelkit.suite.session import compile_cache
from tests.factories import TONIGHT, night_run, three_shards, write_leg


def test_the_key_names_the_torch_build(tmp_path: Path) -> None:
    version = tmp_path / "version.py"
    version.write_text(
        "from typing import Optional\n"
        "__version__ = '2.14.1+cu130'\n"
        "debug = False\n"
        "git_version = '5c4886908584029761b579af026dcfb627c84070'\n"
    )
    assert compile_cache.torch_key(version) == "torch-2.14.1-cu130-5c48869085"
    assert compile_cache.torch_key(tmp_path / "missing.py") is None
    assert compile_cache.torch_key() == compile_cache.torch_key(_installed_version_file())


def _installed_version_file() -> Path:
    import importlib.util

    spec = importlib.util.find_spec("torch")
    assert spec is not None and spec.submodule_search_locations
    return Path(next(iter(spec.submodule_search_locations))) / "version.py"


def test_configure_points_inductor_and_triton_under_the_key(tmp_path: Path) -> None:
    env = {compile_cache.ENV: str(tmp_path)}
    folder = compile_cache.configure(env)
    key = compile_cache.torch_key()
    assert folder == env["TORCHINDUCTOR_CACHE_DIR"] == str(tmp_path / str(key))
    assert env["TRITON_CACHE_DIR"] == str(tmp_path / str(key) / "triton")
    assert (tmp_path / str(key)).is_dir()
    # A folder the caller chose wins; no variable, nothing changes.
    chosen = {compile_cache.ENV: str(tmp_path), "TORCHINDUCTOR_CACHE_DIR": "/mine"}
    assert compile_cache.configure(chosen) == "/mine"
    untouched: dict[str, str] = {}
    assert compile_cache.configure(untouched) is None and untouched == {}


def test_counts_add_up_and_describe_the_hit_rate() -> None:
    total: dict[str, int] = {}
    compile_cache.add(total, {"hits": 3, "misses": 1})
    compile_cache.add(total, {"hits": 6, "bypasses": 2, "unknown": 5})
    assert total == {"hits": 9, "misses": 1, "bypasses": 2}
    cache = CompileCache(key="torch-x", **total)
    assert cache.hit_rate == 0.9
    assert cache.describe() == "90% hit rate (9 hits, 1 misses, 2 bypassed)"
    assert CompileCache(key="torch-x").describe().startswith("nothing looked up")


def _with_cache(results: Results, hits: int, misses: int) -> Results:
    run = results.run.model_copy(
        update={"compile_cache": CompileCache(key="torch-x", hits=hits, misses=misses)}
    )
    return results.model_copy(update={"run": run})


def test_merge_sums_the_shards_counters() -> None:
    parts = [(name, _with_cache(r, i, 1)) for i, (name, r) in enumerate(three_shards())]
    merged = merge_shards(parts).run.compile_cache
    assert merged == CompileCache(key="torch-x", hits=3, misses=3)
    # Files without the field merge as before.
    assert merge_shards(three_shards()).run.compile_cache is None


def test_the_nightly_summary_shows_each_legs_hit_rate(tmp_path: Path) -> None:
    results = tmp_path / "results"
    write_leg(results, "cpu-py3.12", _with_cache(night_run(TONIGHT), 99, 1))
    write_leg(results, "cpu-py3.11", night_run(TONIGHT))
    verdict = judge_nightly(["cpu-py3.11", "cpu-py3.12"], results, None)
    legs = {leg.name: leg for leg in verdict.legs}
    assert legs["cpu-py3.12"].compile_cache == "99% hit rate (99 hits, 1 misses)"
    assert legs["cpu-py3.12"].to_json_dict()["compile_cache"] == legs["cpu-py3.12"].compile_cache
    text = nightly_markdown(verdict)
    assert "| Inductor cache |" in text and "99% hit rate (99 hits, 1 misses)" in text
    # No leg kept its caches: the table is as before.
    alone = judge_nightly(["cpu-py3.11"], results, None)
    assert "Inductor cache" not in nightly_markdown(alone)
