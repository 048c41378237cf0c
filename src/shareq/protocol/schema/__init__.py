"""Message schemas kio does not ship, written in kio's generated style and registered by
``(api_key, version)`` in ``LOCAL_SCHEMAS`` (the codec cache consults it before kio)."""

from __future__ import annotations

from typing import Any

from kio.index import load_request_schema, load_response_schema

from ..api_keys import DESCRIBE_SHARE_GROUP_OFFSETS, SHARE_ACKNOWLEDGE, TXN_SHARE_ACKNOWLEDGE
from .describe_share_group_offsets.v1 import response as _dsgo_resp
from .share_acknowledge.v1 import request as _sa1_req
from .share_acknowledge.v2 import request as _sa2_req
from .txn_share_acknowledge.v0 import request as _tsa_req
from .txn_share_acknowledge.v0 import response as _tsa_resp

LOCAL_SCHEMAS: dict[tuple[int, int], tuple[type[Any], type[Any]]] = {
    (TXN_SHARE_ACKNOWLEDGE, 0): (_tsa_req.TxnShareAcknowledgeRequest, _tsa_resp.TxnShareAcknowledgeResponse),
    # Kafka's request; the response with shareq's tagged TX_PENDING field (see the module).
    (DESCRIBE_SHARE_GROUP_OFFSETS, 1): (
        load_request_schema(DESCRIBE_SHARE_GROUP_OFFSETS, 1),
        _dsgo_resp.DescribeShareGroupOffsetsResponse,
    ),
    # Kafka's response; the request with shareq's tagged release delay per batch (see the modules).
    (SHARE_ACKNOWLEDGE, 1): (_sa1_req.ShareAcknowledgeRequest, load_response_schema(SHARE_ACKNOWLEDGE, 1)),
    (SHARE_ACKNOWLEDGE, 2): (_sa2_req.ShareAcknowledgeRequest, load_response_schema(SHARE_ACKNOWLEDGE, 2)),
}
"""(api key, version) -> (request class, response class)."""
