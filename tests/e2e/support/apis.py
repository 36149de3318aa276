"""Fake implementations of the example APIs (openapi-examples/weather.yaml and translate.yaml).

The answers are deterministic functions of the request, so a test can compute what the agent must
answer for any city, and a reply meant for one conversation is recognisable in another.
"""
from __future__ import annotations

import zlib

from .mocks import Recorded, Response

WEATHER_NOW = "/v3/weather/now"          # server base path /v3 + operation path /weather/now
TRANSLATE = "/v2/translate"

_KNOWN = {"Jinan": (21, "sunny"), "Oslo": (-3, "snowing"), "Berlin": (12, "cloudy")}
_CONDITIONS = ("sunny", "cloudy", "windy", "light rain", "foggy", "snowing")
_PHRASES = {"good morning": {"DE": "Guten Morgen", "EN": "Good morning", "FR": "Bonjour",
                             "ZH": "早上好", "JA": "おはようございます"}}


def weather_for(city: str) -> tuple[int, str]:
    """(°C, condition) for a city: a few fixed ones, the others derived from the name."""
    if city in _KNOWN:
        return _KNOWN[city]
    h = zlib.crc32(city.encode())
    return h % 40 - 5, _CONDITIONS[h // 40 % len(_CONDITIONS)]


def weather_api(rec: Recorded) -> Response:
    """GET /v3/weather/now?location=&unit=c|f"""
    city, unit = rec.query.get("location"), rec.query.get("unit", "c")
    if not city or unit not in ("c", "f"):
        return Response.json({"error": "location is required and unit must be c or f"}, 400)
    celsius, condition = weather_for(city)
    temperature = celsius if unit == "c" else round(celsius * 9 / 5 + 32)
    return Response.json({"location": city, "temperature": temperature, "unit": unit, "condition": condition})


def translate_api(rec: Recorded) -> Response:
    """POST /v2/translate {"text", "target_lang"}"""
    try:
        body = rec.json()
        text, lang = body["text"], body["target_lang"]
    except (ValueError, KeyError, TypeError):
        return Response.json({"error": "the body needs text and target_lang"}, 422)
    translation = _PHRASES.get(text.strip().lower(), {}).get(lang, f"[{lang}] {text}")
    return Response.json({"translation": translation, "detected_source_lang": "EN", "target_lang": lang})


def weather_routes() -> dict:
    return {("GET", WEATHER_NOW): weather_api}


def translate_routes() -> dict:
    return {("POST", TRANSLATE): translate_api}

