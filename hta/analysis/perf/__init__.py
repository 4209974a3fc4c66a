"""How close to the hardware: operator categories, FLOPs and bytes per call (the
performance models), achieved throughput against the device's roofline."""
