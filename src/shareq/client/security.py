"""How the client reaches a secured listener: TLS (``ssl`` of the standard library) and SASL
(PLAIN, or SCRAM-SHA-256/512 through ``scramp``), with librdkafka's names for the settings.

``ClientSecurity.from_config({"security.protocol": "SASL_SSL", "sasl.mechanism": "SCRAM-SHA-512",
"sasl.username": "alice", "sasl.password": "...", "ssl.ca.location": "ca.pem"})``.
"""

from __future__ import annotations

import ssl
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from scramp import ScramClient, ScramException

from shareq.protocol.api_keys import SASL_AUTHENTICATE, SASL_HANDSHAKE

from .errors import KafkaError


@dataclass(frozen=True, slots=True, kw_only=True)
class ClientSecurity:
    protocol: str = "PLAINTEXT"
    mechanism: str = "PLAIN"
    username: str | None = None
    password: str | None = None
    ca_location: str | None = None
    certificate_location: str | None = None
    key_location: str | None = None
    key_password: str | None = None
    check_hostname: bool = True

    @classmethod
    def from_config(cls, config: Mapping[str, Any]) -> ClientSecurity:
        """From librdkafka's setting names (unknown keys are ignored)."""
        return cls(
            protocol=str(config.get("security.protocol", "PLAINTEXT")).upper(),
            mechanism=str(config.get("sasl.mechanism", config.get("sasl.mechanisms", "PLAIN"))).upper(),
            username=config.get("sasl.username"),
            password=config.get("sasl.password"),
            ca_location=config.get("ssl.ca.location"),
            certificate_location=config.get("ssl.certificate.location"),
            key_location=config.get("ssl.key.location"),
            key_password=config.get("ssl.key.password"),
            check_hostname=str(config.get("ssl.endpoint.identification.algorithm", "https")) != "none",
        )

    @property
    def tls(self) -> bool:
        return self.protocol in ("SSL", "SASL_SSL")

    @property
    def sasl(self) -> bool:
        return self.protocol in ("SASL_PLAINTEXT", "SASL_SSL")

    def ssl_context(self) -> ssl.SSLContext:
        context = ssl.create_default_context(cafile=self.ca_location)
        context.check_hostname = self.check_hostname
        if self.certificate_location:
            context.load_cert_chain(self.certificate_location, self.key_location, self.key_password)
        return context


Roundtrip = Callable[[Any], Any]


def authenticate(
    security: ClientSecurity, roundtrip: Roundtrip, request_module: Callable[[int, int], Any]
) -> None:
    """SaslHandshake v1 then SaslAuthenticate until the mechanism completes; raises ``KafkaError``
    (SASL_AUTHENTICATION_FAILED with the broker's message) when the broker refuses."""
    handshake = request_module(SASL_HANDSHAKE, 1).SaslHandshakeRequest(mechanism=security.mechanism)
    response = roundtrip(handshake)
    if int(response.error_code):
        raise KafkaError(
            response.error_code, f"broker offers {list(response.mechanisms)}", context="SaslHandshake"
        )
    module = request_module(SASL_AUTHENTICATE, 1)

    def step(token: bytes) -> bytes:
        answer = roundtrip(module.SaslAuthenticateRequest(auth_bytes=token))
        if int(answer.error_code):
            raise KafkaError(answer.error_code, answer.error_message, context="SaslAuthenticate")
        return bytes(answer.auth_bytes)

    user, password = security.username or "", security.password or ""
    if security.mechanism == "PLAIN":
        step(b"\x00" + user.encode() + b"\x00" + password.encode())
        return
    client = ScramClient([security.mechanism], user, password)
    try:
        server_first = step(client.get_client_first().encode()).decode()
        client.set_server_first(server_first)
        server_final = step(client.get_client_final().encode()).decode()
        client.set_server_final(server_final)
    except ScramException as error:
        raise KafkaError(58, f"SCRAM exchange failed: {error}", context="SaslAuthenticate") from error
