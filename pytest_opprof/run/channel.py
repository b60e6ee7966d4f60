"""The xdist channel: a worker's records and notes sent to the controller at its end
(``config.workeroutput``) and merged into the controller's state there, which reports
the whole run; and, for a measure a child takes, the run's private folder where the
workers' children count and leave what they counted (``run.counting``): made fresh by
the controller, named to each worker in its ``workerinput``, removed by the controller
once its workers are down, SIGTERM included."""

from __future__ import annotations

import contextlib
import json
import shutil
from pathlib import Path
from typing import Any

from ..model import jsontext
from .session import RunState

#: The key of a worker's notes in ``config.workeroutput`` (it starts with "opprof": the
#: plugin's controller hook takes it).
NOTES_KEY = "opprof_notes"


class WorkerChannel:
    """A worker's side (:meth:`finish`) and the controller's (:meth:`receive`)."""

    def __init__(self, state: RunState) -> None:
        self.state = state
        #: On the controller: the run's private folder, once a worker needs it.
        self.folder: Path | None = None
        self._until_closed = contextlib.ExitStack()

    def configure_node(self, node: Any) -> None:
        """On the controller, for each worker it starts: the run's private folder, made
        at the first (no folder when none can be made: each test then says so)."""
        if not self.state.measure.child_counts:
            return
        from .counting import FOLDER_KEY, make_folder

        if self.folder is None:
            from .launcher import sigterm_as_ctrl_c

            try:
                self.folder = make_folder()
            except OSError:
                return
            # SIGTERM ends the session as Ctrl-C does: the workers, then the folder
            self._until_closed.enter_context(sigterm_as_ctrl_c())
        node.workerinput[FOLDER_KEY] = str(self.folder)

    def close(self) -> None:
        """On the controller, its workers down: the run's folder removed."""
        self._until_closed.close()
        if self.folder is not None:
            shutil.rmtree(self.folder, ignore_errors=True)
            self.folder = None

    def receive(self, node: Any) -> None:
        """On the controller: a finished worker's records and notes."""
        from ..model.records import WORKER_KEY, loads

        output = getattr(node, "workeroutput", None) or {}
        if output.get(WORKER_KEY) is not None:
            self.state.remote.extend(loads(output[WORKER_KEY]))
        notes = output.get(NOTES_KEY)
        if isinstance(notes, str):
            self._add_notes(notes)

    def _add_notes(self, text: str) -> None:
        """A worker's notes, as :meth:`finish` wrote them (anything else: none)."""
        try:
            data = jsontext.Reader(dict).parse(text, "a worker's notes")
        except jsontext.Unreadable:
            return
        notes, unprofiled = data.get("notes"), data.get("unprofiled")
        if isinstance(notes, dict):
            self.state.notes.update({str(k): [str(x) for x in v] for k, v in notes.items()
                                     if isinstance(v, list)})
        if isinstance(unprofiled, dict):
            self.state.unprofiled.update({str(k): str(v) for k, v in unprofiled.items()})

    def finish(self) -> None:
        """On a worker: its records (and notes) handed to the controller."""
        state = self.state
        if not state.is_worker:
            return
        from ..model.records import WORKER_KEY, dumps

        output = state.config.workeroutput  # type: ignore[attr-defined]
        output[WORKER_KEY] = dumps(state.records())
        output[NOTES_KEY] = json.dumps({"notes": state.notes, "unprofiled": state.unprofiled})
