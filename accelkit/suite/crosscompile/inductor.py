"""The Triton kernels Inductor generates for the suite's compile cases (the model zoo of
`conformance/compile_parity`), generated for a GPU target that is not here and compiled for
it with the real triton.

How far it goes: Inductor lowers each model's forward graph (traced with fake tensors on
the target's device type) and generates its Triton kernels as it would on the GPU, reading
the target's capability and properties from a stand-in device (`FakeDevice`, from the
backend). Matrix multiplies go to the vendor library (cuBLAS) as without max-autotune, so
the generated kernels are the fused pointwise, reduction and normalisation kernels; the
backward graphs and autotuned GEMM templates are not generated. Each kernel is then compiled
with every launch configuration Inductor's own heuristics give it, for the target.

Generation runs in a fresh Python process (`python -m accelkit.suite.crosscompile.inductor`,
a JSON request on stdin, the kernels' source on stdout): it patches torch's view of the
device, and those answers are cached process-wide, so they must never reach the process
that runs the rest of the suite.

Example: for sm_107, `generate(cross, "mlp")` gives `triton_poi_fused_gelu_0` (the GELU
between the two linears), whose source carries `DeviceProperties(..., cc=107, ...)`;
`compile_generated(kernel, cross)` compiles it into sm_107 cubins.
"""

from __future__ import annotations

import contextlib
import importlib.util
import json
import os
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from types import SimpleNamespace
from typing import TYPE_CHECKING, Any
from unittest import mock

from accelkit.suite.crosscompile.compiling import Compiled, CompileFailed, error_summary

if TYPE_CHECKING:
    from accelkit.backends.base import CrossTarget, FakeDevice

#: Seconds one generation may take (a fresh process importing torch, then Inductor).
GENERATE_TIMEOUT_S = 300.0


class GenerationFailed(Exception):
    """Inductor could not generate a model's kernels for the target; one line."""


@dataclass(frozen=True)
class GeneratedKernel:
    name: str
    source: str


#: Zoo models whose kernels cannot be generated for a stand-in device, and why.
NOT_GENERATED: Mapping[str, str] = {
    "gru": "its step makes a tensor on the device while make_fx traces it (x.new_zeros), "
    "which reaches the GPU driver even under fake tensors; generated on a GPU only",
}


def models() -> tuple[str, ...]:
    """The compile cases whose kernels are generated: the zoo's models, by name."""
    from accelkit.suite.zoo import ZOO

    return tuple(ZOO)


def generate(cross: CrossTarget, model: str) -> list[GeneratedKernel]:
    """The Triton kernels Inductor generates for `model`'s forward on `cross`'s stand-in
    device, in a fresh process; GenerationFailed with the reason."""
    fake = cross.fake_device
    if fake is None:
        raise GenerationFailed(cross.lacks.get("inductor", f"no stand-in for {cross.target}"))
    request = {
        "model": model,
        "device_type": fake.device_type,
        "torch_build": fake.torch_build,
        "properties": dict(fake.properties),
        "triton_target": [cross.triton_backend, cross.triton_arch, cross.warp_size],
    }
    with tempfile.TemporaryDirectory(prefix="accelkit-inductor-") as cache:
        env = {**os.environ, "TORCHINDUCTOR_CACHE_DIR": cache, "TRITON_CACHE_DIR": cache}
        try:
            proc = subprocess.run(
                [sys.executable, "-m", "accelkit.suite.crosscompile.inductor"],
                input=json.dumps(request),
                capture_output=True,
                text=True,
                timeout=GENERATE_TIMEOUT_S,
                env=env,
                check=False,
            )
        except subprocess.TimeoutExpired:
            raise GenerationFailed(
                f"Inductor took over {GENERATE_TIMEOUT_S:g} s to generate {model}"
            ) from None
    answer = _last_json(proc.stdout)
    if answer is None:
        tail = " | ".join(proc.stderr.strip().splitlines()[-3:])
        raise GenerationFailed(f"generating {model} exited {proc.returncode}: {tail[:600]}")
    if answer.get("error"):
        raise GenerationFailed(str(answer["error"]))
    return [GeneratedKernel(k["name"], k["source"]) for k in answer.get("kernels", [])]


def compile_generated(kernel: GeneratedKernel, cross: CrossTarget) -> list[Compiled]:
    """`kernel` compiled for `cross` once per launch configuration Inductor's heuristics
    give it (its autotuning would compile each); CompileFailed with triton's reason."""
    import triton
    from triton.backends.compiler import GPUTarget
    from triton.compiler import ASTSource

    autotuner = _load(kernel)
    meta = autotuner.triton_meta
    target = GPUTarget(cross.triton_backend, cross.triton_arch, cross.warp_size)
    attrs = meta["configs"][0] if meta.get("configs") else None
    out: list[Compiled] = []
    for config in autotuner.configs:
        source = ASTSource(
            fn=autotuner.fn,
            signature=meta["signature"],
            constexprs={**meta.get("constants", {}), **config.kwargs},
            attrs=attrs,
        )
        options = {
            "num_warps": config.num_warps,
            "num_stages": config.num_stages,
            "enable_fp_fusion": meta.get("enable_fp_fusion", True),
        }
        started = time.perf_counter()
        try:
            compiled = triton.compile(source, target=target, options=options)
        except Exception as exc:
            raise CompileFailed(
                f"triton {triton.__version__} could not compile Inductor's {kernel.name} "
                f"({config.kwargs}) for {cross.target}: {error_summary(exc)}"
            ) from None
        out.append(
            Compiled(
                compiled.asm[cross.assembly],
                compiled.asm[cross.binary],
                time.perf_counter() - started,
            )
        )
    return out


def _load(kernel: GeneratedKernel) -> Any:
    """The kernel module's CachingAutotuner, without touching a GPU driver (the module asks
    for the GPU driver at import; only its compile configurations are wanted here)."""
    from torch._inductor.runtime import triton_helpers

    with tempfile.TemporaryDirectory(prefix="accelkit-kernel-") as folder:
        path = os.path.join(folder, f"{kernel.name}.py")
        with open(path, "w", encoding="utf-8") as file:
            file.write(kernel.source)
        spec = importlib.util.spec_from_file_location(f"accelkit_generated_{kernel.name}", path)
        if spec is None or spec.loader is None:
            raise CompileFailed(f"{kernel.name}: cannot load the generated source")
        module = importlib.util.module_from_spec(spec)
        with mock.patch.object(triton_helpers, "set_driver_to_gpu", lambda: None):
            try:
                spec.loader.exec_module(module)
            except Exception as exc:
                raise CompileFailed(f"{kernel.name}: {error_summary(exc)}") from None
    return getattr(module, kernel.name)


def _last_json(text: str) -> dict[str, Any] | None:
    for line in reversed(text.splitlines()):
        if line.startswith("{"):
            try:
                value = json.loads(line)
            except ValueError:
                continue
            if isinstance(value, dict):
                return value
    return None


# --------------------------------------------------------------------------------------
# The generating process


@contextlib.contextmanager
def _stand_in(fake: FakeDevice, triton_target: list[Any]) -> Iterator[None]:
    """torch's view of a `fake.device_type` device answered by `fake` for the block: what
    Inductor asks while it lowers and generates code. Only in the generating process."""
    import torch
    import torch.utils._triton as torch_triton
    from torch._dynamo.device_interface import get_interface_for_device
    from triton.backends.compiler import GPUTarget
    from triton.compiler.compiler import make_backend

    module = getattr(torch, fake.device_type)
    interface = get_interface_for_device(fake.device_type)
    props = SimpleNamespace(**fake.properties)
    capability = (int(fake.properties["major"]), int(fake.properties["minor"]))
    backend = make_backend(GPUTarget(*triton_target))
    answers: dict[str, Any] = {
        "is_available": lambda: True,
        "device_count": lambda: 1,
        "current_device": lambda: 0,
        "set_device": lambda index: None,
        "get_device_capability": lambda *args: capability,
        "get_device_properties": lambda *args: props,
        "get_rng_state": lambda *args, **kwargs: torch.zeros(16, dtype=torch.uint8),
        "set_rng_state": lambda *args, **kwargs: None,
        "_lazy_init": lambda: None,
        "_exchange_device": lambda index: -1,
        "_maybe_exchange_device": lambda index: -1,
    }
    with contextlib.ExitStack() as stack:
        for name, answer in answers.items():
            if hasattr(module, name):
                stack.enter_context(mock.patch.object(module, name, answer))
        for name, answer in (
            ("is_available", lambda: True),
            ("current_device", lambda: 0),
            ("get_device_properties", lambda *args: props),
            ("get_compute_capability", lambda *args: capability[0] * 10 + capability[1]),
        ):
            stack.enter_context(mock.patch.object(interface, name, staticmethod(answer)))
        # triton's active driver would load the GPU driver library: the target's backend
        # is named directly instead.
        stack.enter_context(mock.patch.object(torch_triton, "triton_backend", lambda: backend))
        yield


def _generate(request: Mapping[str, Any]) -> dict[str, Any]:
    """One model's kernels, for a stand-in device (runs in the generating process)."""
    import torch
    import torch._inductor.config as inductor_config
    from torch._inductor import async_compile
    from torch._inductor.compile_fx import compile_fx_inner
    from torch._inductor.decomposition import select_decomp_table
    from torch._subclasses.fake_tensor import FakeTensorMode
    from torch.fx.experimental.proxy_tensor import make_fx

    from accelkit.backends.base import FakeDevice
    from accelkit.suite.zoo import ZOO

    fake = FakeDevice(request["device_type"], request["torch_build"], request["properties"])
    if not getattr(torch.version, fake.torch_build, None):
        return {
            "error": f"torch {torch.__version__} is not a {fake.torch_build} build: Inductor "
            f"cannot generate {fake.device_type} kernels with it"
        }
    factory, make_inputs, _ = ZOO[request["model"]]
    kernels: list[dict[str, str]] = []

    def capture(self: Any, kernel_name: str, source_code: str, *args: Any, **kw: Any) -> Any:
        kernels.append({"name": kernel_name, "source": source_code})
        return SimpleNamespace()  # never run: the process only generates

    with (
        _stand_in(fake, request["triton_target"]),
        mock.patch.object(async_compile.AsyncCompile, "triton", capture),
        inductor_config.patch({"compile_threads": 1, "fx_graph_cache": False}),
    ):
        module = factory().eval()
        # Shapes and dtypes from the case's own CPU tensors; on the stand-in device only
        # fake tensors exist (their values never matter to code generation).
        real = [*module.named_parameters(), *module.named_buffers()]
        real_inputs = make_inputs("cpu")
        mode = FakeTensorMode()
        with mode:
            device = torch.device(fake.device_type, 0)
            state = {name: torch.empty(t.shape, dtype=t.dtype, device=device) for name, t in real}
            inputs = [torch.empty(t.shape, dtype=t.dtype, device=device) for t in real_inputs]

        def forward(state: dict[str, Any], *args: Any) -> tuple[Any, ...]:
            return (torch.func.functional_call(module, state, args),)

        with torch.no_grad():
            graph = make_fx(
                forward, decomposition_table=select_decomp_table(), tracing_mode="fake"
            )(state, *inputs)
            flat = [*state.values(), *inputs]
            with mode:
                compile_fx_inner(graph, flat)
    return {"kernels": kernels}


def main() -> int:
    request = json.loads(sys.stdin.read())
    try:
        answer = _generate(request)
    except Exception as exc:
        reason = f"Inductor could not generate {request.get('model')}: {error_summary(exc)}"
        answer = {"error": reason}
    sys.stdout.write(json.dumps(answer) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
