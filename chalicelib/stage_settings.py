"""A deployment's own settings, kept out of the tracked ``.chalice/config.json``.

``infra/chalice_env.py`` writes what the infra stack made (the table's name, the
Cognito pool, its app client and domain) for each stage into
``chalicelib/stage_settings.json``, beside this module. That file is gitignored,
so ``git pull && chalice deploy`` never meets a local change to a tracked file;
Chalice deploys the whole ``chalicelib`` folder, so the file reaches Lambda with the
code (https://aws.github.io/chalice/topics/multifile.html). At start the app calls
``apply``: each value sets its variable over the tracked config's placeholder
(an empty Cognito id, the table named after the stage): the file holds what this
deployment's stack actually made.

The stage is ``LTM_STAGE`` (each stage of the tracked config sets it), else the
suffix of the function's name (Chalice names it ``<app>-<stage>``).
"""

from __future__ import annotations

import json
import os
from collections.abc import MutableMapping
from pathlib import Path

FILE = Path(__file__).with_name("stage_settings.json")


def stage_of(environ: MutableMapping[str, str]) -> str | None:
    if environ.get("LTM_STAGE"):
        return environ["LTM_STAGE"]
    function = environ.get("AWS_LAMBDA_FUNCTION_NAME", "")
    return function.rsplit("-", 1)[1] if "-" in function else None


def apply(environ: MutableMapping[str, str] | None = None, path: Path = FILE) -> dict[str, str]:
    """Set the stage's variables from the settings file; returns those it set."""
    environ = os.environ if environ is None else environ
    try:
        doc = json.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        return {}
    stage = stage_of(environ)
    stages = doc.get("stages") if isinstance(doc, dict) else None
    values = stages.get(stage) if isinstance(stages, dict) and stage else None
    if not isinstance(values, dict):
        return {}
    filled = {
        name: str(value)
        for name, value in values.items()
        if isinstance(name, str) and name.startswith("LTM_") and name != "LTM_STAGE"
    }
    environ.update(filled)
    return filled
