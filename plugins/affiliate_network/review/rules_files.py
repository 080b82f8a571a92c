"""Which rules files an on-hold review may read: the ``onhold_rules*.yaml`` of the include folder.

The DAG's trigger form offers them as a choice (listed at parse: one directory listing) and the
operator refuses anything else before reading a byte, so a form value cannot make a worker read
(and log fragments of) any other file.
"""

from __future__ import annotations

import os
import re
from pathlib import Path

from affiliate_network.exceptions import ConfigValidationError
from affiliate_network.settings.paths import include_dir

__all__ = ["DEFAULT_RULES_FILE", "RULES_FILE_NAME", "resolve_rules_file", "rules_file_choices"]

#: The rules files a review may read: ``onhold_rules*.yaml`` directly in the include folder.
#: A bare name by construction (no separator, no ``..``): the trigger form offers these only.
RULES_FILE_NAME = re.compile(r"onhold_rules[A-Za-z0-9_.-]*\.ya?ml")
DEFAULT_RULES_FILE = "onhold_rules.yaml"


def rules_file_choices(folder: Path | None = None) -> list[str]:
    """Names of the rules files in the include folder (one directory listing: cheap enough for
    a DAG file's parse; the trigger form's choice). ``[DEFAULT_RULES_FILE]`` when the folder
    cannot be listed, so a parse never fails on it (execute then says what is wrong).

    :param folder: the include folder (default
    :func:`~affiliate_network.settings.paths.include_dir`).
    """
    try:
        with os.scandir(folder or include_dir()) as entries:
            names = sorted(e.name for e in entries if RULES_FILE_NAME.fullmatch(e.name))
    except OSError:
        names = []
    return names or [DEFAULT_RULES_FILE]


def resolve_rules_file(value: object, folder: Path | None = None) -> Path:
    """The rules file a review may read for ``value``, checked before anything is read.

    Accepted: the name of a rules file in the include folder (``onhold_rules*.yaml``), or that
    file's path in the folder. Refused, naming the choices: any other path (absolute, ``../``,
    a sub folder), another name, and a file that resolves outside the folder (a symlink out).
    The trigger form's ``rules_file`` would otherwise read any file on the worker and show
    fragments of it in the log.

    :param value: the operator's (rendered) ``rules_file``.
    :param folder: the include folder (default
    :func:`~affiliate_network.settings.paths.include_dir`).
    :raises ConfigValidationError: not one of the rules files.
    """
    folder = folder or include_dir()
    choices = rules_file_choices(folder)
    text = str(value) if isinstance(value, str | Path) else ""
    name = Path(text).name
    path = Path(text)
    # A path is accepted only when it is literally the folder's own file (tests and DAG code
    # pass include_dir() / name); everything else must be a bare name.
    in_folder = path.is_absolute() and _same_dir(path.parent, folder)
    if not RULES_FILE_NAME.fullmatch(name) or (text != name and not in_folder):
        raise ConfigValidationError(
            f"rules_file {text[:200]!r} is not a rules file of the include folder {folder}: "
            f"choose one of {', '.join(choices)} (files named onhold_rules*.yaml there)"
        )
    target = folder / name
    try:
        real = target.resolve(strict=True)
    except (OSError, RuntimeError):  # missing, or a symlink loop
        real = None
    if real is None or not real.is_file() or not real.is_relative_to(folder.resolve()):
        why = "does not exist" if real is None else "is not a file in that folder"
        raise ConfigValidationError(
            f"rules_file {name!r} {why} (include folder {folder}): "
            f"choose one of {', '.join(c for c in choices if c != name) or 'none found'}"
        )
    return real


def _same_dir(a: Path, b: Path) -> bool:
    try:
        return a.resolve() == b.resolve()
    except (OSError, RuntimeError):
        return False
