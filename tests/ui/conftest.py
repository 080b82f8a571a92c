"""Fixtures of the browser stage: one Airflow deployment per session, one browser per test.

Skipped, with the reason, only where Debian's Chromium and chromedriver are not installed
(``.ci/run`` installs them). Screenshots go to ``tests/ui/artifacts/`` (git-ignored).
"""

from __future__ import annotations

import tempfile
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from .browser import ARTIFACTS, Browser
from .deployment import REVIEWER, UiStage, chromium_missing, new_driver, remove_tree, ui_stage

#: Failed browser tests (the deployment's logs are kept when one failed).
_FAILURES = [0]


@pytest.hookimpl(wrapper=True)
def pytest_runtest_makereport(item: pytest.Item, call: pytest.CallInfo):  # type: ignore[no-untyped-def]
    report = yield
    if report.failed and "browser" in item.keywords:
        _FAILURES[0] += 1
    return report


def pytest_terminal_summary(terminalreporter) -> None:  # type: ignore[no-untyped-def]
    shots = sorted(ARTIFACTS.glob("*.png")) if ARTIFACTS.is_dir() else []
    if shots:
        terminalreporter.write_sep("-", f"browser stage: {len(shots)} screenshots in {ARTIFACTS}")


@pytest.fixture(scope="session")
def ui() -> Iterator[UiStage]:
    """The sandbox and Airflow (api-server, scheduler, dag-processor, triggerer) on loopback."""
    reason = chromium_missing()
    if reason:
        pytest.skip(reason)
    for old in ARTIFACTS.glob("*.png") if ARTIFACTS.is_dir() else ():
        old.unlink()  # this run's screenshots only
    workdir = Path(tempfile.mkdtemp(prefix="afn-ui-"))
    failures_before = _FAILURES[0]
    started = time.monotonic()
    with ui_stage(workdir) as stage:
        print(f"\nbrowser stage: Airflow up in {time.monotonic() - started:.0f}s at {stage.url}")
        yield stage
    if _FAILURES[0] == failures_before:
        remove_tree(workdir)
    else:
        print(f"\nbrowser stage: logs kept in {workdir}")


@pytest.fixture(scope="session")
def signed_in_driver(ui: UiStage) -> Iterator[Any]:
    """One headless Chromium for the stage, signed in once as the named reviewer."""
    driver = new_driver()
    try:
        Browser(driver, ui.url, "sign-in").login(REVIEWER, ui.reviewer_password)
        yield driver
    finally:
        driver.quit()


@pytest.fixture
def browser(signed_in_driver: Any, ui: UiStage, request: pytest.FixtureRequest) -> Browser:
    """The stage's browser, its screenshots named after this test."""
    return Browser(signed_in_driver, ui.url, request.node.name)
