"""The share-partition engine: sans-I/O queue semantics over a partition log."""
