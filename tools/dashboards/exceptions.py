"""What the catalogue refuses to do. Each message is one sentence the model can pass on to the user."""

from __future__ import annotations


class DashboardError(Exception):
    pass


class DashboardNotFound(DashboardError):
    pass


class BranchError(DashboardError):
    pass


class TagError(DashboardError):
    pass


class DeploymentBlocked(DashboardError):
    pass


class NoPendingMigration(DashboardError):
    pass


class NothingToCommit(DashboardError):
    pass
