"""Issue #15, first step: a broker given security settings it cannot honour exits at start-up with a
message naming each key, and never serves (plaintext, unauthenticated) on the configured port."""

from __future__ import annotations

import socket
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.integration


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def run_broker(tmp_path: Path, properties: str) -> subprocess.CompletedProcess[str]:
    config = tmp_path / "server.properties"
    config.write_text(properties, encoding="utf-8")
    argv = [sys.executable, "-m", "broker", "--config", str(config), "--data-dir", str(tmp_path / "logs")]
    return subprocess.run(argv, capture_output=True, text=True, timeout=120, check=False)


def test_sasl_ssl_listener_with_ssl_sasl_and_acl_keys_refuses_to_start(tmp_path: Path) -> None:
    """The issue's reproduction: the broker used to print 'ready … listeners=SASL_SSL://…' and serve
    plaintext with no authentication there."""
    port = free_port()
    done = run_broker(
        tmp_path,
        f"listeners=SASL_SSL://127.0.0.1:{port}\n"
        "sasl.jaas.config=org.apache.kafka.common.security.scram.ScramLoginModule required password=secret;\n"
        "ssl.provider=SunJSSE\n"
        "sasl.kerberos.service.name=kafka\n"
        "authorizer.class.name=com.example.CustomAuthorizer\n"
        "super.users=User:admin\n",
    )
    assert done.returncode != 0
    assert "ready" not in done.stdout
    for named in (
        "sasl.jaas.config",
        "ssl.provider",
        "sasl.kerberos.service.name",
        "authorizer.class.name",
    ):
        assert named in done.stderr, done.stderr
    assert "secret" not in done.stderr  # a refused key is named, its value (a password) is not
    with pytest.raises(OSError), socket.create_connection(("127.0.0.1", port), timeout=2):
        pass  # nothing listens on the port


def test_sasl_listener_without_usable_mechanisms_refuses_to_start(tmp_path: Path) -> None:
    """Never serve a SASL_* port without authentication: no mechanism, or one not served, stops start-up."""
    done = run_broker(
        tmp_path, "listeners=CLIENT://127.0.0.1:0\nlistener.security.protocol.map=CLIENT:SASL_PLAINTEXT\n"
    )
    assert done.returncode != 0
    assert "listener CLIENT is a SASL listener: set sasl.enabled.mechanisms" in done.stderr, done.stderr
    kerberos = run_broker(tmp_path, "listeners=SASL_PLAINTEXT://127.0.0.1:0\nsasl.enabled.mechanisms=GSSAPI\n")
    assert kerberos.returncode != 0
    assert "sasl.enabled.mechanisms: GSSAPI cannot be served" in kerberos.stderr, kerberos.stderr
    no_users = run_broker(tmp_path, "listeners=SASL_PLAINTEXT://127.0.0.1:0\nsasl.enabled.mechanisms=PLAIN\n")
    assert "listener.name.sasl_plaintext.plain.sasl.jaas.config is required" in no_users.stderr, no_users.stderr


def test_ssl_listener_with_an_unreadable_keystore_refuses_to_start(tmp_path: Path) -> None:
    """A TLS listener that cannot get its key never serves: start-up names the key."""
    done = run_broker(
        tmp_path,
        "listeners=SSL://127.0.0.1:0\nssl.keystore.type=PEM\nssl.keystore.location=/nonexistent/broker.pem\n",
    )
    assert done.returncode != 0
    assert "ssl.keystore.location (listener SSL): cannot read /nonexistent/broker.pem" in done.stderr, done.stderr
    jks = run_broker(tmp_path, "listeners=SSL://127.0.0.1:0\nssl.keystore.location=/etc/kafka/broker.jks\n")
    assert "ssl.keystore.type (listener SSL)=JKS is not supported: use PEM or PKCS12" in jks.stderr, jks.stderr


def test_a_sasl_inter_broker_listener_without_the_nodes_own_login_refuses_to_start(tmp_path: Path) -> None:
    """The node must be able to log in where it connects: a SASL inter-broker listener needs
    sasl.mechanism.inter.broker.protocol (Kafka's default GSSAPI is not spoken) and the login in
    the listener's JAAS value; start-up names the key and never binds the port."""
    port = free_port()
    base = (
        "process.roles=broker,controller\nnode.id=1\ncontroller.listener.names=CONTROLLER\n"
        f"listeners=INTERNAL://127.0.0.1:{port},CONTROLLER://127.0.0.1:{free_port()}\n"
        "listener.security.protocol.map=INTERNAL:SASL_PLAINTEXT,CONTROLLER:PLAINTEXT\n"
        "sasl.enabled.mechanisms=PLAIN\n"
        "listener.name.internal.plain.sasl.jaas.config=org.apache.kafka.common.security.plain.PlainLoginModule "
        'required user_admin="hunter2";\n'
    )
    done = run_broker(tmp_path, base)
    assert done.returncode != 0
    assert "sasl.mechanism.inter.broker.protocol is not set" in done.stderr, done.stderr
    no_login = run_broker(tmp_path, base + "sasl.mechanism.inter.broker.protocol=PLAIN\n")
    assert no_login.returncode != 0
    assert 'listener.name.internal.plain.sasl.jaas.config has no username="..."' in no_login.stderr, no_login.stderr
    assert "hunter2" not in done.stderr + no_login.stderr
    with pytest.raises(OSError), socket.create_connection(("127.0.0.1", port), timeout=2):
        pass
