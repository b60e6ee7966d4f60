"""The xdist channel: a worker's records and notes sent to the controller at its end
(``config.workeroutput``) and merged into the controller's state there, which reports
the whole run; and the folders where the workers' children left what they counted."""

from __future__ import annotations

import json
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
        #: On the controller: the run ids its workers had (their counted shares' folders).
        self.run_ids: set[str] = set()

    def receive(self, node: Any) -> None:
        """On the controller: a finished worker's records and notes."""
        from ..model.records import WORKER_KEY, loads

        workerinput = getattr(node, "workerinput", None) or {}
        if self.state.measure.child_counts and "testrunuid" in workerinput:
            self.run_ids.add(str(workerinput["testrunuid"]))
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
        """On a worker: its records (and notes) handed to the controller. On the
        controller: its workers' shares removed."""
        state = self.state
        if not state.is_worker:
            if self.run_ids:
                from .counting import remove_shares

                remove_shares(self.run_ids)
            return
        from ..model.records import WORKER_KEY, dumps

        output = state.config.workeroutput  # type: ignore[attr-defined]
        output[WORKER_KEY] = dumps(state.records())
        output[NOTES_KEY] = json.dumps({"notes": state.notes, "unprofiled": state.unprofiled})
