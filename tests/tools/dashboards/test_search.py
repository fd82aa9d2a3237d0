"""search_dashboards: filters that combine, pagination, problem counts — on the demo catalogue."""

from __future__ import annotations

import importlib

import pytest
from django.apps import apps

from tools.dashboards.demo import CATALOGUE, DASHBOARD_PROBLEMS, PROBLEMS
from tools.dashboards.exceptions import TagError
from tools.dashboards.models import Dashboard
from tools.registry import ToolArgumentsError

from .conftest import call

pytestmark = pytest.mark.django_db

backfill = importlib.import_module("tools.dashboards.migrations.0002_owner_in_latin_letters")


def search(user=None, /, **args):
    return call("search_dashboards", user, **args)


def ids(result) -> list[int]:
    return [item["id"] for item in result["items"]]


def every(**args) -> list[int]:
    result = search(page_size=50, **args)
    assert result["total"] <= 50
    return ids(result)


def test_no_filters_is_the_first_page_of_everything(catalogue):
    result = search()

    assert result["total"] == len(CATALOGUE) == Dashboard.objects.count()
    assert (result["page"], result["page_size"], result["pages"]) == (1, 10, 7)
    assert ids(result) == list(range(1, 11))
    first = result["items"][0]
    assert first == {
        "id": 1,
        "title": "Executive KPI overview",
        "owner": "Emma Clarke",
        "status": "published",
        "tags": ["executive", "finance"],
        "problems": {"error": 0, "warning": 0, "info": 0},
    }


def test_pages(catalogue):
    assert ids(search(page=2, page_size=5)) == [6, 7, 8, 9, 10]
    last = search(page=13, page_size=5)
    assert ids(last) == [61, 62, 63, 64] and last["pages"] == 13
    beyond = search(page=20, page_size=5)
    assert beyond["items"] == [] and beyond["total"] == 64


def test_with_validation_problems(catalogue):
    found = every(has_validation_problems=True)

    assert found == sorted(DASHBOARD_PROBLEMS)
    assert 42 in found
    items = {item["id"]: item for item in search(has_validation_problems=True, page_size=50)["items"]}
    assert all(sum(item["problems"].values()) > 0 for item in items.values())
    assert items[7]["problems"] == {"error": 1, "warning": 1, "info": 0}
    assert items[42]["problems"] == {"error": 0, "warning": 2, "info": 1}


def test_problems_of_one_severity(catalogue):
    severities = {number: {PROBLEMS[code][0] for code in codes} for number, codes in DASHBOARD_PROBLEMS.items()}
    with_errors = sorted(number for number, found in severities.items() if "error" in found)
    with_warnings = sorted(number for number, found in severities.items() if "warning" in found)
    with_notes = sorted(number for number, found in severities.items() if "info" in found)
    assert with_errors and set(with_errors) != set(with_warnings)
    assert every(has_validation_problems=True, severity="error") == with_errors == every(severity="error")
    assert every(severity="warning") == with_warnings and every(severity="info") == with_notes
    # Without errors: warnings and notes are still there; without any problem: none.
    without_errors = search(has_validation_problems=False, severity="error", page_size=50)
    assert without_errors["total"] == len(CATALOGUE) - len(with_errors)
    assert not set(ids(without_errors)) & set(with_errors) and set(ids(without_errors)) & set(with_warnings)
    assert every(severity="warning", status="draft") == [n for n in with_warnings if CATALOGUE[n - 1][2] == "draft"]


def test_the_worst_first(catalogue):
    result = search(order="worst", page_size=50)
    worst = [
        ((item["problems"]["error"], item["problems"]["warning"], item["problems"]["info"]), item["id"])
        for item in result["items"]
    ]

    assert result["order"] == "worst" and result["total"] == len(CATALOGUE)
    # Most errors first, then most warnings, then most notes; alike, the oldest first.
    assert worst == sorted(worst, key=lambda each: (tuple(-count for count in each[0]), each[1]))
    assert worst[0][0][0] == max(counts[0] for counts, _ in worst) > 0
    assert {id_ for counts, id_ in worst if any(counts)} == set(DASHBOARD_PROBLEMS)
    # With a filter, a page at a time, as ever.
    assert ids(search(order="worst", has_validation_problems=True, page_size=3)) == [id_ for _, id_ in worst[:3]]
    assert search()["order"] == "id"


def test_without_validation_problems(catalogue):
    result = search(has_validation_problems=False, page_size=50)
    assert result["total"] == len(CATALOGUE) - len(DASHBOARD_PROBLEMS)
    assert not set(ids(result)) & set(DASHBOARD_PROBLEMS)


def test_words_match_any_case_in_any_alphabet(catalogue):
    assert every(query="ВОРОНКА") == [28, 42]
    assert every(query="воронка регион") == [42]
    assert every(query="Cash Flow") == [15]
    assert every(query="nothing like this") == []


def test_words_match_tags_and_ids(catalogue):
    assert every(query="procurement") == [25]
    assert 42 in every(query="42")


def test_a_word_matches_in_any_of_its_forms(catalogue):
    irina = [number for number, entry in enumerate(CATALOGUE, start=1) if entry[1] == "Ирина Смирнова"]
    logistics = [number for number, entry in enumerate(CATALOGUE, start=1) if "логистик" in entry[0].lower()]
    assert logistics and every(query="логистику") == logistics  # "Логистика: сроки доставки"
    assert every(query="Ирине Смирновой") == irina == every(owner="Ирины Смирновой")
    assert every(query="продажи") == every(query="продаж")
    assert 3 in every(query="campaigns")  # "Marketing campaign performance"


def owned_by(name: str) -> list[int]:
    return [number for number, entry in enumerate(CATALOGUE, start=1) if entry[1] == name]


def test_an_owners_name_is_found_in_either_alphabet(catalogue):
    maria, alexey, dmitry = owned_by("Мария Иванова"), owned_by("Алексей Кузнецов"), owned_by("Дмитрий Орлов")
    assert maria and every(owner="Maria") == maria == every(owner="Mariya Ivanova") == every(owner="Иванова")
    assert every(owner="Alexey") == alexey == every(owner="Aleksei Kuznetsov")
    assert every(owner="Dmitry Orlov") == dmitry == every(query="Dmitriy")
    assert every(owner="Ivanova's") == maria
    assert every(owner="Оливия") == owned_by("Olivia Chen") == every(query="Оливии")
    # Every word must still match: a first name with another's surname finds no one.
    assert every(owner="Maria Orlova") == []
    assert every(owner="Maria", status="draft") == [n for n in maria if CATALOGUE[n - 1][2] == "draft"]


def test_a_saved_dashboard_is_found_by_its_owners_name_in_latin_letters(catalogue):
    made = Dashboard.objects.create(title="Склад", owner="Наталья Щукина")
    assert every(owner="Natalia Shchukina") == [made.pk]
    made.owner = "Юлия Ким"
    made.save(update_fields=["owner"])
    assert every(owner="Natalia") == [] and every(owner="Yulia") == [made.pk]
    # The longest name, transliterated four times as long, is kept whole.
    made.owner = "Щ" * 100
    made.save(update_fields=["owner"])
    assert every(owner="shch" * 25) == [made.pk]
    assert Dashboard.objects.get(pk=made.pk).owner_key.endswith(" " + "shch" * 100)


def test_the_migration_fills_the_owners_keys_there_are(catalogue):
    Dashboard.objects.update(owner_key="")  # as stored before, in Cyrillic only, which no Latin name finds
    assert every(owner="Maria") == []
    backfill.fill_owner_keys(apps, None)
    assert every(owner="Maria") == owned_by("Мария Иванова") == every(owner="Марии")


def test_owner_tag_and_status(catalogue):
    alexey = [number for number, entry in enumerate(CATALOGUE, start=1) if entry[1] == "Алексей Кузнецов"]
    assert every(owner="кузнецов") == alexey
    assert every(tag="Procurement") == [25]
    with pytest.raises(TagError, match=r"^There is no tag 'proc'; the tags are: customers, data-quality, executive, "):
        search(tag="proc")  # a tag is matched whole
    with pytest.raises(TagError, match=r"no tag 'продажи'.* support, tax\.$"):
        search(query="продажи", tag="продажи")
    assert every(status="deprecated") == [30, 47, 63]


def test_filters_combine(catalogue):
    sales = {number for number, entry in enumerate(CATALOGUE, start=1) if "sales" in entry[3].split()}
    assert every(tag="sales", has_validation_problems=True) == sorted(sales & set(DASHBOARD_PROBLEMS))
    assert every(tag="sales", has_validation_problems=True, query="регион") == [42]


@pytest.mark.parametrize(
    ("args", "field"),
    [({"page_size": 500}, "page_size"), ({"page": 0}, "page"), ({"status": "broken"}, "status")],
)
def test_bad_arguments_name_the_field(catalogue, args, field):
    with pytest.raises(ToolArgumentsError, match=field):
        search(**args)
