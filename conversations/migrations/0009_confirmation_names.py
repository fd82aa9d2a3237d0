from django.db import migrations


class Migration(migrations.Migration):
    dependencies = [
        ("conversations", "0007_message_search"),
    ]

    operations = [
        migrations.AlterModelOptions(
            name="pendingconfirmation",
            options={"ordering": ["-created_at"], "verbose_name": "confirmation", "verbose_name_plural": "confirmations"},
        ),
    ]
