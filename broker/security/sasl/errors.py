"""Errors of SASL authentication."""

from __future__ import annotations


class SaslFailure(Exception):
    """Authentication failed; the message goes to the client (SASL_AUTHENTICATION_FAILED) and
    the log, so it never holds a password."""
