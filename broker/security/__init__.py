"""Security: listener security protocols, the settings pylog cannot honour yet, TLS, SASL, ACLs."""
