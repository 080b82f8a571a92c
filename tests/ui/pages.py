"""What a person does on Airflow 3.3's pages, step by step, as reusable flows of the stage."""

from __future__ import annotations

import re
from collections.abc import Callable
from typing import Any
from urllib.parse import unquote

from selenium.webdriver.common.by import By
from selenium.webdriver.common.keys import Keys
from selenium.webdriver.remote.webelement import WebElement

from affiliate_network.review.human_requests import rule_of_subject

from .browser import Browser

#: ``00:00:24.273`` (Airflow's duration format) -> seconds.
_DURATION = re.compile(r"^(\d+):(\d{2}):(\d{2}(?:\.\d+)?)$")


def parse_duration(text: str) -> float | None:
    match = _DURATION.match(text.strip())
    if not match:
        return None
    hours, minutes, seconds = match.groups()
    return int(hours) * 3600 + int(minutes) * 60 + float(seconds)


def open_dag_docs(b: Browser, dag_id: str) -> str:
    """Open a DAG's page and its "Dag Docs" dialog; return the dialog's text."""
    b.open(f"/dags/{dag_id}")
    b.click(b.button("Dag Docs"))
    b.wait_text("Dag Documentation")
    dialog = b.find_visible("[role=dialog]", "the docs dialog")
    return dialog.text


def close_dialog(b: Browser) -> None:
    b.driver.switch_to.active_element.send_keys(Keys.ESCAPE)
    b.wait(lambda: not b.visible("[role=dialog]"), "the dialog closed", timeout=10)


def trigger_from_form(b: Browser, dag_id: str, *, choose: dict[str, str] | None = None) -> str:
    """Trigger ``dag_id`` from its trigger form; return the new run's id.

    :param choose: ``{param: option label}`` picked in the form's dropdowns, as a person does
        (open, type the start of the label, Enter); the other fields keep the form's defaults.
    """
    b.open(f"/dags/{dag_id}")
    b.click(b.button("Trigger Dag"))
    b.wait_text("Run Parameters")
    for name, label in (choose or {}).items():
        pick_option(b, name, label)
    b.shot(f"trigger form {dag_id} {choose or 'defaults'}")
    return submit_trigger(b)


def submit_trigger(b: Browser) -> str:
    """Press the open trigger dialog's Trigger button; return the new run's id."""
    dialog = b.find_visible("[role=dialog]", "the trigger dialog")
    submit = [e for e in dialog.find_elements(By.CSS_SELECTOR, "button") if e.text == "Trigger"]
    b.click(submit[-1])
    url = b.wait(
        lambda: b.driver.current_url if "/runs/" in b.driver.current_url else None,
        "the new run's page",
    )
    return unquote(url.split("/runs/", 1)[1].split("/", 1)[0])


def dropdown_text(b: Browser, name: str) -> str:
    """What the form's dropdown ``name`` shows (its chosen option's label)."""
    return b.find_visible(f"#element_{name}", f"the {name} field").text.strip()


def pick_option(b: Browser, name: str, label: str) -> None:
    """Choose ``label`` in the form's dropdown ``name``; wait until the field shows it."""
    field = b.find_visible(f"#element_{name} input", f"the {name} field")
    b.click(field)
    field.send_keys(label[:12])
    field.send_keys(Keys.ENTER)
    b.wait(lambda: dropdown_text(b, name) == label, f"{name} showing {label!r}")


def review_table(b: Browser) -> list[list[str]]:
    """The rows (cell texts) of the markdown table in the open review request."""
    rows = []
    for tr in b.driver.find_elements(By.CSS_SELECTOR, "table tbody tr"):
        cells = [td.text.strip() for td in tr.find_elements(By.CSS_SELECTOR, "td")]
        if len(cells) == 6:
            rows.append(cells)
    return rows


def _pending_link(b: Browser, rule_id: str, run_id: str) -> WebElement | None:
    """The subject link of the row waiting for an answer about ``rule_id`` in ``run_id``."""
    for row in b.visible("tbody tr"):
        text = row.text.replace("\n", "")
        if run_id in text and "Response Required" in text:
            for a in row.find_elements(By.CSS_SELECTOR, "a"):
                if rule_of_subject(a.text.strip()) == rule_id:
                    return a
    return None


def open_review_request(b: Browser, rule_id: str, run_id: str) -> list[list[str]]:
    """From "Required Actions", open the pending request of ``rule_id`` in ``run_id``; return
    its table."""

    def _link() -> WebElement | None:
        # The list does not refresh itself: reload it as a person would.
        b.open("/required_actions")
        return b.wait(
            lambda: _pending_link(b, rule_id, run_id),
            f"a required action for rule {rule_id}",
            timeout=5,
            screenshot=False,
        )

    link = b.wait(_link, f"a required action for rule {rule_id}", timeout=180)
    b.shot(f"required actions list {rule_id}")
    b.click(link)
    b.wait_text("keep_on_hold")
    return b.wait(lambda: review_table(b), f"the table of rule {rule_id}")


def answer_review(b: Browser, option: str, keep_on_hold: list[str]) -> None:
    """Fill ``keep_on_hold`` as a person types it (ids, comma separated) and press ``option``."""
    field = b.find_visible("#element_keep_on_hold", "the keep_on_hold field")
    b.type_into(field, ", ".join(keep_on_hold))
    b.shot(f"answer {option} keep {len(keep_on_hold)}")
    b.click(b.button(option, timeout=10))


# The trigger dialog's dates, backfills, task logs and clearing ------------------------------
def set_datetime(b: Browser, index: int, day: str) -> None:
    """Type ``day`` (``YYYY-MM-DD``, midnight UTC) into the dialog's ``index``-th date field, as
    a person does in its picker (Date ``YYYY/MM/DD``, Time ``HH:mm``); wait until it shows."""
    field = b.wait(
        lambda: b.visible("[role=dialog] [data-testid=datetime-input]")[index],
        f"date field {index}",
    )
    b.click(field)
    picker = b.find_visible("[data-scope=popover][data-part=content]", "the date picker")
    date_input, time_input = picker.find_elements(By.CSS_SELECTOR, "input")[:2]
    b.type_into(date_input, day.replace("-", "/"))
    b.type_into(time_input, "00:00")
    time_input.send_keys(Keys.ESCAPE)
    b.wait(lambda: not b.visible("[data-scope=popover][data-part=content]"), "the picker closed")
    y, m, d = (int(p) for p in day.split("-"))
    shown = f"{_MONTHS[m - 1]} {d}, {y} 00:00"
    b.wait(
        lambda: b.visible("[role=dialog] [data-testid=datetime-input]")[index].text == shown,
        f"date field {index} showing {shown}",
    )


_MONTHS = ("Jan", "Feb", "Mar", "Apr", "May", "Jun", "Jul", "Aug", "Sep", "Oct", "Nov", "Dec")


def open_trigger_dialog(b: Browser, dag_id: str, *, backfill: bool = False) -> None:
    """The DAG's Trigger dialog, on its Single Run or Backfill choice."""
    b.open(f"/dags/{dag_id}")
    b.click(b.button("Trigger Dag"))
    b.wait_text("Run Parameters")
    if backfill:
        b.click(b.find_visible("label[id$=':radio:backfill']", "the Backfill choice"))
        b.wait_text("Date Range")


def dialog_checkbox(b: Browser, label: str) -> WebElement:
    """The dialog's checkbox (its label element) named ``label``."""
    return b.wait(
        lambda: next(
            (e for e in b.visible("[role=dialog] label") if e.text.strip() == label), None
        ),
        f"the checkbox {label!r}",
    )


def is_checked(box: WebElement) -> bool:
    return box.get_attribute("data-state") == "checked"


def type_param(b: Browser, name: str, value: str) -> None:
    """Type ``value`` into the run-parameter field ``name`` of the open dialog."""
    b.type_into(b.find_visible(f"input[name=element_{name}]", f"the {name} field"), value)


def failure_message(b: Browser) -> str:
    """The error message (without its traceback) of the task log open in the browser."""
    summary = b.find_visible("summary[data-testid^=summary-]", "the log's error", timeout=90)
    return str(summary.text)


def last_log_record(b: Browser) -> str:
    """The text of the log view's last numbered record (the view scrolls to the end)."""
    items = b.wait(lambda: b.visible("[data-testid^=virtualized-item]"), "the log's records")
    return str(items[-1].text)


def clear_task_with_downstream(
    b: Browser, downstream: list[str], applied: Callable[[], bool]
) -> list[str]:
    """On an open task instance: Clear, make sure "Downstream" is on (the affected tasks list the
    ``downstream`` ones), Confirm until ``applied`` (the API's view) says the clear happened.
    Return the affected task ids the dialog listed."""
    b.click(b.button("Press shift+c to clear"))
    dialog = b.find_visible("[role=dialog]", "the clear dialog")

    def _affected() -> list[str]:
        rows = dialog.find_elements(By.CSS_SELECTOR, "tbody tr")
        return [r.find_elements(By.CSS_SELECTOR, "td")[1].text.strip() for r in rows]

    b.wait(lambda: _affected(), "the affected tasks")
    if not set(downstream) <= set(_affected()):
        b.click(b.button("Downstream"))
        b.wait(lambda: set(downstream) <= set(_affected()), "the downstream tasks listed")
    affected = _affected()
    b.shot("clear with downstream")
    confirm_until(b, "Confirm", applied, "the clear applied")
    b.wait(lambda: not b.visible("[role=dialog]"), "the clear dialog closed")
    return affected


def confirm_until(b: Browser, label: str, done: Callable[[], Any], what: str) -> Any:
    """Click the dialog's ``label`` button until ``done()`` (read from the API) is truthy.

    Under load a click can land while the dialog re-renders (its button busy) and do nothing;
    a person clicks again. Only while the button is still there, so nothing is sent twice.
    """
    for _ in range(3):
        button = next(
            (
                el
                for el in b.visible("button")
                if (el.text or "").strip() == label and el.is_enabled()
            ),
            None,
        )
        if button is not None:
            b.click(button)
        result = b.wait(done, what, timeout=60, screenshot=False)
        if result:
            return result
    return b.wait(done, what, timeout=1)  # fails with a screenshot
