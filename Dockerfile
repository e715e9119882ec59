# bot-agent: build with dev dependencies, run with production ones and the compiled output only.
#   docker build -t bot-agent .
#   docker run -d --name agent --network bots --network-alias agent \
#     -v /var/run/docker.sock:/var/run/docker.sock -v bot-agent-data:/var/lib/bot-agent \
#     -v /sys/fs/cgroup:/sys/fs/cgroup:ro --group-add "$(stat -c %g /var/run/docker.sock)" bot-agent
# The host's cgroup tree, read-only: bots' stats are read from it, with no engine stream per bot.
# BASE_IMAGE: any image with Node 24 (the version in .node-version), npm, a POSIX shell and a `node` user (uid 1000).
# A registry behind a TLS proxy: put its CA bundle in the build context as
# npm-ca.pem; only the build stage sees it.
ARG BASE_IMAGE=node:24-bookworm-slim

FROM ${BASE_IMAGE} AS build
WORKDIR /app
COPY package.json package-lock.json npm-ca.pe[m] ./
RUN if [ -f npm-ca.pem ]; then export NODE_EXTRA_CA_CERTS="$PWD/npm-ca.pem"; fi \
 && npm ci --no-audit --no-fund
COPY tsconfig.json tsconfig.build.json ./
COPY scripts/bundle.sh scripts/build-console.ts ./scripts/
COPY src ./src
COPY console ./console
RUN npm run build && npm run bundle && npm prune --omit=dev --no-audit --no-fund

FROM ${BASE_IMAGE}
ENV NODE_ENV=production
WORKDIR /app
COPY --from=build /app/package.json ./
COPY --from=build /app/node_modules ./node_modules
COPY --from=build /app/dist ./dist
# V8's compile cache of the bundle (scripts/bundle.sh), made at build time by loading it with a
# configuration it refuses (so it stops right after): each pod then starts without compiling it.
# Read-only at run time; what it lacks is compiled as usual.
ENV NODE_COMPILE_CACHE=/app/.compile-cache
RUN AGENT_RUNTIME=none node dist/agent.mjs 2>/dev/null; test -d /app/.compile-cache
# Exit records, events and pending webhook deliveries (one SQLite file): give it a volume to keep them.
ENV AGENT_DATA_DIR=/var/lib/bot-agent
RUN mkdir -p /var/lib/bot-agent && chown node:node /var/lib/bot-agent
VOLUME /var/lib/bot-agent
# Non-root; to reach the Docker socket, run with --group-add <the socket's group id>.
USER node
EXPOSE 8000
HEALTHCHECK --interval=15s --timeout=3s --start-period=5s --retries=3 CMD ["node", "dist/healthcheck.js"]
# Exec form: node is PID 1 and receives SIGTERM itself. V8 tuned for memory: with 1,000 bots read once a
# second, a young generation of at most 2 MB and a heap that grows slowly kept the agent at 138 to 141 MB
# where V8's defaults took 295 MB (docs/performance.md; BENCHMARKS.md). A memory limit ends in a
# kill; a CPU limit only slows the agent down. The heap grows by 30% a collection, the most
# --optimize-for-size lets it, without that flag's other trades, which cost a warm request about a
# seventh of its CPU.
# No allocation-site pretenuring: an agent read hard from its first second (50 connections) otherwise
# had V8 allocate request objects straight into the old generation for good, with two to four times
# the full collections of one that started quietly.
# --expose-gc: while a bot's data streams through (a backup, a restore, a move), the agent collects its dead
# buffers every 100 ms (src/streaming-gc.ts). Two malloc arenas: what the zlib and hashing threads free is not
# kept in arenas of their own (docs/performance.md, "Memory while a bot's data streams").
ENV MALLOC_ARENA_MAX=2
ENTRYPOINT ["node", "--max-semi-space-size=2", "--heap-growing-percent=30", "--no-allocation-site-pretenuring", "--expose-gc", "dist/agent.mjs"]
