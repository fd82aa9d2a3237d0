"""What each dashboard tool's result means, said in the person's language: the local model's answer after a call.

Every number, name and title comes from the result itself; nothing is added that the tool did not return.
"""

from __future__ import annotations

from collections.abc import Callable
from datetime import UTC, datetime
from typing import Any

from django.utils import translation
from django.utils.formats import date_format
from django.utils.translation import gettext as _
from django.utils.translation import ngettext

from agentchat.sentences import translate

from .models import Dashboard, Deployment, Migration, ValidationProblem

SHOWN = 10


def in_language(summary: Callable[[dict[str, Any]], str]) -> Callable[[Any, str], str]:
    def summarize(output: Any, language: str) -> str:
        with translation.override(language):
            return summary(output)

    return summarize


def _markdown(lines: list[str]) -> str:
    """The lines as Markdown: each sentence a paragraph of its own (lines one after another would run together as
    one), and the items of a list ("- " lines) together."""
    text: list[str] = []
    for line in lines:
        if text and not (line.startswith("- ") and text[-1].startswith("- ")):
            text.append("")
        text.append(line)
    return "\n".join(text)


def _label(choices: type, value: str) -> str:
    """A choice's label (translated), e.g. "production" → "продакшен"."""
    return str(dict(choices.choices).get(value, value))


def _moment(stamp: str) -> str:
    """A tool's ISO 8601 time as a person reads it in the active language, in UTC."""
    return date_format(datetime.fromisoformat(stamp).astimezone(UTC), "DATETIME_FORMAT") + " UTC"


def _problems(counts: dict[str, int]) -> str:
    errors, warnings, notes = counts.get("error", 0), counts.get("warning", 0), counts.get("info", 0)
    return ", ".join(
        [
            ngettext("%(count)d error", "%(count)d errors", errors) % {"count": errors},
            ngettext("%(count)d warning", "%(count)d warnings", warnings) % {"count": warnings},
            ngettext("%(count)d note", "%(count)d notes", notes) % {"count": notes},
        ]
    )


def _dashboard(item: dict[str, Any]) -> str:
    text = _("#%(id)s “%(title)s” (%(status)s, owner %(owner)s)") % {
        "id": item["id"],
        "title": item["title"],
        "status": _label(Dashboard.Status, item["status"]),
        "owner": item["owner"] or "—",
    }
    counts = item.get("problem_counts", item.get("problems"))
    return f"{text}: {_problems(counts)}" if isinstance(counts, dict) else text


@in_language
def search(output: dict[str, Any]) -> str:
    total, items = output["total"], output["items"]
    if not total:
        return _("No dashboard matches that search.")
    if output.get("order") == "worst" and total > 1:
        found = ngettext(
            "Found %(count)d dashboard, the worst first:", "Found %(count)d dashboards, the worst first:", total
        )
    else:
        found = ngettext("Found %(count)d dashboard:", "Found %(count)d dashboards:", total)
    lines = [found % {"count": total}]
    lines += [f"- {_dashboard(item)}" for item in items[:SHOWN]]
    if total > len(items[:SHOWN]):
        shown = {"shown": len(items[:SHOWN]), "page": output["page"], "pages": output["pages"]}
        if output["page"] < output["pages"]:
            lines.append(_("These are %(shown)d of them (page %(page)d of %(pages)d). Say “next” for more.") % shown)
        else:
            lines.append(_("These are %(shown)d of them (page %(page)d of %(pages)d).") % shown)
    return _markdown(lines)


@in_language
def health(output: dict[str, Any]) -> str:
    lines = [_("Dashboard %(dashboard)s.") % {"dashboard": _dashboard(output)}]
    if output["deployable_to_production"]:
        lines.append(_("It has no errors, so it can be deployed to production."))
    else:
        lines.append(_("It cannot be deployed to production until its errors are fixed."))
    for problem in output["problems"][:SHOWN]:
        severity = _label(ValidationProblem.Severity, problem["severity"])
        lines.append(f"- {severity} {problem['code']}: {problem['message']} ({problem['hint']})")
    pending = output["pending_migrations"]
    if pending:
        lines.append(
            ngettext(
                "%(count)d pending migration: %(names)s.", "%(count)d pending migrations: %(names)s.", len(pending)
            )
            % {"count": len(pending), "names": ", ".join(f"#{m['id']} {m['name']}" for m in pending)}
        )
    else:
        lines.append(_("No pending migrations."))
    changes = output["uncommitted_changes"]
    if changes:
        count = len(changes)
        more = "+" if output.get("more_uncommitted_changes") else ""
        lines.append(
            ngettext("%(count)d%(more)s uncommitted change.", "%(count)d%(more)s uncommitted changes.", count)
            % {"count": count, "more": more}
        )
    for environment, deployment in output["latest_deployments"].items():
        if deployment:
            said = {
                "environment": _label(Deployment.Environment, environment),
                "status": _label(Deployment.Status, deployment["status"]),
                "at": _moment(deployment["at"]),
                "by": deployment["by"],
            }
            if deployment["by"]:
                lines.append(_("Latest deployment to %(environment)s: %(status)s, %(at)s, by %(by)s.") % said)
            else:
                lines.append(_("Latest deployment to %(environment)s: %(status)s, %(at)s.") % said)
        else:
            lines.append(
                _("Never deployed to %(environment)s.") % {"environment": _label(Deployment.Environment, environment)}
            )
    return _markdown(lines)


@in_language
def branch(output: dict[str, Any]) -> str:
    return _("Created branch %(branch)s of dashboard #%(id)s, from %(base)s.") % {
        "branch": output["branch"],
        "id": output["dashboard_id"],
        "base": output["base"],
    }


@in_language
def deployment(output: dict[str, Any]) -> str:
    lines = [
        _("Deployment #%(id)s of dashboard #%(dashboard)s “%(title)s” to %(environment)s: %(status)s.")
        % {
            "id": output["deployment_id"],
            "dashboard": output["dashboard_id"],
            "title": output["title"],
            "environment": _label(Deployment.Environment, output["environment"]),
            "status": _label(Deployment.Status, output["status"]),
        }
    ]
    if output["commit"]:
        lines.append(_("Commit %(commit)s.") % {"commit": output["commit"]})
    lines += [f"- {translate(note)}" for note in output["notes"]]
    return _markdown(lines)


@in_language
def migration(output: dict[str, Any]) -> str:
    return _("Migration #%(id)s “%(name)s” of dashboard #%(dashboard)s: %(status)s. Still pending: %(pending)d.") % {
        "id": output["migration_id"],
        "name": output["name"],
        "dashboard": output["dashboard_id"],
        "status": _label(Migration.Status, output["status"]),
        "pending": output["still_pending"],
    }


@in_language
def commit(output: dict[str, Any]) -> str:
    count = len(output["changes"])
    return ngettext(
        "Committed %(count)d change to %(branch)s of dashboard #%(id)s as %(commit)s: “%(message)s”.",
        "Committed %(count)d changes to %(branch)s of dashboard #%(id)s as %(commit)s: “%(message)s”.",
        count,
    ) % {
        "count": count,
        "branch": output["branch"],
        "id": output["dashboard_id"],
        "commit": output["commit"],
        "message": output["message"],
    }
