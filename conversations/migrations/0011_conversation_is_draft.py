from django.db import migrations, models


class Migration(migrations.Migration):
    dependencies = [
        ("conversations", "0010_message_replaced"),
    ]

    operations = [
        migrations.AddField(
            model_name="conversation",
            name="is_draft",
            field=models.BooleanField(default=False, verbose_name="draft"),
        ),
        migrations.AddIndex(
            model_name="conversation",
            index=models.Index(
                condition=models.Q(("is_draft", True)), fields=["created_at"], name="conversation_drafts"
            ),
        ),
    ]
