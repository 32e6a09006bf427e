"""The Redis broker transport, with one fault of kombu's mended: a node's worker must live
through a Redis restart.

When the broker's connection is lost, Celery's consumer collects the transport (which lets
go of its connection) and then closes it; closing a channel restores the messages it took
and has not acknowledged, and a task that ends later acknowledges its message on the old
channel. With the connection gone both raised AttributeError, which no connection-error
guard catches: the worker stopped ("Unrecoverable error"), and the node with it. Found by
tests/e2e/test_redis_outage.py. Both are skipped where the transport has no connection
left.
"""

from __future__ import annotations

import logging

from kombu.transport import redis, virtual

log = logging.getLogger(__name__)


class QoS(redis.QoS):
    """Where the transport let go of its connection, a restore, an ack or a reject does not
    reach Redis: it keeps the message among the unacknowledged and hands it out again after
    the visibility timeout (a run_attempt sent again is refused by its fencing token)."""

    def restore_unacked(self, client=None):
        if client is None and self._gone():
            log.warning("the broker's connection is gone: %d message(s) taken and not "
                        "acknowledged come back after the visibility timeout",
                        len(self._delivered))
            return None
        return super().restore_unacked(client)

    def ack(self, delivery_tag):
        if self._gone():
            self._forget(delivery_tag, "acknowledged")
        else:
            super().ack(delivery_tag)

    def reject(self, delivery_tag, requeue=False):
        if self._gone():
            self._forget(delivery_tag, "rejected")
        else:
            super().reject(delivery_tag, requeue)

    def _gone(self) -> bool:
        return getattr(self.channel.connection, "client", None) is None

    def _forget(self, delivery_tag, what: str) -> None:
        log.warning("the broker's connection is gone: a message %s on it comes back after "
                    "the visibility timeout", what)
        virtual.QoS.ack(self, delivery_tag)  # this side's record of it only


class Channel(redis.Channel):
    QoS = QoS


class Transport(redis.Transport):
    Channel = Channel
