"""api-agent demo: Envoy with the filter answers two questions by calling two APIs.

It starts, all on 127.0.0.1 (fixed ports, see envoy/demo.yaml):
  * a mock LLM on :18001 that plays a ReAct model deterministically (weather words -> get_weather_now
    for the city in the question, "translate" -> translate_text; then a final answer written from
    the observation),
  * mock weather (:18002) and translate (:18003) APIs for openapi-examples/,
  * Envoy with envoy/demo.yaml (listener :10000), loading the --wasm module,
then asks through the official openai client, once plain and once streaming, prints each answer and
the agent's steps as the mocks saw them, and stops everything (also on Ctrl-C or an error).

    python demo/run.py --envoy .venv/bin/envoy --wasm dist/api_agent.wasm
"""
from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile

import yaml
from openai import OpenAI

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), ".."))
sys.path.insert(0, os.path.join(ROOT, "tests", "e2e"))   # one implementation of the mocks for tests and demo

from support.apis import translate_routes, weather_routes  # noqa: E402
from support.envoy import Envoy, EnvoyError, with_wasm  # noqa: E402
from support.mocks import Exchange, MockLLM, MockServer  # noqa: E402
from support.react import ReactModel  # noqa: E402

CONFIG = os.path.join(ROOT, "envoy", "demo.yaml")
LLM_PORT, WEATHER_PORT, TRANSLATE_PORT = 18001, 18002, 18003     # as in envoy/demo.yaml
QUESTIONS = [("What's the weather in Jinan right now?", False),
             ('Please translate "Good morning" into German.', True)]
WIDTH = 100


def main() -> int:
    args = parse_args()
    with tempfile.TemporaryDirectory(prefix="api-agent-demo-") as workdir:
        return run(args, workdir)


def run(args: argparse.Namespace, workdir: str) -> int:
    mocks: list[MockServer] = []
    envoy = None
    try:
        start_mocks(mocks)
        envoy = Envoy(args.envoy, with_wasm(load_config(), args.wasm), workdir).start()
        print(f"Envoy on 127.0.0.1:{envoy.port} with {os.path.relpath(args.wasm)}; mock LLM :{LLM_PORT}, "
              f"weather API :{WEATHER_PORT}, translate API :{TRANSLATE_PORT}\n")
        ask_all(envoy.port, mocks)
        return 0
    except KeyboardInterrupt:
        print("\ninterrupted", file=sys.stderr)
        return 130
    except (DemoError, EnvoyError) as e:
        print(f"demo failed: {e}", file=sys.stderr)
        return 1
    finally:
        if envoy is not None:
            envoy.stop()
        for m in mocks:
            m.stop()


class DemoError(Exception):
    """Why the demo cannot run, in one line."""


def start_mocks(mocks: list[MockServer]) -> None:
    """The mocks on the fixed ports envoy/demo.yaml points at, appended as they start (so that every
    started one gets stopped)."""
    makers = [(LLM_PORT, lambda: MockLLM(ReactModel(), port=LLM_PORT)),
              (WEATHER_PORT, lambda: MockServer("weather", weather_routes(), WEATHER_PORT)),
              (TRANSLATE_PORT, lambda: MockServer("translate", translate_routes(), TRANSLATE_PORT))]
    for port, make in makers:
        try:
            mocks.append(make().start())
        except OSError as e:
            raise DemoError(f"cannot listen on 127.0.0.1:{port} ({e.strerror}); the demo's ports are fixed, "
                            "see envoy/demo.yaml") from e


def parse_args() -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--envoy", required=True, help="the envoy binary")
    p.add_argument("--wasm", required=True, help="the filter module, e.g. dist/api_agent.wasm")
    args = p.parse_args()
    for path in (args.envoy, args.wasm):
        if not os.path.isfile(path):
            p.error(f"{path} does not exist (run `make setup build`)")
    return args


def load_config() -> dict:
    with open(CONFIG, encoding="utf-8") as f:
        return yaml.safe_load(f)


def ask_all(port: int, mocks: list[MockServer]) -> None:
    client = OpenAI(base_url=f"http://127.0.0.1:{port}/v1", api_key="sk-demo", max_retries=0, timeout=30)
    with client:
        for n, (question, stream) in enumerate(QUESTIONS, 1):
            for m in mocks:
                m.reset()
            print(f"[{n}] client.chat.completions.create({'stream=True' if stream else ''})")
            print(f"Q: {question}")
            print(f"A: {ask(client, question, stream)}")
            print_steps(mocks)
            print()


def ask(client: OpenAI, question: str, stream: bool) -> str:
    messages = [{"role": "user", "content": question}]
    if not stream:
        return client.chat.completions.create(model="gpt-4o-mini", messages=messages).choices[0].message.content
    chunks = client.chat.completions.create(model="gpt-4o-mini", messages=messages, stream=True)
    return "".join(c.choices[0].delta.content or "" for c in chunks if c.choices)


def print_steps(mocks: list[MockServer]) -> None:
    """Every request the agent made, in order: to the LLM (what it was told last, what it answered)
    and to the APIs (the request line, what came back)."""
    steps = sorted(((m.name, e) for m in mocks for e in m.exchanges), key=lambda s: s[1].request.at)
    print("   steps (as the mocks saw them):")
    for i, (name, e) in enumerate(steps, 1):
        told, answered = llm_summary(e) if name == "llm" else tool_summary(e)
        print(shorten(f"   {i}. {name:<9} {e.request.method} {told}"))
        print(shorten(f"      {'':<9} -> {answered}"))


def llm_summary(e: Exchange) -> tuple[str, str]:
    """(the last message the agent sent, the model's reply without its Thought line)."""
    last = e.request.json()["messages"][-1]["content"]
    try:
        reply = json.loads(e.response.body)["choices"][0]["message"]["content"]
    except (ValueError, KeyError, IndexError, TypeError):
        reply = f"HTTP {e.response.status} {e.response.text()}"
    steps = [ln for ln in reply.splitlines() if not ln.startswith("Thought:")]
    return f"{e.request.path}  {one_line(last)}", one_line(" ".join(steps))


def tool_summary(e: Exchange) -> tuple[str, str]:
    """(the request target and body, the status and body of the reply)."""
    sent = f"{e.request.target}  {one_line(e.request.body.decode())}".rstrip()
    return sent, f"{e.response.status} {one_line(e.response.text())}"


def one_line(text: str) -> str:
    return " ".join(text.split())


def shorten(line: str) -> str:
    return line if len(line) <= WIDTH else line[:WIDTH - 1] + "…"


if __name__ == "__main__":
    sys.exit(main())
