# Sugo in a container. Data lives in the /data volume.
# It listens on 0.0.0.0 inside the container, so it refuses to start without SUGO_PASSWORD; set
# SUGO_ALLOW_OPEN=1 instead only when the port is published on 127.0.0.1 alone
# (docker run -p 127.0.0.1:8000:8000 -e SUGO_ALLOW_OPEN=1 ...).
# It answers only requests addressed to 127.0.0.1, localhost or ::1: to reach it under another
# name or address, list those in SUGO_ALLOWED_HOSTS (-e SUGO_ALLOWED_HOSTS=192.168.1.20,sugo.lan).
FROM python:3.11-slim

ENV PYTHONDONTWRITEBYTECODE=1 \
    PYTHONUNBUFFERED=1 \
    PIP_NO_CACHE_DIR=1 \
    HF_HUB_OFFLINE=1 \
    SUGO_DATA_DIR=/data \
    SUGO_HOST=0.0.0.0 \
    SUGO_PORT=8000

WORKDIR /app

# The CPU build of PyTorch; the default index would bring a multi-GB CUDA build.
RUN pip install torch==2.13.0 --index-url https://download.pytorch.org/whl/cpu

COPY pyproject.toml README.md alembic.ini ./
COPY app ./app
COPY migrations ./migrations
COPY templates ./templates
COPY static ./static
RUN pip install .

RUN useradd --create-home --uid 1000 sugo && mkdir -p /data && chown sugo /data
USER sugo
VOLUME ["/data"]
EXPOSE 8000
HEALTHCHECK --interval=30s --timeout=3s CMD python -c "import urllib.request,sys; urllib.request.urlopen('http://127.0.0.1:8000/healthz'); sys.exit(0)"
CMD ["python", "-m", "app"]
