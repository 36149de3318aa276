"""No state shared between requests: concurrent conversations on one Envoy worker each get the tool
call and the answer for their own question."""
from concurrent.futures import ThreadPoolExecutor

from support.agent import answer_of
from support.apis import weather_for

CITIES = ("Amsterdam Athens Bangkok Barcelona Beijing Bergen Berlin Bogota Boston Brussels Budapest Cairo "
          "Chicago Delhi Dublin Dubai Geneva Hamburg Hanoi Helsinki Istanbul Jakarta Jinan Kyiv Lagos Lima "
          "Lisbon London Madrid Manila Melbourne Montreal Moscow Mumbai Munich Nairobi Osaka Oslo Paris Prague "
          "Riga Rome Santiago Seoul Shanghai Stockholm Sydney Tokyo Vienna Warsaw").split()


def test_fifty_concurrent_conversations_do_not_mix(gateway, mocks):
    assert len(CITIES) == 50
    questions = {city: f"What is the weather in {city} right now?" for city in CITIES}
    with ThreadPoolExecutor(max_workers=len(CITIES)) as pool:
        replies = dict(zip(CITIES, pool.map(gateway.chat, questions.values())))

    for city, reply in replies.items():
        celsius, condition = weather_for(city)
        assert answer_of(reply) == f"It is {celsius} °C and {condition} in {city}.", city
        assert len(mocks.llm.requests_for(questions[city])) == 2, city
    assert sorted(r.query["location"] for r in mocks.weather.requests) == sorted(CITIES)
