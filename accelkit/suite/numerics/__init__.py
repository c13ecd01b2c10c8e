"""Numerics: what a conformance answer is checked against, and in which mode it is computed.

Owns the float64 reference and the derived bound of the focused cases (`reference`) and
the strict numerics mode cases run in, with the dtypes a backend cannot run (`mode`).
The OpInfo verdict (`accelkit.suite.opinfo`) builds on it.

May import, inside `accelkit.suite`: `session` only.
"""
