"""The demo runner of a checkout (``python -m demo``): a sandbox, then the provider's DAGs.

It imports the provider, Airflow and the sandbox, so it belongs to neither distribution: it
lives in the repository, run from its root with the development environment (which has both).
"""

from __future__ import annotations

import shutil
from pathlib import Path

__all__ = ["DEMO_INCLUDE", "SANDBOX_OFFER_STATE", "demo_include"]

#: Files that replace the shipped ``include/``'s in the demo's include folder. The sandbox's
#: desired offer state (its default world's ids) lives here, not in ``include/``: the shipped
#: ``include/offer_state.yaml`` is a template whose placeholders the sync refuses, so a copied
#: ``include/`` can never write the sandbox's state onto a real network's objects.
DEMO_INCLUDE = Path(__file__).resolve().parent / "include"
#: The sandbox's example desired state (offer group 301, offers 101 and 109, ...).
SANDBOX_OFFER_STATE = DEMO_INCLUDE / "offer_state.yaml"


def demo_include(shipped: Path, folder: Path) -> Path:
    """``folder`` made the demo's include folder: ``shipped``'s files, then :data:`DEMO_INCLUDE`'s.

    :param shipped: the project's ``include/`` (its rules, reports and network settings).
    :param folder: where to build it (created; the files it holds are replaced).
    :returns: ``folder``.
    """
    shutil.copytree(shipped, folder, dirs_exist_ok=True)
    for path in DEMO_INCLUDE.iterdir():
        if path.is_file():
            shutil.copy2(path, folder / path.name)
    return folder
