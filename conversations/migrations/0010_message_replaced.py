"""Messages superseded before services.turns recorded where their branch stood get the same metadata "replaced"
({after, branch}), from the audit log: each regenerate lists what it replaced after its question; an edit replaced
what was still live from the edited question up to its new message. A message no event accounts for stays
unmarked (the chat page does not show it; the history API still does)."""

from django.db import migrations

REGENERATED = "answer_regenerated"
EDITED = "message_edited"


def mark_replaced(apps, schema_editor) -> None:
    Message = apps.get_model("conversations", "Message")
    AuditEvent = apps.get_model("conversations", "AuditEvent")
    conversations = Message.objects.filter(superseded=True).values_list("conversation_id", flat=True).distinct()
    for conversation in conversations:
        messages = list(Message.objects.filter(conversation_id=conversation).order_by("pk"))
        unmarked = {message.pk: message for message in messages if message.superseded}
        gone: set[int] = set()  # replaced by an earlier event, in the order the events happened
        events = AuditEvent.objects.filter(conversation_id=conversation, kind__in=[REGENERATED, EDITED]).order_by("pk")
        for event in events:
            if event.kind == REGENERATED:
                after = event.data.get("message_id")
                branch = sorted(pk for pk in event.data.get("replaced", []) if pk in unmarked and pk not in gone)
            else:
                start, new = event.data.get("replaces"), event.data.get("message_id")
                if start is None or new is None:
                    continue
                branch = [pk for pk in unmarked if start <= pk < new and pk not in gone]
                after = max((m.pk for m in messages if m.pk < start and m.pk not in gone), default=None)
            if not branch:
                continue
            for pk in branch:
                message = unmarked[pk]
                message.metadata = {**message.metadata, "replaced": {"after": after, "branch": branch[0]}}
            gone.update(branch)
        Message.objects.bulk_update([unmarked[pk] for pk in gone], ["metadata"])


class Migration(migrations.Migration):
    dependencies = [
        ("conversations", "0009_confirmation_names"),
    ]

    operations = [
        migrations.RunPython(mark_replaced, migrations.RunPython.noop),
    ]
