"""Turning a red case into an answer: standalone reproducers (`accelkit repro`), the first
bad torch build (`accelkit bisect`) and value differences between two environments
(`accelkit diff`). The CLI modules are thin; the logic is here."""
