# The CUDA test image: the CUDA 13.4 devel toolkit (its ptxas accepts sm_107a, which
# Inductor's templates compile for on Rubin), the torch under test and accelkit.
#
# TORCH_CUDA_ARCH_LIST and INDUCTOR_CUDA_ARCH name the target `accelkit setup cuda --arch`
# asked for (10.7 and 107 for sm_107); the image keeps them in its environment so builds of
# extensions and Inductor's CUDA templates target it. TRITON_PTXAS is the ptxas triton must
# compile with (a link to the nvidia-cuda-nvcc wheel the install stage adds for a target:
# triton's own ptxas, CUDA 13.3 in triton 3.8, does not know sm_107); both of triton's
# variables point at it. Build context: see cpu.Dockerfile.
ARG BASE_IMAGE=nvidia/cuda:13.4.0-devel-ubuntu24.04
FROM ${BASE_IMAGE} AS system
SHELL ["/bin/bash", "-o", "pipefail", "-c"]
# hadolint ignore=DL3008
RUN if ! python3 -c "import ensurepip, venv" >/dev/null 2>&1; then \
        apt-get update \
        && apt-get install -y --no-install-recommends python3 python3-venv python3-dev ca-certificates \
        && rm -rf /var/lib/apt/lists/*; \
    fi \
    && python3 -m venv /opt/venv

FROM system AS install
COPY . /tmp/accelkit-context/
RUN PIP_CONFIG_FILE=/tmp/accelkit-context/pip/pip.conf \
    /opt/venv/bin/python /tmp/accelkit-context/install.py /tmp/accelkit-context

FROM system
ARG TORCH_CUDA_ARCH_LIST=""
ARG INDUCTOR_CUDA_ARCH=""
ARG TRITON_PTXAS=""
COPY --from=install /opt/venv /opt/venv
ENV VIRTUAL_ENV=/opt/venv \
    PATH=/opt/venv/bin:/usr/local/cuda/bin:$PATH \
    PYTHONUNBUFFERED=1 \
    CUDA_HOME=/usr/local/cuda \
    TORCH_CUDA_ARCH_LIST=${TORCH_CUDA_ARCH_LIST} \
    ACCELKIT_INDUCTOR_CUDA_ARCH=${INDUCTOR_CUDA_ARCH} \
    TRITON_PTXAS_PATH=${TRITON_PTXAS} \
    TRITON_PTXAS_BLACKWELL_PATH=${TRITON_PTXAS}
WORKDIR /tmp
CMD ["accelkit", "doctor"]
