# syntax=docker/dockerfile:1
# Targets: worker (ECS), lambda (AWS Lambda), cost-report (Spark job with a JRE).
#   docker build --target worker -t sqsdelay-worker .
#   docker build --target lambda -t sqsdelay-lambda .
#   docker build --target cost-report -t sqsdelay-cost-report .

# ---- build: a virtualenv with the pinned runtime dependencies (no Spark) ----
FROM python:3.11-slim-bookworm AS build
WORKDIR /src
COPY pyproject.toml constraints.txt README.md ./
COPY sqsdelay ./sqsdelay
RUN python -m venv /opt/venv \
 && /opt/venv/bin/pip install --no-cache-dir -c constraints.txt .

# ---- worker: slim, non-root, no Spark ----
FROM python:3.11-slim-bookworm AS worker
# /run/sqsdelay: the one directory the worker writes, its own. The task's root file system is
# read-only and ECS mounts a task volume here (infra/worker-ecs.yaml, the same path); Fargate
# makes a volume root-owned 0755 unless the image declares its path a VOLUME, whose owner
# and mode it then copies (VOLUME below).
RUN useradd --system --uid 10001 --no-create-home --shell /usr/sbin/nologin sqsdelay \
 && install -d -o 10001 -g 10001 -m 0755 /run/sqsdelay
COPY --from=build /opt/venv /opt/venv
# SQSDELAY_LIVENESS_FILE: touched by the event loop every 5 s, for the ECS health check
# (infra/worker-ecs.yaml), which reads the same path. A worker that cannot write it stops at
# start with the error saying so.
ENV PATH=/opt/venv/bin:$PATH \
    PYTHONUNBUFFERED=1 \
    SQSDELAY_LOG_FORMAT=json \
    SQSDELAY_LIVENESS_FILE=/run/sqsdelay/alive
VOLUME ["/run/sqsdelay"]
USER 10001
# ECS sends SIGTERM and waits stopTimeout (75 s in infra/worker-ecs.yaml): polls in progress
# return and the batch in hand is finished.
STOPSIGNAL SIGTERM
# Queues as arguments (`docker run IMAGE orders billing`) or SQSDELAY_QUEUES=orders,billing.
ENTRYPOINT ["sqsdelay", "worker"]

# ---- lambda: the AWS Lambda Python base image ----
FROM public.ecr.aws/lambda/python:3.11 AS lambda
WORKDIR /src
COPY pyproject.toml constraints.txt README.md ./
COPY sqsdelay ./sqsdelay
RUN pip install --no-cache-dir -c constraints.txt --target "${LAMBDA_TASK_ROOT}" . \
 && rm -rf /src
WORKDIR ${LAMBDA_TASK_ROOT}
CMD ["sqsdelay.aws_lambda.handler"]

# ---- cost-report: pyspark and a Java 17 runtime ----
FROM python:3.11-slim-bookworm AS cost-report
# Debian's security updates replace package versions, so the JRE is not pinned to one.
# hadolint ignore=DL3008
RUN apt-get update \
 && apt-get install -y --no-install-recommends openjdk-17-jre-headless \
 && rm -rf /var/lib/apt/lists/* \
 && useradd --system --uid 10001 --create-home sqsdelay
WORKDIR /src
COPY pyproject.toml constraints.txt README.md ./
COPY sqsdelay ./sqsdelay
RUN python -m venv /opt/venv \
 && /opt/venv/bin/pip install --no-cache-dir -c constraints.txt '.[spark]'
# A container's cache dies with the run, so a class-data archive would cost every run
# its ~40 s dump and never pay back.
ENV PATH=/opt/venv/bin:$PATH \
    PYTHONUNBUFFERED=1 \
    SQSDELAY_SPARK_CLASS_ARCHIVE=off
USER 10001
WORKDIR /home/sqsdelay
ENTRYPOINT ["sqsdelay", "cost-report"]
