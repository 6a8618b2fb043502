"""What an ACL check and an ACL index rebuild cost on the event loop, by number of ACLs.

    .venv/bin/python bench/acl_authorize.py [--checks 20000]

For 10, 1000, 10000 and 100000 ACLs (LITERAL and PREFIXED topic ACLs of 50 principals), prints
the mean time of ``Authorizer.authorize`` for a principal holding an ACL on the topic, the time
to build the ``Authorizer`` (its index) from scratch, which the broker does after a bulk change,
and the time to update it by one added ACL (``Authorizer.updated``), which the broker does on
the first request after an ACL changes (``broker.security.acl.authority``). Pure CPU, no
broker: stable figures.
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from broker.security.acl.authorizer import Authorizer
from broker.security.acl.binding import AclBinding, Operation, PatternType, Permission, ResourceType


def acls(count: int) -> tuple[AclBinding, ...]:
    return tuple(
        AclBinding(ResourceType.TOPIC, f"topic-{i}", PatternType.LITERAL if i % 2 else PatternType.PREFIXED,
                   f"User:u{i % 50}", "*", Operation.READ, Permission.ALLOW)
        for i in range(count)
    )  # fmt: skip


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--checks", type=int, default=20000)
    args = parser.parse_args()
    print(f"{'ACLs':>8} {'check (us)':>12} {'index build (ms)':>18} {'update by one (ms)':>20}")
    for count in (10, 1000, 10000, 100000):
        bindings = acls(count)
        started = time.perf_counter()
        auth = Authorizer(bindings)
        build_ms = (time.perf_counter() - started) * 1000
        started = time.perf_counter()
        for _ in range(args.checks):
            auth.authorize("User:u3", "127.0.0.1", Operation.READ, ResourceType.TOPIC, "topic-3")
        check_us = (time.perf_counter() - started) / args.checks * 1e6
        extra = AclBinding(ResourceType.TOPIC, "extra", PatternType.LITERAL, "User:x", "*", Operation.READ,
                           Permission.ALLOW)  # fmt: skip
        started = time.perf_counter()
        auth.updated((*bindings, extra), [extra], [])
        update_ms = (time.perf_counter() - started) * 1000
        print(f"{count:>8} {check_us:>12.2f} {build_ms:>18.1f} {update_ms:>20.2f}")


if __name__ == "__main__":
    main()
