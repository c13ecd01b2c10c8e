"""Explore legs in the matrix (`explore_seeds: N`, accelkit.matrix.explore): what makes one,
what it cannot be (one-line errors at the setting's line), and the job it becomes."""

from __future__ import annotations

from pathlib import Path

import pytest

from accelkit.errors import ConfigError
from accelkit.matrix import github_matrix, load_legs
from tests.helpers import REPO
from tests.matrices import line_of, write_matrix

CPU = """\
  - backend: cpu
    runner: [self-hosted, linux.4xlarge]
    include:
      - variant: explore
        explore_seeds: 3
"""


def test_an_explore_leg_is_one_job_uploading_findings(tmp_path: Path) -> None:
    gating, explore = load_legs(str(write_matrix(tmp_path, CPU)))
    assert (gating.explore_seeds, explore.explore_seeds) == (0, 3)
    assert explore.name == "cpu-py3.12-explore" and explore.suites == ("conformance",)
    assert explore.test_args == ("--explore-seeds=3",)  # the key's flag, added by expansion
    items = {item["job"]: item for item in github_matrix([gating, explore])["include"]}
    assert items["cpu-py3.12"]["artifact"] == "results-cpu-py3.12"
    assert items["cpu-py3.12"]["explore_seeds"] == 0
    item = items["cpu-py3.12-explore"]
    assert (item["artifact"], item["explore_seeds"], item["suite"]) == (
        "findings-cpu-py3.12-explore",
        3,
        "conformance",
    )
    assert item["shard"] == "" and item["leg_dir"] == "cpu-py3.12-explore"


def test_the_nightly_explores_three_seeds_on_the_cpu_at_the_quick_breadth() -> None:
    explore = [
        leg for leg in load_legs(str(REPO / "matrices" / "nightly.yaml")) if leg.explore_seeds
    ]
    assert [(leg.name, leg.explore_seeds, leg.shards) for leg in explore] == [
        ("cpu-py3.12-explore", 3, 1)
    ]
    assert "--breadth=full" not in explore[0].test_args


@pytest.mark.parametrize(
    ("setting", "message"),
    [
        (
            "explore_seeds: 0",
            "explore_seeds must be a whole number from 1 to 1000, not the number 0",
        ),
        (
            "explore_seeds: true",
            "explore_seeds must be a whole number from 1 to 1000, not the boolean True",
        ),
        (
            "explore_seeds: 1001",
            "explore_seeds must be a whole number from 1 to 1000, not the number 1001",
        ),
        (
            "explore_seeds: 3; suites: [conformance, perf]",
            "explore_seeds: 3 explores the conformance suite only, not conformance, perf: set "
            "suites: [conformance]",
        ),
        (
            "explore_seeds: 3; shards: 2",
            "explore_seeds: 3 is one job, its seeds run one after the other: remove shards",
        ),
        (
            "explore_seeds: 3; test_args: [--explore-seeds=3]",
            "test_args item '--explore-seeds=3': --explore-seeds is set from explore_seeds (an "
            "explore leg); remove it",
        ),
        (
            "explore_seeds: 3; test_args: [--measure-ceilings]",
            "leg 'cpu-py3.12-explore': accelkit test: --explore-seeds: not with --measure-ceilings",
        ),
    ],
)
def test_what_an_explore_leg_cannot_be(tmp_path: Path, setting: str, message: str) -> None:
    lines = "".join(f"        {part}\n" for part in setting.split("; "))  # include item keys
    body = CPU.replace("        explore_seeds: 3\n", lines)
    path = write_matrix(tmp_path, body)
    with pytest.raises(ConfigError) as info:
        load_legs(str(path))
    text = str(info.value)
    assert "\n" not in text and message in text, text
    assert info.value.line in (line_of(path, "explore_seeds"), line_of(path, "variant: explore"))
