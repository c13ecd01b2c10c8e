"""`accelkit test`."""
