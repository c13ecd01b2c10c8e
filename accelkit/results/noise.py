"""When a metric's samples count as noisy: the thresholds the timer, the pooling of passes
and the report share.

Same values and meaning as torch.utils.benchmark.utils.common: an IQR/median at or above
`IQR_WARN_THRESHOLD` "could indicate system fluctuation", at or above
`IQR_GROSS_WARN_THRESHOLD` it "suggests significant environmental influence". A metric's
`noisy` flag in the results file is `iqr_over_median >= IQR_WARN_THRESHOLD`.
"""

from __future__ import annotations

from typing import Final

IQR_WARN_THRESHOLD: Final = 0.10
IQR_GROSS_WARN_THRESHOLD: Final = 0.25
