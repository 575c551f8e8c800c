# costgate: the gateway (Ray head + Serve), the dashboard and the sim share this image;
# docker-compose.yml picks the command. Installed the way the README's quick start does
# (`make demo`: pip install of this project with Python 3.11), without the test extras
# and not in editable mode.
FROM python:3.11-slim-bookworm

ENV PYTHONDONTWRITEBYTECODE=1 \
    PYTHONUNBUFFERED=1 \
    PIP_NO_CACHE_DIR=1 \
    PIP_DISABLE_PIP_VERSION_CHECK=1 \
    COSTGATE_CONFIG=/etc/costgate/costgate.yaml \
    COSTGATE_STATE_DIR=/var/lib/costgate \
    RAY_USAGE_STATS_ENABLED=0

# wget: KubeRay's liveness and readiness probes run it inside the Ray containers
RUN apt-get update \
    && apt-get install -y --no-install-recommends wget \
    && rm -rf /var/lib/apt/lists/*

RUN useradd --create-home --uid 10001 costgate \
    && mkdir -p /etc/costgate /var/lib/costgate \
    && chown costgate:costgate /var/lib/costgate

WORKDIR /opt/costgate
COPY pyproject.toml README.md ./
COPY gateway ./gateway
COPY db ./db
COPY dashboard ./dashboard
RUN pip install .
# the example configuration: the default until a file is mounted over it
COPY config/costgate.example.yaml /etc/costgate/costgate.yaml

USER costgate
# gateway (Serve), Ray dashboard, Streamlit dashboard, sim
EXPOSE 8000 8265 8501 9100
ENTRYPOINT ["costgate"]
CMD ["up", "--foreground"]
