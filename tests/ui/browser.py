"""A person at the Airflow UI: Selenium on headless Chromium, with a screenshot per step.

Waits are explicit (poll until the page shows what the step needs), never fixed sleeps, so a
slow machine is slower but not flaky. Every screenshot is written to the artifacts folder as
``<test>-<NN>-<step>.png`` and its path is printed.
"""

from __future__ import annotations

import re
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from selenium.common.exceptions import (
    ElementClickInterceptedException,
    StaleElementReferenceException,
    WebDriverException,
)
from selenium.webdriver.common.by import By
from selenium.webdriver.common.keys import Keys
from selenium.webdriver.remote.webelement import WebElement

#: Where screenshots go (git-ignored); kept after the run.
ARTIFACTS = Path(__file__).resolve().parent / "artifacts"


class UiStepError(AssertionError):
    """A step in the browser did not find what it waited for; the message names it."""


def _slug(text: str) -> str:
    return re.sub(r"[^a-z0-9]+", "-", text.lower()).strip("-")[:60]


class Browser:
    """One logged-in person's browser.

    :param driver: a Selenium WebDriver (see ``deployment.new_driver``).
    :param base_url: ``http://127.0.0.1:PORT`` of the api-server.
    :param test_name: prefix of this test's screenshots.
    """

    def __init__(self, driver: Any, base_url: str, test_name: str) -> None:
        self.driver = driver
        self.base_url = base_url.rstrip("/")
        self.prefix = _slug(test_name)
        self.step = 0
        self.shots: list[Path] = []
        ARTIFACTS.mkdir(exist_ok=True)

    # Screenshots ------------------------------------------------------------------------
    def shot(self, what: str) -> Path:
        """Save a screenshot of the current page; return (and print) its path."""
        self.step += 1
        path = ARTIFACTS / f"{self.prefix}-{self.step:02d}-{_slug(what)}.png"
        self.driver.save_screenshot(str(path))
        self.shots.append(path)
        print(f"screenshot: {path}")
        return path

    # Navigation and waits ---------------------------------------------------------------
    def open(self, path: str) -> None:
        self.driver.get(self.base_url + path)

    def wait(
        self,
        predicate: Callable[[], Any],
        what: str,
        timeout: float = 60,
        *,
        screenshot: bool = True,
    ) -> Any:
        """Poll ``predicate`` until truthy; on timeout fail naming ``what`` (with a screenshot,
        unless ``screenshot`` is false: an inner wait that an outer one retries)."""
        deadline = time.monotonic() + timeout
        while True:
            try:
                value = predicate()
            except (StaleElementReferenceException, WebDriverException, UiStepError):
                value = None
            if value:
                return value
            if time.monotonic() > deadline:
                if not screenshot:
                    return None
                path = self.shot(f"timeout {what}")
                raise UiStepError(
                    f"timed out after {timeout:.0f}s waiting for {what} at "
                    f"{self.driver.current_url}; screenshot {path}"
                )
            time.sleep(0.3)

    def body_text(self) -> str:
        return self.driver.find_element(By.TAG_NAME, "body").text

    def wait_text(self, text: str, timeout: float = 60) -> None:
        self.wait(lambda: text in self.body_text(), f"text {text!r}", timeout)

    def visible(self, css: str) -> list[WebElement]:
        return [e for e in self.driver.find_elements(By.CSS_SELECTOR, css) if e.is_displayed()]

    def find_visible(self, css: str, what: str, timeout: float = 60) -> WebElement:
        return self.wait(lambda: (self.visible(css) or [None])[0], what, timeout)

    def button(self, label: str, timeout: float = 60, enabled: bool = True) -> WebElement:
        """The visible button whose text (or aria-label) is ``label``."""

        def _find() -> WebElement | None:
            for el in self.visible("button, [role=button], a"):
                names = {(el.text or "").strip(), (el.get_attribute("aria-label") or "").strip()}
                if label in names and (not enabled or el.is_enabled()):
                    return el
            return None

        return self.wait(_find, f"{'enabled ' if enabled else ''}button {label!r}", timeout)

    def click(self, element: WebElement) -> None:
        self.driver.execute_script("arguments[0].scrollIntoView({block: 'center'});", element)
        try:
            element.click()
        except ElementClickInterceptedException:
            self.driver.execute_script("arguments[0].click();", element)

    def click_button(self, label: str, timeout: float = 60) -> None:
        self.click(self.button(label, timeout))

    def type_into(self, element: WebElement, text: str) -> None:
        """Replace a field's content as a person does (select all, type)."""
        self.click(element)
        element.send_keys(Keys.CONTROL, "a")
        element.send_keys(Keys.DELETE)
        if text:
            element.send_keys(text)

    # Log in -----------------------------------------------------------------------------
    def login(self, username: str, password: str) -> None:
        """The simple auth manager's sign-in form."""
        self.open("/")
        user = self.find_visible("input[name=username]", "the sign-in form")
        user.send_keys(username)
        self.driver.find_element(By.CSS_SELECTOR, "input[name=password]").send_keys(password)
        self.click_button("Sign in")
        self.wait(lambda: "/auth/login" not in self.driver.current_url, "signed in")
