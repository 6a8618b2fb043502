"""Which requests a listener serves: the controller listener keeps the quorum's RPCs to itself.

Kafka (KIP-631, ``controller.listener.names``) serves the Raft RPCs, broker registration and
heartbeats, AlterPartition and forwarded requests on the controller listener only, with its own
security protocol, so a client that can reach a broker's client port cannot vote, fetch the
metadata log as a voter, register as a broker or pose as a forwarding broker.

``ListenerPolicy(controller_listeners)``: with an empty set (no ``controller.listener.names``
entry among ``listeners``) pylog keeps its single-listener mode, in which every listener serves
everything (docs/compatibility.md). Otherwise a request ``refusal`` names is answered by closing
the connection, as Kafka closes a connection that asks for an API its listener does not expose,
and ApiVersions on that listener leaves those APIs out.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

from broker.security.sasl.config import SaslListenerConfig
from pyspark_log.wire.api_keys import ApiKey
from pyspark_log.wire.versions import KRAFT_CONTROLLER_APIS

CONTROLLER_APIS = KRAFT_CONTROLLER_APIS


@dataclass(frozen=True)
class ListenerPolicy:
    """Where the controller-only requests are served (see the module docstring)."""

    controller_listeners: frozenset[str] = frozenset()
    sasl: Mapping[str, SaslListenerConfig] = field(default_factory=dict)  # SASL_* listeners by name

    def is_controller(self, listener: str) -> bool:
        return not self.controller_listeners or listener.upper() in self.controller_listeners

    def refusal(self, listener: str, api_key: int, *, forwarded: bool, metadata_fetch: bool) -> str | None:
        """Why a request must not be served on ``listener`` (None: serve it).

        ``forwarded``: the request carries the forwarding client id of ``broker.controller.forwarding``;
        ``metadata_fetch``: a Fetch of ``__cluster_metadata-0`` (KIP-595 replication).
        """
        if self.is_controller(listener):
            return None
        if api_key in CONTROLLER_APIS:
            what = ApiKey(api_key).name
        elif metadata_fetch:
            what = "Fetch of the metadata log"
        elif forwarded:
            what = "a forwarded request"
        else:
            return None
        names = ",".join(sorted(self.controller_listeners))
        return f"{what} is served only on the controller listener ({names}), not on {listener}"

    def api_versions(self, listener: str, entries: list[dict[str, int]]) -> list[dict[str, int]]:
        """The ApiVersions entries a connection on ``listener`` is told about."""
        if self.is_controller(listener):
            return entries
        return [entry for entry in entries if entry["api_key"] not in CONTROLLER_APIS]
