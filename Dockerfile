# autosched service image: the API + Ray head, and the Ray workers that build and measure.
#   docker build --target cpu -t autosched:cpu .      (API, head, CPU workers)
#   docker build --target gpu -t autosched:gpu .      (GPU workers: CuPy + Triton extras)
# Kernels are compiled at run time with gcc + OpenMP, so the compiler is part of the image.
ARG PYTHON_IMAGE=python:3.11-slim-bookworm

FROM ${PYTHON_IMAGE} AS base
ENV PYTHONDONTWRITEBYTECODE=1 PYTHONUNBUFFERED=1 PIP_NO_CACHE_DIR=1 PIP_DISABLE_PIP_VERSION_CHECK=1
RUN apt-get update \
 && apt-get install -y --no-install-recommends gcc libc6-dev libgomp1 procps \
 && rm -rf /var/lib/apt/lists/*
WORKDIR /opt/autosched
COPY pyproject.toml README.md ./
COPY autosched ./autosched
COPY tuning_db ./tuning_db
RUN useradd --create-home --uid 10001 autosched \
 && mkdir -p /home/autosched/.cache/autosched \
 && chown -R autosched:autosched /home/autosched/.cache
# the compiled-kernel cache ($XDG_CACHE_HOME/autosched): docker-compose mounts its volume here, and a
# volume mounted on a folder the image has inherits its owner (otherwise it is root's: builds fail)
ENV XDG_CACHE_HOME=/home/autosched/.cache

FROM base AS cpu
RUN pip install .
USER autosched
EXPOSE 8000 6379
ENTRYPOINT ["autosched"]
CMD ["serve", "--host", "0.0.0.0", "--port", "8000"]

FROM base AS gpu
RUN pip install ".[gpu]"
USER autosched
ENTRYPOINT ["autosched"]
CMD ["worker", "--address", "head:6379"]
