"""PyTorch's OpInfo database (`op_db`) by name, and the dtypes the suite tests.

Importing `op_db` costs several seconds and builds ~700 OpInfos, so it happens once per
process, on the first call of `op_db_by_name` (cached), never at import: the capability probe
and the in-process unit tests must not pay for it.

Names: an OpInfo's full name is its name with its variant, `div.trunc_rounding` for the
OpInfo named "div" with variant_test_name "trunc_rounding"; case ids use full names.
"""

from __future__ import annotations

import functools
from typing import Any

import torch

# The dtypes the suite tests, by the name used in case ids.
DTYPES: dict[str, torch.dtype] = {
    "float32": torch.float32,
    "float16": torch.float16,
    "bfloat16": torch.bfloat16,
    "float64": torch.float64,
    "complex64": torch.complex64,
}


def full_name(op: Any) -> str:
    return f"{op.name}.{op.variant_test_name}" if op.variant_test_name else str(op.name)


@functools.cache
def op_db_by_name() -> dict[str, Any]:
    """PyTorch's OpInfo database by full name (imported once per process: seconds)."""
    from torch.testing._internal.common_methods_invocations import op_db

    return {full_name(op): op for op in op_db}
