"""shareq: a Kafka-compatible broker built around share groups (KIP-932)."""

__version__ = "0.1.0"
