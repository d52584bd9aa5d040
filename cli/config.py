"""Where ltm keeps its files, and the user's settings.

Config (settings, credentials) and data (the embedded store) live apart, as
the XDG spec and the reference implementation have it:

- config: ``$LTM_CONFIG_DIR``, else ``$XDG_CONFIG_HOME/ltm``, else ``~/.config/ltm``
  (the reference's precedence, on every platform, so one dotfile setup works
  everywhere);
- data: ``$LTM_DATA_DIR``, else the platform's user data dir (``~/.local/share/ltm``
  on Linux).

``config.json`` holds plain settings; secrets go only in ``credentials``
(mode 0600), never in settings.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

from ltm.cli.errors import CliError

SETTINGS_FILE = "config.json"


def config_dir() -> Path:
    if os.environ.get("LTM_CONFIG_DIR"):
        return Path(os.environ["LTM_CONFIG_DIR"])
    if os.environ.get("XDG_CONFIG_HOME"):
        return Path(os.environ["XDG_CONFIG_HOME"]) / "ltm"
    return Path.home() / ".config" / "ltm"


def data_dir() -> Path:
    if os.environ.get("LTM_DATA_DIR"):
        return Path(os.environ["LTM_DATA_DIR"])
    from platformdirs import user_data_dir

    return Path(user_data_dir("ltm", appauthor=False))


def local_db_path() -> Path:
    """The embedded store: the user's own packets, no server involved."""
    return data_dir() / "ltm.db"


def load_settings() -> dict[str, Any]:
    path = config_dir() / SETTINGS_FILE
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        return {}
    except (OSError, ValueError) as exc:
        raise CliError(f"cannot read {path}: {exc}") from None
    if not isinstance(data, dict):
        raise CliError(f"{path} must hold a JSON object")
    return data


def save_settings(settings: dict[str, Any]) -> None:
    write_private(config_dir() / SETTINGS_FILE, json.dumps(settings, indent=2) + "\n", mode=0o644)


def write_private(path: Path, text: str, *, mode: int = 0o600) -> None:
    """Write a file atomically, with ``mode`` set before any byte lands in it."""
    path.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, mode)
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as handle:
            handle.write(text)
        os.chmod(tmp, mode)
        os.replace(tmp, path)
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise
