import assert from "node:assert/strict";
import { randomUUID } from "node:crypto";
import { describe, it } from "node:test";
import type {
  V1NodeSelectorRequirement,
  V1NodeSelectorTerm,
  V1PersistentVolume,
  V1Volume,
  V1VolumeNodeAffinity,
} from "@kubernetes/client-node";
import {
  inTreeCsiMigration,
  isMigratable,
  translateInTreeSpecToCSI,
  translateInTreeSpecToCSIIfNeeded,
} from "../../src/volume/csimigration/plugin-manager.js";
import {
  AWS_EBS_TOPOLOGY_KEY,
  awsElasticBlockStoreCSITranslator,
  kubernetesVolumeIDToEBSVolumeID,
} from "../../src/volume/csimigration/plugins/aws-ebs.js";
import { azureDiskCSITranslator } from "../../src/volume/csimigration/plugins/azure-disk.js";
import {
  azureFileCSITranslator,
  getStorageAccountName,
} from "../../src/volume/csimigration/plugins/azure-file.js";
import {
  backwardCompatibleAccessModes,
  GCE_PD_TOPOLOGY_KEY,
  gcePersistentDiskCSITranslator,
} from "../../src/volume/csimigration/plugins/gce-pd.js";
import {
  addTopology,
  LABEL_FAILURE_DOMAIN_BETA_REGION,
  LABEL_FAILURE_DOMAIN_BETA_ZONE,
  LABEL_TOPOLOGY_REGION,
  LABEL_TOPOLOGY_ZONE,
  replaceTopology,
  translateTopologyFromInTreeToCSI,
} from "../../src/volume/csimigration/plugins/in-tree-volume.js";
import { CINDER_TOPOLOGY_KEY } from "../../src/volume/csimigration/plugins/openstack-cinder.js";
import { portworxCSITranslator } from "../../src/volume/csimigration/plugins/portworx.js";
import { vSphereCSITranslator } from "../../src/volume/csimigration/plugins/vsphere-volume.js";
import {
  getCSINameFromInTreeName,
  IN_TREE_PLUGINS,
  translateInTreeInlineVolumeToCSI,
  translateInTreePVToCSI,
} from "../../src/volume/csimigration/translate.js";
import { specFromPersistentVolume, specFromVolume } from "../../src/volume/plugin.js";

/*
 * Ported from k8s.io/csi-translation-lib@v0.37.2 (translate_test.go, plugins/*_test.go), in-tree to
 * CSI direction: same inputs, same expected outputs. Upstream compares Go structs, whose zero values
 * (false, "", nil) are what the API omits; `wire` compares the JSON the API would store instead.
 */

/** The object as Go's omitempty JSON has it: no false, "", empty struct or list (map entries stay). */
function wire(value: unknown): unknown {
  const MAPS = new Set(["volumeAttributes", "labels", "annotations"]);
  const strip = (v: unknown, inMap: boolean): unknown => {
    if (Array.isArray(v)) return v.length === 0 ? undefined : v.map((item) => strip(item, false));
    if (v !== null && typeof v === "object") {
      const entries = Object.entries(v)
        .map(([key, child]) => [key, strip(child, MAPS.has(key))] as const)
        .filter(([, child]) => child !== undefined);
      if (inMap) return Object.fromEntries(Object.entries(v)); // a map: entries are kept verbatim
      return entries.length === 0 ? undefined : Object.fromEntries(entries);
    }
    if (!inMap && (v === false || v === "")) return undefined;
    return v;
  };
  return strip(value, false) ?? {};
}

const betaLabels = {
  [LABEL_FAILURE_DOMAIN_BETA_ZONE]: "us-east-1a",
  [LABEL_FAILURE_DOMAIN_BETA_REGION]: "us-east-1",
};
const gaLabels = { [LABEL_TOPOLOGY_ZONE]: "us-east-1a", [LABEL_TOPOLOGY_REGION]: "us-east-1" };
const regionalBetaPDLabels = { [LABEL_FAILURE_DOMAIN_BETA_ZONE]: "europe-west1-b__europe-west1-c" };
const regionalGAPDLabels = { [LABEL_TOPOLOGY_ZONE]: "europe-west1-b__europe-west1-c" };

const topology = (key: string, ...values: string[]): V1NodeSelectorRequirement => ({
  key,
  operator: "In",
  values,
});

function makePV(labels: Record<string, string> | undefined, ...topologies: V1NodeSelectorRequirement[]) {
  const pv: V1PersistentVolume = { metadata: labels ? { labels } : {}, spec: {} };
  if (topologies.length > 0 && pv.spec) {
    pv.spec.nodeAffinity = {
      required: { nodeSelectorTerms: topologies.map((t) => ({ matchExpressions: [t] })) },
    };
  }
  return pv;
}
const makeGCEPDPV = (labels?: Record<string, string>, ...topologies: V1NodeSelectorRequirement[]) => {
  const pv = makePV(labels, ...topologies);
  pv.spec = {
    ...pv.spec,
    gcePersistentDisk: { pdName: "test-disk", fsType: "ext4", partition: 0, readOnly: false },
  };
  return pv;
};
const makeAWSEBSPV = (labels?: Record<string, string>, ...topologies: V1NodeSelectorRequirement[]) => {
  const pv = makePV(labels, ...topologies);
  pv.spec = {
    ...pv.spec,
    awsElasticBlockStore: { volumeID: "vol01", fsType: "ext3", partition: 1, readOnly: true },
  };
  return pv;
};
const makeCinderPV = (labels?: Record<string, string>, ...topologies: V1NodeSelectorRequirement[]) => {
  const pv = makePV(labels, ...topologies);
  pv.spec = { ...pv.spec, cinder: { volumeID: "vol1", fsType: "ext4", readOnly: false } };
  return pv;
};
function makeNodeAffinity(multiTerms: boolean, key: string, ...values: string[]): V1VolumeNodeAffinity {
  const terms: V1NodeSelectorTerm[] = multiTerms
    ? values.map((value) => ({ matchExpressions: [topology(key, value)] }))
    : [{ matchExpressions: [topology(key, ...values)] }];
  return { required: { nodeSelectorTerms: terms } };
}

describe("csi-translation-lib translate_test.go", () => {
  // TestTopologyTranslation: the CSI side (kvc never translates back).
  const cases: [string, V1PersistentVolume, V1VolumeNodeAffinity][] = [
    [
      "GCE PD with beta zone labels",
      makeGCEPDPV(betaLabels),
      makeNodeAffinity(false, GCE_PD_TOPOLOGY_KEY, "us-east-1a"),
    ],
    [
      "GCE PD with GA kubernetes zone labels",
      makeGCEPDPV(gaLabels),
      makeNodeAffinity(false, GCE_PD_TOPOLOGY_KEY, "us-east-1a"),
    ],
    [
      "GCE PD with existing topology (beta keys)",
      makeGCEPDPV(undefined, topology(LABEL_FAILURE_DOMAIN_BETA_ZONE, "us-east-2a")),
      makeNodeAffinity(false, GCE_PD_TOPOLOGY_KEY, "us-east-2a"),
    ],
    [
      "GCE PD with existing topology (CSI keys)",
      makeGCEPDPV(undefined, topology(GCE_PD_TOPOLOGY_KEY, "us-east-2a")),
      makeNodeAffinity(false, GCE_PD_TOPOLOGY_KEY, "us-east-2a"),
    ],
    [
      "GCE PD with zone labels and topology",
      makeGCEPDPV(betaLabels, topology(LABEL_FAILURE_DOMAIN_BETA_ZONE, "us-east-2a")),
      makeNodeAffinity(false, GCE_PD_TOPOLOGY_KEY, "us-east-2a"),
    ],
    [
      "GCE PD with regional zones",
      makeGCEPDPV(regionalBetaPDLabels),
      makeNodeAffinity(false, GCE_PD_TOPOLOGY_KEY, "europe-west1-b", "europe-west1-c"),
    ],
    [
      "GCE PD with regional topology",
      makeGCEPDPV(undefined, topology(LABEL_TOPOLOGY_ZONE, "europe-west1-b", "europe-west1-c")),
      makeNodeAffinity(false, GCE_PD_TOPOLOGY_KEY, "europe-west1-b", "europe-west1-c"),
    ],
    [
      "GCE PD with Beta regional zone and topology",
      makeGCEPDPV(
        regionalBetaPDLabels,
        topology(LABEL_FAILURE_DOMAIN_BETA_ZONE, "europe-west1-f", "europe-west1-g"),
      ),
      makeNodeAffinity(false, GCE_PD_TOPOLOGY_KEY, "europe-west1-f", "europe-west1-g"),
    ],
    [
      "GCE PD with GA regional zone and topology",
      makeGCEPDPV(regionalGAPDLabels, topology(LABEL_TOPOLOGY_ZONE, "europe-west1-f", "europe-west1-g")),
      makeNodeAffinity(false, GCE_PD_TOPOLOGY_KEY, "europe-west1-f", "europe-west1-g"),
    ],
    [
      "GCE PD with multiple node selector terms",
      makeGCEPDPV(
        undefined,
        topology(LABEL_TOPOLOGY_ZONE, "europe-west1-f"),
        topology(LABEL_TOPOLOGY_ZONE, "europe-west1-g"),
      ),
      makeNodeAffinity(true, GCE_PD_TOPOLOGY_KEY, "europe-west1-f", "europe-west1-g"),
    ],
    [
      "AWS EBS with beta zone labels",
      makeAWSEBSPV(betaLabels),
      makeNodeAffinity(false, AWS_EBS_TOPOLOGY_KEY, "us-east-1a"),
    ],
    [
      "AWS EBS with beta zone labels and topology",
      makeAWSEBSPV(betaLabels, topology(LABEL_FAILURE_DOMAIN_BETA_ZONE, "us-east-2a")),
      makeNodeAffinity(false, AWS_EBS_TOPOLOGY_KEY, "us-east-2a"),
    ],
    [
      "AWS EBS with GA zone labels",
      makeAWSEBSPV(gaLabels),
      makeNodeAffinity(false, AWS_EBS_TOPOLOGY_KEY, "us-east-1a"),
    ],
    [
      "AWS EBS with GA zone labels and topology",
      makeAWSEBSPV(gaLabels, topology(LABEL_TOPOLOGY_ZONE, "us-east-2a")),
      makeNodeAffinity(false, AWS_EBS_TOPOLOGY_KEY, "us-east-2a"),
    ],
    [
      "OpenStack Cinder with zone labels",
      makeCinderPV(betaLabels),
      makeNodeAffinity(false, CINDER_TOPOLOGY_KEY, "us-east-1a"),
    ],
    [
      "OpenStack Cinder with zone labels and topology",
      makeCinderPV(betaLabels, topology(LABEL_FAILURE_DOMAIN_BETA_ZONE, "us-east-2a")),
      makeNodeAffinity(false, CINDER_TOPOLOGY_KEY, "us-east-2a"),
    ],
  ];
  for (const [name, pv, expected] of cases) {
    it(`TestTopologyTranslation: ${name}`, () => {
      const original = structuredClone(pv);
      assert.deepEqual(translateInTreePVToCSI(pv).spec?.nodeAffinity, expected);
      assert.deepEqual(pv, original, "the input PV is not modified");
    });
  }

  it("TestTranslationStability: the CSI sources of the GCE PD and EBS PVs", () => {
    assert.deepEqual(wire(translateInTreePVToCSI(makeGCEPDPV()).spec), {
      csi: {
        driver: "pd.csi.storage.gke.io",
        volumeHandle: "projects/UNSPECIFIED/zones/UNSPECIFIED/disks/test-disk",
        fsType: "ext4",
        volumeAttributes: { partition: "" },
      },
    });
    assert.deepEqual(wire(translateInTreePVToCSI(makeAWSEBSPV()).spec), {
      csi: {
        driver: "ebs.csi.aws.com",
        volumeHandle: "vol01",
        fsType: "ext3",
        readOnly: true,
        volumeAttributes: { partition: "1" },
      },
    });
  });

  // TestTranslateInTreeInlineVolumeToCSINameUniqueness
  const uniqueSources: Record<string, () => V1Volume> = {
    "pd.csi.storage.gke.io": () => ({ name: "", gcePersistentDisk: { pdName: randomUUID() } }),
    "ebs.csi.aws.com": () => ({ name: "", awsElasticBlockStore: { volumeID: randomUUID() } }),
    "cinder.csi.openstack.org": () => ({ name: "", cinder: { volumeID: randomUUID() } }),
    "disk.csi.azure.com": () => ({ name: "", azureDisk: { diskName: randomUUID(), diskURI: randomUUID() } }),
    "file.csi.azure.com": () => ({
      name: "",
      azureFile: { secretName: randomUUID(), shareName: randomUUID() },
    }),
    "csi.vsphere.vmware.com": () => ({
      name: "",
      vsphereVolume: {
        volumePath: ` [vsanDatastore] 6785a85e-268e-6352-a2e8-02008b7afadd/kubernetes-dynamic-pvc-${randomUUID()}.vmdk`,
        fsType: "ext4",
      },
    }),
    "pxd.portworx.com": () => ({ name: "", portworxVolume: { volumeID: randomUUID() } }),
  };
  for (const driverName of IN_TREE_PLUGINS.keys()) {
    it(`TestTranslateInTreeInlineVolumeToCSINameUniqueness: ${driverName}`, () => {
      const source = uniqueSources[driverName];
      assert.ok(source, `couldn't find logic for driver: ${driverName}`);
      const pv1 = translateInTreeInlineVolumeToCSI(source(), "");
      const pv2 = translateInTreeInlineVolumeToCSI(source(), "");
      assert.notEqual(pv1.metadata?.name, pv2.metadata?.name);
      assert.equal(pv1.spec?.volumeMode, "Filesystem", "inline volumes are filesystem volumes");
    });
  }

  it("TestPluginNameMappings", () => {
    for (const [inTree, csi] of [
      ["kubernetes.io/gce-pd", "pd.csi.storage.gke.io"],
      ["kubernetes.io/aws-ebs", "ebs.csi.aws.com"],
    ] as const) {
      assert.equal(getCSINameFromInTreeName(inTree), csi);
      assert.equal(IN_TREE_PLUGINS.get(csi)?.inTreePluginName, inTree);
    }
    assert.throws(() => getCSINameFromInTreeName("kubernetes.io/nfs"), /could not find CSI Driver name/);
  });
});

describe("csi-translation-lib plugins/in_tree_volume_test.go", () => {
  const useast1aGALabels = { [LABEL_TOPOLOGY_ZONE]: "us-east1-a", [LABEL_TOPOLOGY_REGION]: "us-east1" };
  it("TestTranslateTopologyFromInTreeToCSI: replace GA kubernetes zone topology", () => {
    const pv = makePV(useast1aGALabels);
    pv.spec = {
      nodeAffinity: {
        required: {
          nodeSelectorTerms: [
            {
              matchExpressions: [
                topology(LABEL_TOPOLOGY_ZONE, "us-east1-a"),
                topology(LABEL_TOPOLOGY_REGION, "us-east1"),
              ],
            },
          ],
        },
      },
    };
    translateTopologyFromInTreeToCSI(pv, GCE_PD_TOPOLOGY_KEY);
    assert.deepEqual(pv.spec.nodeAffinity?.required?.nodeSelectorTerms, [
      {
        matchExpressions: [
          topology(GCE_PD_TOPOLOGY_KEY, "us-east1-a"),
          topology(LABEL_TOPOLOGY_REGION, "us-east1"),
        ],
      },
    ]);
  });
  it("TestTranslateTopologyFromInTreeToCSI: replace beta topology and upgrade the region label", () => {
    const pv = makePV(useast1aGALabels);
    pv.spec = {
      nodeAffinity: {
        required: {
          nodeSelectorTerms: [
            {
              matchExpressions: [
                topology(LABEL_FAILURE_DOMAIN_BETA_ZONE, "us-west2-b"),
                topology(LABEL_FAILURE_DOMAIN_BETA_REGION, "us-west2"),
              ],
            },
          ],
        },
      },
    };
    translateTopologyFromInTreeToCSI(pv, GCE_PD_TOPOLOGY_KEY);
    assert.deepEqual(pv.spec.nodeAffinity?.required?.nodeSelectorTerms, [
      {
        matchExpressions: [
          topology(GCE_PD_TOPOLOGY_KEY, "us-west2-b"),
          topology(LABEL_TOPOLOGY_REGION, "us-west2"),
        ],
      },
    ]);
  });

  const addCases: [string, string[], V1VolumeNodeAffinity | undefined][] = [
    ["empty zones", [], undefined],
    ["only whitespace-named zones", [" ", "\n", "\t", "  "], undefined],
    [
      "including whitespace-named zones",
      [" ", "us-central1-a"],
      makeNodeAffinity(false, GCE_PD_TOPOLOGY_KEY, "us-central1-a"),
    ],
    [
      "unsorted zones",
      ["us-central1-f", "us-central1-a", "us-central1-c", "us-central1-b"],
      makeNodeAffinity(
        false,
        GCE_PD_TOPOLOGY_KEY,
        "us-central1-a",
        "us-central1-b",
        "us-central1-c",
        "us-central1-f",
      ),
    ],
  ];
  for (const [name, zones, expected] of addCases) {
    it(`TestAddTopology: ${name}`, () => {
      const pv: V1PersistentVolume = { spec: {} };
      if (expected === undefined) {
        assert.throws(() => {
          addTopology(pv, GCE_PD_TOPOLOGY_KEY, zones);
        }, /no valid zones/);
      } else {
        addTopology(pv, GCE_PD_TOPOLOGY_KEY, zones);
        assert.deepEqual(pv.spec?.nodeAffinity, expected);
      }
    });
  }

  const withTerms = (terms: V1NodeSelectorTerm[]): V1PersistentVolume => ({
    spec: { nodeAffinity: { required: { nodeSelectorTerms: terms } } },
  });
  const replaceCases: [string, V1NodeSelectorTerm[], V1NodeSelectorTerm[]][] = [
    [
      "Replace single csi topology from PV",
      [{ matchExpressions: [topology(GCE_PD_TOPOLOGY_KEY, "us-east1-a")] }],
      [{ matchExpressions: [topology(LABEL_TOPOLOGY_ZONE, "us-east1-a")] }],
    ],
    [
      "Not found the topology key so do nothing",
      [{ matchExpressions: [topology(LABEL_TOPOLOGY_ZONE, "us-east1-a")] }],
      [{ matchExpressions: [topology(LABEL_TOPOLOGY_ZONE, "us-east1-a")] }],
    ],
    [
      "Replace the topology key from multiple terms",
      [
        { matchExpressions: [topology(GCE_PD_TOPOLOGY_KEY, "us-east1-a")] },
        { matchExpressions: [topology(GCE_PD_TOPOLOGY_KEY, "us-east1-c")] },
      ],
      [
        { matchExpressions: [topology(LABEL_TOPOLOGY_ZONE, "us-east1-a")] },
        { matchExpressions: [topology(LABEL_TOPOLOGY_ZONE, "us-east1-c")] },
      ],
    ],
    [
      "Replace the topology key from single term and not combine topology key",
      [
        {
          matchExpressions: [
            topology(GCE_PD_TOPOLOGY_KEY, "us-east1-a"),
            topology(LABEL_TOPOLOGY_ZONE, "us-east1-c"),
          ],
        },
      ],
      [
        {
          matchExpressions: [
            topology(LABEL_TOPOLOGY_ZONE, "us-east1-a"),
            topology(LABEL_TOPOLOGY_ZONE, "us-east1-c"),
          ],
        },
      ],
    ],
  ];
  for (const [name, terms, expected] of replaceCases) {
    it(`TestReplaceTopology: ${name}`, () => {
      const pv = withTerms(terms);
      replaceTopology(pv, GCE_PD_TOPOLOGY_KEY, LABEL_TOPOLOGY_ZONE);
      assert.deepEqual(pv, withTerms(expected));
    });
  }
});

describe("csi-translation-lib plugins/aws_ebs_test.go", () => {
  const normalVolumeID = "vol-02399794d890f9375";
  const awsVolumeID = "aws:///vol-02399794d890f9375";
  const awsZoneVolumeID = "aws://us-west-2a/vol-02399794d890f9375";
  const invalidVolumeID = "aws://us-west-2a/02399794d890f9375";
  it("TestKubernetesVolumeIDToEBSVolumeID", () => {
    assert.equal(kubernetesVolumeIDToEBSVolumeID(normalVolumeID), normalVolumeID);
    assert.equal(kubernetesVolumeIDToEBSVolumeID(awsVolumeID), normalVolumeID);
    assert.equal(kubernetesVolumeIDToEBSVolumeID(awsZoneVolumeID), normalVolumeID);
    assert.throws(() => kubernetesVolumeIDToEBSVolumeID(invalidVolumeID), /Invalid format for AWS volume/);
  });
  it("TestTranslateInTreeInlineVolumeToCSI", () => {
    for (const id of [normalVolumeID, awsVolumeID, awsZoneVolumeID]) {
      const pv = awsElasticBlockStoreCSITranslator.translateInTreeInlineVolumeToCSI(
        { name: "volume", awsElasticBlockStore: { volumeID: id } },
        "",
      );
      assert.equal(pv.metadata?.name, `ebs.csi.aws.com-${normalVolumeID}`);
      assert.equal(pv.spec?.csi?.volumeHandle, normalVolumeID);
    }
    assert.throws(() =>
      awsElasticBlockStoreCSITranslator.translateInTreeInlineVolumeToCSI(
        { name: "volume", awsElasticBlockStore: { volumeID: invalidVolumeID } },
        "",
      ),
    );
    assert.throws(() =>
      awsElasticBlockStoreCSITranslator.translateInTreeInlineVolumeToCSI({ name: "volume" }, ""),
    );
  });
});

describe("csi-translation-lib plugins/gce_pd_test.go", () => {
  const cases: [string[], string[]][] = [
    [["ReadOnlyMany"], ["ReadOnlyMany"]],
    [["ReadWriteOnce"], ["ReadWriteOnce"]],
    [["ReadWriteMany"], ["ReadWriteOnce"]],
    [["ReadOnlyMany", "ReadWriteOnce"], ["ReadWriteOnce"]],
    [["ReadWriteOnce", "ReadWriteMany"], ["ReadWriteOnce"]],
    [["ReadWriteMany", "ReadOnlyMany"], ["ReadWriteOnce"]],
    [["ReadWriteMany", "ReadWriteOnce", "ReadOnlyMany"], ["ReadWriteOnce"]],
  ];
  it("TestBackwardCompatibleAccessModes", () => {
    for (const [modes, expected] of cases)
      assert.deepEqual(backwardCompatibleAccessModes(modes), expected, modes.join());
  });
  it("TestInlineReadOnly", () => {
    const pv = gcePersistentDiskCSITranslator.translateInTreeInlineVolumeToCSI(
      { name: "", gcePersistentDisk: { pdName: "foo", readOnly: true } },
      "",
    );
    assert.equal(pv.spec?.csi?.readOnly, true);
    assert.deepEqual(pv.spec?.accessModes, ["ReadOnlyMany"]);
  });
  const volIDCases: [string, string, string][] = [
    [LABEL_FAILURE_DOMAIN_BETA_ZONE, "us-east1-a", "projects/UNSPECIFIED/zones/us-east1-a/disks/pd-name"],
    [LABEL_TOPOLOGY_ZONE, "us-east1-a", "projects/UNSPECIFIED/zones/us-east1-a/disks/pd-name"],
    [
      LABEL_FAILURE_DOMAIN_BETA_ZONE,
      "us-central1-a__us-central1-c",
      "projects/UNSPECIFIED/regions/us-central1/disks/pd-name",
    ],
    [
      LABEL_TOPOLOGY_ZONE,
      "us-central1-a__us-central1-c",
      "projects/UNSPECIFIED/regions/us-central1/disks/pd-name",
    ],
  ];
  for (const [key, value, want] of volIDCases) {
    it(`TestTranslateInTreePVToCSIVolIDFmt: ${key}=${value}`, () => {
      const pv = gcePersistentDiskCSITranslator.translateInTreePVToCSI({
        metadata: { labels: { [key]: value } },
        spec: { gcePersistentDisk: { pdName: "pd-name" } },
      });
      assert.equal(pv.spec?.csi?.volumeHandle, want);
    });
  }
});

describe("csi-translation-lib plugins/azure_disk_test.go", () => {
  it("TestTranslateAzureDiskInTreeInlineVolumeToCSI", () => {
    assert.throws(() => azureDiskCSITranslator.translateInTreeInlineVolumeToCSI({ name: "" }, ""));
    const pv = azureDiskCSITranslator.translateInTreeInlineVolumeToCSI(
      { name: "", azureDisk: { diskName: "diskname", diskURI: "datadiskuri" } },
      "",
    );
    assert.deepEqual(wire(pv), {
      metadata: { name: "datadiskuri" },
      spec: {
        csi: {
          driver: "disk.csi.azure.com",
          volumeHandle: "datadiskuri",
          volumeAttributes: { kind: "Managed" },
        },
        accessModes: ["ReadWriteOnce"],
      },
    });
    assert.throws(
      () =>
        azureDiskCSITranslator.translateInTreeInlineVolumeToCSI(
          { name: "", azureDisk: { diskName: "diskname", diskURI: "datadiskuri", kind: "Dedicated" } },
          "",
        ),
      /kind\(Dedicated\) is not supported in csi migration/,
    );
  });
  it("TestTranslateAzureDiskInTreePVToCSI", () => {
    const diskURI = "/subscriptions/12/resourceGroups/23/providers/Microsoft.Compute/disks/name";
    assert.throws(() => azureDiskCSITranslator.translateInTreePVToCSI({}));
    const source = { cachingMode: "cachingmode", diskName: "", diskURI, fsType: "fstype", readOnly: true };
    assert.deepEqual(wire(azureDiskCSITranslator.translateInTreePVToCSI({ spec: { azureDisk: source } })), {
      spec: {
        csi: {
          driver: "disk.csi.azure.com",
          fsType: "fstype",
          readOnly: true,
          volumeAttributes: { cachingmode: "cachingmode", fstype: "fstype", kind: "Managed" },
          volumeHandle: diskURI,
        },
      },
    });
    assert.throws(() =>
      azureDiskCSITranslator.translateInTreePVToCSI({
        spec: { azureDisk: { ...source, kind: "Dedicated" } },
      }),
    );
  });
});

describe("csi-translation-lib plugins/azure_file_test.go", () => {
  const secretNamespace = "secretnamespace";
  const rg = { "kubernetes.io/azure-file-resource-group": "rg" };
  const source = { shareName: "sharename", secretName: "secretname", readOnly: true };
  const csi = (volumeHandle: string) => ({
    driver: "file.csi.azure.com",
    readOnly: true,
    nodeStageSecretRef: { name: "secretname", namespace: secretNamespace },
    volumeAttributes: { sharename: "sharename" },
    volumeHandle,
  });
  it("TestTranslateAzureFileInTreePVToCSI", () => {
    assert.throws(() => azureFileCSITranslator.translateInTreePVToCSI({}));
    assert.throws(
      () =>
        azureFileCSITranslator.translateInTreePVToCSI({
          metadata: { name: "uuid", annotations: rg },
          spec: { azureFile: source },
        }),
      /could not find a secret namespace/,
    );
    assert.deepEqual(
      wire(
        azureFileCSITranslator.translateInTreePVToCSI({
          metadata: { name: "uuid" },
          spec: { azureFile: { ...source, secretNamespace } },
        }),
      ),
      { metadata: { name: "uuid" }, spec: { csi: csi("#secretname#sharename#uuid#secretnamespace") } },
    );
    assert.deepEqual(
      wire(
        azureFileCSITranslator.translateInTreePVToCSI({
          metadata: { name: "uuid", annotations: rg },
          spec: { azureFile: { ...source, secretNamespace } },
        }),
      ),
      {
        metadata: { name: "uuid", annotations: rg },
        spec: { csi: csi("rg#secretname#sharename#uuid#secretnamespace") },
      },
    );
    assert.deepEqual(
      wire(
        azureFileCSITranslator.translateInTreePVToCSI({
          metadata: { name: "uuid", annotations: rg },
          spec: { azureFile: source, claimRef: { namespace: secretNamespace } },
        }),
      ),
      {
        metadata: { name: "uuid", annotations: rg },
        spec: {
          csi: csi("rg#secretname#sharename#uuid#secretnamespace"),
          claimRef: { namespace: secretNamespace },
        },
      },
    );
  });
  it("TestGetStorageAccount", () => {
    assert.equal(getStorageAccountName("azure-storage-account-accountname-secret"), "accountname");
    assert.equal(getStorageAccountName("azure-storage-account-accountname-dup-secret"), "accountname-dup");
    assert.throws(() => getStorageAccountName("invalid"));
  });
});

describe("csi-translation-lib plugins/portworx_test.go", () => {
  it("TestTranslatePortworxInTreeInlineVolumeToCSI", () => {
    const pv = portworxCSITranslator.translateInTreeInlineVolumeToCSI(
      { name: "PortworxVol", portworxVolume: { volumeID: "ID", fsType: "type", readOnly: false } },
      "ns",
    );
    assert.deepEqual(wire(pv), {
      metadata: { name: "pxd.portworx.com-ID" },
      spec: {
        csi: { driver: "pxd.portworx.com", volumeHandle: "ID", fsType: "type", volumeAttributes: {} },
        accessModes: ["ReadWriteOnce"],
      },
    });
  });
  it("TestTranslatePortworxInTreePVToCSI", () => {
    const spec = { accessModes: ["ReadWriteOnce"], claimRef: { name: "test-pvc", namespace: "default" } };
    assert.throws(() =>
      portworxCSITranslator.translateInTreePVToCSI({ metadata: { name: "pxd.portworx.com" }, spec }),
    );
    const source = { volumeID: "ID1111", fsType: "type", readOnly: false };
    const csi = { driver: "pxd.portworx.com", volumeHandle: "ID1111", fsType: "type", volumeAttributes: {} };
    assert.deepEqual(
      wire(
        portworxCSITranslator.translateInTreePVToCSI({
          metadata: { name: "pxd.portworx.com" },
          spec: { ...spec, portworxVolume: source },
        }),
      ),
      { metadata: { name: "pxd.portworx.com" }, spec: { ...spec, csi } },
    );
    const annotations = {
      "openstorage.io/auth-secret-name": "test-secret",
      "openstorage.io/auth-secret-namespace": "test-namespace",
    };
    const ref = { name: "test-secret", namespace: "test-namespace" };
    assert.deepEqual(
      wire(
        portworxCSITranslator.translateInTreePVToCSI({
          metadata: { name: "pxd.portworx.com", annotations },
          spec: { ...spec, portworxVolume: source },
        }),
      ),
      {
        metadata: { name: "pxd.portworx.com", annotations },
        spec: {
          ...spec,
          csi: {
            ...csi,
            controllerPublishSecretRef: ref,
            nodeStageSecretRef: ref,
            nodePublishSecretRef: ref,
            controllerExpandSecretRef: ref,
            nodeExpandSecretRef: ref,
          },
        },
      },
    );
  });
});

describe("csi-translation-lib plugins/vsphere_volume_test.go", () => {
  const volumePath =
    "[vsanDatastore] 6785a85e-268e-6352-a2e8-02008b7afadd/kubernetes-dynamic-pvc-68734c9f-a679-42e6-a694-39632c51e31f.vmdk";
  const name = "pvc-d8b4475f-2c47-486e-9b57-43ae006f9b59";
  const source = { volumePath, fsType: "ext4", storagePolicyName: "vSAN Default Storage Policy" };
  const csi = {
    driver: "csi.vsphere.vmware.com",
    volumeHandle: volumePath,
    fsType: "ext4",
    volumeAttributes: { storagepolicyname: "vSAN Default Storage Policy" },
  };
  const zoneRegion = makeNodeAffinity(false, "topology.csi.vmware.com/zone", "z1");
  zoneRegion.required?.nodeSelectorTerms[0]?.matchExpressions?.push(
    topology("topology.csi.vmware.com/region", "r1"),
  );
  it("TestTranslateVSphereInTreePVToCSI", () => {
    assert.throws(() => vSphereCSITranslator.translateInTreePVToCSI({}));
    assert.deepEqual(
      wire(
        vSphereCSITranslator.translateInTreePVToCSI({
          metadata: { name },
          spec: { vsphereVolume: source, accessModes: ["ReadWriteOnce"] },
        }),
      ),
      { metadata: { name }, spec: { csi, accessModes: ["ReadWriteOnce"] } },
    );
    for (const labels of [
      { [LABEL_FAILURE_DOMAIN_BETA_ZONE]: "z1", [LABEL_FAILURE_DOMAIN_BETA_REGION]: "r1" },
      { [LABEL_TOPOLOGY_ZONE]: "z1", [LABEL_TOPOLOGY_REGION]: "r1" },
    ]) {
      assert.deepEqual(
        wire(
          vSphereCSITranslator.translateInTreePVToCSI({
            metadata: { name, labels },
            spec: { vsphereVolume: source, accessModes: ["ReadWriteOnce"] },
          }),
        ),
        {
          metadata: { name, labels },
          spec: { csi, accessModes: ["ReadWriteOnce"], nodeAffinity: zoneRegion },
        },
      );
    }
  });
  it("a blank zone label is ignored, as upstream ignores addTopology's error", () => {
    const pv = vSphereCSITranslator.translateInTreePVToCSI({
      metadata: { labels: { [LABEL_TOPOLOGY_ZONE]: " " } },
      spec: { vsphereVolume: { volumePath: "p" } },
    });
    assert.equal(pv.spec?.nodeAffinity, undefined);
    assert.equal(pv.spec?.csi?.volumeHandle, "p");
  });
  it("TestTranslatevSphereInTreeInlineVolumeToCSI", () => {
    assert.throws(() => vSphereCSITranslator.translateInTreeInlineVolumeToCSI({ name: "" }, ""));
    const path = "[vsanDatastore] volume/inlinevolume.vmdk";
    const pv = vSphereCSITranslator.translateInTreeInlineVolumeToCSI(
      { name: "inlinevolume", vsphereVolume: { volumePath: path, fsType: "ext4" } },
      "",
    );
    assert.deepEqual(wire(pv), {
      metadata: { name: `csi.vsphere.vmware.com-${path}` },
      spec: {
        csi: { driver: "csi.vsphere.vmware.com", volumeHandle: path, fsType: "ext4", volumeAttributes: {} },
        accessModes: ["ReadWriteOnce"],
      },
    });
  });
  it("an inline volume with a storage policy is refused, where upstream dereferences nil and panics", () => {
    assert.throws(
      () =>
        vSphereCSITranslator.translateInTreeInlineVolumeToCSI(
          { name: "v", vsphereVolume: { volumePath: "p", storagePolicyName: "gold" } },
          "",
        ),
      /storagePolicyName/,
    );
  });
});

describe("csimigration plugin manager (pkg/volume/csimigration)", () => {
  const ebsPV: V1PersistentVolume = {
    metadata: { name: "pv-ebs" },
    spec: { awsElasticBlockStore: { volumeID: "aws://us-east-1a/vol-1" }, accessModes: ["ReadWriteOnce"] },
  };
  it("every in-tree plugin with a CSI replacement is migrated; others are not", () => {
    assert.equal(isMigratable(specFromPersistentVolume(ebsPV)), true);
    assert.equal(isMigratable(specFromVolume({ name: "v", gcePersistentDisk: { pdName: "d" } })), true);
    assert.equal(isMigratable(specFromVolume({ name: "v", nfs: { server: "s", path: "/" } })), false);
    assert.equal(
      isMigratable(specFromPersistentVolume({ spec: { csi: { driver: "d", volumeHandle: "h" } } })),
      false,
    );
    assert.equal(inTreeCsiMigration.migratedDriver("kubernetes.io/portworx-volume"), "pxd.portworx.com");
    assert.equal(inTreeCsiMigration.migratedDriver("kubernetes.io/nfs"), undefined);
    assert.equal(inTreeCsiMigration.migratedDriver("constructor"), undefined);
  });
  it("a PV translates to a migrated spec with the same PV name; an inline volume to an inline spec", () => {
    const pvSpec = translateInTreeSpecToCSI(specFromPersistentVolume(ebsPV, true), "ns");
    assert.equal(pvSpec.persistentVolume?.metadata?.name, "pv-ebs");
    assert.equal(pvSpec.persistentVolume?.spec?.csi?.volumeHandle, "vol-1");
    assert.deepEqual(
      [pvSpec.migrated, pvSpec.inlineVolumeSpecForCSIMigration, pvSpec.readOnly],
      [true, false, true],
    );
    assert.ok(ebsPV.spec?.awsElasticBlockStore, "the informer's PV is not modified");
    const inline = translateInTreeSpecToCSI(
      specFromVolume({ name: "v", gcePersistentDisk: { pdName: "d" } }),
      "ns",
    );
    assert.deepEqual([inline.migrated, inline.inlineVolumeSpecForCSIMigration], [true, true]);
    assert.equal(inline.persistentVolume?.spec?.csi?.driver, "pd.csi.storage.gke.io");
  });
  it("untranslatable volumes fail with upstream's message; others pass through unchanged", () => {
    assert.throws(
      () =>
        translateInTreeSpecToCSI(
          specFromVolume({ name: "v", awsElasticBlockStore: { volumeID: "aws://z/bad" } }),
          "",
        ),
      /^Error: failed to translate in-tree pv to CSI: failed to translate Kubernetes ID to EBS Volume ID Invalid format/,
    );
    const nfs = specFromVolume({ name: "v", nfs: { server: "s", path: "/" } });
    assert.equal(translateInTreeSpecToCSIIfNeeded(nfs, ""), nfs);
  });
});
