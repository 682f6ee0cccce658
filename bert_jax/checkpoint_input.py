"""The `input` item of a checkpoint step: each JAX process's input-iterator state as JSON, with
the state's fingerprint taken at save time (bert_jax.checkpoint saves and restores it beside the
TrainState; exact resume reads it back)."""

from __future__ import annotations

import dataclasses
import json
from typing import Any

import jax
import orbax.checkpoint as ocp
from etils import epath

from bert_jax.errors import BertJaxError


class InputStateHandler(ocp.CheckpointHandler):
    """Each JAX process writes its own input-iterator state (`process_<i>-of-<n>.json`); the state
    is snapshotted when `save` is called, so async array saves never see a later position."""

    def _file(self, directory: epath.Path) -> epath.Path:
        return directory / f"process_{jax.process_index()}-of-{jax.process_count()}.json"

    def save(self, directory: epath.Path, args: InputSave) -> None:
        record = {"input": args.state, "fingerprint": args.fingerprint}
        self._file(directory).write_text(json.dumps(record))

    def restore(self, directory: epath.Path, args: InputRestore | None = None) -> Any:
        path = self._file(directory)
        if not path.exists():
            raise BertJaxError(
                f"{path}: missing; was the run saved with a different process count?"
            )
        return json.loads(path.read_text())  # {"input": ..., "fingerprint": ... (or absent)}

    def metadata(self, directory: epath.Path) -> None:
        return None

    def finalize(self, directory: epath.Path) -> None:
        pass

    def close(self) -> None:
        pass


@ocp.args.register_with_handler(InputStateHandler, for_save=True)
@dataclasses.dataclass
class InputSave(ocp.args.CheckpointArgs):
    state: Any
    fingerprint: dict[str, int] | None = None


@ocp.args.register_with_handler(InputStateHandler, for_restore=True)
@dataclasses.dataclass
class InputRestore(ocp.args.CheckpointArgs):
    pass
