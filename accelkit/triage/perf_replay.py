"""A perf case timed alone, in a standalone reproducer (embedded by `accelkit repro`).

`run_perf(CASE)` (called by `accelkit.triage.replay_main.main` with torch seeded with the
case's seed, as the suite seeds it) rebuilds the case's op from `CASE["perf"]` (written by
`accelkit.triage.perf_repro`: the op family, sizes, dtype, rotating input sets, the size
tier's timing options, the timer's device and the recorded intra-op threads), times it
with `accelkit.suite.perf.timing.Timer.blocked_autorange` (the perf suite's one timing method:
the same warm-up, block sizing, device synchronisation or events, sample rules), and prints
each metric measured here beside the recorded one: median, the recorded samples'
interquartile range, and the ratio. Its last line (`MEASURED_PREFIX` and JSON) holds every
metric's samples measured here, which `accelkit repro --baseline` reads to give compare's
verdict against a baseline (`accelkit.triage.perf_baseline`).
The ops are built as the case functions in `accelkit/suite/perf/` build them. Exit status
0 when it ran (a perf reproducer measures; it has no pass or fail), 2 when it cannot run.

Standard library and torch only (numpy for the host canaries, as the suite times them).
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import contextmanager, nullcontext
from typing import Any

EXIT_MEASURED = 0
EXIT_CANNOT_RUN = 2
MEASURED_PREFIX = "accelkit-measured: "


def _dtype(torch: Any, name: str) -> Any:
    """accelkit.suite.perf.harness.torch_dtype: tfloat32 computes in float32."""
    if name == "tfloat32":
        return torch.float32
    return getattr(torch, name)


def _float8(torch: Any, device: str) -> Any:
    """accelkit.suite.perf.harness.float8_dtype: the e4m3 dtype _scaled_mm takes here."""
    for name in ("float8_e4m3fn", "float8_e4m3fnuz"):
        dtype = getattr(torch, name, None)
        if dtype is None:
            continue
        try:
            a = torch.ones(16, 16, device=device).to(dtype)
            scale = torch.ones((), device=device)
            torch._scaled_mm(a, a.t(), scale_a=scale, scale_b=scale, out_dtype=torch.bfloat16)
        except (RuntimeError, NotImplementedError, TypeError):
            continue
        return dtype
    return torch.float8_e4m3fn


@contextmanager
def _tf32(torch: Any, dtype: str) -> Iterator[None]:
    if dtype != "tfloat32":
        yield
        return
    previous = torch.backends.cuda.matmul.allow_tf32
    torch.backends.cuda.matmul.allow_tf32 = True
    try:
        yield
    finally:
        torch.backends.cuda.matmul.allow_tf32 = previous


Built = tuple[Callable[..., object], dict[str, Any], dict[str, float]]
"""(function, Timer arguments, work per call of each throughput metric)."""


def _gemm(torch: Any, spec: dict[str, Any], device: str) -> Built:
    m, n, k = spec["shape"]
    dtype = spec["dtype"]
    sets: list[tuple[Any, ...]] = []
    for _ in range(spec["sets"]):
        if dtype == "float8":
            f8 = _float8(torch, device)
            a = torch.randn(m, k, device=device).to(f8)
            b = torch.randn(n, k, device=device).to(f8).t()
            scale = torch.ones((), device=device)
            sets.append((a, b, scale, scale))
        else:
            t = _dtype(torch, dtype)
            sets.append(
                (
                    torch.randn(m, k, device=device, dtype=t),
                    torch.randn(k, n, device=device, dtype=t),
                )
            )
    fn: Callable[..., object] = torch.mm
    if dtype == "float8":

        def fn(a: Any, b: Any, sa: Any, sb: Any) -> object:
            return torch._scaled_mm(a, b, scale_a=sa, scale_b=sb, out_dtype=torch.bfloat16)

    return fn, {"arg_sets": sets}, {"flops": 2.0 * m * n * k}


def _gemv(torch: Any, spec: dict[str, Any], device: str) -> Built:
    import torch.nn.functional as F

    _, n, k = spec["shape"]
    t = _dtype(torch, spec["dtype"])
    size = torch.empty((), dtype=t).element_size()
    sets = [
        (torch.randn(1, k, device=device, dtype=t), torch.randn(n, k, device=device, dtype=t))
        for _ in range(spec["sets"])
    ]
    return F.linear, {"arg_sets": sets}, {"bandwidth": n * k * size + (k + n) * size}


def _stream(torch: Any, spec: dict[str, Any], device: str) -> Built:
    n, kernel, count = spec["elements"], spec["kernel"], spec["sets"]
    sets: list[tuple[Any, ...]]
    if kernel == "copy":
        sets = [
            (torch.empty(n, device=device), torch.randn(n, device=device)) for _ in range(count)
        ]
        return (lambda dst, src: dst.copy_(src)), {"arg_sets": sets}, {"bandwidth": 2 * 4 * n}
    if kernel == "triad":
        sets = [
            (
                torch.empty(n, device=device),
                torch.randn(n, device=device),
                torch.randn(n, device=device),
            )
            for _ in range(count)
        ]
        fn = lambda a, b, c: torch.add(b, c, alpha=3.0, out=a)  # noqa: E731
        return fn, {"arg_sets": sets}, {"bandwidth": 3 * 4 * n}
    sets = [(torch.randn(n, device=device),) for _ in range(count)]
    return torch.sum, {"arg_sets": sets}, {"bandwidth": 4 * n}


def _rows(torch: Any, spec: dict[str, Any], device: str) -> Built:
    import torch.nn.functional as F

    rows, cols = spec["shape"]
    t = _dtype(torch, spec["dtype"])
    size = torch.empty((), dtype=t).element_size()
    sets = [(torch.randn(rows, cols, device=device, dtype=t),) for _ in range(spec["sets"])]
    if spec["kernel"] == "softmax":
        fn: Callable[..., object] = lambda x: torch.softmax(x, dim=-1)  # noqa: E731
    else:
        weight = torch.randn(cols, device=device, dtype=t)
        bias = torch.randn(cols, device=device, dtype=t)
        fn = lambda x: F.layer_norm(x, (cols,), weight, bias)  # noqa: E731
    return fn, {"arg_sets": sets}, {"bandwidth": 2 * rows * cols * size}


def _sdpa(torch: Any, spec: dict[str, Any], device: str) -> Built:
    import torch.nn.functional as F

    b, h, s, d = spec["shape"]
    t = _dtype(torch, spec["dtype"])
    causal = bool(spec["causal"])
    q, k, v = (torch.randn(b, h, s, d, device=device, dtype=t) for _ in range(3))

    def attention(q: Any, k: Any, v: Any) -> Any:  # timed under torch.no_grad(), as the case
        return F.scaled_dot_product_attention(q, k, v, is_causal=causal)

    flop = 4.0 * b * h * s * s * d * (0.5 if causal else 1.0)
    return attention, {"args": (q, k, v)}, {"flops": flop}


def _canary(torch: Any, spec: dict[str, Any], device: str) -> Built:
    kernel, n = spec["kernel"], spec["size"]
    if kernel == "host/copy":
        import numpy as np

        rng = np.random.default_rng(0)
        count = spec.get("sets", 8)  # files written before the sets were recorded: 8
        sets = [
            (np.empty(n, np.float32), rng.standard_normal(n, dtype=np.float32))
            for _ in range(count)
        ]
        return np.copyto, {"arg_sets": sets}, {"bandwidth": 2 * 4 * n}
    if kernel == "host/gemm":
        import numpy as np

        rng = np.random.default_rng(0)
        a, b = (rng.standard_normal((n, n), dtype=np.float32) for _ in range(2))
        out = np.empty((n, n), np.float32)

        def product() -> None:
            np.matmul(a, b, out=out)

        return product, {}, {"flops": 2.0 * n**3}
    if kernel == "device/copy":
        src = torch.randn(n, device=device)
        dst = torch.empty_like(src)
        return dst.copy_, {"args": (src,)}, {"bandwidth": 2 * 4 * n}
    x = torch.randn(n, n, device=device)
    y = torch.randn(n, n, device=device)
    return torch.mm, {"args": (x, y)}, {"flops": 2.0 * n**3}


BUILDERS: dict[str, Callable[[Any, dict[str, Any], str], Built]] = {
    "gemm": _gemm,
    "gemv": _gemv,
    "stream": _stream,
    "rows": _rows,
    "sdpa": _sdpa,
    "canary": _canary,
}


def _spread(samples: list[float]) -> tuple[float, float, float]:
    from accelkit.suite.perf.timing import spread

    return spread(samples) if samples else (float("nan"),) * 3


def _show(value: float, unit: str) -> str:
    if unit == "s":
        return f"{value * 1e6:.3f} us"
    for scale, prefix in ((1e12, "T"), (1e9, "G"), (1e6, "M")):
        if abs(value) >= scale:
            return f"{value / scale:.3f} {prefix}{unit}"
    return f"{value:.4g} {unit}"


def run_perf(case: dict[str, Any]) -> int:
    import json

    import torch

    from accelkit.suite.perf.timing import Timer

    spec, device = case["perf"], case["device"]
    threads = spec.get("threads")
    if threads:
        torch.set_num_threads(int(threads))
    sizes = spec.get("shape", spec.get("elements", spec.get("size")))
    what = " ".join(str(spec[key]) for key in ("family", "kernel", "dtype") if key in spec)
    print(
        f"\nperf case alone: {what}, sizes {sizes}, tier {spec['tier']}, "
        f"threads {torch.get_num_threads()}, timer device {spec['timer_device'] or 'host clock'}"
    )
    fn, timer_args, work = BUILDERS[spec["family"]](torch, spec, device)
    timer = Timer(fn, device=spec["timer_device"], **timer_args)
    no_grad = torch.no_grad() if spec["family"] == "sdpa" else nullcontext()
    with _tf32(torch, str(spec.get("dtype", ""))), no_grad:
        measurement = timer.blocked_autorange(**spec["timing"])
    print(
        f"timed with {measurement.timer}: {len(measurement.samples)} samples of "
        f"{measurement.number_per_sample} calls, {measurement.warmup_calls} warm-up calls\n"
    )
    measured: dict[str, Any] = {}
    for name, recorded in spec["metrics"].items():
        unit = recorded["unit"]
        if unit == "s":
            now = measurement.latency_metric()
        else:
            per_call = recorded.get("work_per_call") or work.get(name)
            if not per_call:
                print(f"{name}: no work per call recorded; not compared")
                continue
            now = measurement.throughput_metric(float(per_call), unit)
        measured[name] = {
            "unit": unit,
            "higher_is_better": bool(recorded["higher_is_better"]),
            "samples": [float(v) for v in now["samples"]],
        }
        p25, _, p75 = _spread(list(recorded["samples"]))
        median = float(recorded["value"])  # the median of every recorded sample
        value = float(now["value"])
        ratio = value / median if median else float("inf")
        inside = p25 <= value <= p75
        print(f"{name} ({unit}, {'higher' if recorded['higher_is_better'] else 'lower'} is better)")
        spread = f"IQR {_show(p25, unit)} .. {_show(p75, unit)}"
        print(
            f"  recorded: median {_show(median, unit)}, {spread}"
            f" ({len(recorded['samples'])} samples)"
        )
        print(
            f"  here:     median {_show(value, unit)}, IQR/median {now['iqr_over_median']:.1%}"
            f" ({len(now['samples'])} samples)"
        )
        print(
            f"  ratio here/recorded: {ratio:.3f}; "
            f"{'inside' if inside else 'outside'} the recorded samples' interquartile range"
        )
    print(MEASURED_PREFIX + json.dumps(measured))
    return EXIT_MEASURED
