"""The storage tool's pure parts (issue #29): ``--add-scram`` parsing with Kafka's messages,
``--release-version``, the start-up check of ``meta.properties`` (``check_formatted``), the bootstrap
checkpoint round trip into a fresh metadata file, and UnregisterBrokerRecord on the metadata state.
The same behaviour against Kafka's tool: tests/integration/test_storage_tool.py."""

from __future__ import annotations

import base64
from pathlib import Path

import pytest

from broker.controller.local import LocalController
from broker.meta_properties import (
    MetaProperties,
    MetaPropertiesError,
    bootstrap_records,
    check_formatted,
    new_cluster_id,
    write_meta,
)
from broker.metadata.cluster_state import ClusterState
from broker.metadata.image import BrokerInfo
from broker.metadata.records import RegisterBrokerRecord, UnregisterBrokerRecord, encode_records
from broker.metadata.replay import apply_payload
from broker.security.sasl.scram import salted_password
from broker.storage import StorageToolError, main, parse_scram, release_version

pytestmark = pytest.mark.unit

CLUSTER = "cGlsb2ctc3RvcmFnZS10ZXN"


def test_add_scram_with_a_password_salts_it_with_kafka_defaults() -> None:
    cred = parse_scram("SCRAM-SHA-256=[name=alice,password=alice-secret]")
    assert (cred.name, cred.mechanism, cred.iterations, len(cred.salt)) == ("alice", "SCRAM-SHA-256", 4096, 32)
    assert cred.salted_password == salted_password("SCRAM-SHA-256", "alice-secret", cred.salt, 4096)


def test_add_scram_with_a_salted_password_keeps_it() -> None:
    cred = parse_scram('SCRAM-SHA-512=[name=alice,iterations=8192,salt="N3E=",saltedpassword="YCE="]')
    assert (cred.salt, cred.salted_password, cred.iterations) == (base64.b64decode("N3E="), b"`!", 8192)


@pytest.mark.parametrize(
    ("argument", "message"),
    [
        ("SCRAM-SHA-256", "Failed to find equals sign in SCRAM argument 'SCRAM-SHA-256'"),
        ("SCRAM-SHA-1=[name=a,password=x]", "The add-scram mechanism SCRAM-SHA-1 is not supported."),
        ("SCRAM-SHA-256=name=a,password=x", "Expected configuration string to start with ["),
        ("SCRAM-SHA-256=[password=x]", "You must supply 'name' to add-scram"),
        ("SCRAM-SHA-256=[name=a]", "You must supply one of 'password' or 'saltedpassword' to add-scram"),
        ("SCRAM-SHA-256=[name=a,password=x,bogus=1]", "Unknown SCRAM configurations: bogus"),
        ("SCRAM-SHA-256=[name=a,saltedpassword=YCE=]", "You must supply 'salt' with 'saltedpassword' to add-scram"),
        ("SCRAM-SHA-256=[name=a,password=x,iterations=100]",
         "The 'iterations' value must be >= 4096 for add-scram using SCRAM_SHA_256"),
        ("SCRAM-SHA-512=[name=a,password=x,iterations=99999]",
         "The 'iterations' value must be <= 16384 for add-scram using SCRAM_SHA_512"),
    ],
)  # fmt: skip
def test_bad_add_scram_arguments_get_kafkas_messages(argument: str, message: str) -> None:
    with pytest.raises(StorageToolError) as info:
        parse_scram(argument)
    assert str(info.value) == message


def test_release_versions() -> None:
    assert release_version("3.9") == "3.9-IV0"
    assert release_version("4.0") == "4.0-IV3"
    assert release_version("3.7-IV2") == "3.7-IV2"
    with pytest.raises(StorageToolError, match="is not yet stable"):
        release_version("4.2-IV1")
    with pytest.raises(StorageToolError, match=r"The minimum version is 3\.3-IV3"):
        release_version("3.0-IV1")


def test_check_formatted_refuses_what_kafka_refuses(tmp_path: Path) -> None:
    dirs = [str(tmp_path / "a"), str(tmp_path / "b")]
    with pytest.raises(MetaPropertiesError, match=r"No readable meta\.properties files found.*pylog storage format"):
        check_formatted(dirs, 1)
    write_meta(dirs[0], MetaProperties(CLUSTER, 1, new_cluster_id()))
    with pytest.raises(MetaPropertiesError, match=r"No `meta\.properties` found in .*b"):
        check_formatted(dirs, 1)
    write_meta(dirs[1], MetaProperties("AAAAAAAAAAAAAAAAAAAAAA", 1, new_cluster_id()))
    with pytest.raises(MetaPropertiesError, match=f"Invalid cluster.id in: .*Expected {CLUSTER}, but read AAAA"):
        check_formatted(dirs, 1)
    write_meta(dirs[1], MetaProperties(CLUSTER, 1, new_cluster_id()))
    assert check_formatted(dirs, 1) == CLUSTER
    assert check_formatted(dirs, 1, CLUSTER) == CLUSTER
    with pytest.raises(MetaPropertiesError, match="Stored node id 1 doesn't match previous node id 2"):
        check_formatted(dirs, 2)
    with pytest.raises(MetaPropertiesError, match="formatted for cluster"):
        check_formatted(dirs, 1, "AAAAAAAAAAAAAAAAAAAAAA")


def test_format_then_a_fresh_single_node_has_the_scram_users(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    logs = tmp_path / "logs"
    argv = ["format", "--data-dir", str(logs), "-t", CLUSTER, "-S", "SCRAM-SHA-256=[name=alice,password=secret]"]
    assert main(argv) == 0
    assert capsys.readouterr().out == f"Formatting metadata directory {logs} with metadata.version 4.1-IV1.\n"
    assert main(argv) == 1
    assert "is already formatted. Use --ignore-formatted" in capsys.readouterr().err
    assert main([*argv, "-g"]) == 0
    assert capsys.readouterr().out == "All of the log directories are already formatted.\n"
    records = bootstrap_records([str(logs)])
    assert [(r.name, r.mechanism) for r in records] == [("alice", "SCRAM-SHA-256")]  # type: ignore[union-attr]
    controller = LocalController(logs, CLUSTER, BrokerInfo(1, "127.0.0.1", 9092), bootstrap=records)
    assert ("alice", "SCRAM-SHA-256") in controller.image().scram
    assert main(["info", "--data-dir", str(logs)]) == 0
    assert f"Found metadata: {{cluster.id={CLUSTER}, directory.id=" in capsys.readouterr().out


def test_unregister_broker_record_removes_that_registration_only() -> None:
    state = ClusterState()
    for offset, b in enumerate((1, 2)):
        state = apply_payload(state, offset, encode_records([RegisterBrokerRecord(b, f"i{b}", "127.0.0.1", 9000 + b)]))
    stale = apply_payload(state, 5, encode_records([UnregisterBrokerRecord(2, 99)]))  # another epoch: ignored
    assert set(stale.registrations) == {1, 2}
    gone = apply_payload(state, 5, encode_records([UnregisterBrokerRecord(2, state.registrations[2].epoch)]))
    assert set(gone.registrations) == {1}
