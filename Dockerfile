# CIFAR Lab: one image for the app server and for Ray nodes (docs/hosting.md).
#
#   docker build -t cifarlab .                    # CPU image: torch's CPU wheels, Ray included
#   docker build --build-arg WITH_RAY=0 -t cifarlab .    # the app alone (local worker processes)
#   docker run -p 8501:8501 -v /srv/cifar:/data:ro -e CIFARLAB_DATA=/data/cifar10-jpeg.tar.gz cifarlab
#
# GPU image (Ray worker nodes with NVIDIA GPUs, or an app server with one): start from a CUDA
# runtime base and take torch's CUDA wheels instead of the CPU ones, e.g.
#
#   docker build -t cifarlab:cuda \
#     --build-arg BASE=nvidia/cuda:12.8.1-cudnn-runtime-ubuntu24.04 \
#     --build-arg TORCH_INDEX=https://download.pytorch.org/whl/cu128 .
#
# (that base has no Python 3.11: add `apt-get install python3.11 python3.11-venv` and point
# PYTHON at it; run with `--gpus all`, and start the Ray worker with `--num-gpus=N`). The
# driver (the app) and every Ray node must run the same Python, Ray and cifarlab: build all of
# them from one image.
ARG BASE=python:3.11-slim
FROM ${BASE}

ARG WITH_RAY=1
ARG TORCH_INDEX=https://download.pytorch.org/whl/cpu
ENV PIP_NO_CACHE_DIR=1 \
    PIP_DISABLE_PIP_VERSION_CHECK=1 \
    PYTHONDONTWRITEBYTECODE=1 \
    PYTHONUNBUFFERED=1 \
    PYTHONPATH=/app \
    CIFARLAB_HOME=/srv/cifarlab/var \
    CIFARLAB_CACHE=/srv/cifarlab/cache

WORKDIR /app
COPY requirements.txt requirements-ray.txt ./
# torch first, from the CPU (or CUDA) index; requirements.txt then finds it installed.
RUN python -m pip install --index-url "${TORCH_INDEX}" torch==2.14.1 torchvision==0.29.1 \
 && python -m pip install -r requirements.txt \
 && if [ "${WITH_RAY}" = "1" ]; then python -m pip install -r requirements-ray.txt; fi

COPY .streamlit ./.streamlit
COPY app.py server.py ./
COPY pages ./pages
COPY ui ./ui
COPY cifarlab ./cifarlab
# The CPU-vs-GPU page shows the GPU recordings kept here on machines without a GPU.
COPY docs/gpu-results ./docs/gpu-results

RUN useradd --create-home --uid 1000 cifarlab \
 && mkdir -p /srv/cifarlab/var /srv/cifarlab/cache \
 && chown -R cifarlab /srv/cifarlab
USER cifarlab
VOLUME ["/srv/cifarlab"]
EXPOSE 8501

# Streamlit answers "ok" here once it serves (the Ray nodes override the command and the check).
HEALTHCHECK --interval=30s --timeout=5s --start-period=60s --retries=3 \
  CMD python -c "import sys, urllib.request; sys.exit(urllib.request.urlopen('http://127.0.0.1:8501/_stcore/health', timeout=4).read().strip() != b'ok')"

# server.py: app.py with the job queue started with the server (runs queued before a restart go on)
CMD ["python", "-m", "streamlit", "run", "server.py", "--server.port=8501", "--server.address=0.0.0.0"]
