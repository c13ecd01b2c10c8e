"""A matrix leg adds or waives required capabilities, with a reason (issue 11): the legs carry
them, and `accelkit test` gets them as --require/--waive through the leg's test_args."""

from __future__ import annotations

from pathlib import Path

import pytest

from accelkit.errors import ConfigError
from accelkit.matrix import load_legs
from accelkit.suite.run.request import RunRequest
from tests.matrices import HEADER, write_matrix

MATRIX = (
    HEADER
    + """\
  - backend: cuda
    backend_version: "13.4"
    targets: [sm_90, sm_107]
    runner: [self-hosted]
    require: [nvgemm]
    include:
      - target: sm_107
        python: "3.13"
        test_args: [--passes=1]
        waive:
          cuda_graph_while_loop: "driver 590 on the Rubin runners lacks conditional nodes"
"""
)


def test_legs_carry_their_requirements_and_pass_them_to_accelkit_test(tmp_path: Path) -> None:
    legs = {leg.name: leg for leg in load_legs(str(write_matrix(tmp_path, MATRIX, header="")))}
    plain = legs["cuda13.4-sm_90-py3.12"]
    assert plain.require == ("nvgemm",) and plain.waive == ()
    assert plain.test_args == ("--require=nvgemm",)
    waived = legs["cuda13.4-sm_107-py3.13"]
    assert waived.to_dict()["waive"] == {
        "cuda_graph_while_loop": "driver 590 on the Rubin runners lacks conditional nodes"
    }
    assert waived.test_args == ("--passes=1", "--require=nvgemm", "--waive=cuda_graph_while_loop")
    # The real command's parser reads them back.
    request = RunRequest.from_argv(["--device", waived.device, *waived.test_args])
    assert request.required_extra == ("nvgemm",)
    assert request.waived == ("cuda_graph_while_loop",)


@pytest.mark.parametrize(
    ("setting", "needle"),
    [
        ("    require: [cuda_grph]\n", "require: unknown capability 'cuda_grph' (did you mean"),
        ("    waive: {nvgemm: ''}\n", "waive nvgemm: give the reason as one line of text"),
        ("    waive: [nvgemm]\n", "waive ({capability: reason}) must be a mapping"),
        ("    waive: {xpu_grph: because}\n", "waive: unknown capability 'xpu_grph'"),
        (
            "    require: [nvgemm]\n    waive: {nvgemm: because}\n",
            "waive nvgemm: the same leg requires it",
        ),
        # A waiver without its reason, or a requirement beside `require`, is refused.
        ("    test_args: [--waive=nvgemm]\n", "--waive is set from waive (each capability"),
        ("    test_args: ['--require', nvgemm]\n", "--require is set from require; remove it"),
    ],
)
def test_bad_requirements_are_located_errors(tmp_path: Path, setting: str, needle: str) -> None:
    base = MATRIX.split("    require:")[0]
    path = write_matrix(tmp_path, base + setting, header="")
    with pytest.raises(ConfigError) as raised:
        load_legs(str(path))
    assert needle in str(raised.value)
    assert f"{path}:" in str(raised.value)
