"""Message schemas kio does not ship, written in kio's generated style and registered by
``(api_key, version)`` in ``LOCAL_SCHEMAS`` (the codec cache consults it before kio)."""

from __future__ import annotations

from typing import Any

from .txn_share_acknowledge.v0 import request as _tsa_req
from .txn_share_acknowledge.v0 import response as _tsa_resp

TXN_SHARE_ACKNOWLEDGE = 93
"""KIP-1289's TxnShareAcknowledge. Another proposal eyes key 93 too: keep the key in this one place."""

LOCAL_SCHEMAS: dict[tuple[int, int], tuple[type[Any], type[Any]]] = {
    (TXN_SHARE_ACKNOWLEDGE, 0): (_tsa_req.TxnShareAcknowledgeRequest, _tsa_resp.TxnShareAcknowledgeResponse),
}
"""(api key, version) -> (request class, response class)."""
