"""What a compile-only run compiles for a target: one `KernelSpec` per case.

Each spec names a kernel of `accelkit.suite.crosscompile.kernels`, the triton signature and
constants it is compiled with, the features the target must have for it (`needs`: a target
without one skips the case with the reason its backend gives, `CrossTarget.lacks`) and the
instruction checks its code must pass (`checks`: the keys of `CrossTarget.isa`).

Example: `gemm_fp8` is `kernels.gemm` with `a_ptr: *{fp8}`, where `{fp8}` becomes the
target's fp8 type (fp8e4nv on sm_107, fp8e4b8 on gfx942); it needs "fp8", and its PTX
on sm_107 must hold `tcgen05.mma ... kind::f8f6f4` (check "mma_fp8").

Block sizes are the smallest that still select each target's matrix instructions (64 x 64
x 32 gives wgmma on sm_90, tcgen05 on sm_100/107, MFMA on gfx942): compiles stay around a
second each.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from types import MappingProxyType

FP8 = "{fp8}"
"""Placeholder in a signature for the target's fp8 type."""


@dataclass(frozen=True)
class KernelSpec:
    name: str
    """The case's last id part: conformance/cross_compile/<target>/<name>."""
    kernel: str
    """The function's name in `kernels`."""
    signature: Mapping[str, str]
    constants: Mapping[str, int | bool] = field(default_factory=dict)
    needs: tuple[str, ...] = ()
    checks: tuple[str, ...] = ()

    def __post_init__(self) -> None:
        object.__setattr__(self, "signature", MappingProxyType(dict(self.signature)))
        object.__setattr__(self, "constants", MappingProxyType(dict(self.constants)))

    def signature_for(self, fp8_type: str | None) -> dict[str, str]:
        """The signature with `{fp8}` replaced by the target's fp8 type."""
        if fp8_type is None and any(FP8 in kind for kind in self.signature.values()):
            raise ValueError(f"{self.name}: the target has no fp8 type")
        return {name: kind.replace(FP8, fp8_type or "") for name, kind in self.signature.items()}


def _gemm_signature(operand: str, result: str) -> dict[str, str]:
    return {
        "a_ptr": f"*{operand}",
        "b_ptr": f"*{operand}",
        "c_ptr": f"*{result}",
        "M": "i32",
        "N": "i32",
        "K": "i32",
    }


TILES: Mapping[str, int] = MappingProxyType({"BM": 64, "BN": 64, "BK": 32})
#: A persistent kernel's grid: one program per SM of a large GPU (only a loop bound here).
PERSISTENT_PROGRAMS = 132

CORPUS: tuple[KernelSpec, ...] = (
    KernelSpec(
        "elementwise",
        "elementwise",
        {"x_ptr": "*fp32", "y_ptr": "*fp32", "out_ptr": "*fp32", "n": "i32"},
        {"BLOCK": 1024},
    ),
    KernelSpec(
        "reduction",
        "reduction",
        {"x_ptr": "*fp32", "out_ptr": "*fp32", "n_cols": "i32"},
        {"BLOCK": 1024},
    ),
    KernelSpec(
        "softmax",
        "softmax",
        {"x_ptr": "*fp16", "out_ptr": "*fp16", "n_cols": "i32"},
        {"BLOCK": 1024},
    ),
    KernelSpec(
        "layer_norm",
        "layer_norm",
        {
            "x_ptr": "*bf16",
            "w_ptr": "*bf16",
            "b_ptr": "*bf16",
            "out_ptr": "*bf16",
            "n_cols": "i32",
            "eps": "fp32",
        },
        {"BLOCK": 1024},
    ),
    KernelSpec("gemm_fp16", "gemm", _gemm_signature("fp16", "fp32"), TILES, checks=("mma",)),
    KernelSpec("gemm_bf16", "gemm", _gemm_signature("bf16", "bf16"), TILES, checks=("mma",)),
    KernelSpec(
        "gemm_fp8",
        "gemm",
        _gemm_signature(FP8, "fp32"),
        {**TILES, "BK": 2 * TILES["BK"]},
        needs=("fp8",),
        checks=("mma_fp8",),
    ),
    KernelSpec(
        "gemm_persistent",
        "gemm_persistent",
        _gemm_signature("bf16", "bf16"),
        {"NUM_PROGRAMS": PERSISTENT_PROGRAMS, **TILES},
        checks=("mma",),
    ),
    KernelSpec(
        "gemm_tma",
        "gemm_descriptors",
        _gemm_signature("bf16", "bf16"),
        {**TILES, "WARP_SPECIALIZE": False},
        needs=("tma",),
        checks=("mma", "tma"),
    ),
    KernelSpec(
        "gemm_warp_specialized",
        "gemm_descriptors",
        _gemm_signature("bf16", "bf16"),
        {**TILES, "WARP_SPECIALIZE": True},
        needs=("tma", "warp_specialize"),
        checks=("mma", "tma", "warp_specialize"),
    ),
)

BY_NAME: Mapping[str, KernelSpec] = MappingProxyType({spec.name: spec for spec in CORPUS})
