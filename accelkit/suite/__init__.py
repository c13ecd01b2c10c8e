"""The shared suite: conformance/ and perf/ cases, the pytest plugin, and the runner."""
