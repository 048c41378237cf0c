"""Persisters: durable homes for share-partition state, behind ``shareq.share.persister.Persister``."""
