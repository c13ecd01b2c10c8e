"""`accelkit doctor`."""
