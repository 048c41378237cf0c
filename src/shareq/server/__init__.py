"""The asyncio shell: listener, connections, handlers, timers, around the sans-I/O core."""

from .broker import Broker, BrokerStartError
from .context import Handler, RequestContext
from .embedded import EmbeddedBroker
from .handlers import HandlerTable, default_handlers

__all__ = [
    "Broker",
    "BrokerStartError",
    "EmbeddedBroker",
    "Handler",
    "HandlerTable",
    "RequestContext",
    "default_handlers",
]
