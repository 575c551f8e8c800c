"""What a Ray node's Python processes change in Ray as they start, where Ray has no setting.

Every Python process of a Ray node that `costgate up` or `costgate join` starts has this
folder first on its PYTHONPATH, so Python imports this module at start. It does two things,
each only in the one process it concerns, and nothing anywhere else:

- Serve's HAProxy config template (rendered by Serve's HAProxy manager), when first
  imported: the stats page and the Prometheus exporter bind loopback, not every
  interface (Ray 2.60 writes `bind *:<stats port>`, `bind :<metrics port>`, and nothing
  in Ray reaches them but over loopback); and its global `log <target> local0 info`
  line is dropped unless RAY_SERVE_HAPROXY_LOG_TARGET is set: with `option httplog`
  inherited by every frontend, HAProxy otherwise formats and sends a syslog datagram per
  request to 127.0.0.1:514, where nothing listens. costgate's replicas log and count
  requests themselves.
- Ray's dashboard head (`ray/dashboard/dashboard.py`): it loads only the modules named in
  COSTGATE_RAY_DASHBOARD_MODULES (default: Serve's REST API, the state API and the job
  API, whose `/api/version` says the head is up: all that costgate calls; `all` keeps
  Ray's whole set). Each module is a process of its own, started with the head and
  polling GCS: nine of them by default.
"""

from __future__ import annotations

import importlib.abc
import importlib.util
import os
import sys
from types import ModuleType
from typing import Any

TEMPLATES = "ray.serve._private.haproxy_templates"
BINDS = {
    "bind :{{ config.metrics_port }}": "bind 127.0.0.1:{{ config.metrics_port }}",
    "bind *:{{ config.stats_port }}": "bind 127.0.0.1:{{ config.stats_port }}",
}
LOG_LINE = "    log {{ config.log_target }} local0 info\n"
LOG_TARGET_ENV = "RAY_SERVE_HAPROXY_LOG_TARGET"
DASHBOARD_MODULES_ENV = "COSTGATE_RAY_DASHBOARD_MODULES"
DASHBOARD_MODULES = "ServeHead,StateHead,JobHead"


def loopback_template(text: str, keep_log: bool = False) -> str:
    for every, loopback in BINDS.items():
        text = text.replace(every, loopback)
    if not keep_log:
        text = text.replace(LOG_LINE, "")
    return text


def dashboard_argv(argv: list[str], modules: str | None) -> list[str]:
    """The dashboard head's command line with its modules limited (unless `all`, or the
    command line already names them)."""
    wanted = DASHBOARD_MODULES if modules is None else modules.strip()
    if wanted == "all" or not wanted or any(a.startswith("--modules-to-load") for a in argv):
        return argv
    return [*argv, f"--modules-to-load={wanted}"]


class _PatchTemplates(importlib.abc.MetaPathFinder):
    def find_spec(self, name: str, path: Any, target: Any = None) -> Any:
        if name != TEMPLATES:
            return None
        sys.meta_path.remove(self)  # find the real module, once
        spec = importlib.util.find_spec(name)
        if spec is None or spec.loader is None:
            return spec
        loader = spec.loader
        run = loader.exec_module
        keep_log = bool(os.environ.get(LOG_TARGET_ENV))

        def exec_module(module: ModuleType) -> None:
            run(module)
            template = getattr(module, "HAPROXY_CONFIG_TEMPLATE", None)
            if isinstance(template, str):
                module.HAPROXY_CONFIG_TEMPLATE = loopback_template(template, keep_log)  # type: ignore[attr-defined]

        loader.exec_module = exec_module  # type: ignore[method-assign]
        return spec


sys.meta_path.insert(0, _PatchTemplates())
if sys.argv and sys.argv[0].replace(os.sep, "/").endswith("ray/dashboard/dashboard.py"):
    sys.argv[:] = dashboard_argv(sys.argv, os.environ.get(DASHBOARD_MODULES_ENV))
