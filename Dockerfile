# Container images for the Marathon app and the Metronome job in mesos/ (mesos/README.md).
#
#   docker build -t registry.example.com/garmexport:0.1.0 .
#       the exporter (the default, last target): no Spark, no Java
#   docker build --target compaction -t registry.example.com/garmexport-compaction:0.1.0 .
#       the compaction job: the same package with the `spark` extra and a Java 17 runtime
#   --build-arg EXTRAS=kerberos
#       adds WebHDFS with Kerberos (SPNEGO) to either image
#
# bookworm, not the moving `3.11-slim`: its openjdk-17 is the Java that PySpark is tested
# with here.
ARG PYTHON_IMAGE=python:3.11-slim-bookworm

# -- wheels: garmexport and its dependencies as wheels (gssapi builds from source) -------
FROM ${PYTHON_IMAGE} AS wheels
RUN apt-get update \
 && DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends gcc libc6-dev libkrb5-dev \
 && rm -rf /var/lib/apt/lists/*
WORKDIR /src
COPY pyproject.toml setup.cfg README.md ./
COPY garmexport ./garmexport
ARG EXTRAS=""
RUN pip wheel --no-cache-dir --wheel-dir /wheels ".${EXTRAS:+[$EXTRAS]}"

# -- compaction: garmexport[spark] and Java --------------------------------------------------
FROM ${PYTHON_IMAGE} AS compaction
RUN apt-get update \
 && DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends openjdk-17-jre-headless krb5-user \
 && rm -rf /var/lib/apt/lists/*
COPY --from=wheels /wheels /wheels
ARG EXTRAS=""
RUN pip install --no-cache-dir --find-links /wheels "garmexport[spark${EXTRAS:+,$EXTRAS}]" \
 && rm -rf /wheels
RUN useradd --system --uid 10001 --create-home --home-dir /home/garmexport garmexport
USER garmexport
WORKDIR /home/garmexport
ENTRYPOINT ["garmexport"]
CMD ["compact"]

# -- exporter (default): garmexport without Spark -------------------------------------------
FROM ${PYTHON_IMAGE} AS exporter
# kinit renews Kerberos tickets from a keytab (output.hdfs_kerberos_keytab).
RUN apt-get update \
 && DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends krb5-user \
 && rm -rf /var/lib/apt/lists/*
COPY --from=wheels /wheels /wheels
ARG EXTRAS=""
RUN pip install --no-cache-dir --no-index --find-links /wheels "garmexport${EXTRAS:+[$EXTRAS]}" \
 && rm -rf /wheels
RUN useradd --system --uid 10001 --create-home --home-dir /home/garmexport garmexport
USER garmexport
WORKDIR /home/garmexport
# metrics.port: /metrics, /health/live, /health/ready (Marathon maps it to $PORT0)
EXPOSE 9108
ENTRYPOINT ["garmexport"]
CMD ["run"]
