"""Approval of important writes: decisions, same-key overwrites, edits, removals, corrections.

A write is let through when the request carries ``approved: true``; else,
when ``approval.command`` is set, that command is asked (exit 0 approves, any
other exit declines); else ``approval.mode`` decides: ``fail-closed`` refuses
with ``approval_required``, ``open`` lets it through. A command that cannot
run or does not answer within ``approval.timeout_seconds`` counts as no
answer, so fail-closed still refuses. The command gets the request as JSON
on stdin and ``BRAIND_APPROVAL_WHAT`` (one line saying what would be
written) in its environment, so a desktop dialog or a chat bot can ask.
"""

from __future__ import annotations

import json
import logging
import os
import shlex
import subprocess
from collections.abc import Mapping
from typing import Any

from braind.config import ApprovalConfig
from braind.errors import BraindError

log = logging.getLogger(__name__)


class Approver:
    """Decides whether an important write may go ahead."""

    def __init__(self, config: ApprovalConfig) -> None:
        self.config = config

    def require(self, important: bool, approved: bool, what: str, request: Mapping[str, Any] | None = None) -> None:
        """Return when the write may go ahead; raise approval_required or approval_declined when not."""
        if not important or approved:
            return
        if self.config.command:
            answer = self._ask(what, request or {})
            if answer is True:
                return
            if answer is False:
                raise BraindError("approval_declined", f"{what} was declined by the approval command", what=what)
        if self.config.mode == "fail-closed":
            raise BraindError(
                "approval_required", f"{what} needs approval: ask the user, then retry with approved=true", what=what
            )

    def _ask(self, what: str, request: Mapping[str, Any]) -> bool | None:
        """Run the approval command: True approves, False declines, None when it gave no answer."""
        argv = shlex.split(self.config.command)
        env = {**os.environ, "BRAIND_APPROVAL_WHAT": what}
        payload = json.dumps({"what": what, "request": dict(request)}, ensure_ascii=False, default=str)
        try:
            done = subprocess.run(
                argv,
                input=payload.encode("utf-8"),
                env=env,
                stdout=subprocess.DEVNULL,
                stderr=subprocess.PIPE,
                timeout=self.config.timeout_seconds,
                check=False,
            )
        except (OSError, ValueError, subprocess.TimeoutExpired) as exc:
            log.warning("approval command %r gave no answer: %s", self.config.command, exc)
            return None
        if done.returncode != 0:
            log.info("approval command declined %s (exit %d)", what, done.returncode)
        return done.returncode == 0
