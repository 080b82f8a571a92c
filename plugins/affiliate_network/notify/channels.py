"""Send a :class:`~affiliate_network.notify.messages.Message` through the configured channels.

E-mail goes through the SMTP provider's hook and an Airflow SMTP connection; a chat webhook
through the HTTP provider's hook and an Airflow HTTP connection. Credentials stay in those
connections. A channel that fails is logged and skipped: a notification never changes what
happened to the task (a human-review request still waits, a failed task stays failed the same
way, a finished one stays finished).
"""

from __future__ import annotations

import logging
import re
from typing import TYPE_CHECKING, Any

from affiliate_network.settings.models import EmailChannel, NotificationSettings, WebhookChannel

if TYPE_CHECKING:
    from affiliate_network.notify.messages import Message

_LOG = logging.getLogger(__name__)
#: A URL in an error text (a webhook URL can hold its secret in the path).
_URL = re.compile(r"\S+://\S+|(?<=url: )\S+")


def deliver(message: Message, settings: NotificationSettings, log: Any = None) -> dict[str, bool]:
    """Send ``message`` through every configured channel; ``{channel: delivered}``.

    :param message: what to send.
    :param settings: the notification settings (channels).
    :param log: logger (default: this module's).
    """
    log = log or _LOG
    results: dict[str, bool] = {}
    channels: list[tuple[str, EmailChannel | WebhookChannel]] = [
        (name, channel)
        for name, channel in (("email", settings.email), ("webhook", settings.webhook))
        if channel is not None
    ]
    for name, channel in channels:
        try:
            if isinstance(channel, WebhookChannel):
                _post(message, channel)
            else:
                _send_email(message, channel)
        except Exception as err:
            results[name] = False
            log.warning(
                "Notification %r not delivered by %s (connection %r): %s. The task's outcome "
                "is unchanged.",
                message.event,
                name,
                channel.conn_id,
                safe_reason(err),
            )
        else:
            results[name] = True
            log.info(
                "Notification %r sent by %s (connection %r)", message.event, name, channel.conn_id
            )
    return results


def safe_reason(err: BaseException) -> str:
    """The error's class and text without URLs, masked (a log line that leaks nothing)."""
    from airflow.sdk.log import redact

    text = _URL.sub("<url>", str(err))[:300]
    return f"{type(err).__name__}: {redact(text)}"


def _send_email(message: Message, channel: EmailChannel) -> None:
    from airflow.providers.smtp.hooks.smtp import SmtpHook

    with SmtpHook(smtp_conn_id=channel.conn_id) as hook:
        hook.send_email_smtp(
            to=channel.to,
            subject=message.title,
            html_content=message.html(),
            from_email=channel.from_email,
        )


def _post(message: Message, channel: WebhookChannel) -> None:
    from airflow.providers.http.hooks.http import HttpHook
    from airflow.sdk import BaseHook
    from airflow.sdk.log import mask_secret

    # A chat webhook's URL holds its secret in the path, and the HTTP hook logs the URL when
    # the receiver is down: mask it like a password.
    host = BaseHook.get_connection(channel.conn_id).host or ""
    path = host.split("://", 1)[-1].partition("/")[2]
    if len(path) >= 8:  # requests' errors name the path alone
        mask_secret(host)
        mask_secret(f"/{path}")
    payload = message.fields() if channel.format == "json" else {"text": message.text()}
    HttpHook(method="POST", http_conn_id=channel.conn_id).run(
        channel.endpoint,
        json=payload,
        extra_options={"timeout": channel.timeout_s, "check_response": True},
    )
