import django.db.models.deletion
from django.conf import settings
from django.db import migrations, models


class Migration(migrations.Migration):
    dependencies = [
        ("conversations", "0005_message_error"),
        migrations.swappable_dependency(settings.AUTH_USER_MODEL),
    ]

    operations = [
        migrations.AddField(
            model_name="message",
            name="superseded",
            field=models.BooleanField(
                default=False,
                help_text="Replaced by a regenerated answer or an edited question: kept, never sent to the model.",
            ),
        ),
        migrations.AddField(
            model_name="message",
            name="usage",
            field=models.JSONField(
                blank=True,
                help_text="For an answer: {prompt_tokens, completion_tokens}, as reported.",
                null=True,
            ),
        ),
        migrations.AlterField(
            model_name="auditevent",
            name="kind",
            field=models.CharField(
                choices=[
                    ("conversation_created", "conversation created"),
                    ("conversation_renamed", "conversation renamed"),
                    ("conversation_archived", "conversation archived"),
                    ("conversation_restored", "conversation restored"),
                    ("message_sent", "message sent"),
                    ("message_edited", "message edited"),
                    ("answer_regenerated", "answer regenerated"),
                    ("run_continued", "run continued"),
                    ("run_started", "run started"),
                    ("run_finished", "run finished"),
                    ("tool_called", "tool called"),
                    ("tool_succeeded", "tool succeeded"),
                    ("tool_failed", "tool failed"),
                    ("confirmation_requested", "confirmation requested"),
                    ("confirmation_decided", "confirmation decided"),
                    ("permission_denied", "permission denied"),
                    ("attachment_uploaded", "attachment uploaded"),
                    ("attachment_rejected", "attachment rejected"),
                    ("auth_failed", "authentication failed"),
                ],
                db_index=True,
                max_length=32,
            ),
        ),
        migrations.CreateModel(
            name="TokenUsage",
            fields=[
                ("id", models.BigAutoField(auto_created=True, primary_key=True, serialize=False, verbose_name="ID")),
                ("day", models.DateField()),
                ("prompt_tokens", models.PositiveBigIntegerField(default=0)),
                ("completion_tokens", models.PositiveBigIntegerField(default=0)),
                (
                    "answers",
                    models.PositiveIntegerField(default=0, help_text="Answers (rounds) whose usage was reported."),
                ),
                (
                    "user",
                    models.ForeignKey(
                        on_delete=django.db.models.deletion.CASCADE, related_name="+", to=settings.AUTH_USER_MODEL
                    ),
                ),
            ],
            options={
                "verbose_name_plural": "token usage",
                "ordering": ["-day", "user"],
                "constraints": [models.UniqueConstraint(fields=("user", "day"), name="token_usage_user_day")],
            },
        ),
    ]
