"""A separate process acting on a storage root, for race and crash tests.

Usage: ``python -m tests.storage.child ROOT_URI OUTPUT_JSON INSTANCE MODE PATH DATA GO``
(OUTPUT_JSON: the ``[output]`` keys of the root, as in :class:`tests.storage.conftest.Backend`).

- ``race``: stage DATA, print ``staged``, wait until file GO exists, publish to PATH and
  print ``won`` or ``lost`` (PublishConflict).
- ``hang``: stage DATA, print ``staged``, then sleep until killed (SIGKILL by the test).
"""

from __future__ import annotations

import json
import os
import sys
import time

from garmexport.errors import PublishConflict
from garmexport.settings.config import OutputConfig
from garmexport.storage.open import open_storage
from garmexport.storage.options import from_output


def main(argv: list[str]) -> int:
    root_uri, output, instance, mode, path, data, go = argv
    storage = open_storage(root_uri, instance, from_output(OutputConfig(**json.loads(output))))
    staged = storage.stage(data.encode())
    print("staged", flush=True)
    if mode == "hang":
        while True:
            time.sleep(1)
    while not os.path.exists(go):
        time.sleep(0.005)
    try:
        storage.publish(staged, path)
        print("won", flush=True)
    except PublishConflict:
        storage.discard(staged)
        print("lost", flush=True)
    storage.close()
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
