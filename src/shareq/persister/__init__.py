"""Persisters: durable share-partition state behind the ``shareq.share.persister.Persister`` protocol."""
