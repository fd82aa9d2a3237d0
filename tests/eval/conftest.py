"""What the evaluations share: one local provider, and a summary printed after the results, pass or fail."""

from __future__ import annotations

import pytest

from agentchat.agent.providers import ProviderConfig
from agentchat.agent.providers.local import LocalProvider

SUMMARY = pytest.StashKey[list[str]]()


@pytest.fixture(scope="session")
def provider() -> LocalProvider:
    """Warmed up as the server warms it when it starts: the first request's time is not the model's loading."""
    provider = LocalProvider(ProviderConfig())
    provider.warm_up().join()
    return provider


@pytest.fixture(scope="session")
def summary(request: pytest.FixtureRequest) -> list[str]:
    """Lines for the summary; each evaluation adds its own."""
    return request.config.stash.setdefault(SUMMARY, [])


def pytest_terminal_summary(terminalreporter: pytest.TerminalReporter, config: pytest.Config) -> None:
    lines = config.stash.get(SUMMARY, [])
    if lines:
        terminalreporter.write_sep("=", "evaluation summary")
        for line in lines:
            terminalreporter.write_line(line)
