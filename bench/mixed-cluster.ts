/**
 * A realistic mixed cluster for the memory benchmark: nodes with the status a kubelet reports (images,
 * conditions, capacity), Deployment-style pods with the status a kubelet writes, 10% of them mounting
 * a CSI claim, and the claims' bound PVs, VolumeAttachments and the nodes' volumesAttached as the
 * attach/detach controller and an external-attacher leave them. Everything is in its steady state
 * (bound, attached, finalizers and the claims' Unused condition present), so none of the four loops
 * has anything to write and their RSS is what their caches and runtime cost.
 */
import { randomUUID } from "node:crypto";
import type { CoreV1Api, StorageV1Api, V1Container, V1Node, V1Pod } from "@kubernetes/client-node";
import { ANN_BIND_COMPLETED, ANN_BOUND_BY_CONTROLLER } from "../src/persistentvolume/annotations.js";
import { unusedConditionChange, withUnusedCondition } from "../src/protection/unused-condition.js";
import { attachmentName } from "../src/volume/csi/attachment-name.js";
import { isAlreadyExists } from "../src/runtime/api-errors.js";
import { realClock } from "../src/runtime/clock.js";
import { retryWithInterval } from "../src/util/retry.js";
import { mergePatch } from "../src/runtime/client.js";
import { pool } from "./support.js";

export interface MixedClusterSize {
  nodes: number;
  pods: number;
  /** Bound PV/PVC pairs; the first pods / 10 of them are mounted by a pod. */
  claims: number;
}

const DRIVER = "ebs.csi.bench.example.com";
const NAMESPACES = 20;
const IMAGES_PER_NODE = 40;
const STARTED = "2026-12-01T08:00:00Z";

const namespaceOf = (claim: number) => `team-${String(claim % NAMESPACES).padStart(2, "0")}`;
const nodeName = (i: number) => `ip-10-0-${Math.floor(i / 250)}-${i % 250}.ec2.internal`;
const handle = (claim: number) => `vol-0${(0x1000000 + claim).toString(16)}abcdef`;
const uniqueName = (claim: number) => `kubernetes.io/csi/${DRIVER}^${handle(claim)}`;

/** Pod i mounts claim i / 10 when i is a multiple of 10 (and that claim exists). */
function claimOfPod(i: number, size: MixedClusterSize): number | undefined {
  return i % 10 === 0 && i / 10 < size.claims ? i / 10 : undefined;
}

const noop = () => Promise.resolve(undefined);

/**
 * Sends one request, again after a failure: under this load the apiserver drops connections ("other
 * side closed"). A create whose first attempt went through answers AlreadyExists on the next; then
 * `existing` reads what it created.
 */
async function send<T>(
  call: () => Promise<T>,
  existing?: () => Promise<T | undefined>,
): Promise<T | undefined> {
  return retryWithInterval<T | undefined>(
    async (n) => {
      try {
        return await call();
      } catch (err) {
        if (n > 1 && existing && isAlreadyExists(err)) return existing();
        throw err;
      }
    },
    { attempts: 5, intervalMs: 2000, clock: realClock },
  );
}

/**
 * Creates the cluster; `progress` gets a line per phase. Pass `benchClients`' APIs: client-node's own
 * open a TLS connection per request (6–7× slower for PV/PVC pairs; the likely cause of 30,000 pods
 * taking 690–1,031 s).
 */
export async function createMixedCluster(
  core: CoreV1Api,
  storage: StorageV1Api,
  size: MixedClusterSize,
  concurrency: number,
  progress: (line: string) => void,
): Promise<void> {
  const range = (n: number) => Array.from({ length: n }, (_, i) => i);
  const podNode = (i: number) => i % size.nodes;

  await pool(range(NAMESPACES), concurrency, (i) =>
    send(() => core.createNamespace({ body: { metadata: { name: namespaceOf(i) } } }), noop),
  );
  await send(
    () => storage.createCSIDriver({ body: { metadata: { name: DRIVER }, spec: { attachRequired: true } } }),
    noop,
  );

  // Which claims each node has attached: those of the pods on it.
  const attached = new Map<number, number[]>();
  for (let i = 0; i < size.pods; i++) {
    const claim = claimOfPod(i, size);
    if (claim !== undefined) attached.set(podNode(i), [...(attached.get(podNode(i)) ?? []), claim]);
  }

  await pool(range(size.nodes), concurrency, async (i) => {
    const node = realisticNode(i);
    await send(() => core.createNode({ body: { metadata: node.metadata!, spec: node.spec! } }), noop);
    const volumes = (attached.get(i) ?? []).map(uniqueName);
    await send(() =>
      core.patchNodeStatus(
        {
          name: nodeName(i),
          body: {
            status: {
              ...node.status,
              volumesInUse: volumes,
              volumesAttached: volumes.map((name) => ({ name, devicePath: "" })),
            },
          },
        },
        mergePatch,
      ),
    );
  });
  progress(`${size.nodes} nodes`);

  const nodeOfClaim = new Map<number, number>();
  for (const [node, claims] of attached) for (const claim of claims) nodeOfClaim.set(claim, node);
  await pool(range(size.claims), concurrency, async (j) => {
    const namespace = namespaceOf(j);
    const name = `data-${j}`;
    const annotations = { [ANN_BOUND_BY_CONTROLLER]: "yes" };
    const claim = await send(
      () =>
        core.createNamespacedPersistentVolumeClaim({
          namespace,
          body: {
            metadata: {
              name,
              labels: { app: `app-${j % 200}` },
              annotations: {
                ...annotations,
                [ANN_BIND_COMPLETED]: "yes",
                "volume.kubernetes.io/storage-provisioner": DRIVER,
              },
              finalizers: ["kubernetes.io/pvc-protection"],
            },
            spec: {
              accessModes: ["ReadWriteOnce"],
              storageClassName: "gp3",
              volumeName: `pvc-${j}`,
              resources: { requests: { storage: "20Gi" } },
            },
          },
        }),
      () => core.readNamespacedPersistentVolumeClaim({ namespace, name }),
    );
    await send(
      () =>
        core.createPersistentVolume({
          body: {
            metadata: {
              name: `pvc-${j}`,
              annotations: { ...annotations, "pv.kubernetes.io/provisioned-by": DRIVER },
              finalizers: ["kubernetes.io/pv-protection"],
            },
            spec: {
              capacity: { storage: "20Gi" },
              accessModes: ["ReadWriteOnce"],
              storageClassName: "gp3",
              persistentVolumeReclaimPolicy: "Delete",
              volumeMode: "Filesystem",
              csi: {
                driver: DRIVER,
                volumeHandle: handle(j),
                fsType: "ext4",
                volumeAttributes: {
                  "storage.kubernetes.io/csiProvisionerIdentity": "1764000000000-8081-ebs",
                },
              },
              nodeAffinity: {
                required: {
                  nodeSelectorTerms: [
                    {
                      matchExpressions: [
                        {
                          key: "topology.ebs.csi.aws.com/zone",
                          operator: "In",
                          values: [`eu-west-1${"abc"[j % 3]}`],
                        },
                      ],
                    },
                  ],
                },
              },
              claimRef: {
                kind: "PersistentVolumeClaim",
                apiVersion: "v1",
                namespace,
                name,
                uid: claim!.metadata!.uid!,
              },
            },
          },
        }),
      noop,
    );
    await send(() =>
      core.patchPersistentVolumeStatus(
        { name: `pvc-${j}`, body: { status: { phase: "Bound" } } },
        mergePatch,
      ),
    );
    await send(() =>
      core.patchNamespacedPersistentVolumeClaimStatus(
        {
          namespace,
          name,
          body: {
            status: {
              phase: "Bound",
              accessModes: ["ReadWriteOnce"],
              capacity: { storage: "20Gi" },
              // As the pvc-protection controller leaves it (feature PersistentVolumeClaimUnusedSinceTime):
              // without it every new leader, kvc's or KCM's, first patches all the claims.
              conditions: withUnusedCondition(
                {},
                unusedConditionChange({}, j * 10 < size.pods)!,
                new Date(STARTED),
              ),
            },
          },
        },
        mergePatch,
      ),
    );
    const node = nodeOfClaim.get(j);
    if (node === undefined) return;
    const va = attachmentName(handle(j), DRIVER, nodeName(node));
    await send(
      () =>
        storage.createVolumeAttachment({
          body: {
            metadata: { name: va, finalizers: [`external-attacher/${DRIVER.replaceAll(".", "-")}`] },
            spec: {
              attacher: DRIVER,
              nodeName: nodeName(node),
              source: { persistentVolumeName: `pvc-${j}` },
            },
          },
        }),
      noop,
    );
    await send(() =>
      storage.patchVolumeAttachmentStatus(
        { name: va, body: { status: { attached: true, attachmentMetadata: { devicePath: "/dev/xvdba" } } } },
        mergePatch,
      ),
    );
  });
  progress(`${size.claims} bound PV/PVC pairs`);

  let done = 0;
  await pool(range(size.pods), concurrency, async (i) => {
    const pod = realisticPod(i, nodeName(podNode(i)), claimOfPod(i, size));
    const namespace = pod.metadata!.namespace!;
    await send(
      () => core.createNamespacedPod({ namespace, body: { metadata: pod.metadata!, spec: pod.spec! } }),
      noop,
    );
    await send(() =>
      core.patchNamespacedPodStatus(
        { namespace, name: pod.metadata!.name!, body: { status: pod.status! } },
        mergePatch,
      ),
    );
    if (++done % 5000 === 0) progress(`${done}/${size.pods} pods`);
  });
}

/**
 * A new pod `name` (metadata and spec, as a client creates it) on node `node` (an index), mounting
 * `claim`, a bound claim no pod mounts (pods / 10 ≤ claim < claims); and the name of the
 * VolumeAttachment the attach/detach controller is to create for it.
 */
export function podMountingUnmountedClaim(
  size: MixedClusterSize,
  claim: number,
  node: number,
  name: string,
): { pod: V1Pod; attachment: string } {
  if (claim < size.pods / 10 || claim >= size.claims) throw new Error(`claim ${claim} is mounted or missing`);
  const { metadata, spec } = realisticPod(claim * 10, nodeName(node), claim);
  return {
    pod: { metadata: { ...metadata, name }, spec: spec! },
    attachment: attachmentName(handle(claim), DRIVER, nodeName(node)),
  };
}

/** A node as a kubelet on a cloud VM reports it (labels, capacity, conditions, images). */
function realisticNode(i: number): V1Node {
  const name = nodeName(i);
  const zone = `eu-west-1${"abc"[i % 3]}`;
  const condition = (type: string, status: string, reason: string, message: string) => ({
    type,
    status,
    reason,
    message,
    lastHeartbeatTime: new Date(STARTED),
    lastTransitionTime: new Date(STARTED),
  });
  const resources = { cpu: "8", memory: "32408076Ki", "ephemeral-storage": "104845292Ki", pods: "110" };
  return {
    metadata: {
      name,
      labels: {
        "beta.kubernetes.io/arch": "amd64",
        "beta.kubernetes.io/os": "linux",
        "kubernetes.io/arch": "amd64",
        "kubernetes.io/os": "linux",
        "kubernetes.io/hostname": name,
        "node.kubernetes.io/instance-type": "m6i.2xlarge",
        "topology.kubernetes.io/region": "eu-west-1",
        "topology.kubernetes.io/zone": zone,
        "topology.ebs.csi.aws.com/zone": zone,
        "eks.amazonaws.com/nodegroup": `workers-${i % 4}`,
        "eks.amazonaws.com/capacityType": "ON_DEMAND",
      },
      annotations: {
        "volumes.kubernetes.io/controller-managed-attach-detach": "true",
        "node.alpha.kubernetes.io/ttl": "0",
        "csi.volume.kubernetes.io/nodeid": JSON.stringify({ [DRIVER]: `i-0${(0x100000 + i).toString(16)}` }),
      },
    },
    spec: {
      providerID: `aws:///${zone}/i-0${(0x100000 + i).toString(16)}`,
      podCIDR: `10.${i >> 8}.${i & 255}.0/24`,
    },
    status: {
      capacity: resources,
      allocatable: { ...resources, cpu: "7910m", memory: "31391244Ki" },
      conditions: [
        condition(
          "MemoryPressure",
          "False",
          "KubeletHasSufficientMemory",
          "kubelet has sufficient memory available",
        ),
        condition("DiskPressure", "False", "KubeletHasNoDiskPressure", "kubelet has no disk pressure"),
        condition("PIDPressure", "False", "KubeletHasSufficientPID", "kubelet has sufficient PID available"),
        condition("Ready", "True", "KubeletReady", "kubelet is posting ready status"),
      ],
      addresses: [
        { type: "InternalIP", address: `10.0.${i >> 8}.${i & 255}` },
        { type: "Hostname", address: name },
        { type: "InternalDNS", address: name },
      ],
      daemonEndpoints: { kubeletEndpoint: { Port: 10250 } },
      nodeInfo: {
        machineID: randomUUID().replaceAll("-", ""),
        systemUUID: randomUUID(),
        bootID: randomUUID(),
        kernelVersion: "6.1.112-124.190.amzn2023.x86_64",
        osImage: "Amazon Linux 2023.6.20241010",
        containerRuntimeVersion: "containerd://1.7.22",
        kubeletVersion: "v1.37.2",
        kubeProxyVersion: "",
        operatingSystem: "linux",
        architecture: "amd64",
      },
      images: Array.from({ length: IMAGES_PER_NODE }, (_, k) => ({
        names: [
          `registry.example.com/team-${k % NAMESPACES}/service-${k}@sha256:${(k * 7919 + 1).toString(16).padStart(64, "0")}`,
          `registry.example.com/team-${k % NAMESPACES}/service-${k}:v1.${k}.0`,
        ],
        sizeBytes: 50_000_000 + k * 1_000_003,
      })),
    },
  };
}

/** A Deployment's pod as the apiserver stores it once a kubelet runs it; `claim` adds a PVC volume. */
function realisticPod(i: number, node: string, claim: number | undefined): V1Pod {
  const app = `service-${i % 40}`;
  const namespace = namespaceOf(Math.floor(i / 10));
  const hash = (0x5a5a5a + (i % 40)).toString(36);
  const tokenVolume = `kube-api-access-${(i % 46656).toString(36).padStart(5, "x")}`;
  const container = (name: string, image: string, port: number): V1Container => ({
    name,
    image,
    ports: [{ name: "http", containerPort: port, protocol: "TCP" }],
    env: [
      { name: "LOG_LEVEL", value: "info" },
      { name: "POD_NAME", valueFrom: { fieldRef: { apiVersion: "v1", fieldPath: "metadata.name" } } },
      {
        name: "POD_NAMESPACE",
        valueFrom: { fieldRef: { apiVersion: "v1", fieldPath: "metadata.namespace" } },
      },
      { name: "DATABASE_URL", valueFrom: { secretKeyRef: { name: `${app}-db`, key: "url" } } },
      { name: "OTEL_EXPORTER_OTLP_ENDPOINT", value: "http://otel-collector.observability:4317" },
    ],
    resources: { requests: { cpu: "100m", memory: "256Mi" }, limits: { memory: "512Mi" } },
    livenessProbe: {
      httpGet: { path: "/healthz", port, scheme: "HTTP" },
      periodSeconds: 10,
      timeoutSeconds: 1,
      successThreshold: 1,
      failureThreshold: 3,
    },
    readinessProbe: {
      httpGet: { path: "/ready", port, scheme: "HTTP" },
      periodSeconds: 5,
      timeoutSeconds: 1,
      successThreshold: 1,
      failureThreshold: 3,
    },
    volumeMounts: [
      { name: tokenVolume, mountPath: "/var/run/secrets/kubernetes.io/serviceaccount", readOnly: true },
      ...(claim !== undefined && name === "app" ? [{ name: "data", mountPath: "/var/lib/data" }] : []),
    ],
    securityContext: { runAsNonRoot: true, allowPrivilegeEscalation: false, capabilities: { drop: ["ALL"] } },
    terminationMessagePath: "/dev/termination-log",
    terminationMessagePolicy: "File",
    imagePullPolicy: "IfNotPresent",
  });
  const containers = [container("app", `registry.example.com/${namespace}/${app}:v1.${i % 40}.0`, 8080)];
  if (i % 2 === 0) containers.push(container("proxy", "registry.example.com/mesh/proxy:v1.22.3", 15001));
  const condition = (type: string) => ({ type, status: "True", lastTransitionTime: new Date(STARTED) });
  return {
    metadata: {
      name: `${app}-${hash}-${i.toString(36)}`,
      namespace,
      labels: {
        app,
        "app.kubernetes.io/name": app,
        "pod-template-hash": hash,
        "app.kubernetes.io/part-of": namespace,
      },
      annotations: {
        "prometheus.io/scrape": "true",
        "prometheus.io/port": "9090",
        "kubectl.kubernetes.io/restartedAt": STARTED,
      },
      ownerReferences: [
        {
          apiVersion: "apps/v1",
          kind: "ReplicaSet",
          name: `${app}-${hash}`,
          uid: randomUUID(),
          controller: true,
          blockOwnerDeletion: true,
        },
      ],
    },
    spec: {
      nodeName: node,
      containers,
      volumes: [
        {
          name: tokenVolume,
          projected: {
            defaultMode: 420,
            sources: [
              { serviceAccountToken: { expirationSeconds: 3607, path: "token" } },
              { configMap: { name: "kube-root-ca.crt", items: [{ key: "ca.crt", path: "ca.crt" }] } },
              {
                downwardAPI: {
                  items: [
                    { path: "namespace", fieldRef: { apiVersion: "v1", fieldPath: "metadata.namespace" } },
                  ],
                },
              },
            ],
          },
        },
        ...(claim !== undefined
          ? [{ name: "data", persistentVolumeClaim: { claimName: `data-${claim}` } }]
          : []),
      ],
      serviceAccountName: app,
      tolerations: [
        {
          key: "node.kubernetes.io/not-ready",
          operator: "Exists",
          effect: "NoExecute",
          tolerationSeconds: 300,
        },
        {
          key: "node.kubernetes.io/unreachable",
          operator: "Exists",
          effect: "NoExecute",
          tolerationSeconds: 300,
        },
      ],
      affinity: {
        podAntiAffinity: {
          preferredDuringSchedulingIgnoredDuringExecution: [
            {
              weight: 100,
              podAffinityTerm: {
                topologyKey: "kubernetes.io/hostname",
                labelSelector: { matchLabels: { app } },
              },
            },
          ],
        },
      },
    },
    status: {
      phase: "Running",
      conditions: [
        "PodReadyToStartContainers",
        "Initialized",
        "Ready",
        "ContainersReady",
        "PodScheduled",
      ].map(condition),
      hostIP: `10.0.0.${i % 250}`,
      hostIPs: [{ ip: `10.0.0.${i % 250}` }],
      podIP: `10.${(i >> 16) & 255}.${(i >> 8) & 255}.${i & 255}`,
      podIPs: [{ ip: `10.${(i >> 16) & 255}.${(i >> 8) & 255}.${i & 255}` }],
      startTime: new Date(STARTED),
      qosClass: "Burstable",
      containerStatuses: containers.map((c) => ({
        name: c.name,
        image: c.image!,
        imageID: `${c.image!.split(":")[0]!}@sha256:${(i % 40).toString(16).padStart(64, "0")}`,
        containerID: `containerd://${randomUUID().replaceAll("-", "")}${randomUUID().replaceAll("-", "")}`,
        ready: true,
        started: true,
        restartCount: 0,
        state: { running: { startedAt: new Date(STARTED) } },
        lastState: {},
        volumeMounts: c.volumeMounts!.map((m) => ({
          name: m.name,
          mountPath: m.mountPath,
          ...(m.readOnly && { readOnly: true, recursiveReadOnly: "Disabled" }),
        })),
      })),
    },
  };
}
