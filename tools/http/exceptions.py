"""What goes wrong when the agent calls a service. Each message is a sentence the model (and the person) reads."""

from __future__ import annotations


class ServiceCallError(Exception):
    """A call that did not succeed: refused, failed, too slow or unreachable. It becomes the tool's error."""


class ServiceNotConfigured(ServiceCallError):
    """A service the agent cannot call yet, such as one whose token variable is not set."""
