"""The permission each dashboard tool needs. Codenames are named like the tools that need them."""

from __future__ import annotations

VIEW = "dashboards.view_dashboard"
CREATE_BRANCH = "dashboards.create_branch"
DEPLOY = "dashboards.deploy_dashboard"
EXECUTE_MIGRATION = "dashboards.execute_migration"
COMMIT = "dashboards.commit_changes"
ALL = (VIEW, CREATE_BRANCH, DEPLOY, EXECUTE_MIGRATION, COMMIT)
