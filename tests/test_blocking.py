"""One rule for blocking calls (`unbounded.blocking`): the coroutine runs on a loop of its own,
in the calling thread when no loop runs there, else on a worker thread. Checked for the
runner itself and for every family of callers: providers, hooks, the session, integrations."""

from __future__ import annotations

import asyncio
import contextvars
import threading
import time
from collections.abc import Callable, Coroutine
from pathlib import Path
from typing import Any, TypeVar

import pytest

from apiserver import (
    ApiServer,
    api_server_fixture,  # noqa: F401  (registers the api_server fixture)
    message,
    tool_use_block,
)
from unbounded.blocking import BlockingRunner, loop_running_here, run_blocking
from unbounded.events import Event
from unbounded.hooks import HookRunner, HookSettings
from unbounded.model.profile import MODEL_PROFILE
from unbounded.model.request import ProviderRequest
from unbounded.model.response import Heartbeat, ModelResponse
from unbounded.policy import Policy
from unbounded.providers.base import SdkProvider
from unbounded.providers.retry import RetryingProvider
from unbounded.session import Session, SessionConfig
from unbounded.sync_session import SyncSession

MODEL = "claude-sonnet-4-6"
T = TypeVar("T")
_caller: contextvars.ContextVar[str] = contextvars.ContextVar("caller", default="unset")


def both_ways(call: Callable[[], T]) -> tuple[T, T]:
    """`call()` from plain blocking code, then from inside a running event loop."""

    async def inside() -> T:
        return call()

    return call(), asyncio.run(inside())


async def where() -> tuple[int, asyncio.AbstractEventLoop]:
    return threading.get_ident(), asyncio.get_running_loop()


# -- the rule ---------------------------------------------------------------------------


def test_run_blocking_runs_here_without_a_loop_and_on_a_worker_inside_one() -> None:
    here = threading.get_ident()
    (outside, _), (inside, _) = both_ways(lambda: run_blocking(where()))
    assert outside == here and inside != here
    assert not loop_running_here()
    assert asyncio.run(_is_running()) is True


async def _is_running() -> bool:
    return loop_running_here()


def test_errors_values_and_context_cross_the_worker_thread() -> None:
    async def fail() -> None:
        raise KeyError("missing")

    async def read_caller() -> str:
        return _caller.get()

    async def inside() -> str:
        _caller.set("the caller's")
        with pytest.raises(KeyError, match="missing"):
            run_blocking(fail())
        return run_blocking(read_caller())

    assert asyncio.run(inside()) == "the caller's"


def test_any_awaitable_not_only_a_coroutine() -> None:
    class Ready:
        def __await__(self) -> Any:
            yield from asyncio.sleep(0).__await__()
            return 7

    assert both_ways(lambda: run_blocking(Ready())) == (7, 7)


def test_the_runner_keeps_one_loop_inside_a_loop_too() -> None:
    runner = BlockingRunner()
    here = threading.get_ident()
    (outside_thread, first), (inside_thread, second) = both_ways(lambda: runner.run(where()))
    assert first is second and not first.is_closed()  # one loop, whichever thread runs it
    assert outside_thread == here and inside_thread != here

    async def close_inside() -> None:
        runner.close()

    asyncio.run(close_inside())
    assert first.is_closed()


def test_the_runner_called_from_its_own_loop_runs_elsewhere() -> None:
    with BlockingRunner() as runner:

        async def nested() -> tuple[asyncio.AbstractEventLoop, asyncio.AbstractEventLoop]:
            return asyncio.get_running_loop(), runner.run(where())[1]

        own, inner = runner.run(nested())
        assert inner is not own


def test_an_async_generator_steps_across_calls_inside_a_loop() -> None:
    async def numbers() -> Any:
        for number in range(3):
            await asyncio.sleep(0)
            yield number, asyncio.get_running_loop()

    async def step(agen: Any) -> Any:
        return await agen.__anext__()

    async def inside() -> list[Any]:
        with BlockingRunner() as runner:
            agen = numbers()
            return [runner.run(step(agen)) for _ in range(3)]

    steps = asyncio.run(inside())
    assert [n for n, _ in steps] == [0, 1, 2] and len({id(loop) for _, loop in steps}) == 1


def test_the_providers_run_sync_is_the_one_runner() -> None:
    from unbounded.providers import base

    assert base.run_sync is run_blocking


# -- providers ---------------------------------------------------------------------------


class ThreadProvider(SdkProvider):
    """Answers with the thread its call ran on."""

    name = "thread"
    supports_cache_edits = False
    profile = MODEL_PROFILE

    def _create(
        self,
        request: ProviderRequest,
        *,
        stream: bool,
        heartbeat: Heartbeat | None,
        want_async: bool,
    ) -> Coroutine[Any, Any, ModelResponse]:
        return self._answer()

    async def _answer(self) -> ModelResponse:
        text = str(threading.get_ident())
        return ModelResponse([{"type": "text", "text": text}], "end_turn", {}, MODEL)


def _request() -> ProviderRequest:
    return ProviderRequest(
        model=MODEL, messages=[{"role": "user", "content": "hi"}], max_tokens=16
    )


@pytest.mark.parametrize("wrapped", [False, True], ids=["sdk", "retrying"])
def test_provider_create_sync_follows_the_rule(wrapped: bool) -> None:
    provider: Any = ThreadProvider()
    if wrapped:
        provider = RetryingProvider(provider)
    outside, inside = both_ways(lambda: provider.create_sync(_request()).text)
    assert outside == str(threading.get_ident()) and inside != outside


# -- hooks -------------------------------------------------------------------------------


def test_hook_facades_follow_the_rule(tmp_path: Path) -> None:
    async def thread_hook(payload: dict[str, Any]) -> str:
        return str(threading.get_ident())

    settings = HookSettings().with_hook("SessionStart", thread_hook)
    runner = HookRunner(settings, session_id="s", cwd=tmp_path)
    (outside,), (inside,) = both_ways(runner.run_session_start)
    assert outside == str(threading.get_ident()) and inside != outside


# -- the session -------------------------------------------------------------------------


def test_sync_session_follows_the_rule() -> None:
    session = SyncSession(Session(SessionConfig(model=MODEL), policy=Policy()))

    def turn() -> str:
        session.add_user("hello")
        return session.call(ThreadProvider()).text

    outside, inside = both_ways(turn)
    assert outside == str(threading.get_ident()) and inside != outside
    assert [m["role"] for m in session.prepare()["messages"]] == ["user", "assistant"] * 2


# -- integrations ------------------------------------------------------------------------


def test_the_agent_loop_follows_the_rule(api_server: ApiServer) -> None:
    pytest.importorskip("anthropic")
    from unbounded.integrations import iter_agent, run_agent
    from unbounded.providers.anthropic import AnthropicProvider

    threads: list[int] = []

    def note(label: str) -> str:
        """Note a label."""
        threads.append(threading.get_ident())
        return f"noted {label}"

    def one_round() -> list[Event]:
        api_server.anthropic.push(
            message(tool_use_block("note", {"label": "a"}, id="toolu_1"), id="msg_1"),
            message("Done.", id="msg_2"),
        )
        provider = AnthropicProvider(api_server.anthropic_client(sync=True))
        return list(iter_agent(SessionConfig(model=MODEL), provider, tools=[note], prompt="go"))

    outside, inside = both_ways(one_round)
    assert [type(e).__name__ for e in outside] == [type(e).__name__ for e in inside]
    assert threads[0] == threading.get_ident() and threads[1] != threads[0]

    async def run_inside() -> str:
        api_server.anthropic.push(message("Hello.", id="msg_3"))
        provider = AnthropicProvider(api_server.anthropic_client(sync=True))
        return run_agent(SessionConfig(model=MODEL), provider, prompt="hi").text

    assert asyncio.run(run_inside()) == "Hello."


def test_the_blocking_client_drop_in_follows_the_rule(api_server: ApiServer) -> None:
    pytest.importorskip("anthropic")
    from unbounded.integrations import wrap

    client = wrap(api_server.anthropic_client(sync=True), policy=Policy())
    api_server.anthropic.push(message("One.", id="msg_1"), message("Two.", id="msg_2"))
    messages: list[Any] = [{"role": "user", "content": "Count."}]

    def call() -> str:
        reply = client.messages.create(model=MODEL, max_tokens=64, messages=messages)
        messages.append({"role": "assistant", "content": reply.content})
        messages.append({"role": "user", "content": "Again."})
        return str(reply.content[0].text)

    assert both_ways(call) == ("One.", "Two.")
    assert len(client.session.view) == 4  # both turns in the one session


def test_the_langchain_sync_hook_follows_the_rule() -> None:
    pytest.importorskip("langchain.agents.middleware")
    from langchain_core.messages import AIMessage, BaseMessage, HumanMessage, ToolMessage

    from unbounded.integrations import UnboundedMiddleware

    def conversation() -> list[BaseMessage]:
        messages: list[BaseMessage] = [HumanMessage("Read the modules.", id="h0")]
        for n in range(12):
            call = {"name": "read_file", "args": {"path": f"m{n}.py"}, "id": f"call_{n}"}
            messages.append(AIMessage(content="", tool_calls=[call], id=f"ai_{n}"))
            output = "x = compute(value)\n" * 450  # about 2,000 tokens
            messages.append(ToolMessage(content=output, tool_call_id=f"call_{n}", id=f"tool_{n}"))
        return messages

    def compact() -> str:  # over the threshold: the summary is written through run_blocking
        middleware = UnboundedMiddleware(
            MODEL, context_window=40_000, policy=Policy(small_window_reference=0), keep_messages=4
        )
        update = middleware.before_model({"messages": conversation()}, None)  # type: ignore[arg-type]
        assert update is not None
        return str(update["messages"][1].content)

    outside, inside = both_ways(compact)
    assert outside == inside and "Summary:" in outside


def test_a_runner_collected_inside_a_running_loop_never_waits_there() -> None:
    # The collector may run a runner's finalizer at any point, even where a thread pool's
    # submit holds the pools' shared lock: closing the loop must not need that lock here.
    import concurrent.futures.thread as pool_threads

    holder = [BlockingRunner()]
    holder[0].run(asyncio.sleep(0))
    loop = holder[0]._loop
    assert loop is not None
    finished = threading.Event()

    def collect_inside_a_loop() -> None:
        async def main() -> None:
            with pool_threads._global_shutdown_lock:  # type: ignore[attr-defined]
                holder.clear()  # the last reference: the finalizer runs now
            finished.set()

        asyncio.run(main())

    worker = threading.Thread(target=collect_inside_a_loop, daemon=True)
    worker.start()
    worker.join(timeout=30)  # a deadlock guard: the thread ends at once when all is well
    assert finished.is_set(), "the finalizer waited for a lock its own thread holds"
    deadline = time.monotonic() + 30  # closed on a thread of its own, soon after (a hang guard)
    while not loop.is_closed() and time.monotonic() < deadline:
        threading.Event().wait(0.05)
    assert loop.is_closed()


def test_a_sync_session_refuses_the_background_summary(tmp_path: Path) -> None:
    from unbounded.errors import ConfigError

    config = SessionConfig(model="claude-sonnet-4-6", system="You are careful.", context_window=200_000)
    with pytest.raises(ConfigError, match="use the async Session"):
        SyncSession.open(tmp_path / "a", config, policy=Policy(background_summary=True))
    SyncSession.open(tmp_path / "a", config, policy=Policy()).close()  # refused before the folder's lock was taken
    sync = SyncSession.open(tmp_path / "b", config, policy=Policy())
    with pytest.raises(ConfigError, match="background_summary"):
        sync.reconfigure(policy=Policy(background_summary=True))
    assert not sync.policy.background_summary  # refused before anything changed
    sync.close()


def test_a_sync_session_opens_with_a_policy_file(tmp_path: Path) -> None:
    from unbounded.errors import ConfigError

    config = SessionConfig(model="claude-sonnet-4-6", context_window=200_000)
    calm, eager = tmp_path / "calm.toml", tmp_path / "eager.toml"
    calm.write_text("[policy]\nautocompact_pct_override = 40\n", encoding="utf-8")
    eager.write_text("[policy]\nbackground_summary = true\n", encoding="utf-8")
    with SyncSession.open(tmp_path / "a", config, policy=calm) as sync:
        assert sync.session.options.policy == Policy.from_file(calm)
    with pytest.raises(ConfigError, match="use the async Session"):
        SyncSession.open(tmp_path / "b", config, policy=str(eager))


def test_a_sync_session_refuses_a_background_summary_given_in_options_before_the_folder(tmp_path: Path) -> None:
    from unbounded.errors import ConfigError
    from unbounded.session_options import SessionOptions

    config = SessionConfig(model="claude-sonnet-4-6", context_window=200_000)
    options = SessionOptions(policy=Policy(background_summary=True))
    with pytest.raises(ConfigError, match="use the async Session"):
        SyncSession.open(tmp_path / "a", config, options=options)
    SyncSession.open(tmp_path / "a", config).close()  # the folder's lock was never taken
    transcript = Path(__file__).parent / "fixtures" / "sessions" / "resumed.jsonl"
    with pytest.raises(ConfigError, match="use the async Session"):
        SyncSession.from_transcript(transcript, tmp_path / "b", config, options=options)
    # Nothing was written: the folder still takes a transcript (it refuses one holding a session).
    with SyncSession.from_transcript(transcript, tmp_path / "b", config) as sync:
        assert sync.messages


def test_a_sync_session_given_a_policy_in_options_does_not_read_the_environment(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from unbounded.session_options import SessionOptions

    monkeypatch.setenv("UNBOUNDED_AUTOCOMPACT_PCT_OVERRIDE", "500")  # Policy.from_env() refuses it
    config = SessionConfig(model="claude-sonnet-4-6", context_window=200_000)
    given = Policy(autocompact_pct_override=40)
    with SyncSession.open(tmp_path / "a", config, options=SessionOptions(policy=given)) as sync:
        assert sync.session.options.policy == given
