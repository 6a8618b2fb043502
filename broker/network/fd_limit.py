"""The open-file limit: raised to the hard limit at start-up, both logged.

Every connection costs a descriptor; with the common soft limit of 1,024 a flood of idle
connections exhausted the broker (issue 16). Raising the soft limit to the hard limit (what a
process may do without privileges) plus ``max.connections.per.ip`` keeps one address from using
them all.
"""

from __future__ import annotations

import logging
import resource

log = logging.getLogger(__name__)


def raise_open_file_limit() -> tuple[int, int]:
    """Set the soft RLIMIT_NOFILE to the hard one; returns the (soft, hard) limits now in force."""
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    target = hard if hard != resource.RLIM_INFINITY else max(soft, 1 << 20)
    if soft != resource.RLIM_INFINITY and soft < target:
        try:
            resource.setrlimit(resource.RLIMIT_NOFILE, (target, hard))
        except (ValueError, OSError) as exc:
            log.warning("could not raise the open-file limit from %d to %d: %s", soft, target, exc)
            return soft, hard
        log.info("open-file limit: soft %d raised to the hard limit %d", soft, target)
        return target, hard
    log.info("open-file limit: soft %d, hard %d", soft, hard)
    return soft, hard
