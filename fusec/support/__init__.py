"""The bottom layer: errors, log records, counters, a bounded cache and progress bars; imports nothing of fusec."""
