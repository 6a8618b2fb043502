"""Request handlers, one module per API family."""
