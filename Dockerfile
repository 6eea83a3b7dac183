# sessionmux host image: `docker build -t sessionmux .` then
# `docker run -p 8787:8787 -v sessionmux-data:/data sessionmux` (the admin token is printed at start
# and kept in the volume; set SESSIONMUX_TOKEN to choose it).
FROM node:20-slim AS build
WORKDIR /app
# better-sqlite3 downloads a prebuilt binary; the toolchain is the fallback when none matches.
RUN apt-get update \
  && apt-get install -y --no-install-recommends python3 make g++ \
  && rm -rf /var/lib/apt/lists/*
COPY package.json package-lock.json ./
RUN npm ci --no-audit --no-fund
COPY tsconfig.json tsconfig.build.json ./
COPY protocol protocol
COPY src src
COPY web web
RUN npm run build && npm prune --omit=dev

FROM node:20-slim
ENV NODE_ENV=production \
  SESSIONMUX_HOST=0.0.0.0 \
  SESSIONMUX_PORT=8787 \
  SESSIONMUX_DB=/data/sessions.db
WORKDIR /app
COPY --from=build /app/package.json ./
COPY --from=build /app/node_modules node_modules
COPY --from=build /app/dist dist
RUN mkdir -p /data && chown node:node /data
USER node
VOLUME ["/data"]
EXPOSE 8787
HEALTHCHECK --interval=30s --timeout=5s --start-period=10s --retries=3 \
  CMD ["node", "-e", "fetch('http://127.0.0.1:'+(process.env.SESSIONMUX_PORT||8787)+'/healthz').then(r=>process.exit(r.ok?0:1),()=>process.exit(1))"]
# SIGTERM from `docker stop` closes sockets, ends open turns as interrupted and closes the database.
STOPSIGNAL SIGTERM
CMD ["node", "dist/src/cli/main.js", "serve"]
