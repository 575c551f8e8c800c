"""`costgate k8s-manifest`: KubeRay manifests from the same config file as `costgate up`."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Any


def register(sub: Any) -> None:
    p = sub.add_parser(
        "k8s-manifest",
        help="print Kubernetes manifests (ConfigMap, migration Job, KubeRay RayService)",
        description="The RayService's serveConfigV2 is the Serve config `costgate up` deploys, "
        "generated from the same file; the file itself goes into a ConfigMap.",
    )
    p.add_argument(
        "--config",
        type=Path,
        default=None,
        help="costgate YAML (default: $COSTGATE_CONFIG or config/costgate.example.yaml)",
    )
    p.add_argument("--image", default="costgate:latest", help="the image built from Dockerfile")
    p.add_argument("--name", default="costgate", help="RayService name and resource prefix")
    p.add_argument(
        "--workers",
        default="1:1:3",
        help="worker pods as REPLICAS:MIN:MAX (default 1:1:3)",
    )
    p.add_argument("-o", "--output", type=Path, help="write here instead of standard output")
    p.set_defaults(func=cmd_k8s_manifest)


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
    from gateway.config import ConfigError, default_config_path, load_config
    from gateway.kuberay import manifests, render

    path = args.config or default_config_path()
    try:
        cfg = load_config(path)
    except ConfigError as err:
        print(f"costgate: {err}", file=sys.stderr)
        return 2
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


def _shown(path: Path) -> str:
    """The config's path as the header shows it: relative to the working dir when inside."""
    try:
        return str(path.resolve().relative_to(Path.cwd()))
    except ValueError:
        return str(path)
