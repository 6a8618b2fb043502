"""``pyspark_log.notebook``: the notebooks' settings from Databricks widgets and secrets (a
stand-in with dbutils' call shapes: ``widgets.text/get``, ``secrets.get(scope=, key=)``) or from
``PYLOG_*`` variables, the ``kafka.*`` security options they become, and the refusal to start a
loopback broker for a Spark that is not local."""

from __future__ import annotations

from typing import Any

import pytest

from pyspark_log.notebook import NotebookSettingError, NotebookSettings, bootstrap_or_local_broker
from pyspark_log.wire.jaas import parse_jaas

pytestmark = pytest.mark.unit


class Widgets:
    def __init__(self, values: dict[str, str]) -> None:
        self.values = values
        self.created: dict[str, str] = {}

    def text(self, name: str, default: str, label: str) -> None:
        self.created[name] = default
        self.values.setdefault(name, default)

    def get(self, name: str) -> str:
        return self.values[name]


class Secrets:
    def __init__(self, scopes: dict[str, dict[str, str]]) -> None:
        self.scopes = scopes

    def get(self, scope: str, key: str) -> str:
        return self.scopes[scope][key]


class DbUtils:
    def __init__(self, widgets: dict[str, str], secrets: dict[str, dict[str, str]]) -> None:
        self.widgets = Widgets(widgets)
        self.secrets = Secrets(secrets)


def test_environment_variables_outside_databricks() -> None:
    settings = NotebookSettings(None, {"PYLOG_BOOTSTRAP": " b1:9092 ", "PYLOG_TOPIC": "t"})
    assert settings.get("bootstrap") == "b1:9092"
    assert settings.get("topic", "page-views") == "t"
    assert settings.get("table_path", "") == ""
    assert settings.kafka_options("b1:9092") == {"bootstrap.servers": "b1:9092"}


def test_widgets_are_created_with_their_defaults_and_read_on_databricks() -> None:
    dbutils = DbUtils({"bootstrap": "b1:9092,b2:9092"}, {})
    settings = NotebookSettings(dbutils, {"PYLOG_BOOTSTRAP": "ignored:1"})
    assert settings.get("bootstrap") == "b1:9092,b2:9092"
    assert settings.get("topic", "page-views") == "page-views"
    assert dbutils.widgets.created == {"bootstrap": "", "topic": "page-views"}


def test_sasl_ssl_from_a_secret_scope() -> None:
    dbutils = DbUtils(
        {"security_protocol": "sasl_ssl", "sasl_mechanism": "SCRAM-SHA-512", "secret_scope": "kafka",
         "ssl_truststore_location": "/Volumes/main/certs/ca.p12", "ssl_truststore_type": "pkcs12"},
        {"kafka": {"sasl_username": "etl", "sasl_password": 'p"w\\d', "ssl_truststore_password": "tp"}},
    )  # fmt: skip
    options = NotebookSettings(dbutils, {}).kafka_options("b1:9093")
    jaas = parse_jaas(options.pop("kafka.sasl.jaas.config"))
    assert jaas.login_module == "org.apache.kafka.common.security.scram.ScramLoginModule"
    assert jaas.options == {"username": "etl", "password": 'p"w\\d'}
    assert options == {
        "bootstrap.servers": "b1:9093",
        "kafka.security.protocol": "SASL_SSL",
        "kafka.sasl.mechanism": "SCRAM-SHA-512",
        "kafka.ssl.truststore.location": "/Volumes/main/certs/ca.p12",
        "kafka.ssl.truststore.type": "PKCS12",
        "kafka.ssl.truststore.password": "tp",
    }
    assert "sasl_password" not in dbutils.widgets.created  # credentials are never widgets


def test_sasl_plain_from_the_environment() -> None:
    env = {"PYLOG_SECURITY_PROTOCOL": "SASL_PLAINTEXT", "PYLOG_SASL_USERNAME": "u", "PYLOG_SASL_PASSWORD": "p"}
    options = NotebookSettings(None, env).kafka_options("b:1")
    assert parse_jaas(options["kafka.sasl.jaas.config"]).options == {"username": "u", "password": "p"}
    assert options["kafka.sasl.mechanism"] == "PLAIN"
    assert "kafka.ssl.truststore.location" not in options


@pytest.mark.parametrize(
    ("env", "message"),
    [
        ({"PYLOG_SECURITY_PROTOCOL": "SSH"}, "'security_protocol' widget .* or PYLOG_SECURITY_PROTOCOL"),
        ({"PYLOG_SECURITY_PROTOCOL": "SASL_SSL"}, "PYLOG_SASL_USERNAME"),
        ({"PYLOG_SECURITY_PROTOCOL": "SASL_SSL", "PYLOG_SASL_MECHANISM": "GSSAPI"}, "PYLOG_SASL_MECHANISM"),
    ],
)
def test_bad_settings_name_the_widget_and_the_variable(env: dict[str, str], message: str) -> None:
    with pytest.raises(NotebookSettingError, match=message):
        NotebookSettings(None, env).kafka_options("b:1")


class Conf:
    def __init__(self, master: str | None) -> None:
        self.master = master

    def get(self, key: str, default: Any = None) -> Any:
        assert key == "spark.master"
        return self.master if self.master is not None else default


class Session:
    def __init__(self, master: str | None) -> None:
        self.conf = Conf(master)


def test_given_bootstrap_servers_are_used_as_they_are() -> None:
    assert bootstrap_or_local_broker(Session("spark://cluster:7077"), "b1:9092") == ("b1:9092", None)


@pytest.mark.parametrize("master", ["spark://cluster:7077", "yarn", None])
def test_no_loopback_broker_for_executors_on_other_hosts(master: str | None) -> None:
    with pytest.raises(NotebookSettingError, match=r"'bootstrap' widget .* or PYLOG_BOOTSTRAP"):
        bootstrap_or_local_broker(Session(master), "")


def test_no_loopback_broker_on_databricks(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("DATABRICKS_RUNTIME_VERSION", "17.3")
    with pytest.raises(NotebookSettingError, match=r"127\.0\.0\.1"):
        bootstrap_or_local_broker(Session("local[8]"), "")
