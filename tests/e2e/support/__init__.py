"""Helpers shared by the end-to-end tests and the demo: recording mock servers, a deterministic ReAct
model, fake example APIs, an Envoy launcher and a raw HTTP client. Standard library only."""
