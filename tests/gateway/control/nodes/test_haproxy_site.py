"""Serve's HAProxy stats and metrics listeners on loopback: the template change that a
Ray node's Python processes make at start (gateway/control/haproxy_site)."""

from __future__ import annotations

import importlib.util
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

from gateway.control.cluster import haproxy_site_path

CHECK = """
from ray.serve._private import haproxy
t = haproxy.HAPROXY_CONFIG_TEMPLATE
assert "bind 127.0.0.1:{{ config.stats_port }}" in t, "stats"
assert "bind 127.0.0.1:{{ config.metrics_port }}" in t, "metrics"
assert "bind *:" not in t and "bind :" not in t
print("LOOPBACK")
"""


def test_a_node_process_renders_haproxys_stats_and_metrics_on_loopback() -> None:
    env = {**os.environ, "PYTHONPATH": haproxy_site_path(os.environ.get("PYTHONPATH"))}
    done = subprocess.run([sys.executable, "-c", CHECK], env=env, capture_output=True,
                          text=True, timeout=120)  # fmt: skip
    assert done.returncode == 0 and "LOOPBACK" in done.stdout, done.stderr[-2000:]


def test_without_it_this_ray_binds_every_interface_so_the_change_is_still_needed() -> None:
    # a Ray whose template no longer has these lines makes the change a silent no-op
    from ray.serve._private.haproxy_templates import HAPROXY_CONFIG_TEMPLATE

    assert "bind *:{{ config.stats_port }}" in HAPROXY_CONFIG_TEMPLATE
    assert "bind :{{ config.metrics_port }}" in HAPROXY_CONFIG_TEMPLATE


def test_an_operators_pythonpath_is_kept_after_the_site_folder() -> None:
    path = haproxy_site_path("/opt/extra")
    site, extra = path.split(os.pathsep)
    assert site.endswith("haproxy_site") and extra == "/opt/extra"


NO_LOG = """
from ray.serve._private import haproxy
t = haproxy.HAPROXY_CONFIG_TEMPLATE
print("LOG" if "log {{ config.log_target }}" in t else "NOLOG")
"""


def test_haproxys_per_request_syslog_line_is_dropped_unless_a_log_target_is_set() -> None:
    env = {**os.environ, "PYTHONPATH": haproxy_site_path(os.environ.get("PYTHONPATH"))}
    env.pop("RAY_SERVE_HAPROXY_LOG_TARGET", None)
    done = subprocess.run([sys.executable, "-c", NO_LOG], env=env, capture_output=True,
                          text=True, timeout=120)  # fmt: skip
    assert done.stdout.strip() == "NOLOG", done.stderr[-2000:]
    env["RAY_SERVE_HAPROXY_LOG_TARGET"] = "/dev/log"  # an operator who wants the lines
    done = subprocess.run([sys.executable, "-c", NO_LOG], env=env, capture_output=True,
                          text=True, timeout=120)  # fmt: skip
    assert done.stdout.strip() == "LOG", done.stderr[-2000:]


def _site_module() -> Any:
    """The folder's sitecustomize, loaded from its file (not the interpreter's own)."""
    path = Path(haproxy_site_path(None)) / "sitecustomize.py"
    spec = importlib.util.spec_from_file_location("costgate_haproxy_site", path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_rays_template_still_has_the_global_log_line_the_site_drops() -> None:
    from ray.serve._private.haproxy_templates import HAPROXY_CONFIG_TEMPLATE

    assert _site_module().LOG_LINE in HAPROXY_CONFIG_TEMPLATE


def test_the_dashboard_head_loads_only_the_modules_costgate_calls() -> None:
    site = _site_module()
    argv = ["/venv/ray/dashboard/dashboard.py", "--port=8265"]
    default = "--modules-to-load=ServeHead,StateHead,JobHead"
    assert site.dashboard_argv(argv, None) == [*argv, default]
    assert site.dashboard_argv(argv, "all") == argv  # Ray's whole set, for its own pages
    more = "ServeHead,StateHead,JobHead,NodeHead"
    assert site.dashboard_argv(argv, more) == [*argv, f"--modules-to-load={more}"]
    named = [*argv, "--modules-to-load=NodeHead"]
    assert site.dashboard_argv(named, None) == named


def test_rays_dashboard_head_still_takes_a_module_list() -> None:
    import inspect

    from ray.dashboard import dashboard

    assert "--modules-to-load" in inspect.getsource(dashboard)
