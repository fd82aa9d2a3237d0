"""The owner's search key holds the name in Latin letters too, so that "Maria" finds "Мария Иванова": the column
becomes a text, as a transliteration can be several times as long as the name, and is filled again for the dashboards
there are."""

from django.db import migrations, models

from tools.dashboards.models import owner_search_key


def fill_owner_keys(apps, schema_editor) -> None:
    Dashboard = apps.get_model("dashboards", "Dashboard")
    dashboards = list(Dashboard.objects.only("pk", "owner"))
    for dashboard in dashboards:
        dashboard.owner_key = owner_search_key(dashboard.owner)
    Dashboard.objects.bulk_update(dashboards, ["owner_key"], batch_size=500)


class Migration(migrations.Migration):
    dependencies = [
        ("dashboards", "0001_initial"),
    ]

    operations = [
        migrations.AlterField(
            model_name="dashboard",
            name="owner_key",
            field=models.TextField(blank=True, editable=False),
        ),
        migrations.RunPython(fill_owner_keys, migrations.RunPython.noop),
    ]
