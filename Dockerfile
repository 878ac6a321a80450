# SPDX-License-Identifier: Apache-2.0
# kiln's container image: `docker build -t kiln .` then
# `docker run --rm -p 8000:8000 -p 8001:8001 -p 8002:8002 kiln` serves the demo repository
# built into the image at /models; mount your own over it (`-v /path/to/repo:/models:ro`).
# docs/deployment.md, "Container image".
#
# Two stages on Debian 12. The build stage installs the build dependencies with the project's
# own scripts/install-deps and configures exactly as `make` does (the Makefile's build.ninja
# rule, the step scripts/check-fresh-machine proves on a clean Debian 12), then builds the two
# targets the image needs: the `kiln` binary and the demo model repository. The run stage gets
# only the shared libraries kiln loads (`scripts/install-deps runtime`), the binary, the demo
# models and an unprivileged user. No CUDA toolkit is in the build stage, so this is the CPU
# image.
ARG BUILD_IMAGE=debian:12
ARG RUN_IMAGE=debian:12-slim

FROM ${BUILD_IMAGE} AS build
WORKDIR /src
COPY . .
RUN scripts/install-deps \
 && make build/build.ninja BUILD_DIR=build BUILD_TYPE=Release \
 && cmake --build build -j "$(nproc)" --target kiln demo_models

FROM ${RUN_IMAGE} AS run
COPY scripts/install-deps /tmp/install-deps
RUN /tmp/install-deps runtime \
 && apt-get clean \
 && rm -rf /var/lib/apt/lists/* /tmp/install-deps
RUN groupadd --system --gid 10001 kiln \
 && useradd --system --uid 10001 --gid 10001 --no-create-home --home-dir /nonexistent \
      --shell /usr/sbin/nologin kiln
COPY --from=build /src/build/kiln /usr/local/bin/kiln
COPY --from=build /src/build/demo_models /models
USER 10001:10001
# KServe v2 HTTP, KServe v2 gRPC, Prometheus metrics.
EXPOSE 8000 8001 8002
# Ready = every model loaded and every listener up (GET /v2/health/ready answers 200). bash's
# /dev/tcp speaks the HTTP request, so the image needs no HTTP client for it.
HEALTHCHECK --interval=10s --timeout=3s --start-period=60s --retries=3 \
  CMD ["bash", "-c", "exec 3<>/dev/tcp/127.0.0.1/8000 && printf 'GET /v2/health/ready HTTP/1.0\\r\\nHost: localhost\\r\\n\\r\\n' >&3 && head -n 1 <&3 | grep -q ' 200 '"]
# SIGTERM drains for up to --exit-timeout-secs (30 s): stop with `docker stop -t 35`.
STOPSIGNAL SIGTERM
ENTRYPOINT ["kiln"]
CMD ["serve", "--model-repository", "/models"]
