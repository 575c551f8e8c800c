"""Where the Ray head and its processes listen: one head's ports, kept apart from any other
head's on the same machine (part of the gateway's config, `gateway.ray`)."""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict, Field, model_validator

# each head's replicas listen on a range this wide: a redeploy takes new ports while the
# old ones wait out Serve's quarantine (150 s), so it must hold several generations
REPLICA_PORTS = 50


class RayOptions(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    # 6379 is Redis's on these machines
    head_port: int = Field(default=6380, gt=0, lt=65536)
    dashboard_port: int = Field(default=8265, gt=0, lt=65536)
    # where Ray's dashboard (and its REST API, the routing update path) listens; a
    # container sets 0.0.0.0 so that the dashboard container can reach it
    dashboard_host: str = "127.0.0.1"
    metrics_export_port: int = Field(default=8266, gt=0, lt=65536)
    # Ray's defaults (10001, 52365, and HAProxy's 8404, 9101) would collide between two
    # heads on one machine; unset, they follow the head port (+1 .. +4, and +7, +8 below)
    client_server_port: int | None = Field(default=None, gt=0, lt=65536)
    dashboard_agent_port: int | None = Field(default=None, gt=0, lt=65536)
    haproxy_stats_port: int | None = Field(default=None, gt=0, lt=65536)
    haproxy_metrics_port: int | None = Field(default=None, gt=0, lt=65536)
    # the Serve proxy HAProxy falls back to when no replica is up (mid-redeploy): Ray's
    # 8500/9500 are machine-wide, and another head's proxy there answered our clients
    # with its own gateway (401s for valid keys). Unset: the head port +7 and +8
    fallback_proxy_port: int | None = Field(default=None, gt=0, lt=65536)
    fallback_grpc_port: int | None = Field(default=None, gt=0, lt=65536)
    num_cpus: int | None = Field(default=None, gt=0)
    # where the replicas listen (HAProxy forwards to them): a range of REPLICA_PORTS from
    # this port. Ray's default range is machine-wide, and a port one head's replica freed
    # could be taken by another head's new replica while the first head's HAProxy still
    # routes there (its keys then refuse ours: seen as 401s during redeploys). Unset, it
    # follows the head port, so heads on distinct hundreds get distinct ranges.
    replica_port_min: int | None = Field(default=None, ge=1024, le=65536 - REPLICA_PORTS)

    @model_validator(mode="after")
    def _distinct(self) -> RayOptions:
        ports = self.ports()
        seen: dict[int, str] = {}
        for name, port in ports.items():
            if port in seen:
                raise ValueError(f"{name} and {seen[port]} are both {port}")
            seen[port] = name
        return self

    def ports(self) -> dict[str, int]:
        return {
            "head_port": self.head_port,
            "dashboard_port": self.dashboard_port,
            "metrics_export_port": self.metrics_export_port,
            "client_server_port": self.client_server_port or self.head_port + 1,
            "dashboard_agent_port": self.dashboard_agent_port or self.head_port + 2,
            "haproxy_stats_port": self.haproxy_stats_port or self.head_port + 3,
            "haproxy_metrics_port": self.haproxy_metrics_port or self.head_port + 4,
            "fallback_proxy_port": self.fallback_proxy_port or self.head_port + 7,
            "fallback_grpc_port": self.fallback_grpc_port or self.head_port + 8,
        }

    def replica_ports(self) -> tuple[int, int]:
        """(first, last) port of the replicas' range. Derived ones stay in 30000-32749:
        above Ray's worker ports (20000-29999), below Linux's ephemeral ones (32768-)."""
        first = self.replica_port_min
        if first is None:
            first = 30000 + (self.head_port // 100) % 55 * REPLICA_PORTS
        return first, first + REPLICA_PORTS - 1
