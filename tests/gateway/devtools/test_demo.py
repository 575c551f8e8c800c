"""`costgate demo`'s banner: the sign-ins it names work, admin and finance first."""

import re

from dashboard.auth import USERS_ENV, Permission, authenticate, load_users, role_allows
from gateway.devtools.demo import DEMO_DASHBOARD_USERS, sign_in_lines

SIGN_IN = re.compile(r"^(\w+) / (demo-\w+) \((.+)\)$")


def test_the_banner_names_admin_and_finance_first_and_every_sign_in_works():
    lines = sign_in_lines()
    parsed = [SIGN_IN.match(line) for line in lines]
    assert all(parsed), lines
    names = [m.group(1) for m in parsed if m]
    assert names[:2] == ["admin", "finance"] and set(names) == {"admin", "finance", "ops", "viewer"}
    users = load_users({USERS_ENV: DEMO_DASHBOARD_USERS})
    for m in parsed:
        assert m is not None
        name, password, sees = m.groups()
        user = authenticate(users, name, password)
        assert user is not None and user.role == name
        # what the banner says each sees is what the role may do
        assert ("customers" in sees or sees == "every page") == role_allows(
            name, Permission.CUSTOMERS
        )
        assert ("no spend" in sees) == (not role_allows(name, Permission.SPEND))
    # the first two see the money: the spend pages and the Customers page
    for name in names[:2]:
        assert role_allows(name, Permission.SPEND) and role_allows(name, Permission.CUSTOMERS)
    assert authenticate(users, "admin", "demo-ops") is None
