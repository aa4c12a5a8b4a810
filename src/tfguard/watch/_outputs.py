"""The outputs of `tfguard watch`, chosen by its options: terminal or JSON lines, plus webhooks.

Example:

>>> import io
>>> from rich.console import Console
>>> [type(o).__name__ for o in watch_outputs(console=Console(file=io.StringIO()), json=True)]
['JsonLinesOutput']
"""

from __future__ import annotations

from collections.abc import Iterable

from rich.console import Console
from rich.text import Text

from tfguard._text import printable
from tfguard.watch._jsonlines import JsonLinesOutput
from tfguard.watch._terminal import TerminalOutput
from tfguard.watch._webhook import WebhookOutput

__all__ = ["watch_outputs"]


def watch_outputs(*, console: Console, errors: Console | None = None, json: bool = False,
                  webhooks: Iterable[str] = (), timeout: float | None = None,
                  wait: float | None = None) -> list:
    """The outputs for `watch_logdir`.

    Args:
        console: the terminal (stdout).
        errors: where remarks go with `json` and webhook failures go (stderr).
            Defaults to `None` (`console`).
        json: JSON lines on `console`'s file instead of terminal lines. Defaults to `False`.
        webhooks: URLs to POST every event to. Defaults to `()`.
        timeout: seconds one POST may take. Defaults to `None` (`WebhookOutput`'s 5 s).
        wait: seconds the end waits for the webhooks' queued events. Defaults
            to `None` (`WebhookOutput`'s 60 s).

    Returns:
        The outputs, the printing one first.

    Raises:
        ContractError: for a webhook URL that is not http(s), or a `timeout` or
            `wait` that is not a finite number of seconds (> 0, >= 0).
    """
    errors = errors if errors is not None else console

    def say(text: str) -> None:
        errors.print(Text(printable(text, newlines=False), style="yellow"))

    first = JsonLinesOutput(console.file, errors=say) if json else TerminalOutput(console)
    options = {name: value for name, value in (("timeout", timeout), ("wait", wait))
               if value is not None}
    return [first, *(WebhookOutput(url, notice=say, **options) for url in webhooks)]
