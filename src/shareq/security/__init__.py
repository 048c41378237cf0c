"""Kafka's security model without I/O: listeners, SASL exchanges, SCRAM credentials and ACLs.

Everything here is plain objects and functions; the asyncio shell (``server/security.py``) owns
sockets, TLS contexts and the files the credentials and ACLs are kept in.
"""
