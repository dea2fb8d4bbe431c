"""The sidecar's Thrift service (``thrift/sidecar.thrift``): hqueue errors become the
IDL's typed exceptions at this boundary."""

from __future__ import annotations

from typing import Any

from hqueue.errors import InvalidArgumentError, NoQueueError, NotOwnerError, UnavailableError
from hqueue.idl import load
from sidecar.core import Sidecar

__all__ = ["SidecarHandler", "sidecar_idl"]


def sidecar_idl() -> Any:
    """Return the sidecar's Thrift module."""
    return load("sidecar")


class SidecarHandler:
    """``HQueueSidecar`` RPCs over a :class:`Sidecar`."""

    def __init__(self, sidecar: Sidecar) -> None:
        self.sidecar = sidecar
        self.idl = sidecar_idl()

    def put(self, queue: str, batch: Any) -> Any:
        idl = self.idl
        if batch is None or batch.values is None:
            raise idl.TInvalidMessage(message="the batch has no values", index=-1)
        try:
            timestamps, sequences = self.sidecar.put(
                queue, batch.values, batch.topics or [], batch.partitions or [])
        except NotOwnerError as exc:
            raise idl.TNotOwner(message=str(exc), partition=exc.partition,
                                ownerAddress=exc.owner) from None
        except NoQueueError as exc:
            raise idl.TQueueNotFound(message=str(exc)) from None
        except InvalidArgumentError as exc:
            raise idl.TInvalidMessage(message=str(exc),
                                      index=getattr(exc, "index", -1)) from None
        except UnavailableError as exc:
            raise idl.TUnavailable(message=str(exc)) from None
        return idl.TMessageIds(timestamps=timestamps, sequences=sequences)

    def scan(self, queue: str, request: Any) -> Any:
        idl = self.idl
        try:
            keys, topics, values = self.sidecar.scan(
                queue, request.startRow or b"", request.stopRow or b"", request.topics,
                request.limit or 0)
        except NoQueueError as exc:
            raise idl.TQueueNotFound(message=str(exc)) from None
        except InvalidArgumentError as exc:
            raise idl.TInvalidMessage(message=str(exc),
                                      index=getattr(exc, "index", -1)) from None
        except UnavailableError as exc:
            raise idl.TUnavailable(message=str(exc)) from None
        return idl.TMessageColumns(rowkeys=keys, topics=topics, values=values)

    def status(self) -> Any:
        idl = self.idl
        partitions = {
            queue: [
                idl.TPartitionStatus(
                    partition=p, epoch=epoch,
                    newest=None if newest is None else idl.TMessageId(
                        timestamp=newest.timestamp, sequence=newest.sequence))
                for p, (epoch, newest) in owned.items()
            ]
            for queue, owned in self.sidecar.status().items()
        }
        return idl.TSidecarStatus(sidecar=self.sidecar.id, address=self.sidecar.address,
                                  leader=self.sidecar.leading, partitions=partitions)
