from __future__ import annotations

import threading
from collections.abc import Iterator
from decimal import Decimal
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pandas as pd
import pytest
import yaml

from dashboard.access.guard import PermissionDenied
from dashboard.access.sessions import SessionStore, SessionUser
from dashboard.auth import MIN_PBKDF2_ITERATIONS, USERS_ENV, hash_password, load_users
from dashboard.routing_editor import (
    PendingChange,
    apply_change,
    history_frame,
    propose_change,
    weights_frame,
)
from dashboard.settings import DashboardSettings
from db.routing_audit import list_routing_changes
from gateway.control.declarative import RoutingUpdateError
from gateway.domain.config import default_config_path, load_config
from gateway.domain.routing_settings import RoutingError, routing_from_config
from tests.fixtures.kube_api_server import FakeKubeApi
from tests.gateway.conftest import plain_gateway  # noqa: F401 - the replica below
from tests.gateway.control import test_kuberay_routing as kuberay_case
from tests.gateway.control.test_kuberay_routing import replica  # noqa: F401 - a fixture

CFG = load_config(default_config_path())
SETTINGS = routing_from_config(CFG)


def edited(**weights):
    return pd.DataFrame({"model": list(weights), "weight": list(weights.values())})


def test_weights_frame_shows_shares_per_alias():
    frame = weights_frame(SETTINGS, CFG, "auto").set_index("model")
    assert frame.loc["deepseek-v3.2", "share_pct"] == 60.0
    assert set(weights_frame(SETTINGS, CFG)["alias"]) == set(CFG.aliases)


def test_an_edit_becomes_a_validated_change():
    change = propose_change(
        SETTINGS,
        CFG,
        "auto",
        edited(**{"deepseek-v3.2": 0.0, "gemini-2.5-flash": 0.0, "claude-sonnet-4.5": 100.0}),
    )
    assert change.after == {
        "deepseek-v3.2": 0,
        "gemini-2.5-flash": 0,
        "claude-sonnet-4.5": Decimal(100),
    }
    assert change.before["deepseek-v3.2"] == 60
    assert "claude-sonnet-4.5=100" in change.after_text()
    assert change.diff_frame().set_index("model")["after"].to_dict() == {
        "deepseek-v3.2": "0",
        "gemini-2.5-flash": "0",
        "claude-sonnet-4.5": "100",
    }


@pytest.mark.parametrize(
    "weights, message",
    [
        ({"deepseek-v3.2": -1.0, "gemini-2.5-flash": 30.0, "claude-sonnet-4.5": 10.0}, "negative"),
        (
            {"deepseek-v3.2": 0.0, "gemini-2.5-flash": 0.0, "claude-sonnet-4.5": 0.0},
            "every weight is 0",
        ),
        ({"deepseek-v3.2": 60.0, "gemini-2.5-flash": 30.0, "claude-sonnet-4.5": 10.0}, "unchanged"),
        ({"deepseek-v3.2": None, "gemini-2.5-flash": 30.0, "claude-sonnet-4.5": 10.0}, "required"),
        ({"no-such-model": 5.0}, "unknown model"),
    ],
)
def test_invalid_edits_are_refused_before_the_confirm_step(weights, message):
    with pytest.raises(RoutingError, match=message):
        propose_change(SETTINGS, CFG, "auto", edited(**weights))


def test_history_shows_before_and_after_weights():
    changes = pd.DataFrame(
        {
            "changed_at": pd.to_datetime(["2026-11-29T10:00:00Z"]),
            "actor": ["alice"],
            "alias": ["auto"],
            "before": [{"deepseek-v3.2": "60"}],
            "after": [{"deepseek-v3.2": "0", "claude-sonnet-4.5": "100"}],
            "note": [None],
        }
    )
    row = history_frame(changes).iloc[0]
    assert row["who"] == "alice" and row["when (UTC)"] == "2026-11-29 10:00:00"
    assert row["after"] == "deepseek-v3.2=0, claude-sonnet-4.5=100"
    assert history_frame(pd.DataFrame()).empty


# -- applying a change: the role is checked again inside the call the page makes -------

CHANGE = PendingChange(
    alias="auto",
    before={"deepseek-v3.2": Decimal(60)},
    after={"deepseek-v3.2": Decimal(0), "claude-sonnet-4.5": Decimal(100)},
)


@pytest.fixture
def serve_api() -> Iterator[tuple[str, list[str]]]:
    """A real HTTP server where Serve's REST API would be: it records every request and
    answers 503, so a test sees whether an apply got as far as calling the cluster."""
    seen: list[str] = []

    class Handler(BaseHTTPRequestHandler):
        def do_GET(self) -> None:  # noqa: N802 - http.server's name
            seen.append(f"GET {self.path}")
            self.send_response(503)
            self.end_headers()

        do_PUT = do_GET  # noqa: N815

        def log_message(self, *args: object) -> None:
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{server.server_address[1]}", seen
    server.shutdown()
    server.server_close()


@pytest.fixture
def people(tmp_path):
    cheap = MIN_PBKDF2_ITERATIONS
    users = load_users(
        {
            USERS_ENV: f"vic:viewer:{hash_password('v', cheap)},"
            f"olga:ops:{hash_password('o', cheap)},"
            f"tess:ops:{hash_password('t', cheap)}:search"
        }
    )
    store = SessionStore(tmp_path / "sessions", b"x" * 32, ttl_s=600)

    def signed_in(name: str) -> SessionUser:
        user = users[name]
        session = store.open(name, user.password_hash).session_id
        return SessionUser(name, user.role, user.team, session)

    return users, store, signed_in


def settings_for(url: str) -> DashboardSettings:
    return DashboardSettings(
        database_url="postgresql+psycopg://nobody@127.0.0.1:1/none",  # never reached here
        config=CFG,
        ray_dashboard_url=url,
        app_name=CFG.gateway.app_name,
        gateway_url="http://127.0.0.1:1",  # never reached: the apply stops earlier
        refresh_s=30,
    )


def test_a_viewers_forged_apply_is_refused_before_anything_is_sent(serve_api, people):
    url, seen = serve_api
    users, store, signed_in = people
    vic = signed_in("vic")
    forged = [
        vic,  # the page never showed vic the editor; the call is made anyway
        SessionUser("vic", "ops", None, vic.session_id),  # a session state claiming ops
        SessionUser("olga", "ops", None, vic.session_id),  # vic's session under olga's name
        SessionUser("olga", "ops", None, ""),  # no session at all
    ]
    for user in forged:
        with pytest.raises(PermissionDenied):
            apply_change(user, CHANGE, "forged", settings_for(url), users=users, store=store)
    with pytest.raises(PermissionDenied, match=r"vic \(viewer\) may not change routing"):
        apply_change(vic, CHANGE, "", settings_for(url), users=users, store=store)
    assert seen == []  # not even a read of the live routing


def test_a_signed_out_or_team_scoped_ops_user_is_refused(serve_api, people):
    url, seen = serve_api
    users, store, signed_in = people
    olga = signed_in("olga")
    store.close(olga.session_id)
    with pytest.raises(PermissionDenied, match="session has ended"):
        apply_change(olga, CHANGE, "", settings_for(url), users=users, store=store)
    with pytest.raises(PermissionDenied, match="every team"):
        apply_change(signed_in("tess"), CHANGE, "", settings_for(url), users=users, store=store)
    assert seen == []


def test_an_ops_users_apply_goes_through_to_the_cluster(serve_api, people):
    url, seen = serve_api
    users, store, signed_in = people
    with pytest.raises(RoutingUpdateError):  # the stand-in answers 503 to everything
        apply_change(signed_in("olga"), CHANGE, "", settings_for(url), users=users, store=store)
    assert seen and seen[0].startswith("GET /api/serve/")


# -- on KubeRay: the editor's apply patches the RayService (routing.target: kuberay) ----


@pytest.fixture
def kuberay_api() -> Iterator[FakeKubeApi]:
    fake = FakeKubeApi({kuberay_case.TOKEN}).start()
    yield fake
    fake.stop()


@pytest.mark.usefixtures("clean_ledger")
def test_an_ops_users_apply_on_kuberay_patches_the_rayservice_and_is_confirmed(
    kuberay_api,
    people,
    replica,  # noqa: F811 - the fixture imported above
    database_url,
    tmp_path,
):
    """The dashboard's whole path: the signed-in ops user, the patch through the
    Kubernetes API, KubeRay's reconcile reconfiguring the (real) replica, the replica's
    own report of the new version, and the audit row naming the user."""
    users, store, signed_in = people
    cfg = replica.service.cfg
    kuberay_api.put(kuberay_case.manifest(cfg, replicas=1))
    kuberay_api.on_reconcile = lambda sc: replica.service.apply_user_config(
        sc["applications"][0]["deployments"][0]["user_config"]
    )
    token = tmp_path / "token"
    token.write_text(kuberay_case.TOKEN)
    settings = DashboardSettings(
        database_url=database_url,
        config=kuberay_case.on_kuberay(cfg, kuberay_api, token),
        ray_dashboard_url="http://127.0.0.1:1",  # never asked on this target
        app_name=cfg.gateway.app_name,
        gateway_url=replica.base_url,
        refresh_s=30,
    )
    candidates = sorted(cfg.aliases["auto"].candidates)
    after = {m: Decimal(100 if m == candidates[0] else 0) for m in candidates}
    change = PendingChange(alias="auto", before={}, after=after)
    result = apply_change(
        signed_in("olga"), change, "from the editor", settings, users=users, store=store
    )
    assert result.after.version == 2 and replica.service.routing.version == 2
    assert replica.service.routing.aliases["auto"] == after
    patched = kuberay_api.get(kuberay_case.NAMESPACE, "costgate")
    sc = yaml.safe_load(patched["spec"]["serveConfigV2"])
    weights = sc["applications"][0]["deployments"][0]["user_config"]["routing"]["aliases"]["auto"]
    assert {m: Decimal(str(w)) for m, w in weights.items()} == after
    (row,) = list_routing_changes(database_url)
    assert (row.status, row.actor, row.note) == ("applied", "olga", "from the editor")
