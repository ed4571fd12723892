# kube-volume-controller: `kvc run` on Node 24 LTS, production dependencies only, as a non-root user.
# Nothing is written at run time outside /tmp (an emptyDir in manifests/: the FlexVolume plugin
# directory, which kvc creates when absent), so the container works with a read-only root filesystem.
#
# The base is pinned to an exact tag: the Node release (the `node` dev dependency's version, so the
# image runs the Node the tests run) and the Debian release. Not to a digest: the project's CI cannot
# pull it and builds a stand-in under this exact name (test/image/base-image.sh), whose digest can
# never match; pin the digest in your own build pipeline if it pulls from a registry you trust.
#
# Registry settings are build secrets, never in a layer: an npmrc (a private registry or proxy, its
# token) and, if the registry needs one, the CA bundle that npmrc names as cafile=/run/secrets/npm-ca:
#   docker build --secret id=npmrc,src=$HOME/.npmrc [--secret id=npm-ca,src=ca.pem] .
# (podman/buildah alike). Without them the public npm registry is used.

FROM node:24.21.0-trixie-slim AS build
# Debian's tini, statically linked, is PID 1 of the runtime image (below).
RUN apt-get update && apt-get install -y --no-install-recommends tini && rm -rf /var/lib/apt/lists/*
WORKDIR /src
COPY package.json package-lock.json ./
RUN --mount=type=secret,id=npmrc,target=/root/.npmrc,required=false \
    --mount=type=secret,id=npm-ca,required=false \
    npm ci --no-audit --no-fund
COPY tsconfig.json tsconfig.build.json ./
COPY src ./src
RUN npm run build && npm prune --omit=dev

FROM node:24.21.0-trixie-slim
ENV NODE_ENV=production
COPY --from=build /usr/bin/tini-static /usr/bin/tini
WORKDIR /app
COPY --from=build /src/package.json ./package.json
COPY --from=build /src/node_modules ./node_modules
COPY --from=build /src/dist ./dist
# The same uid as the Deployment's securityContext (runAsUser 65532).
USER 65532:65532
# tini as PID 1: kvc spawns FlexVolume drivers, and a driver's own children that outlive it are
# re-parented to PID 1; Node reaps only the children it spawned, so without an init they would stay
# zombies until the pod's PID limit is reached. tini also forwards SIGTERM to Node.
# A smaller young generation: V8's default lets the heap grow far past the live objects during the
# informers' list and resync bursts; 8 MiB semi-spaces cut RSS by about 40% at the same CPU
# (docs/performance.md).
ENTRYPOINT ["/usr/bin/tini", "--", "node", "--max-semi-space-size=8", "dist/src/app/cli.js"]
CMD ["run"]
