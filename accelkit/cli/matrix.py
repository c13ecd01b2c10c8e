"""`accelkit matrix`."""
