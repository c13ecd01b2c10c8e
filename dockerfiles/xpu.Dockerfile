# The Intel XPU test image: Ubuntu 24.04 with Intel's GPU runtime (Level Zero loader and
# GPU driver, OpenCL ICD, the offline compiler), torch from PyTorch's XPU index (its
# dependencies bring the oneAPI runtime and triton-xpu) and accelkit.
#
# The oneAPI runtime reads SYCL_CACHE_PERSISTENT to keep compiled kernels between runs;
# graph capture (torch.xpu.XPUGraph) needs nothing else at run time. Build context: see
# cpu.Dockerfile (install.json names the index and torch).
ARG BASE_IMAGE=ubuntu:24.04
FROM ${BASE_IMAGE} AS system
SHELL ["/bin/bash", "-o", "pipefail", "-c"]
# Ubuntu 24.04's universe carries Intel's compute runtime; Intel's own apt repository
# (repositories.intel.com/gpu) has newer ones: point BASE_IMAGE at an image with it.
# The leg's Python comes from install-python.sh (see cpu.Dockerfile).
ARG PYTHON_VERSION=""
COPY install-python.sh /tmp/install-python.sh
# hadolint ignore=DL3008
RUN apt-get update \
    && apt-get install -y --no-install-recommends \
        ca-certificates \
        libze1 libze-intel-gpu1 intel-opencl-icd ocl-icd-libopencl1 \
    && sh /tmp/install-python.sh "${PYTHON_VERSION}" /opt/venv \
    && rm -rf /var/lib/apt/lists/* /tmp/install-python.sh

FROM system AS install
COPY . /tmp/accelkit-context/
RUN PIP_CONFIG_FILE=/tmp/accelkit-context/pip/pip.conf \
    /opt/venv/bin/python /tmp/accelkit-context/install.py /tmp/accelkit-context

FROM system
COPY --from=install /opt/venv /opt/venv
ENV VIRTUAL_ENV=/opt/venv \
    PATH=/opt/venv/bin:$PATH \
    PYTHONUNBUFFERED=1 \
    SYCL_CACHE_PERSISTENT=1
WORKDIR /tmp
CMD ["accelkit", "doctor"]
