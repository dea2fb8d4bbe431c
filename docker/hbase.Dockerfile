# Apache HBase from its release tarball, for docker/compose.yml: one image, every role
# (master, region server, Thrift1 gateway, Thrift2 gateway), chosen by the command.
# HBase 2.2 or later: its Thrift2 gateway creates tables with split keys, which
# hqueue needs to pre-split a queue's table at partition boundaries.
# Built from the repository root: docker build -f docker/hbase.Dockerfile -t hqueue-hbase .
FROM eclipse-temurin:17-jre-jammy

ARG HBASE_VERSION=2.6.1
ARG MIRROR=https://archive.apache.org/dist/hbase

RUN apt-get update \
 && apt-get install -y --no-install-recommends curl ca-certificates \
 && rm -rf /var/lib/apt/lists/*

WORKDIR /tmp/hbase
# The .sha512 file is either sha512sum's "HEX  NAME" or gpg's "NAME: HE X..." over
# several lines: keep the hex digits of the checksum only.
RUN tarball="hbase-${HBASE_VERSION}-bin.tar.gz" \
 && curl -fsSLO "${MIRROR}/${HBASE_VERSION}/${tarball}" \
 && curl -fsSLO "${MIRROR}/${HBASE_VERSION}/${tarball}.sha512" \
 && expected="$(tr -d ' \n\r' < "${tarball}.sha512" | sed -e 's/^[^:]*://' -e "s/${tarball}\$//" | tr 'A-F' 'a-f')" \
 && echo "${expected}  ${tarball}" | sha512sum -c - \
 && tar -xzf "${tarball}" -C /opt \
 && mv "/opt/hbase-${HBASE_VERSION}" /opt/hbase \
 && rm -rf /tmp/hbase

WORKDIR /opt/hbase
ENV PATH=/opt/hbase/bin:$PATH \
    HBASE_MANAGES_ZK=false
COPY docker/hbase-site.xml /opt/hbase/conf/hbase-site.xml
VOLUME /var/lib/hbase
