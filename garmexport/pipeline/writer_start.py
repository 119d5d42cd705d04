"""A writer actor's start: the parts of its process it builds its writer on, typed.

Every writer of one exporter process shares three parts, which
:func:`garmexport.actors.exporter_parts.assemble` builds once: the store (one set of
connections), the store's one back-off (a failing store is waited out once, not once per
writer) and the :class:`~garmexport.pipeline.writer_work.WriterWork` whose executor runs
the writers' jobs. :class:`StartWriter` hands them to a new writer actor as one
:class:`WriterSite`, with the values that say which writer it is.

They are live objects, not values, so ``StartWriter`` does not pickle, unlike the messages
of :mod:`garmexport.pipeline.messages` (it lives here, with the parts it carries): only the
in-process actor system, which passes messages by reference, can deliver it, as it delivers
``StartReader`` with the subscribed Kafka source. That is the system an exporter runs;
readers in parallel are processes of their own, each with its own actor system and its own
parts (DESIGN.md 9.8). Typed, so a wrong part is a type error where it is built rather than
a check at run time; and no process-global registry holds them.
"""

from __future__ import annotations

from dataclasses import dataclass

from garmexport.pipeline.writer_work import WriterWork
from garmexport.protocol.backoff import Backoff
from garmexport.settings.config import Config
from garmexport.storage.base import Storage


@dataclass(frozen=True)
class WriterSite:
    storage: Storage
    #: the store's one back-off, shared by its writers (a SharedBackoff: they run on threads)
    backoff: Backoff
    work: WriterWork


@dataclass(frozen=True)
class StartWriter:
    """reader -> writer actor, once, before any WriterMessage: build the writer of
    (``origin``, ``partition``) on ``site``."""

    config: Config
    instance: str
    origin: str
    partition: int
    exporter: object  # the top actor's address, where failures go
    site: WriterSite
