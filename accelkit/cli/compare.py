"""`accelkit compare`."""
