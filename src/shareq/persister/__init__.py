"""Persisters: durable homes for share-partition state."""
