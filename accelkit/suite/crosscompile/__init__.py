"""Compile-only conformance: the suite's Triton kernels compiled for a GPU target that is
not here (`accelkit test --device cuda --target sm_107 --compile-only`).

`corpus.py` says what is compiled and checked, `kernels.py` holds the kernels (it imports
triton), `compiling.py` compiles one with the real triton and checks the binary and the
assembly. Each backend says how its targets are compiled and what their code must show
(`Backend.cross_target`, `cross_toolchain`, `binary_target`); nothing here names a backend.
"""
