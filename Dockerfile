# kadmit's image: the wheel and its dependencies in a virtual environment, nothing else of the
# source tree, run as a non-root user on a read-only root filesystem (the Deployment mounts /tmp).
#
#   KADMIT_COMPILE=1 python -m pip wheel . -w wheelhouse   # kadmit's wheel (its engine compiled by
#                                                          # mypyc: setup.py) and every dependency's
#   buildah bud --build-arg BASE=<an image with that Python> -t kadmit:0.1.0 .
#
# BASE must have python3 with the venv module (Debian: python3 and python3-venv), of the minor
# version that built the wheel (its compiled engine is built for one); hack/image.sh
# makes one from Debian's packages and builds, exports and runs this image daemonless.
ARG BASE=python:3.11-slim-bookworm

FROM ${BASE} AS build
COPY wheelhouse/ /wheelhouse/
# --no-index: only the wheels of the build context, so the image holds exactly what was tested.
RUN python3 -m venv /opt/kadmit \
 && /opt/kadmit/bin/pip install --no-cache-dir --no-index --find-links /wheelhouse kadmit \
 && /opt/kadmit/bin/pip uninstall --yes pip \
 && find /opt/kadmit -name '__pycache__' -prune -exec rm -rf {} + \
 && /opt/kadmit/bin/python -m compileall -q /opt/kadmit/lib

FROM ${BASE}
COPY --from=build /opt/kadmit /opt/kadmit
ENV PATH=/opt/kadmit/bin:/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin \
    PYTHONDONTWRITEBYTECODE=1 \
    PYTHONUNBUFFERED=1
# 65532: the Deployment's runAsUser/runAsGroup (distroless' "nonroot").
USER 65532:65532
WORKDIR /tmp
ENTRYPOINT ["kadmit"]
CMD ["run"]
