"""Shortcut: ``from shareq.embedded import EmbeddedBroker``."""

from shareq.server.embedded import EmbeddedBroker

__all__ = ["EmbeddedBroker"]
