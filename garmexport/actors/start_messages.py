"""The start messages of the exporter and reader actors: they hand an actor live parts of
its process once, typed (the subscribed Kafka source, the forced stop's snapshot), so they
do not pickle, unlike the messages of :mod:`garmexport.pipeline.messages`: only the
in-process actor system, which passes messages by reference, delivers them.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

from garmexport.settings.config import Config

if TYPE_CHECKING:  # live parts, named for their type only
    from garmexport.kafka.source import KafkaSource
    from garmexport.pipeline.unfinished import Unfinished


# external caller -> exporter (top actor)
@dataclass(frozen=True)
class StartExport:
    config: Config
    instance: str
    #: a KafkaSource already subscribed (the join under way), or None to subscribe now;
    #: a live object, which the in-process actor system passes as it is
    source: KafkaSource | None = None
    #: the Unfinished the reader gives its work pool's count of open files, for a forced
    #: stop's last line (a live object too), or None
    unfinished: Unfinished | None = None


# exporter -> reader
@dataclass(frozen=True)
class StartReader:
    config: Config
    instance: str
    exporter: object  # the top actor's address
    source: KafkaSource | None = None  # see StartExport
    unfinished: Unfinished | None = None  # see StartExport
