"""The broker's metrics, served at ``metrics.port`` in the Prometheus text format through
prometheus-client: hot-path counters (``instruments``), what a request adds (``requests``), the
event loop's lag and busy fraction (``loop``), collectors over the broker's state (``collectors``
and the subsystems' ``metrics`` modules), the renderer (``exposition``) and the endpoint (``http``).
Every metric, its meaning and its Kafka MBean: docs/operations.md, "Metrics".
"""
