"""Start-up time of the CLI against `import torch` (target: at most a quarter of it), and
`accelkit doctor` against it (target: at most twice it; issue 17).

Runs each command several times in fresh interpreters and prints the medians:

    python benchmarks/bench_startup.py [--runs 7] [--no-doctor]

Also checks that the fast paths never import torch.
"""

from __future__ import annotations

import argparse
import statistics
import subprocess
import sys
import time

COMMANDS: dict[str, list[str]] = {
    "accelkit --help": [sys.executable, "-m", "accelkit", "--help"],
    "accelkit matrix --help": [sys.executable, "-m", "accelkit", "matrix", "--help"],
    "accelkit test --help": [sys.executable, "-m", "accelkit", "test", "--help"],
    'python -c "import torch"': [sys.executable, "-c", "import torch"],
}
DOCTOR = {"accelkit doctor": [sys.executable, "-m", "accelkit", "doctor"]}
HELP_TARGET = 0.25
DOCTOR_TARGET = 2.0
NO_TORCH_CHECK = (
    "import sys; from accelkit.cli import main\n"
    "try:\n    main(['--help'])\nexcept SystemExit:\n    pass\n"
    "assert 'torch' not in sys.modules, 'accelkit --help imported torch'\n"
)


def time_command(argv: list[str], runs: int) -> list[float]:
    samples = []
    for _ in range(runs):
        start = time.perf_counter()
        subprocess.run(argv, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, check=True)
        samples.append(time.perf_counter() - start)
    return samples


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--runs", type=int, default=7)
    parser.add_argument("--no-doctor", action="store_true", help="skip `accelkit doctor`")
    args = parser.parse_args()
    subprocess.run([sys.executable, "-c", NO_TORCH_CHECK], check=True, stdout=subprocess.DEVNULL)
    medians: dict[str, float] = {}
    commands = COMMANDS if args.no_doctor else {**COMMANDS, **DOCTOR}
    for name, argv in commands.items():
        time_command(argv, 1)  # warm the page cache
        samples = time_command(argv, args.runs)
        medians[name] = statistics.median(samples)
        print(
            f"{name:32} median {medians[name] * 1000:7.0f} ms  (min {min(samples) * 1000:.0f} ms)"
        )
    torch_s = medians['python -c "import torch"']
    ok = True
    for name, target in (("accelkit --help", HELP_TARGET), ("accelkit doctor", DOCTOR_TARGET)):
        if name not in medians:
            continue
        ratio = medians[name] / torch_s
        ok = ok and ratio <= target
        verdict = "OK" if ratio <= target else "TOO SLOW"
        print(f"{name} / import torch = {ratio:.2f} (target <= {target:g}): {verdict}")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
