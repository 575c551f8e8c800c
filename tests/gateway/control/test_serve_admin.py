"""The one client of Serve's REST API, against httpx.MockTransport.

What it proves without a cluster: the token comes from the environment (read on every
call) as `Authorization: Bearer`, each method makes the call `serve deploy` makes, and
a failed call says what was being done without ever showing the token.
"""

from __future__ import annotations

import json
from typing import Any

import httpx
import pytest

from gateway.control.serve_admin import APPLICATIONS_PATH, VERSION_PATH, ServeAdmin, ServeAdminError

TOKEN = "tok-9f2c61d0e5"


class Recorder:
    def __init__(self, status: int = 200, body: object = None, text: str | None = None) -> None:
        self.status, self.body, self.text = status, body, text
        self.requests: list[httpx.Request] = []

    def __call__(self, request: httpx.Request) -> httpx.Response:
        self.requests.append(request)
        if self.text is not None:
            return httpx.Response(self.status, text=self.text)
        return httpx.Response(self.status, json=self.body if self.body is not None else {})

    def admin(self, **kw: Any) -> ServeAdmin:
        return ServeAdmin("http://dash:8265/", transport=httpx.MockTransport(self), **kw)


@pytest.fixture
def env_token(monkeypatch: pytest.MonkeyPatch, tmp_path) -> None:
    monkeypatch.setenv("RAY_AUTH_TOKEN", TOKEN)
    monkeypatch.setenv("RAY_AUTH_TOKEN_PATH", str(tmp_path / "absent"))


def test_each_method_makes_serves_call_with_the_token_from_the_environment(env_token) -> None:
    rec = Recorder(body={"applications": {}})
    with rec.admin() as admin:
        assert admin.is_up()
        assert admin.instance() == {"applications": {}}
        admin.put({"applications": [{"name": "a"}]})
        admin.delete_applications()
    calls = [(r.method, r.url.path) for r in rec.requests]
    assert calls == [
        ("GET", VERSION_PATH),
        ("GET", APPLICATIONS_PATH),
        ("PUT", APPLICATIONS_PATH),
        ("DELETE", APPLICATIONS_PATH),
    ]
    assert {r.url.host for r in rec.requests} == {"dash"}
    assert {r.headers["authorization"] for r in rec.requests} == {f"Bearer {TOKEN}"}
    assert json.loads(rec.requests[2].content) == {"applications": [{"name": "a"}]}


def test_the_token_is_read_on_every_call(monkeypatch, tmp_path) -> None:
    # `ray start` may write Ray's token file after the client was made
    token_file = tmp_path / "auth_token"
    monkeypatch.delenv("RAY_AUTH_TOKEN", raising=False)
    monkeypatch.setenv("RAY_AUTH_TOKEN_PATH", str(token_file))
    rec = Recorder()
    with rec.admin() as admin:
        admin.is_up()
        token_file.write_text(f"{TOKEN}\n")
        admin.is_up()
    assert "authorization" not in rec.requests[0].headers
    assert rec.requests[1].headers["authorization"] == f"Bearer {TOKEN}"


def test_an_explicit_token_or_none_overrides_the_environment(env_token) -> None:
    rec = Recorder()
    rec.admin(token="other").is_up()
    rec.admin(token=None).is_up()
    assert rec.requests[0].headers["authorization"] == "Bearer other"
    assert "authorization" not in rec.requests[1].headers


def test_refusals_and_errors_say_what_was_done_and_never_show_the_token(env_token) -> None:
    with pytest.raises(ServeAdminError, match="refused our credentials") as refused:
        Recorder(401, text=f"bad token {TOKEN}").admin().instance()
    assert refused.value.status_code == 401
    with pytest.raises(ServeAdminError, match="sending the new Serve config: HTTP 500") as failed:
        Recorder(500, text=f"Traceback ...\nValueError: echo {TOKEN}").admin().put({})
    assert failed.value.status_code == 500
    for err in (refused.value, failed.value):
        assert TOKEN not in str(err) and TOKEN not in err.body
    assert "[token]" in failed.value.body


def test_an_unreachable_dashboard(env_token) -> None:
    def down(request: httpx.Request) -> httpx.Response:
        raise httpx.ConnectError("connection refused", request=request)

    admin = ServeAdmin("http://dash:8265", transport=httpx.MockTransport(down))
    assert admin.is_up() is False
    with pytest.raises(ServeAdminError, match="cannot reach the Ray dashboard") as err:
        admin.instance()
    assert err.value.status_code is None
    with pytest.raises(ServeAdminError, match="sending the new Serve config failed"):
        admin.put({})


def test_an_answer_that_is_not_a_json_object_is_an_error(env_token) -> None:
    with pytest.raises(ServeAdminError, match="other than a JSON object"):
        Recorder(text="<html>proxy error</html>").admin().instance()
