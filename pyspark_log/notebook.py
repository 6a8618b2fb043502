"""Settings of pylog's notebooks (``notebooks/``): Databricks widgets and secrets where the
notebook runs on Databricks (``dbutils`` exists), environment variables elsewhere.

    settings = NotebookSettings(globals().get("dbutils"))
    BOOTSTRAP = settings.get("bootstrap")                     # widget "bootstrap" / PYLOG_BOOTSTRAP
    BOOTSTRAP, local_broker = bootstrap_or_local_broker(spark, BOOTSTRAP)
    KAFKA_OPTIONS = settings.kafka_options(BOOTSTRAP)         # bootstrap.servers + kafka.* security

A setting ``name`` is the text widget ``name`` (created with its default the first time, as
``dbutils.widgets.text`` does) or the environment variable ``PYLOG_<NAME>``. Credentials are never
widgets: ``secret(name)`` reads ``dbutils.secrets.get(<secret_scope>, name)`` when the
``secret_scope`` setting names a scope, else ``PYLOG_<NAME>``.

Security, as Spark's Kafka connector takes it (``kafka.security.protocol``, ``kafka.sasl.*``,
``kafka.ssl.truststore.*``): ``security_protocol`` (PLAINTEXT, SSL, SASL_PLAINTEXT, SASL_SSL),
``sasl_mechanism`` (PLAIN, SCRAM-SHA-256, SCRAM-SHA-512) with the secrets ``sasl_username`` and
``sasl_password``, and ``ssl_truststore_location`` / ``ssl_truststore_type`` with the secret
``ssl_truststore_password``.

A notebook without a bootstrap setting starts its own broker on 127.0.0.1 only where Spark runs
in one process on this machine (a ``local`` master, not Databricks): on a cluster, executors on
other hosts would each reach their own loopback. There it stops with an error that names the
setting to give.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from pyspark_log.wire.jaas import PLAIN_LOGIN_MODULE, SCRAM_LOGIN_MODULE

if TYPE_CHECKING:
    from pyspark_log.embedded import EmbeddedBroker

__all__ = ["NotebookSettingError", "NotebookSettings", "bootstrap_or_local_broker"]

PROTOCOLS = ("PLAINTEXT", "SSL", "SASL_PLAINTEXT", "SASL_SSL")
MECHANISMS = ("PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512")


class NotebookSettingError(ValueError):
    """A notebook setting is missing or wrong; the message names the widget and the variable."""


def _where(name: str) -> str:
    return f"the {name!r} widget (Databricks) or PYLOG_{name.upper()}"


class NotebookSettings:
    """Widgets and secrets of ``dbutils`` when given, else the environment (see the module)."""

    def __init__(self, dbutils: Any = None, environ: Mapping[str, str] | None = None) -> None:
        self._dbutils = dbutils
        self._environ = os.environ if environ is None else environ

    @property
    def on_databricks(self) -> bool:
        return self._dbutils is not None

    def get(self, name: str, default: str = "", label: str | None = None) -> str:
        """The widget ``name`` (created with ``default``) on Databricks, else ``PYLOG_<NAME>``."""
        if self._dbutils is not None:
            self._dbutils.widgets.text(name, default, label or name)
            return str(self._dbutils.widgets.get(name)).strip()
        return self._environ.get(f"PYLOG_{name.upper()}", default).strip()

    def secret(self, name: str) -> str:
        """``dbutils.secrets.get(<secret_scope>, name)`` when a scope is set, else
        ``PYLOG_<NAME>``; empty when neither has it."""
        scope = self.get("secret_scope", "", "secret scope")
        if self._dbutils is not None and scope:
            return str(self._dbutils.secrets.get(scope=scope, key=name))
        return self._environ.get(f"PYLOG_{name.upper()}", "")

    def kafka_options(self, bootstrap: str) -> dict[str, str]:
        """``bootstrap.servers`` and the ``kafka.*`` security options of the source and sink."""
        options = {"bootstrap.servers": bootstrap}
        protocol = self.get("security_protocol", "PLAINTEXT", "security protocol").upper()
        if protocol not in PROTOCOLS:
            raise NotebookSettingError(f"{_where('security_protocol')} must be one of {', '.join(PROTOCOLS)}")
        if protocol == "PLAINTEXT":
            return options
        options["kafka.security.protocol"] = protocol
        if protocol.startswith("SASL_"):
            options.update(self._sasl_options())
        if protocol.endswith("SSL"):
            options.update(self._truststore_options())
        return options

    def _sasl_options(self) -> dict[str, str]:
        mechanism = self.get("sasl_mechanism", "PLAIN", "SASL mechanism").upper()
        if mechanism not in MECHANISMS:
            raise NotebookSettingError(f"{_where('sasl_mechanism')} must be one of {', '.join(MECHANISMS)}")
        username, password = self.secret("sasl_username"), self.secret("sasl_password")
        if not username:
            raise NotebookSettingError(
                "SASL needs a user: put 'sasl_username' and 'sasl_password' in the secret scope named by "
                f"{_where('secret_scope')}, or set PYLOG_SASL_USERNAME and PYLOG_SASL_PASSWORD"
            )
        module = PLAIN_LOGIN_MODULE if mechanism == "PLAIN" else SCRAM_LOGIN_MODULE
        jaas = f'{module} required username="{_jaas_quote(username)}" password="{_jaas_quote(password)}";'
        return {"kafka.sasl.mechanism": mechanism, "kafka.sasl.jaas.config": jaas}

    def _truststore_options(self) -> dict[str, str]:
        location = self.get("ssl_truststore_location", "", "truststore (empty: the system's CAs)")
        if not location:
            return {}
        options = {
            "kafka.ssl.truststore.location": location,
            "kafka.ssl.truststore.type": self.get("ssl_truststore_type", "PEM", "truststore type").upper(),
        }
        password = self.secret("ssl_truststore_password")
        if password:
            options["kafka.ssl.truststore.password"] = password
        return options


def _jaas_quote(value: str) -> str:
    return value.replace("\\", "\\\\").replace('"', '\\"')


def _spark_master(spark: Any) -> str | None:
    try:
        master = spark.conf.get("spark.master", None)
    except Exception:  # noqa: BLE001 - a session that hides its master is treated as a cluster
        return None
    return str(master) if master else None


def bootstrap_or_local_broker(spark: Any, bootstrap: str) -> tuple[str, EmbeddedBroker | None]:
    """``bootstrap`` when given; else a broker started for this notebook on 127.0.0.1, but only
    where Spark's executors share this machine (a ``local`` master outside Databricks)."""
    if bootstrap:
        return bootstrap, None
    master = _spark_master(spark)
    if os.environ.get("DATABRICKS_RUNTIME_VERSION") or master is None or not master.startswith("local"):
        raise NotebookSettingError(
            f"no bootstrap servers: set {_where('bootstrap')} to your brokers' host:port list. "
            f"A broker started by the notebook would listen on 127.0.0.1, which executors on other hosts "
            f"cannot reach (Spark master: {master or 'unknown'})"
        )
    from pyspark_log.embedded import EmbeddedBroker

    broker = EmbeddedBroker().start()
    return broker.bootstrap_servers, broker
