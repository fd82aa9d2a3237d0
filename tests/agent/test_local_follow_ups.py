"""Requests that go on from earlier calls (providers/local/follow_ups.py): another page of the last search, the last
search narrowed, "it", an action said without its object, and an item of the last list by its place. The rules on their
own, then whole requests on the real model."""

from __future__ import annotations

import json

import pytest

from agentchat.agent.prompts import build_system_prompt
from agentchat.agent.providers import ChatMessage, ProviderChatParams, ToolCall
from agentchat.agent.providers.local import LocalProvider, answers
from agentchat.agent.providers.local.follow_ups import (
    Page,
    another_page,
    completed,
    earlier_calls,
    last_ids,
    last_object,
    looked_within,
    narrowed,
    pointed_at,
)
from tools.registry import registry

from .test_local_provider import ONE_THREAD
from .test_local_routing import offered, said, user

pytestmark = pytest.mark.django_db


def searched(args: dict, result: dict, call_id: str = "s1", outcome: str = "done") -> list[ChatMessage]:
    return [
        user("Which dashboards have validation problems?"),
        {
            "role": "assistant",
            "content": "",
            "tool_calls": [{"id": call_id, "name": "search_dashboards", "args": args}],
        },
        {
            "role": "tool",
            "tool_call_id": call_id,
            "name": "search_dashboards",
            "content": json.dumps(result),
            "outcome": outcome,
        },
        {"role": "assistant", "content": "Found 22 dashboards: …"},
    ]


def checked(dashboard_id: int, call_id: str = "h1") -> list[ChatMessage]:
    call = {"id": call_id, "name": "dashboard_health", "args": {"dashboard_id": dashboard_id}}
    return [
        user(f"How is dashboard {dashboard_id} doing?"),
        {"role": "assistant", "content": "", "tool_calls": [call]},
        {"role": "tool", "tool_call_id": call_id, "name": "dashboard_health", "content": "{}", "outcome": "done"},
        {"role": "assistant", "content": "…"},
    ]


PROBLEMS = {"has_validation_problems": True}
PAGE_1_OF_3 = {"total": 22, "page": 1, "pages": 3, "items": []}


def page_asked(request: str, history: list[ChatMessage]) -> dict | None:
    page = another_page(request, earlier_calls(history), offered())
    if page is None:
        return None
    if page.call:
        return {"args": page.call["args"]}
    return {"asked": page.asked, "pages": page.pages} | ({} if page.listed else {"listed": False})


@pytest.mark.parametrize(
    "request_text",
    [
        "next",
        "Next page",
        "show me more",
        "more please",
        "and the next page?",
        "next 10",
        "дальше",
        "Ещё",
        "покажи следующую страницу",
        "а следующие?",
        "продолжай",
    ],
)
def test_a_request_for_more_is_the_last_search_a_page_on(request_text: str):
    assert page_asked(request_text, searched(PROBLEMS, PAGE_1_OF_3)) == {"args": {**PROBLEMS, "page": 2}}


@pytest.mark.parametrize(
    "request_text",
    ["page 3", "Show page 3", "страница 3", "покажи 3-ю страницу", "last page", "Покажи последнюю страницу"],
)
def test_a_page_named_by_its_number_is_that_page(request_text: str):
    assert page_asked(request_text, searched(PROBLEMS, PAGE_1_OF_3)) == {"args": {**PROBLEMS, "page": 3}}


def test_the_first_page_is_page_one_and_the_last_is_the_last_page_once_known():
    on_page_2 = searched({**PROBLEMS, "page": 2}, {**PAGE_1_OF_3, "page": 2})
    for request_text in ["first page", "show me the first page please", "первая страница", "Покажи первую страницу"]:
        assert page_asked(request_text, on_page_2) == {"args": {**PROBLEMS, "page": 1}}, request_text
    # A result that does not say how many pages it has: the last page is the one shown.
    assert page_asked("last page", searched({**PROBLEMS, "page": 2}, {"items": []})) == {
        "args": {**PROBLEMS, "page": 2}
    }


def test_the_previous_page_and_pages_that_do_not_exist():
    on_page_2 = searched({**PROBLEMS, "page": 2}, {**PAGE_1_OF_3, "page": 2})
    assert page_asked("previous page", on_page_2) == {"args": {**PROBLEMS, "page": 1}}
    assert page_asked("назад", searched(PROBLEMS, PAGE_1_OF_3)) == {"asked": 0, "pages": 3}
    on_page_3 = searched({**PROBLEMS, "page": 3}, {**PAGE_1_OF_3, "page": 3})
    assert page_asked("next", on_page_3) == {"asked": 4, "pages": 3}
    assert page_asked("page 7", searched(PROBLEMS, PAGE_1_OF_3)) == {"asked": 7, "pages": 3}


def test_more_pages_are_of_the_last_search_that_ran_and_only_for_a_request_that_asks_for_one():
    # A health check since does not take pages: the search before it does.
    assert page_asked("next", [*searched(PROBLEMS, PAGE_1_OF_3), *checked(12)]) == {"args": {**PROBLEMS, "page": 2}}
    # A search that did not run has no pages to go on from, and is said so, as when there was none.
    nothing = {"asked": 0, "pages": 0, "listed": False}
    assert page_asked("next", searched(PROBLEMS, PAGE_1_OF_3, outcome="error")) == nothing
    assert page_asked("next", checked(12)) == nothing
    for request_text in ["Tell me more about dashboard 3", "Show me the drafts", "more dashboards about sales"]:
        assert page_asked(request_text, searched(PROBLEMS, PAGE_1_OF_3)) is None
    # A tool that acts is never called again unasked, even one that takes pages.
    acting = {**registry.get("search_dashboards").schema(), "action_words": [r"\barchive"]}
    assert another_page("next", earlier_calls(searched(PROBLEMS, PAGE_1_OF_3)), [acting]) == Page(listed=False)


def test_a_search_of_them_keeps_the_last_searchs_arguments_and_starts_at_page_one():
    earlier = earlier_calls(searched({**PROBLEMS, "page": 2}, {**PAGE_1_OF_3, "page": 2}))
    asked = ToolCall(id="c", name="search_dashboards", args={"query": "", "owner": "Olivia", "page": 1})

    for request_text in ["Which of them are owned by Olivia?", "Какие из них у Оливии?", "Any among them by Olivia?"]:
        search = looked_within(request_text, earlier, offered())
        assert search is not None and search["name"] == "search_dashboards", request_text
    assert narrowed(asked, earlier, search)["args"] == {**PROBLEMS, "owner": "Olivia"}
    # Said afresh, the search is the request's own.
    assert looked_within("Which dashboards are owned by Olivia?", earlier, offered()) is None
    # Within what the last call found, with that call's tool, if the user is offered it.
    after_a_check = looked_within(
        "Which of them is broken?", earlier_calls([*searched(PROBLEMS, {}), *checked(3)]), offered()
    )
    assert after_a_check is not None and after_a_check["name"] == "dashboard_health"
    assert looked_within("Which of them are drafts?", earlier, []) is None
    assert looked_within("Which of them are drafts?", [], offered()) is None


def test_it_means_the_ids_of_the_last_call_that_took_any():
    after_a_search = earlier_calls([*checked(12), *searched(PROBLEMS, PAGE_1_OF_3)])
    assert last_ids(after_a_search, "Who owns it?") == {"dashboard_id": 12}
    assert last_ids(earlier_calls(searched(PROBLEMS, PAGE_1_OF_3)), "Who owns it?") == {}
    # "them" after a search means what it listed, which took no ids.
    assert last_ids(after_a_search, "Deploy them") == {}


LISTED = {**PAGE_1_OF_3, "items": [{"id": id_, "title": f"Dashboard {id_}"} for id_ in (3, 7, 12, 19)]}


@pytest.mark.parametrize(
    ("request_text", "picked"),
    [
        ("Deploy the first one to staging", 3),
        ("check the second one", 7),
        ("How about the 3rd one?", 12),
        ("Who owns the last one?", 19),
        ("Run the migrations of the last dashboard", 19),
        ("Проверь второй", 7),
        ("Что со вторым?", 7),
        ("Выкати первый на стейджинг", 3),
        ("А у последнего какие проблемы?", 19),
    ],
)
def test_an_item_picked_by_its_place_is_that_item_of_the_last_list(request_text: str, picked: int):
    assert pointed_at(request_text, earlier_calls(searched(PROBLEMS, LISTED)), []) == {"id": picked}


def test_a_place_is_an_item_only_of_a_list_that_has_it():
    listed = earlier_calls(searched(PROBLEMS, LISTED))
    # Beyond the list, a page, or an order of doing things: no item.
    for request_text in [
        "the fifth one",
        "Покажи первую страницу",
        "First deploy dashboard 3",
        "в первый раз",
        "Когда был последний деплой?",
    ]:
        assert pointed_at(request_text, listed, []) == {}, request_text
    # A call since that listed nothing (a check of one of them) leaves the list as it was; a search that found
    # nothing, or no list, has no items.
    assert pointed_at("the first one", earlier_calls([*searched(PROBLEMS, LISTED), *checked(12)]), []) == {"id": 3}
    assert pointed_at("the first one", earlier_calls(searched(PROBLEMS, {"total": 0, "items": []})), []) == {}
    assert pointed_at("the first one", earlier_calls(checked(12)), checked(12)) == {}
    assert pointed_at("the first one", [], []) == {}
    # "it" still means the last call's ids, and nothing else points back.
    assert pointed_at("Who owns it?", earlier_calls(checked(12)), checked(12)) == {"dashboard_id": 12}
    assert pointed_at("Who owns dashboard 4?", earlier_calls(checked(12)), checked(12)) == {}


@pytest.fixture(scope="module")
def provider() -> LocalProvider:
    return LocalProvider(ONE_THREAD)


async def answer(provider: LocalProvider, history: list[ChatMessage]):
    params = ProviderChatParams(messages=history, system_prompt=build_system_prompt(), tools=offered())
    return await provider.chat(params)


async def test_on_the_model_a_follow_up_goes_on_from_the_last_search(provider: LocalProvider):
    history = searched(PROBLEMS, PAGE_1_OF_3)
    [call] = (await answer(provider, [*history, user("дальше")])).tool_calls
    assert (call["name"], call["args"]) == ("search_dashboards", {**PROBLEMS, "page": 2})
    for request_text, narrower in [
        ("Which of them are owned by Olivia?", {"owner": "Olivia"}),
        ("А какие из них опубликованы?", {"status": "published"}),
    ]:
        [call] = (await answer(provider, [*history, user(request_text)])).tool_calls
        assert (call["name"], said(call["name"], call["args"])) == ("search_dashboards", {**PROBLEMS, **narrower})
    last = await answer(provider, [*searched({**PROBLEMS, "page": 3}, {**PAGE_1_OF_3, "page": 3}), user("next")])
    assert last.tool_calls == [] and last.content == "That was the last page: there are 3."
    last = await answer(provider, [*searched({**PROBLEMS, "page": 3}, {**PAGE_1_OF_3, "page": 3}), user("дальше")])
    assert last.content == "Это была последняя страница: всего их 3."
    nothing = await answer(provider, [*checked(12), user("next")])
    assert nothing.tool_calls == []
    assert nothing.content == "There is no list here to turn the page of yet: ask for one first."


async def test_on_the_model_a_branch_for_it_gets_a_generated_name_not_the_requests_words(provider: LocalProvider):
    for request_text in ["Создай ветку для него", "Сделай ветку для него", "Make a branch for it"]:
        [call] = (await answer(provider, [*checked(14), user(request_text)])).tool_calls
        assert (call["name"], call["args"].get("name")) == ("create_branch", None), request_text
        assert call["args"]["dashboard_id"] == 14


def asked_where(request_text: str) -> list[ChatMessage]:
    return [user(request_text), {"role": "assistant", "content": "Which environment do you mean: …?"}]


def test_a_short_reply_completes_the_request_that_left_a_choice_unsaid():
    tools = offered()
    assert completed("staging", asked_where("Deploy dashboard 5"), tools) == "Deploy dashboard 5 staging"
    assert (
        completed("в прод, пожалуйста", asked_where("Выкати дашборд 9"), tools) == "Выкати дашборд 9 в прод, пожалуйста"
    )
    # Anything else is a request of its own.
    for reply, history in [
        ("Show the dashboards on staging and their owners", asked_where("Deploy dashboard 5")),
        ("thanks", asked_where("Deploy dashboard 5")),
        ("staging", asked_where("Deploy dashboard 5 to production")),
        ("staging", asked_where("Is dashboard 5 on staging?")),
        ("staging", [*asked_where("Deploy dashboard 5")[:1], *checked(5)[1:]]),
        ("staging", []),
    ]:
        assert completed(reply, history, tools) == reply, (reply, history)


async def test_on_the_model_an_unsaid_environment_is_asked_for_never_chosen(provider: LocalProvider):
    asked = await answer(provider, [user("Deploy dashboard 5")])
    assert asked.tool_calls == []
    assert asked.content == (
        "Which environment do you mean: staging or production? You can say it in the request, for example "
        "“Deploy dashboard 3 to staging”."
    )
    [call] = (
        await answer(provider, [user("Deploy dashboard 5"), assistant(asked.content), user("staging")])
    ).tool_calls
    assert (call["name"], call["args"]) == ("deploy_dashboard", {"dashboard_id": 5, "environment": "staging"})

    asked = await answer(provider, [user("Выкати дашборд 9")])
    assert asked.tool_calls == [] and asked.content.startswith(
        "Какое значение environment вы имеете в виду: staging или"
    )
    [call] = (await answer(provider, [user("Выкати дашборд 9"), assistant(asked.content), user("в прод")])).tool_calls
    assert (call["name"], call["args"]) == ("deploy_dashboard", {"dashboard_id": 9, "environment": "production"})


async def test_on_the_model_a_reply_to_which_tool_was_meant_is_read_with_the_request(provider: LocalProvider):
    asked = await answer(provider, [user("Push dashboard 8 to production")])
    assert asked.tool_calls == [] and answers.asked_what_was_meant(asked.content)

    def replied(text: str) -> list[ChatMessage]:
        return [user("Push dashboard 8 to production"), assistant(asked.content), user(text)]

    [call] = (await answer(provider, replied("deploy it"))).tool_calls
    assert (call["name"], call["args"]) == ("deploy_dashboard", {"dashboard_id": 8, "environment": "production"})
    [call] = (await answer(provider, replied("check it"))).tool_calls
    assert (call["name"], call["args"]) == ("dashboard_health", {"dashboard_id": 8})
    # A reply that answers nothing is read on its own, not asked about again.
    thanks = await answer(provider, replied("thanks"))
    assert thanks.tool_calls == [] and not answers.asked_what_was_meant(thanks.content)


def test_the_question_of_which_tool_was_meant_is_known_in_either_language():
    tools = [registry.get("dashboard_health").schema(), registry.get("create_branch").schema()]
    assert answers.asked_what_was_meant(answers.unsure("Check dashboard 19", tools))
    assert answers.asked_what_was_meant(answers.unsure("Проверь состояние дашборда 19", tools))
    assert not answers.asked_what_was_meant("I am the demo model that runs on this server.")


def assistant(text: str) -> ChatMessage:
    return {"role": "assistant", "content": text}


def test_it_in_a_reply_to_which_tool_was_meant_is_the_object_asked_about():
    tools = [registry.get("dashboard_health").schema(), registry.get("deploy_dashboard").schema()]
    asked = [user("Push dashboard 8 to production"), assistant(answers.unsure("Push dashboard 8 to production", tools))]
    assert pointed_at("check it", [], asked) == {"id": 8}
    # Before an older call's object, which the question came after.
    assert pointed_at("check it", earlier_calls(checked(12)), [*checked(12), *asked]) == {"id": 8}
    # Not a reply that points at nothing, nor one to another answer, nor after a request of two numbers.
    assert pointed_at("thanks", [], asked) == {}
    assert pointed_at("check it", [], [user("Push dashboard 8 to production"), assistant("Done.")]) == {}
    two = [user("Push dashboards 8 and 9"), assistant(answers.unsure("Push dashboards 8 and 9", tools))]
    assert pointed_at("check it", [], two) == {}


def checked_together(*ids: int) -> list[ChatMessage]:
    calls = [{"id": f"h{i}", "name": "dashboard_health", "args": {"dashboard_id": i}} for i in ids]
    return [
        user(f"How healthy are dashboards {' and '.join(map(str, ids))}?"),
        {"role": "assistant", "content": "", "tool_calls": calls},
        *({"role": "tool", "tool_call_id": call["id"], "name": "dashboard_health", "content": "{}"} for call in calls),
        assistant("…"),
    ]


async def test_on_the_model_them_means_each_object_of_the_last_turn(provider: LocalProvider):
    history = [*checked(12), *checked_together(3, 5)]
    for request_text, environment in [("Deploy them to staging", "staging"), ("Выкати их в прод", "production")]:
        calls = (await answer(provider, [*history, user(request_text)])).tool_calls
        assert [(call["name"], call["args"]) for call in calls] == [
            ("deploy_dashboard", {"dashboard_id": 3, "environment": environment}),
            ("deploy_dashboard", {"dashboard_id": 5, "environment": environment}),
        ], request_text
    # After a search, "them" is what it listed, which no call took: the model asks which, as with nothing before.
    for before in [[*history, *searched(PROBLEMS, PAGE_1_OF_3)], []]:
        asked = await answer(provider, [*before, user("Deploy them to staging")])
        assert asked.tool_calls == [] and asked.content == (
            "Which one do you mean? Say its number, for example “Deploy dashboard 3 to staging”."
        )


async def test_on_the_model_an_action_without_its_object_is_asked_which_then_done(provider: LocalProvider):
    asked = await answer(provider, [user("Create a branch called fix-4")])
    assert asked.tool_calls == [] and answers.asked_what_was_meant(asked.content)
    assert asked.content == "Which one do you mean? Say its number, for example “Create a branch of dashboard 5”."
    [call] = (
        await answer(provider, [user("Create a branch called fix-4"), assistant(asked.content), user("8")])
    ).tool_calls
    assert (call["name"], said(call["name"], call["args"])) == ("create_branch", {"dashboard_id": 8, "name": "fix-4"})

    asked = await answer(provider, [user("Выкати на прод")])
    assert asked.content == "Какой именно вы имеете в виду? Назовите его номер, например «Выкати дашборд 9 в прод»."
    history = [user("Выкати на прод"), assistant(asked.content), user("дашборд 4")]
    [call] = (await answer(provider, history)).tool_calls
    assert (call["name"], call["args"]) == ("deploy_dashboard", {"dashboard_id": 4, "environment": "production"})


def test_the_one_object_the_last_turn_was_about():
    assert last_object(earlier_calls(checked(12))) == {"dashboard_id": 12}
    assert last_object(earlier_calls([*checked_together(3, 5), *checked(12)])) == {"dashboard_id": 12}
    # A turn about several, a search since, or no call: no one object.
    assert last_object(earlier_calls([*checked(12), *checked_together(3, 5)])) == {}
    assert last_object(earlier_calls([*checked(12), *searched(PROBLEMS, PAGE_1_OF_3)])) == {}
    assert last_object([]) == {}


async def test_on_the_model_an_action_said_without_its_object_is_on_the_one_the_last_turn_was_about(
    provider: LocalProvider,
):
    for request_text, call in [
        ("Run the migrations", ("execute_migration", {"dashboard_id": 12})),
        ("Выкати на прод", ("deploy_dashboard", {"dashboard_id": 12, "environment": "production"})),
    ]:
        [made] = (await answer(provider, [*checked(12), user(request_text)])).tool_calls
        assert (made["name"], made["args"]) == call, request_text
    # After a look at two, or a search since: which one is asked, as with nothing before.
    for before in [[*checked(12), *checked_together(3, 5)], [*checked(12), *searched(PROBLEMS, PAGE_1_OF_3)]]:
        asked = await answer(provider, [*before, user("Run the migrations")])
        assert asked.tool_calls == [] and answers.asked_what_was_meant(asked.content)


async def test_on_the_model_a_pointed_object_takes_no_made_up_arguments(provider: LocalProvider):
    [call] = (await answer(provider, [*checked(12), user("Запусти их")])).tool_calls
    assert (call["name"], call["args"]) == ("execute_migration", {"dashboard_id": 12})  # no migration_id made up
    [call] = (await answer(provider, [*checked(12), user("Run migration 2 on it")])).tool_calls
    assert (call["name"], call["args"]) == ("execute_migration", {"dashboard_id": 12, "migration_id": 2})
    # An action the model did not take for a call is asked about, not answered with small talk.
    asked = await answer(provider, [*checked(12), user("Run them")])
    assert asked.tool_calls == [] and asked.content.startswith(
        "I am not sure what you would like me to do. Did you mean something like “"
    )


async def test_on_the_model_an_item_picked_from_the_list_is_checked_or_acted_on(provider: LocalProvider):
    history = searched(PROBLEMS, LISTED)
    for request_text, call in [
        ("ok deploy the first one to staging", ("deploy_dashboard", {"dashboard_id": 3, "environment": "staging"})),
        ("What's wrong with the second one?", ("dashboard_health", {"dashboard_id": 7})),
        ("Что с последним?", ("dashboard_health", {"dashboard_id": 19})),
    ]:
        [made] = (await answer(provider, [*history, user(request_text)])).tool_calls
        assert (made["name"], made["args"]) == call, request_text
    # Said by its number, the dashboard is the one said.
    [made] = (await answer(provider, [*history, user("Check the first one, dashboard 12")])).tool_calls
    assert (made["name"], made["args"]) == ("dashboard_health", {"dashboard_id": 12})
    # With no list shown, or none that long, it says so rather than make one up.
    for request_text, before in [("the first one", []), ("Что с пятым?", history)]:
        said_so = await answer(provider, [*before, user(request_text)])
        assert said_so.tool_calls == [] and said_so.content == answers.not_in_a_list(request_text), request_text
    assert answers.not_in_a_list("Что с пятым?").startswith("Ни в одном показанном здесь списке")
