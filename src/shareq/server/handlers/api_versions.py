"""ApiVersions: the versions advertised are exactly those with a registered handler; v3+ also
carries the supported and finalized features (``server/features.py``)."""

from __future__ import annotations

from typing import Any

from kio.schema.errors import ErrorCode

from shareq.protocol import VersionRange, api_version_entries
from shareq.protocol.api_keys import API_VERSIONS

from ..context import NO_THROTTLE, RequestContext
from ..features import FINALIZED_FEATURES_EPOCH, finalized_features, supported_features


def handle_api_versions(request: Any, ctx: RequestContext) -> Any:
    if ctx.version >= 5:
        refused = _target_check(request, ctx)
        if refused is not None:  # answered with nothing else, as Kafka
            return ctx.build(error_code=refused, api_keys=(), throttle_time=NO_THROTTLE)
    features: dict[str, Any] = {}
    if ctx.version >= 3:
        features = {
            "supported_features": tuple(
                ctx.build(
                    "SupportedFeatureKey",
                    name=f.name,
                    min_version=f.min_supported,
                    max_version=f.max_supported,
                )
                for f in supported_features(ctx.version)
            ),
            "finalized_features_epoch": FINALIZED_FEATURES_EPOCH,
            "finalized_features": tuple(
                ctx.build(
                    "FinalizedFeatureKey",
                    name=f.name,
                    max_version_level=f.finalized,
                    min_version_level=f.finalized,
                )
                for f in finalized_features(ctx.version)
            ),
            "zk_migration_ready": False,
        }
    return ctx.build(
        error_code=ErrorCode.none,
        api_keys=api_version_entries(ctx.codec.response_module, ctx.broker.handlers.versions),
        throttle_time=NO_THROTTLE,
        **features,
    )


def _target_check(request: Any, ctx: RequestContext) -> ErrorCode | None:
    """KIP-1242: a v5 request may name the cluster and the node it means to reach, both or
    neither (one alone is INVALID_REQUEST); a broker that is not that node of that cluster (a
    client holding an address another broker had) answers REBOOTSTRAP_REQUIRED, and the client
    starts again from its bootstrap servers."""
    cluster, node = request.cluster_id, request.node_id
    if cluster is None and node < 0:
        return None
    if cluster is None or node < 0:
        return ErrorCode.invalid_request
    if cluster != ctx.broker.topics.cluster_id or node != ctx.broker.node_id:
        return ErrorCode.rebootstrap_required
    return None


HANDLERS = {API_VERSIONS: (VersionRange(0, 5), handle_api_versions)}
