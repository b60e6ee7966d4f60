"""The xdist channel: a worker's records and notes sent to the controller at its end
(``config.workeroutput``), and merged there into the controller's state, which reports
for the whole run."""

from __future__ import annotations

import json
from typing import Any

from ..model import jsontext
from .session import RunState

#: The key of a worker's notes in ``config.workeroutput`` (it starts with "opprof": the
#: plugin's controller hook takes it).
NOTES_KEY = "opprof_notes"


class WorkerChannel:
    """Between a worker's state and the controller's."""

    def __init__(self, state: RunState) -> None:
        self.state = state

    def send(self) -> None:
        """On an xdist worker: hand this worker's records (and notes) to the controller."""
        from ..model.records import WORKER_KEY, dumps

        state = self.state
        output = state.config.workeroutput  # type: ignore[attr-defined]
        output[WORKER_KEY] = dumps(state.records())
        output[NOTES_KEY] = json.dumps({"notes": state.notes, "unprofiled": state.unprofiled})

    def receive(self, workeroutput: dict[str, Any]) -> None:
        """On the controller: a finished worker's records and notes."""
        from ..model.records import WORKER_KEY, loads

        text = workeroutput.get(WORKER_KEY)
        if text is not None:
            self.state.remote.extend(loads(text))
        notes = workeroutput.get(NOTES_KEY)
        if isinstance(notes, str):
            self._add_notes(notes)

    def _add_notes(self, text: str) -> None:
        """A worker's notes, as :meth:`send` wrote them (anything else: none)."""
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
