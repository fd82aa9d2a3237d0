"""What the local provider says without the model writing it (providers/local/answers.py and routing.py's rules):
tool results told by the tools' own summaries, calls that did not run, a question when it cannot tell, no
dangerous call unless the request says the action, and arguments held to what the request says."""

from __future__ import annotations

import pytest

from agentchat.agent.providers import ChatMessage, ToolSchema
from agentchat.agent.providers.local import answers
from agentchat.agent.providers.local.routing import (
    example_words,
    grounded,
    names_by_number,
    names_its_action,
    needs_a_number,
)
from tools.registry import registry

pytestmark = pytest.mark.django_db


def schema(name: str) -> ToolSchema:
    return registry.get(name).schema()


def turn(request: str, *results: tuple[str, str, str]) -> list[ChatMessage]:
    """A request, the calls it made, and their results as (tool, content, outcome)."""
    calls = [{"id": f"call_{i}", "name": name, "args": {}} for i, (name, _, _) in enumerate(results)]
    history: list[ChatMessage] = [
        {"role": "user", "content": request},
        {"role": "assistant", "content": "", "tool_calls": calls},
    ]
    history += [
        {"role": "tool", "tool_call_id": f"call_{i}", "name": name, "content": content, "outcome": outcome}
        for i, (name, content, outcome) in enumerate(results)
    ]
    return history


def test_calls_that_did_not_run_are_told_as_such_in_the_request_language():
    tools = [schema("deploy_dashboard"), schema("commit_changes")]

    english = answers.after_calls(
        turn(
            "Deploy dashboard 3 to staging and commit dashboard 4",
            ("deploy_dashboard", "Error: rejected by the user. Reason: not today", "rejected"),
            ("commit_changes", "Error: the server stopped while commit_changes was running…", "unknown"),
        ),
        tools,
    )
    russian = answers.after_calls(
        turn("Выкати дашборд 3 на стейджинг", ("deploy_dashboard", "Error: rejected by the user.", "rejected")), tools
    )

    assert english == (
        "You rejected `deploy_dashboard`, so it did not run.\n\n"
        "The server stopped while `commit_changes` was running, so whether it took effect is not known. "
        "Check before asking again."
    )
    assert russian == "Вы отклонили `deploy_dashboard`, поэтому он не выполнялся."
    failed = turn("tagged revenue", ("search_dashboards", "Error: search_dashboards failed: No tag.", "error"))
    assert answers.after_calls(failed, tools) == "`search_dashboards` did not succeed: No tag."


def test_of_several_calls_of_one_tool_the_one_that_did_not_run_is_told_with_its_arguments():
    tools = [schema("deploy_dashboard")]
    history = turn(
        "Выкати дашборды 4 и 6 в прод",
        ("deploy_dashboard", "Error: rejected by the user.", "rejected"),
        ("deploy_dashboard", "Error: rejected by the user.", "rejected"),
    )
    history[1]["tool_calls"] = [
        {"id": f"call_{i}", "name": "deploy_dashboard", "args": {"dashboard_id": i + 4, "environment": "production"}}
        for i in range(2)
    ]

    assert answers.after_calls(history, tools) == (
        'Вы отклонили `deploy_dashboard(dashboard_id=4, environment="production")`, поэтому он не выполнялся.\n\n'
        'Вы отклонили `deploy_dashboard(dashboard_id=5, environment="production")`, поэтому он не выполнялся.'
    )


def test_a_result_without_a_summary_is_shown_as_it_is():
    plain: ToolSchema = {"name": "lookup", "description": "Look up.", "parameters": {"type": "object"}}

    text = answers.after_calls(turn("Look it up", ("lookup", '{"answer": 42}', "done")), [plain])

    assert text == '`lookup` returned:\n\n```\n{"answer": 42}\n```'


def test_a_failing_summary_falls_back_to_the_result():
    def broken(output, language):
        raise KeyError("total")

    tool: ToolSchema = {"name": "count", "description": "Count.", "parameters": {"type": "object"}, "summarize": broken}

    assert answers.after_calls(turn("Count", ("count", "7", "done")), [tool]) == "`count` returned:\n\n```\n7\n```"


def test_the_question_it_asks_quotes_an_example_of_each_tool_in_the_persons_language():
    tools = [schema("dashboard_health"), schema("create_branch")]

    assert answers.unsure("Проверь состояние дашборда 19", tools) == (
        "Я не уверен, что именно нужно сделать. Вы имели в виду что-то вроде «Какие проблемы у дашборда 5?» или "
        "«Создай ветку draft-2 для дашборда 6»?"
    )
    assert answers.unsure("Check dashboard 19", tools).startswith(
        "I am not sure what you would like me to do. Did you mean something like “"
    )


def test_a_russian_request_for_no_tool_is_told_what_the_demo_model_can_do():
    text = answers.what_it_can_do("Спокойной ночи!", [schema("search_dashboards"), schema("dashboard_health")])

    assert text.startswith("Я — демонстрационная модель, которая работает прямо на этом сервере")
    assert "LLM_PROVIDER=openai-compatible" in text
    assert "Попробуйте, например: «" in text


def test_asked_what_it_is_in_english_it_says_what_the_demo_model_can_do():
    text = answers.what_it_can_do("Hi! What can you do?", [schema("search_dashboards"), schema("dashboard_health")])

    assert text.startswith("I am the demo model that runs on this server: I can only work with the tools")
    assert "Try, for example: “" in text


@pytest.mark.parametrize(
    ("request_text", "about_itself"),
    [
        ("Hi! What can you do?", True),
        ("Who made you?", True),
        ("How can you help me?", True),
        ("What's your name?", True),
        ("Help", True),
        ("помогите!", True),
        ("Help me find dashboard 7", False),
        ("What can dashboard 7 do?", False),
        ("Thanks, that was helpful", False),
        ("Who owns dashboard 3?", False),
    ],
)
def test_questions_about_the_assistant_itself_are_told_apart(request_text: str, about_itself: bool):
    assert answers.asks_about_itself(request_text) is about_itself


@pytest.mark.parametrize(
    ("request_text", "allowed"),
    [
        ("Deploy dashboard 9 to staging", True),
        ("Please deploy dashboard 9 to production", True),
        ("Could you deploy dashboard 9?", True),
        ("Выкати дашборд 9 в прод", True),
        ("Можешь опубликовать дашборд 14 на стейджинге?", True),
        ("Is it safe to deploy dashboard 9 to production?", False),
        ("Can dashboard 7 go to production?", False),
        ("What happens when I deploy dashboard 3?", False),
        ("Можно ли выкатить дашборд 9?", False),
        ("How healthy is dashboard 3?", False),
        ("Show the dashboards I can deploy to production", False),
        ("Покажи, что выкатить на прод", False),
    ],
)
def test_a_tool_that_waits_for_approval_is_offered_only_when_the_request_asks_for_its_action(request_text, allowed):
    assert names_its_action(request_text, schema("deploy_dashboard")) is allowed
    assert names_its_action(request_text, schema("dashboard_health"))  # a tool that reads is always offered


def test_migration_words_are_not_the_action_of_migrating():
    migrate = schema("execute_migration")

    assert not names_its_action("What migrations are pending on dashboard 42?", migrate)
    assert names_its_action("Run the pending migration of dashboard 42", migrate)
    assert names_its_action("Примени миграции дашборда 5", migrate)
    assert not names_its_action("Show the migrations to run on dashboard 5", migrate)


def test_without_declared_words_the_first_word_of_the_name_is_the_action():
    assert schema("deploy_dashboard")["action_words"][0].startswith(r"\b(deploy")
    assert "action_words" not in schema("search_dashboards")


def test_a_tool_that_needs_an_id_is_one_that_needs_a_number():
    assert needs_a_number(schema("dashboard_health"))
    assert not needs_a_number(schema("search_dashboards"))


def test_arguments_are_held_to_what_the_request_says():
    tools = [
        schema(name) for name in ("search_dashboards", "dashboard_health", "execute_migration", "deploy_dashboard")
    ]
    common = example_words(tools)

    migration = grounded(schema("execute_migration"), "Run migration 5 of dashboard 3", common)
    assert migration["properties"]["dashboard_id"]["enum"] == [3]  # the number after "dashboard"
    # Said after its own word, a number is not the model's to leave out: the tool would run another migration.
    assert migration["properties"]["migration_id"]["anyOf"] == [{"enum": [5]}]
    assert "migration_id" in migration["required"]
    second = grounded(schema("search_dashboards"), "Show page 2 of dashboards with errors", common)
    assert second["properties"]["page"]["enum"] == [2] and "page" in second["required"]  # not the default, 1
    assert "page_size" not in second["properties"]  # "page 2" is the page's, not the page size's: left to the tool

    search = grounded(schema("search_dashboards"), "Show me Maria Ivanova's dashboards", common)
    phrases = search["properties"]["query"]["enum"]
    assert "Maria Ivanova's" in phrases and "Maria" in phrases
    assert not any(phrase.lower().startswith(("show", "me ")) or phrase.endswith("dashboards") for phrase in phrases)
    assert "" not in phrases
    about = grounded(schema("search_dashboards"), "Search for dashboards about revenue", common)["properties"]
    assert about["query"]["enum"] == ["revenue"]  # "search" is how the request is put: the tool's name says so

    drafts = grounded(schema("search_dashboards"), "Which dashboards are still drafts?", common)
    assert drafts["properties"]["status"]["anyOf"] == [{"enum": ["draft"], "type": "string"}]
    assert "status" in drafts["required"]

    deploy = grounded(schema("deploy_dashboard"), "Ship dashboard 5 to staging", common)["properties"]
    assert deploy["environment"]["enum"] == ["staging"]
    assert deploy["dashboard_id"]["enum"] == [5]


def test_a_field_the_request_says_nothing_for_keeps_its_schema():
    common = example_words([schema("dashboard_health")])

    health = grounded(schema("dashboard_health"), "How is the sales dashboard?", common)

    assert (
        health["properties"]["dashboard_id"] == schema("dashboard_health")["parameters"]["properties"]["dashboard_id"]
    )


def test_a_number_that_belongs_to_another_argument_is_not_offered():
    common = example_words([schema("execute_migration")])

    migration = grounded(schema("execute_migration"), "Execute the pending migration on dashboard 11", common)

    assert migration["properties"]["dashboard_id"]["enum"] == [11]
    assert "migration_id" not in migration["properties"]  # left out: the next one


def test_a_choice_named_in_other_words_is_taken():
    common = example_words([schema("deploy_dashboard"), schema("search_dashboards")])

    deploy = grounded(schema("deploy_dashboard"), "Выкати дашборд 14 на стейджинг", common)
    drafts = grounded(schema("search_dashboards"), "Покажи опубликованные дашборды", common)

    assert deploy["properties"]["environment"]["enum"] == ["staging"]
    assert drafts["properties"]["status"]["anyOf"] == [{"enum": ["published"], "type": "string"}]


def test_what_the_request_does_not_name_is_left_out():
    search = schema("search_dashboards")
    common = example_words([schema(name) for name in ("search_dashboards", "dashboard_health", "deploy_dashboard")])

    for request in ["What dashboards do I have?", "Какие у меня есть дашборды?", "Покажи мои дашборды"]:
        properties = grounded(search, request, common)["properties"]
        assert sorted(properties) == ["page", "page_size"], request  # no words, owner, tag, status or problems


def test_a_yes_or_no_named_in_words_is_taken_and_the_narrower_words_win():
    search = schema("search_dashboards")
    common = example_words([search])

    with_problems = grounded(search, "Show dashboards with errors", common)
    without = grounded(search, "Какие дашборды без проблем валидации?", common)

    assert with_problems["properties"]["has_validation_problems"]["anyOf"] == [{"type": "boolean", "enum": [True]}]
    assert not {"query", "owner", "tag"} & set(with_problems["properties"])  # "errors" is not also a tag
    assert without["properties"]["has_validation_problems"]["anyOf"] == [{"type": "boolean", "enum": [False]}]
    assert "has_validation_problems" in without["required"]
    # Words that name the choice together are all of them the choice's, none a word to search for.
    for request in ["Which dashboards are fine?", "Покажи дашборды в порядке", "Dashboards that are in good order"]:
        fine = grounded(search, request, common)["properties"]
        assert fine["has_validation_problems"]["anyOf"] == [{"type": "boolean", "enum": [False]}], request
        assert not {"query", "owner", "tag"} & set(fine), request


def test_a_choice_named_twice_is_left_to_the_tool():
    search = schema("search_dashboards")
    common = example_words([search])

    errors = grounded(search, "Show dashboards with errors", common)
    warnings = grounded(search, "Какие дашборды с предупреждениями?", common)
    both = grounded(search, "Show dashboards with errors or warnings", common)

    assert errors["properties"]["severity"]["anyOf"] == [{"enum": ["error"], "type": "string"}]
    assert warnings["properties"]["severity"]["anyOf"] == [{"enum": ["warning"], "type": "string"}]
    # Either would leave the other's dashboards out: the problems of every severity count.
    assert "severity" not in both["properties"]
    assert both["properties"]["has_validation_problems"]["anyOf"] == [{"type": "boolean", "enum": [True]}]


def test_a_search_never_leaves_the_requests_own_words_out():
    tools = [schema(name) for name in ("search_dashboards", "create_branch", "commit_changes")]
    common = example_words(tools)

    published = grounded(schema("search_dashboards"), "Покажи опубликованные дашборды про маркетинг", common)
    assert {"status", "query"} <= set(published["required"])
    assert published["properties"]["query"]["enum"] == ["маркетинг"]
    olivia = grounded(schema("search_dashboards"), "Which dashboards belong to Olivia Chen?", common)
    assert "owner" in olivia["required"] and "query" not in olivia["required"]
    branch = grounded(schema("create_branch"), "Make a branch of dashboard 15 for testing things", common)
    assert branch["required"] == ["dashboard_id"]  # a name left out is the tool's to make


def test_a_tag_or_an_owner_is_filled_only_when_the_request_says_so():
    search = schema("search_dashboards")
    common = example_words([search])

    for request in ["Какие дашборды про продажи?", "Покажи дашборды про логистику", "Look for dashboards about churn"]:
        properties = grounded(search, request, common)["properties"]
        assert not {"tag", "owner"} & set(properties), request
        assert properties["query"]["enum"], request  # the words are searched for
    for request, field, value in [
        ("Покажи дашборды с тегом finance", "tag", "finance"),
        ("Dashboards tagged marketing", "tag", "marketing"),
        ("Find the dashboards owned by Olivia Chen", "owner", "Olivia Chen"),
        ("Какие дашборды принадлежат Ирине Смирновой?", "owner", "Ирине Смирновой"),
    ]:
        assert value in grounded(search, request, common)["properties"][field]["enum"], request


def test_a_cue_word_is_not_taken_for_what_it_points_at():
    search = schema("search_dashboards")
    common = example_words([search])

    for request in ["Who owns it?", "Кто владелец?", "Which tags are there?"]:
        properties = grounded(search, request, common)["properties"]
        assert not {"query", "owner", "tag"} & set(properties), request
    olivia = grounded(search, "Dashboards owned by Olivia", common)["properties"]
    assert olivia["owner"]["enum"] == ["Olivia"]
    # Asking who owns them: the words are what to look for, not an owner.
    for request, words in [
        ("Who owns the marketing dashboards?", "marketing"),
        ("Чьи дашборды про продажи?", "продажи"),
    ]:
        asked = grounded(search, request, common)
        assert "owner" not in asked["properties"], request
        assert asked["properties"]["query"]["enum"] == [words], request


def test_a_commit_message_is_all_that_follows_its_cue_and_none_is_made_up():
    commit = schema("commit_changes")
    common = example_words([commit])

    for request, message in [
        ("Commit my changes to dashboard 5 with message fixed stock filter", "fixed stock filter"),
        ("Commit dashboard 5 with the message: “fix totals”", "fix totals"),
        ("Сохрани правки дашборда 7 с сообщением поправил итоги", "поправил итоги"),
    ]:
        properties = grounded(commit, request, common)["properties"]
        assert properties["message"]["enum"] == [message], request
    for request in ["Commit the pending changes on dashboard 25", "Закоммить всё в дашборде 2"]:
        assert not {"message", "branch"} & set(grounded(commit, request, common)["properties"]), request


def test_an_action_word_alone_is_not_a_name():
    branch = schema("create_branch")
    common = example_words([branch])

    for request in ["Сделай ветку для него", "Make a branch for it"]:
        assert "name" not in grounded(branch, request, common)["properties"], request
    named = grounded(branch, "Create a branch new-filters for dashboard 5", common)["properties"]
    assert named["name"]["anyOf"][0]["enum"] == ["new-filters"]


def test_a_question_never_creates_a_branch():
    assert not names_its_action("Сколько веток у дашборда 5?", schema("create_branch"))
    assert names_its_action("Create a branch of dashboard 5", schema("create_branch"))


def test_a_dashboard_named_by_its_number_is_for_the_tools_that_take_one():
    assert names_by_number("Does dashboard 16 have changes that nobody committed?", schema("dashboard_health"))
    assert names_by_number("Готов ли дашборд 18 к выкатке в прод?", schema("deploy_dashboard"))
    assert not names_by_number("Does dashboard 16 have changes that nobody committed?", schema("search_dashboards"))
    assert not names_by_number("Сколько будет 2+2?", schema("dashboard_health"))


def test_an_action_the_user_may_not_take_is_refused_in_words_and_only_then():
    reading = [schema("search_dashboards"), schema("dashboard_health")]
    withheld = [schema(name) for name in ("create_branch", "deploy_dashboard")]

    assert answers.not_permitted("Create a branch of dashboard 3", reading, withheld).startswith(
        "You may not use `create_branch`"
    )
    assert answers.not_permitted("Выкати дашборд 9 в прод", reading, withheld).startswith(
        "Вам нельзя использовать `deploy_dashboard`"
    )
    # A question about the action reads; a request for nothing withheld, or for an action also offered, goes on.
    assert answers.not_permitted("Is it safe to deploy dashboard 9?", reading, withheld) == ""
    assert answers.not_permitted("Show dashboards about sales", reading, withheld) == ""
    assert answers.not_permitted("Deploy dashboard 9", [*reading, schema("deploy_dashboard")], withheld) == ""


def test_the_word_after_called_is_a_name_and_a_number_inside_a_name_is_no_id():
    tools = [schema(name) for name in ("search_dashboards", "create_branch", "commit_changes")]
    common = example_words(tools)
    for request_text in ["Create a branch called test on dashboard 9", "Создай ветку с именем test для дашборда 9"]:
        branch = grounded(schema("create_branch"), request_text, common)
        assert branch["properties"]["name"]["anyOf"][0]["enum"] == ["test"], request_text
        assert branch["properties"]["dashboard_id"]["enum"] == [9]
    # No number of its own: the request is asked which dashboard it means (decide), the 4 of "fix-4" is not one.
    unnumbered = grounded(schema("create_branch"), "Create a branch called fix-4", common)
    assert "enum" not in unnumbered["properties"]["dashboard_id"]


def test_a_dashboard_tools_refusal_is_told_in_the_requests_language():
    refused = "Error: create_branch failed: Dashboard 6 has a branch named 'fix' already; choose another name."
    russian = answers.after_calls(
        turn("Создай ветку fix для дашборда 6", ("create_branch", refused, "error")), [schema("create_branch")]
    )
    english = answers.after_calls(
        turn("Create branch fix for dashboard 6", ("create_branch", refused, "error")), [schema("create_branch")]
    )

    assert russian == "`create_branch` не удался: У дашборда 6 уже есть ветка 'fix'; выберите другое имя."
    assert english == (
        "`create_branch` did not succeed: Dashboard 6 has a branch named 'fix' already; choose another name."
    )
