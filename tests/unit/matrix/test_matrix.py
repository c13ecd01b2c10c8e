"""Matrix files: loading, validation with file:line errors, expansion, GitHub output (the
commands end to end, and the golden files of `accelkit matrix github`:
tests/integration/test_matrix.py)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from accelkit.errors import BadInput, ConfigError
from accelkit.matrix import (
    expand,
    github_matrix,
    leg_name,
    load_legs,
    load_matrix,
    parse_filters,
)
from accelkit.matrix.loader import MAX_EXPANDED_NODES
from tests.matrices import BILLION_LAUGHS, HEADER, MATRICES, ROCM, line_of, rocm, write_matrix


def config_error(path: Path) -> ConfigError:
    with pytest.raises(ConfigError) as info:
        load_legs(str(path))
    return info.value


def assert_located(error: ConfigError, path: Path, needle: str, *words: str) -> None:
    """The error names `path` and the line holding `needle`, and says each of `words`."""
    assert str(error).startswith(f"{path}:{line_of(path, needle)}: "), str(error)
    for word in words:
        assert word in str(error), str(error)
    assert "\n" not in str(error)


# --- the shipped matrices ---------------------------------------------------------------


@pytest.mark.parametrize("name", ["nightly", "pr"])
def test_shipped_matrices_validate(name: str) -> None:
    legs = expand(load_matrix(MATRICES / f"{name}.yaml"))
    assert legs
    assert len({leg.name for leg in legs}) == len(legs)
    for leg in legs:
        assert leg.runner, leg.name


def test_nightly_covers_every_backend() -> None:
    legs = expand(load_matrix(MATRICES / "nightly.yaml"))
    by_backend = {leg.backend for leg in legs}
    assert by_backend == {"rocm", "cuda", "xpu", "cpu", "mps"}
    rocm = [leg for leg in legs if leg.backend == "rocm"]
    assert len({leg.family for leg in rocm}) >= 2
    assert all(leg.build and leg.build_args for leg in rocm)
    assert {"sm_90", "sm_100", "sm_107"} <= {leg.target for leg in legs if leg.backend == "cuda"}
    assert {"pvc", "bmg"} <= {leg.target for leg in legs if leg.backend == "xpu"}
    (mps,) = [leg for leg in legs if leg.backend == "mps"]
    assert not mps.container and mps.image is None and mps.base_image is None
    assert any("macos" in label for label in mps.runner)
    names = {leg.name for leg in legs}
    assert {"rocm7.14-gfx942-py3.12", "cuda13.4-sm_107-py3.12", "cpu-py3.12", "mps-py3.12"} <= (
        names
    )


def test_pr_matrix_is_one_quick_cpu_leg() -> None:
    (leg,) = expand(load_matrix(MATRICES / "pr.yaml"))
    assert (leg.backend, leg.device, leg.suites) == ("cpu", "cpu", ("conformance",))


def test_github_output_order_is_stable() -> None:
    first = github_matrix(load_legs(str(MATRICES / "nightly.yaml")))
    second = github_matrix(load_legs(str(MATRICES / "nightly.yaml")))
    assert json.dumps(first) == json.dumps(second)


# --- naming and expansion --------------------------------------------------------------


def test_leg_names() -> None:
    assert leg_name("rocm", "7.14", "gfx942", "3.12", None) == "rocm7.14-gfx942-py3.12"
    assert leg_name("cuda", "13.4", "sm_107", "3.12", None) == "cuda13.4-sm_107-py3.12"
    assert leg_name("cpu", None, None, "3.12", None) == "cpu-py3.12"
    assert leg_name("mps", None, None, "3.12", "eager") == "mps-py3.12-eager"


def test_defaults_include_exclude(tmp_path: Path) -> None:
    path = write_matrix(
        tmp_path,
        """\
  - backend: rocm
    backend_version: "7.14"
    targets: [gfx942, gfx950, gfx1100]
    python: ["3.11", "3.12"]
    runner: {gfx942: [a], gfx950: [b], gfx1100: [c]}
    torch: {ref: v2.14.1}
    build: true
    build_args: ["--rocm-version={backend_version}", "--gfx={target}", "--family={family}"]
    exclude:
      - {target: gfx1100, python: "3.11"}
    include:
      - {target: gfx942, python: "3.13", suites: [perf], timeout_minutes: 30}
  - backend: cpu
    runner: ubuntu-24.04
exclude:
  - {backend: rocm, target: gfx950, python: "3.11"}
""",
    )
    legs = load_legs(str(path))
    assert [leg.name for leg in legs] == [
        "rocm7.14-gfx942-py3.11",
        "rocm7.14-gfx942-py3.12",
        "rocm7.14-gfx950-py3.12",
        "rocm7.14-gfx1100-py3.12",
        "rocm7.14-gfx942-py3.13",
        "cpu-py3.12",
    ]
    gfx1100 = legs[3]
    assert gfx1100.runner == ("c",)
    assert gfx1100.family == "gfx110X-all"
    assert gfx1100.build_args == (
        "--rocm-version=7.14",
        "--gfx=gfx1100",
        "--family=gfx110X-all",
        "--python=3.12",
        "--torch-ref=v2.14.1",
    )
    included = legs[4]
    assert (included.suites, included.timeout_minutes) == (("perf",), 30)
    assert legs[5].device == "cpu" and legs[5].timeout_minutes == 60


def test_rocm_family_names_are_targets(tmp_path: Path) -> None:
    family = ROCM.replace("[gfx942, gfx950]", "[gfx94X-dcgpu]")
    # A family is not a --gfx target of the build: the build says so, at the leg's line.
    path = write_matrix(tmp_path, family)
    assert_located(config_error(path), path, "backend: rocm", "accelkit build", "--gfx: 'gfx94X")
    both = family.replace('"--gfx={target}"', '"--gfx=gfx942", "--family={family}"')
    path = write_matrix(tmp_path, both)
    (leg,) = load_legs(str(path))
    assert (leg.target, leg.family) == ("gfx94X-dcgpu", "gfx94X-dcgpu")


# --- located errors --------------------------------------------------------------------


def test_unknown_key_gets_a_hint_and_a_line(tmp_path: Path) -> None:
    path = write_matrix(tmp_path, ROCM + "    suite: [perf]\n")
    assert_located(config_error(path), path, "suite: [perf]", "'suite'", "did you mean 'suites'?")


def test_unknown_top_level_key(tmp_path: Path) -> None:
    path = write_matrix(tmp_path, ROCM + "exlcude: []\n")
    assert_located(config_error(path), path, "exlcude", "did you mean 'exclude'?")


def test_unknown_key_inside_defaults(tmp_path: Path) -> None:
    path = write_matrix(tmp_path, ROCM, header=HEADER.replace("  suites:", "  suits:"))
    assert_located(config_error(path), path, "suits:", "did you mean 'suites'?")


def test_unknown_backend_gets_a_hint(tmp_path: Path) -> None:
    path = write_matrix(tmp_path, ROCM.replace("backend: rocm", "backend: rcom"))
    assert_located(config_error(path), path, "backend: rcom", "did you mean 'rocm'?")


@pytest.mark.parametrize(
    ("targets", "words"),
    [
        ("[gfx942, sm_90]", ("'sm_90' is not a rocm target",)),
        ("[gfx924]", ("did you mean 'gfx942'?",)),
        ("[gfx942, gfx942]", ("twice",)),
        ("[]", ("must not be empty",)),
    ],
)
def test_bad_targets(tmp_path: Path, targets: str, words: tuple[str, ...]) -> None:
    path = write_matrix(tmp_path, ROCM.replace("[gfx942, gfx950]", targets))
    assert_located(config_error(path), path, "targets:", *words)


def test_targets_on_a_backend_without_targets(tmp_path: Path) -> None:
    path = write_matrix(tmp_path, "  - backend: cpu\n    targets: [x86]\n    runner: [r]\n")
    assert_located(config_error(path), path, "targets:", "has no targets")


def test_cuda_target_needs_a_recent_enough_toolkit(tmp_path: Path) -> None:
    body = (
        '  - backend: cuda\n    backend_version: "13.0"\n    targets: [sm_107]\n    runner: [r]\n'
    )
    path = write_matrix(tmp_path, body)
    assert_located(config_error(path), path, "targets:", "sm_107 needs CUDA version >= 13.4")


@pytest.mark.parametrize(
    ("backend", "version", "words"),
    [
        ("rocm", '"7"', ("malformed backend_version '7'", "like '7.14'")),
        ("rocm", '"v7.14"', ("malformed",)),
        ("rocm", '"7.14;id"', ("malformed",)),
        ("rocm", "7.14", ("must be a quoted string",)),
        ("cuda", '"13.x"', ("malformed", "like '13.4'")),
        ("cuda", '"9.0"', ("malformed",)),
        ("xpu", '"25.3"', ("malformed", "like '2025.3'")),
        ("cpu", '"1.0"', ("takes no backend_version",)),
    ],
)
def test_malformed_versions(tmp_path: Path, backend: str, version: str, words: tuple[str]) -> None:
    targets = {"rocm": "[gfx942]", "cuda": "[sm_90]", "xpu": "[pvc]", "cpu": None}[backend]
    body = f"  - backend: {backend}\n    backend_version: {version}\n    runner: [r]\n"
    if targets:
        body += f"    targets: {targets}\n"
    path = write_matrix(tmp_path, body)
    assert_located(config_error(path), path, "backend_version:", *words)


def test_missing_backend_version(tmp_path: Path) -> None:
    path = write_matrix(tmp_path, "  - backend: xpu\n    targets: [pvc]\n    runner: [r]\n")
    assert "needs backend_version" in str(config_error(path))


def test_unquoted_python_version_is_explained(tmp_path: Path) -> None:
    path = write_matrix(tmp_path, ROCM + "    python: [3.10]\n")
    assert_located(config_error(path), path, "python: [3.10]", "quoted", "3.1")


@pytest.mark.parametrize("python", ['"3.9"', '"2.7"', '"3"', '"py3.12"'])
def test_bad_python_versions(tmp_path: Path, python: str) -> None:
    path = write_matrix(tmp_path, ROCM + f"    python: [{python}]\n")
    assert_located(config_error(path), path, f"python: [{python}]", "python version")


def test_duplicate_legs(tmp_path: Path) -> None:
    path = write_matrix(tmp_path, ROCM + ROCM.replace("[gfx942, gfx950]", "[gfx950]"))
    error = config_error(path)
    assert "duplicate leg 'rocm7.14-gfx950-py3.12'" in str(error)
    assert str(error).startswith(f"{path}:15: ")  # the second entry
    assert "line 8" in str(error)  # the first


def test_variant_tells_duplicates_apart(tmp_path: Path) -> None:
    second = rocm("torch").replace("[gfx942, gfx950]", "[gfx950]") + "    variant: ref-main\n"
    second += "    torch: {ref: main}\n"
    legs = load_legs(str(write_matrix(tmp_path, ROCM + second)))
    assert legs[-1].name == "rocm7.14-gfx950-py3.12-ref-main"
    assert legs[-1].torch.ref == "main"


def test_missing_runner_labels(tmp_path: Path) -> None:
    path = write_matrix(tmp_path, "  - backend: cpu\n")
    assert_located(config_error(path), path, "backend: cpu", "'cpu-py3.12' has no runner labels")


def test_missing_runner_for_one_target(tmp_path: Path) -> None:
    body = ROCM.replace("runner: [self-hosted, linux.rocm.gpu]", "runner: {gfx942: [a]}")
    path = write_matrix(tmp_path, body)
    assert_located(config_error(path), path, "runner:", "for target gfx950")


def test_runner_for_unknown_target(tmp_path: Path) -> None:
    body = ROCM.replace(
        "runner: [self-hosted, linux.rocm.gpu]", "runner: {gfx942: [a], gfx95: [b]}"
    )
    path = write_matrix(tmp_path, body)
    assert_located(config_error(path), path, "runner:", "did you mean 'gfx950'?")


@pytest.mark.parametrize(
    ("line", "words"),
    [
        ("    runner: [self-hosted, 'x; rm -rf /']\n", ("runner label", "contains ';'")),
        ("    runner: ['linux gpu']\n", ("runner label", "contains a space")),
        ("    runner: ['a;b']\n", ("contains ';'",)),
        ("    image: 'ubuntu:24.04$(id)'\n", ("image", "contains '$'")),
        ("    image: '-v/:/host'\n", ("a leading '-'",)),
        ("    torch: {ref: 'main`id`'}\n", ("torch ref", "contains '`'")),
        ("    setup_args: ['--arch sm_90']\n", ("setup_args item", "contains a space")),
        ("    test_args: ['-k', 'a|b']\n", ("contains '|'",)),
        ("    variant: 'a&b'\n", ("variant", "contains '&'")),
        ("    build: true\n    build_args: ['--x=\"y\"']\n", ("contains a quote",)),
    ],
)
def test_shell_metacharacters_are_rejected(
    tmp_path: Path, line: str, words: tuple[str, ...]
) -> None:
    body = rocm("runner", *(key for key in ("torch", "build", "build_args") if key in line))
    if "runner" not in line:
        body += "    runner: [r]\n"
    path = write_matrix(tmp_path, body + line)
    error = config_error(path)
    assert "matrix values never reach a shell" in str(error) or "not valid" in str(error)
    for word in words:
        assert word in str(error), str(error)


def test_unknown_placeholder(tmp_path: Path) -> None:
    path = write_matrix(tmp_path, ROCM + "    setup_args: ['--gfx={traget}']\n")
    assert_located(config_error(path), path, "setup_args", "did you mean 'target'?")


def test_placeholder_without_value(tmp_path: Path) -> None:
    body = '  - backend: cuda\n    backend_version: "13.4"\n    targets: [sm_90]\n'
    body += "    runner: [r]\n    setup_args: ['--family={family}']\n"
    path = write_matrix(tmp_path, body)
    assert "{family} has no value" in str(config_error(path))


def test_exclude_matching_nothing_is_an_error(tmp_path: Path) -> None:
    path = write_matrix(tmp_path, ROCM + "exclude:\n  - {backend: rocm, python: '3.11'}\n")
    assert_located(config_error(path), path, "- {backend: rocm", "matches no leg")


def test_container_false_with_an_image(tmp_path: Path) -> None:
    body = "  - backend: mps\n    runner: [r]\n    container: false\n    image: ubuntu:24.04\n"
    path = write_matrix(tmp_path, body)
    assert_located(config_error(path), path, "container: false", "no use for image")


@pytest.mark.parametrize(
    ("field", "words"),
    [
        ("timeout_minutes: 0", ("timeout_minutes must be",)),
        ("timeout_minutes: '60'", ("timeout_minutes must be",)),
        ("torch: {channel: nighty}", ("did you mean 'nightly'?",)),
        ("torch: {channel: nightly, ref: main}", ("exactly one",)),
        ("suites: [conformence]", ("did you mean 'conformance'?",)),
        ("container: 'no'", ("container must be true or false",)),
        (
            "torch: {channel: nightly}\n    build: false\n    build_args: ['--x']",
            ("build is false",),
        ),
        ("torch: {channel: test}", ("build: true builds torch from a git ref",)),
    ],
)
def test_bad_settings(tmp_path: Path, field: str, words: tuple[str, ...]) -> None:
    keys = [line.split(":")[0].strip() for line in field.splitlines()]
    path = write_matrix(tmp_path, rocm(*keys) + f"    {field}\n")
    error = config_error(path)
    assert str(error).startswith(f"{path}:"), str(error)
    for word in words:
        assert word in str(error), str(error)


def test_duplicate_key_in_a_mapping(tmp_path: Path) -> None:
    path = write_matrix(tmp_path, ROCM + "    python: ['3.12']\n    python: ['3.13']\n")
    assert_located(config_error(path), path, "python: ['3.13']", "appears twice")


def test_yaml_syntax_error_has_a_line(tmp_path: Path) -> None:
    path = write_matrix(tmp_path, ROCM + "    runner: [a, b\n")
    assert str(config_error(path)).startswith(f"{path}:")


def test_arbitrary_objects_are_refused(tmp_path: Path) -> None:
    path = write_matrix(tmp_path, "  - !!python/object/apply:os.system ['id']\n")
    assert "invalid YAML" in str(config_error(path))


@pytest.mark.parametrize(
    ("text", "words"),
    [
        ("", ("empty",)),
        ("- a\n", ("must be a mapping",)),
        ("schema: 2\nentries: []\n", ("unsupported schema 2",)),
        ("entries: []\n", ("missing 'schema: 1'",)),
        ("schema: 1\n", ("missing 'entries'",)),
        ("schema: 1\nentries: []\n", ("non-empty list",)),
    ],
)
def test_bad_top_level(tmp_path: Path, text: str, words: tuple[str, ...]) -> None:
    path = tmp_path / "m.yaml"
    path.write_text(text)
    for word in words:
        assert word in str(config_error(path))


def test_merge_keys_and_aliases_are_fine(tmp_path: Path) -> None:
    path = write_matrix(
        tmp_path,
        """\
  - &rocm
    backend: rocm
    backend_version: "7.14"
    targets: [gfx942]
    runner: &labels [self-hosted, linux.rocm.gpu]
    torch: {ref: release/2.14}
    build: true
    build_args: ["--rocm-version={backend_version}", "--gfx={target}"]
  - <<: *rocm
    targets: [gfx950]
  - backend: cpu
    runner: *labels
""",
    )
    assert [leg.name for leg in load_legs(str(path))] == [
        "rocm7.14-gfx942-py3.12",
        "rocm7.14-gfx950-py3.12",
        "cpu-py3.12",
    ]


# --- hostile YAML ------------------------------------------------------------------------


def test_billion_laughs_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "lol.yaml"
    path.write_text(BILLION_LAUGHS)
    # Refused by the node limit before anything grows; how fast: benchmarks/bench_matrix.py.
    error = config_error(path)
    assert f"more than {MAX_EXPANDED_NODES} nodes" in str(error)
    assert str(error).startswith(f"{path}:")


def test_merge_key_bomb_is_refused(tmp_path: Path) -> None:
    lines = ["a0: &a0 {k0: 1, k1: 2, k2: 3, k3: 4, k4: 5, k5: 6, k6: 7, k7: 8}"]
    for level in range(1, 9):
        refs = ", ".join(f"x{n}: *a{level - 1}" for n in range(8))
        lines.append(f"a{level}: &a{level} {{{refs}}}")
    path = tmp_path / "bomb.yaml"
    path.write_text("\n".join(lines) + "\n")
    assert "nodes" in str(config_error(path))


def test_recursive_alias_is_rejected(tmp_path: Path) -> None:
    path = tmp_path / "loop.yaml"
    path.write_text("a: &a [1, *a]\n")
    assert "recursive YAML alias" in str(config_error(path))


def test_deep_nesting_is_rejected(tmp_path: Path) -> None:
    path = tmp_path / "deep.yaml"
    path.write_text("a: " + "[" * 200 + "]" * 200 + "\n")
    assert "nested" in str(config_error(path))


def test_oversized_file_is_rejected(tmp_path: Path) -> None:
    path = tmp_path / "big.yaml"
    path.write_text("# " + "x" * (2 * 1024 * 1024) + "\n")
    assert "larger than" in str(config_error(path))


# --- filters ------------------------------------------------------------------------------


def test_filters_select_legs() -> None:
    nightly = str(MATRICES / "nightly.yaml")
    rocm = load_legs(nightly, ["backend=rocm"])
    assert rocm and all(leg.backend == "rocm" for leg in rocm)
    both = load_legs(nightly, ["backend=cuda,xpu", "python=3.12"])
    assert {leg.backend for leg in both} == {"cuda", "xpu"}
    assert all(leg.python == "3.12" for leg in both)
    assert [leg.name for leg in load_legs(nightly, ["name=cuda*-sm_107-*"])] == [
        "cuda13.4-sm_107-py3.12",
        "cuda13.4-sm_107-py3.13",
    ]
    assert all(leg.build for leg in load_legs(nightly, ["build=true"]))
    assert load_legs(nightly, ["runner=linux.dgx.b200"])[0].target == "sm_100"


@pytest.mark.parametrize(
    ("text", "words"),
    [
        ("backnd=rocm", ("unknown key 'backnd'", "did you mean 'backend'?")),
        ("rocm", ("expected KEY=VALUE",)),
        ("backend=", ("no value",)),
        ("backend=rcom", ("unknown backend", "did you mean 'rocm'?")),
        ("suite=perf,conformence", ("did you mean 'conformance'?",)),
        ("build=yes", ("valid: true, false",)),
    ],
)
def test_bad_filters(text: str, words: tuple[str, ...]) -> None:
    with pytest.raises(BadInput) as info:
        parse_filters([text])
    for word in words:
        assert word in str(info.value)


def test_filter_globs_skip_the_value_check() -> None:
    (only,) = parse_filters(["backend=r*"])
    assert only.patterns == ("r*",)


# --- the command line --------------------------------------------------------------------


# --- what a leg runs: its Python, torch and base image reach its commands -----------------

CUDA = '  - backend: cuda\n    backend_version: "13.4"\n    targets: [sm_107]\n    runner: [r]\n'


def test_every_shipped_leg_runs_its_python_torch_and_base_image() -> None:
    for leg in load_legs(str(MATRICES / "nightly.yaml")):
        item = github_matrix([leg])["include"][0]
        if leg.build:
            assert f"--python={leg.python}" in item["build_args"]
            assert f"--torch-ref={leg.torch.ref}" in item["build_args"]
        if not leg.container:
            assert item["setup_args"] == [] and item["base_image"] == ""
            assert item["torch_index"].startswith("https://download.pytorch.org/whl/nightly/")
            continue
        assert f"--python={leg.python}" in item["setup_args"], leg.name
        assert item["base_image"] and f"--base-image={item['base_image']}" in item["setup_args"]
        if leg.torch.channel is not None:
            assert f"--torch-channel={leg.torch.channel}" in item["setup_args"]
            assert f"--torch-index={item['torch_index']}" in item["setup_args"]
        else:
            assert "--torch-wheel=wheelhouse" in item["setup_args"] and item["torch_index"] == ""
    by_name = {leg.name: leg for leg in load_legs(str(MATRICES / "nightly.yaml"))}
    # The XPU entry's Intel base image is the one its setup uses; its torch is nightly.
    xpu = by_name["xpu2025.3-pvc-py3.12"]
    assert xpu.base_image == "intel/deep-learning-essentials:2025.3-devel-ubuntu24.04"
    assert xpu.torch_index == "https://download.pytorch.org/whl/nightly/xpu"
    assert by_name["mps-py3.12"].torch_index == "https://download.pytorch.org/whl/nightly/cpu"
    assert by_name["cuda13.4-sm_107-py3.13"].torch_index.endswith("/nightly/cu130")
    assert "--python=3.13" in by_name["rocm7.14-gfx942-py3.13"].build_args


def test_free_threaded_python_reaches_build_and_setup(tmp_path: Path) -> None:
    path = write_matrix(tmp_path, rocm() + '    python: ["3.13t"]\n')
    (leg,) = [leg for leg in load_legs(str(path)) if leg.target == "gfx942"]
    assert leg.name == "rocm7.14-gfx942-py3.13t"
    assert "--python=3.13t" in leg.build_args and "--python=3.13t" in leg.setup_args


def test_cuda_update_releases_are_valid_for_validate_and_build(tmp_path: Path) -> None:
    body = CUDA.replace('"13.4"', '"13.4.1"') + "    torch: {ref: v2.14.1}\n    build: true\n"
    body += '    build_args: ["--cuda-version={backend_version}", "--arch={target}"]\n'
    (leg,) = load_legs(str(write_matrix(tmp_path, body)))
    assert leg.name == "cuda13.4.1-sm_107-py3.12"
    assert "--cuda-version=13.4.1" in leg.build_args
    # The test image is that toolkit's, like the builder's.
    assert leg.base_image == "nvidia/cuda:13.4.1-devel-ubuntu24.04"
    assert "--base-image=nvidia/cuda:13.4.1-devel-ubuntu24.04" in leg.setup_args


@pytest.mark.parametrize(
    ("body", "needle", "words"),
    [
        # What the commands themselves refuse, at the leg's line.
        (
            CUDA + "    setup_args: ['--arch=sm_999']\n",
            "backend: cuda",
            ("accelkit setup", "sm_999"),
        ),
        (CUDA + "    test_args: ['--passes=0']\n", "backend: cuda", ("accelkit test", "--passes")),
        (
            CUDA.replace('"13.4"', '"13.3"').replace("[sm_107]", "[sm_90]")
            + "    torch: {ref: main}\n    build: true\n"
            + "    build_args: ['--cuda-version={backend_version}', '--arch=sm_107']\n",
            "backend: cuda",
            ("accelkit build", "sm_107 needs CUDA version >= 13.4, got 13.3"),
        ),
        (
            CUDA
            + "    torch: {ref: main}\n    build: true\n"
            + "    build_args: ['--cuda-version={backend_version}', '--family=gfx94X-dcgpu']\n",
            "backend: cuda",
            ("accelkit build", "--family does not apply to accelkit build cuda"),
        ),
        # What the leg's own keys set is never written by hand.
        (
            CUDA + "    setup_args: ['--torch-index=https://x.org/s']\n",
            "backend: cuda",
            ("set from torch",),
        ),
        (
            CUDA + "    setup_args: ['--python=3.11']\n",
            "backend: cuda",
            ("set from the leg's python",),
        ),
        (CUDA + "    test_args: ['--device', 'cpu']\n", "backend: cuda", ("--device is set from",)),
        # torch sources that a leg cannot have.
        (rocm("torch", "build", "build_args"), "backend: rocm", ("no torch wheels for rocm 7.14",)),
        (CUDA.replace('"13.4"', '"12.4"').replace("sm_107", "sm_90"), "backend: cuda", ("12.4",)),
        (CUDA + "    torch: {ref: main}\n", "torch: {ref", ("set build: true",)),
        (CUDA + "    image: a:1\n    base_image: b:1\n", "base_image", ("no use for base_image",)),
    ],
)
def test_leg_commands_refuse_what_the_commands_refuse(
    tmp_path: Path, body: str, needle: str, words: tuple[str, ...]
) -> None:
    path = write_matrix(tmp_path, body)
    assert_located(config_error(path), path, needle, *words)
