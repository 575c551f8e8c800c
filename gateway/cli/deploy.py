"""`costgate k8s-manifest`: KubeRay manifests from the same config file as `costgate up`;
`costgate helm-chart`: the same as a Helm chart (deploy/helm/costgate);
`costgate check-secrets`: refuse to start a deployment whose secrets are still placeholders."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Any

from gateway.cli.config_option import add_config_option, load_for_command


def register(sub: Any) -> None:
    p = sub.add_parser(
        "k8s-manifest",
        help="print Kubernetes manifests (ConfigMap, migration Job, KubeRay RayService)",
        description="The RayService's serveConfigV2 is the Serve config `costgate up` deploys, "
        "generated from the same file; the file itself goes into a ConfigMap.",
    )
    add_config_option(p)
    p.add_argument("--image", default="costgate:latest", help="the image built from Dockerfile")
    p.add_argument("--name", default="costgate", help="RayService name and resource prefix")
    p.add_argument(
        "--workers",
        default="1:1:3",
        help="worker pods as REPLICAS:MIN:MAX (default 1:1:3)",
    )
    p.add_argument("-o", "--output", type=Path, help="write here instead of standard output")
    p.set_defaults(func=cmd_k8s_manifest)

    chart = sub.add_parser(
        "helm-chart",
        help="write the Helm chart (gateway RayService, dashboard, migrations) for a config",
        description="The chart's RayService and ConfigMap come from the config file, as "
        "`k8s-manifest`'s do; name, image, workers and toggles are Helm values.",
    )
    add_config_option(chart)
    chart.add_argument(
        "--dashboard-manifest",
        type=Path,
        default=Path("deploy/k8s/dashboard.yaml"),
        help="the dashboard's manifest the chart's dashboard template is made from",
    )
    chart.add_argument(
        "-o", "--output", type=Path, default=Path("deploy/helm/costgate"), help="chart directory"
    )
    chart.set_defaults(func=cmd_helm_chart)

    check = sub.add_parser(
        "check-secrets",
        help="fail if a named secret is unset or still an example placeholder",
        description="docker compose runs this before every other service: a stack whose "
        ".env still holds example.env's placeholders does not start. Values are never shown.",
    )
    check.add_argument("names", nargs="+", metavar="VAR", help="environment variables to check")
    check.set_defaults(func=cmd_check_secrets)


def cmd_check_secrets(args: argparse.Namespace) -> int:
    import os

    from gateway.domain.environment import secret_problems

    problems = secret_problems(os.environ, args.names)
    for problem in problems:
        print(f"costgate check-secrets: {problem}", file=sys.stderr)
    if problems:
        print(
            "costgate check-secrets: edit .env (copied from example.env) and start again",
            file=sys.stderr,
        )
        return 1
    print(f"costgate check-secrets: {len(args.names)} secrets set", file=sys.stderr)
    return 0


def _workers(spec: str) -> tuple[int, int, int]:
    try:
        replicas, low, high = (int(x) for x in spec.split(":"))
    except ValueError:
        raise SystemExit(
            f"costgate k8s-manifest: --workers {spec!r} is not REPLICAS:MIN:MAX"
        ) from None
    if not 0 <= low <= replicas <= high:
        raise SystemExit(f"costgate k8s-manifest: --workers needs MIN <= REPLICAS <= MAX ({spec})")
    return replicas, low, high


def cmd_k8s_manifest(args: argparse.Namespace) -> int:
    from gateway.control.kuberay import manifests, render

    cfg, path = load_for_command(args.config)
    docs = manifests(
        cfg,
        Path(path).read_text(),
        name=args.name,
        image=args.image,
        workers=_workers(args.workers),
    )
    text = render(docs, _shown(Path(path)))
    if args.output:
        args.output.write_text(text)
        print(f"wrote {args.output}", file=sys.stderr)
    else:
        sys.stdout.write(text)
    return 0


def cmd_helm_chart(args: argparse.Namespace) -> int:
    from gateway.devtools.helm_chart import ChartError, chart_files, write_chart

    cfg, path = load_for_command(args.config)
    try:
        files = chart_files(
            cfg,
            Path(path).read_text(),
            args.dashboard_manifest.read_text(),
            config_source=_shown(Path(path)),
            dashboard_source=_shown(args.dashboard_manifest),
        )
    except (ChartError, OSError) as err:
        print(f"costgate helm-chart: {err}", file=sys.stderr)
        return 1
    write_chart(files, args.output)
    print(f"wrote {len(files)} files under {args.output}", file=sys.stderr)
    return 0


def _shown(path: Path) -> str:
    """The config's path as the header shows it: relative to the working dir when inside."""
    try:
        return str(path.resolve().relative_to(Path.cwd()))
    except ValueError:
        return str(path)
