"""The asyncio shell: listener, connections, handlers, timers, around the sans-I/O core."""

from .broker import Broker
from .context import Handler, RequestContext
from .embedded import EmbeddedBroker
from .handlers import HandlerTable, default_handlers
from .start_errors import BrokerStartError

__all__ = [
    "Broker",
    "BrokerStartError",
    "EmbeddedBroker",
    "Handler",
    "HandlerTable",
    "RequestContext",
    "default_handlers",
]
