// Checks rendered Kubernetes manifests offline: every object against the
// Kubernetes API schemas (kubernetes-models), and every TPU worker group
// against the TPU rules a GKE slice follows (as the TPU webhook does): its
// replicas (numOfHosts) and google.com/tpu chips per host must match its
// accelerator and topology node selectors. With the image's Containerfile,
// every pod must run as the image's user (USER uid:gid, fsGroup its gid so
// the Secret is readable), on a read-only root file system with an emptyDir
// at /tmp, and read its --token-file from a read-only Secret mount that
// only the owner and the group may read.
//
//   kubectl kustomize deploy/kubernetes | node check.mjs - [Containerfile]
//
// Needs js-yaml and kubernetes-models on NODE_PATH (scripts/install_deps.sh
// puts them under ~/.cache/manta/node_tools). Exits 1 listing every problem.
import { readFileSync } from "node:fs";
import { createRequire } from "node:module";

const require = createRequire(import.meta.url);
const yaml = require("js-yaml");

// TPU rules (../../common/tpu.h): 1 TensorCore a chip on v5litepod and v6e,
// where the single-host topologies put every chip on one host; 4 chips a
// host otherwise.
const PLANAR = new Set(["v5litepod", "v6e"]);
const SINGLE_HOST = new Set(["1x1", "2x2", "2x4"]);

function tpuHosts(generation, topology) {
  const dims = topology.split("x").map(Number);
  if (dims.length < 2 || dims.some((d) => !Number.isInteger(d) || d <= 0)) return null;
  const chips = dims.reduce((a, b) => a * b, 1);
  const perHost = PLANAR.has(generation) && SINGLE_HOST.has(topology) ? chips : Math.min(4, chips);
  return { chips, perHost, hosts: Math.ceil(chips / perHost) };
}

// "tpu-v6e-slice" -> "v6e", "tpu-v5-lite-podslice" -> "v5litepod", "tpu-v5p-slice" -> "v5p".
function generationOf(accelerator) {
  const m = /^tpu-(v\d+[a-z]*)(-lite)?-(pod)?slice$/.exec(accelerator);
  if (!m) return null;
  return m[2] ? `${m[1]}litepod` : m[1];
}

// The model of `kind` in `apiVersion` ("apps/v1", or "v1" for the core group).
function modelFor(apiVersion, kind) {
  if (!/^[a-z0-9./]+$/.test(apiVersion) || !/^[A-Za-z]+$/.test(kind)) return null;
  try {
    const mod = require(`kubernetes-models/${apiVersion}/${kind}`);
    return mod[kind] ?? null;
  } catch {
    return null;
  }
}

function checkTpuGroup(obj, problems) {
  const name = `${obj.kind}/${obj.metadata?.name}`;
  const pod = obj.spec?.template?.spec ?? {};
  const selector = pod.nodeSelector ?? {};
  const accelerator = selector["cloud.google.com/gke-tpu-accelerator"];
  const topology = selector["cloud.google.com/gke-tpu-topology"];
  if (!accelerator && !topology) return;
  const generation = generationOf(accelerator ?? "");
  if (!generation) return problems.push(`${name}: unknown TPU accelerator '${accelerator}'`);
  const shape = tpuHosts(generation, topology ?? "");
  if (!shape) return problems.push(`${name}: malformed TPU topology '${topology}'`);
  const replicas = obj.spec?.replicas ?? 1;
  if (replicas % shape.hosts !== 0 || replicas === 0) {
    problems.push(`${name}: numOfHosts ${replicas} contradicts topology ${topology} of ${accelerator} ` +
                  `(${shape.chips} chips, ${shape.perHost} a host: ${shape.hosts} hosts a slice)`);
  }
  for (const c of pod.containers ?? []) {
    const chips = Number(c.resources?.limits?.["google.com/tpu"] ?? c.resources?.requests?.["google.com/tpu"]);
    if (chips !== shape.perHost) {
      problems.push(`${name}: container ${c.name} asks for google.com/tpu ${chips}, a ${topology} host has ${shape.perHost}`);
    }
  }
}

// The image's user and group: the Containerfile's numeric USER uid[:gid].
function imageUser(containerfile) {
  const m = /^USER\s+(\d+)(?::(\d+))?\s*$/m.exec(readFileSync(containerfile, "utf8"));
  return m ? { uid: Number(m[1]), gid: Number(m[2] ?? m[1]) } : null;
}

function checkRunsTheImage(obj, user, problems) {
  const name = `${obj.kind}/${obj.metadata?.name}`;
  const pod = obj.spec?.template?.spec ?? {};
  const security = pod.securityContext ?? {};
  if (security.runAsNonRoot !== true) problems.push(`${name}: the pod does not set runAsNonRoot`);
  if (security.runAsUser !== user.uid) {
    problems.push(`${name}: runAsUser ${security.runAsUser} is not the image's user ${user.uid}`);
  }
  if (security.runAsGroup !== user.gid) {
    problems.push(`${name}: runAsGroup ${security.runAsGroup} is not the image's group ${user.gid}`);
  }
  if (security.fsGroup !== user.gid) {
    problems.push(`${name}: fsGroup ${security.fsGroup} is not the image's group ${user.gid}: ` +
                  "its user could not read the token's Secret");
  }
  const volumes = new Map((pod.volumes ?? []).map((v) => [v.name, v]));
  for (const c of pod.containers ?? []) {
    const where = `${name}: container ${c.name}`;
    if (c.securityContext?.readOnlyRootFilesystem !== true) problems.push(`${where}: no readOnlyRootFilesystem`);
    if (c.securityContext?.allowPrivilegeEscalation !== false) {
      problems.push(`${where}: allowPrivilegeEscalation is not false`);
    }
    const mounts = c.volumeMounts ?? [];
    const tmp = mounts.find((m) => m.mountPath === "/tmp");
    if (!tmp || !volumes.get(tmp.name)?.emptyDir) {
      problems.push(`${where}: no emptyDir at /tmp, where the sessions are written under a read-only root`);
    }
    const flag = /--token-file[= ]("?)([^\s"]+)\1/.exec([...(c.command ?? []), ...(c.args ?? [])].join(" "));
    if (!flag) {
      problems.push(`${where}: no --token-file`);
      continue;
    }
    const path = flag[2];
    const dir = path.slice(0, path.lastIndexOf("/"));
    const file = path.slice(path.lastIndexOf("/") + 1);
    const mount = mounts.find((m) => m.mountPath.replace(/\/$/, "") === dir);
    const secret = mount ? volumes.get(mount.name)?.secret : undefined;
    if (!secret) {
      problems.push(`${where}: --token-file ${path} is not on a Secret's mount`);
      continue;
    }
    if (mount.readOnly !== true) problems.push(`${where}: the Secret at ${dir} is not mounted readOnly`);
    const keys = secret.items ? secret.items.map((i) => i.path) : ["token"];
    if (!keys.includes(file)) problems.push(`${where}: --token-file ${path} names no key of Secret ${secret.secretName}`);
    const mode = secret.defaultMode ?? 0o644;
    if ((mode & 0o037) !== 0) {
      problems.push(`${where}: Secret mode ${mode.toString(8)} lets others read the token, which manta start refuses`);
    }
  }
}

const source = process.argv[2] ?? "-";
const containerfile = process.argv[3];
const user = containerfile ? imageUser(containerfile) : null;
const text = readFileSync(source === "-" ? 0 : source, "utf8");
const problems = [];
let objects = 0;
for (const obj of yaml.loadAll(text)) {
  if (obj == null) continue;
  objects++;
  const name = `${obj.kind}/${obj.metadata?.name}`;
  const Model = modelFor(obj.apiVersion ?? "", obj.kind ?? "");
  if (!Model) {
    problems.push(`${name}: no schema for apiVersion '${obj.apiVersion}' kind '${obj.kind}'`);
    continue;
  }
  try {
    new Model(obj).validate();
  } catch (e) {
    problems.push(`${name}: ${e.message}`);
  }
  if (obj.kind === "StatefulSet" || obj.kind === "Deployment") {
    checkTpuGroup(obj, problems);
    if (user) checkRunsTheImage(obj, user, problems);
  }
}
if (objects === 0) problems.push("no objects");
if (containerfile && !user) problems.push(`${containerfile}: no numeric USER uid:gid`);
for (const p of problems) console.error(p);
console.log(`${objects} objects, ${problems.length} problems`);
process.exit(problems.length === 0 ? 0 : 1);
