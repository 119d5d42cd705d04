"""The top actor: starts the reader, stops everything on a failure or a stop request.

A failure is logged as one ERROR ``failure`` line: ``error`` says what went wrong (for an
error garmexport raises on purpose, also the setting and what to do; its traceback is in
a ``detail`` field only at DEBUG); an unforeseen exception always carries its traceback in
``detail``. On a failure it also ends the reader (and with it the writers): their timers
would keep the actor system busy, and the in-process system hands ExportStopped to the
main loop only once it is idle. Failures that follow the first are its echoes: not logged.
"""

from __future__ import annotations

import logging

from thespian.actors import ActorExitRequest, ActorTypeDispatcher

from garmexport.observe.logs import log_event
from garmexport.actors.start_messages import StartExport, StartReader
from garmexport.pipeline.messages import (
    ExportStopped, Failure, ReaderStopped, StopExport, StopReader,
)
from garmexport.actors.reader_actor import ReaderActor

log = logging.getLogger(__name__)


class ExporterActor(ActorTypeDispatcher):
    def __init__(self) -> None:
        super().__init__()
        self.caller = None
        self.reader = None
        self.done = False

    def receiveMsg_StartExport(self, msg: StartExport, sender: object) -> None:
        self.caller = sender
        self.reader = self.createActor(ReaderActor)
        self.send(self.reader, StartReader(msg.config, msg.instance, self.myAddress, msg.source,
                                            msg.unfinished))

    def receiveMsg_StopExport(self, msg: StopExport, sender: object) -> None:
        if self.reader is not None:
            self.send(self.reader, StopReader(msg.reason))

    def receiveMsg_ReaderStopped(self, msg: ReaderStopped, sender: object) -> None:
        self._stop(0, msg.reason)

    def receiveMsg_Failure(self, msg: Failure, sender: object) -> None:
        if self.done:
            return
        error = msg.error or msg.traceback.strip().splitlines()[-1]
        # A foreseen error's message says what to do: its traceback, for developers, comes
        # only at DEBUG. An unforeseen one is a bug: its traceback is what finds it.
        detail = {"detail": msg.traceback} if not msg.foreseen or log.isEnabledFor(
            logging.DEBUG) else {}
        log_event(log, "failure", level=logging.ERROR, where=msg.where, error=error, **detail)
        self._stop(msg.exit_code, f"{msg.where}: {error}")
        if self.reader is not None:
            self.send(self.reader, ActorExitRequest())
            self.reader = None

    def _stop(self, code: int, reason: str) -> None:
        if not self.done and self.caller is not None:
            self.done = True
            self.send(self.caller, ExportStopped(code, reason))
