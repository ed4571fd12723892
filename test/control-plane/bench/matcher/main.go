// Command matcher times upstream's claim matcher — k8s.io/component-helpers/storage/volume
// FindMatchingVolume at the pinned release — called the way kube-controller-manager's PV controller
// calls it: through a client-go cache.Indexer keyed by access modes, one FindMatchingVolume per
// access-mode bucket, fewest modes first (pkg/controller/volume/persistentvolume/index.go, whose
// types are unexported and are therefore reproduced below verbatim in behaviour).
//
// It reads the data set that bench/matcher.ts generates (so both matchers see the same PVs and
// claims), times one findByClaim per claim and prints a JSON report on stdout. It asserts nothing.
//
//	go run ./bench/matcher <dataset.json>
package main

import (
	"encoding/json"
	"fmt"
	"os"
	"runtime"
	"sort"
	"time"

	v1 "k8s.io/api/core/v1"
	utilfeature "k8s.io/apiserver/pkg/util/feature"
	"k8s.io/client-go/tools/cache"
	"k8s.io/component-helpers/storage/volume"
	v1helper "k8s.io/kubernetes/pkg/apis/core/v1/helper"
	"k8s.io/kubernetes/pkg/features"
	"k8s.io/kubernetes/pkg/volume/util"
)

// dataset is what bench/matcher.ts writes.
type dataset struct {
	Volumes []*v1.PersistentVolume      `json:"volumes"`
	Claims  []*v1.PersistentVolumeClaim `json:"claims"`
	// Warmup claims are matched first and not timed.
	Warmup int `json:"warmup"`
	// Lookups is how many claims (from the start of Claims) are timed.
	Lookups int `json:"lookups"`
}

type report struct {
	GoVersion string  `json:"goVersion"`
	BuildMs   float64 `json:"buildMs"`
	HeapMB    float64 `json:"heapMB"`
	Lookups   int     `json:"lookups"`
	TotalMs   float64 `json:"totalMs"`
	// Micros holds one duration per timed lookup, in claim order.
	Micros []float64 `json:"micros"`
	// Results holds the chosen PV's name per timed lookup ("" for no match).
	Results []string `json:"results"`
}

// --- index.go, reproduced ---

type persistentVolumeOrderedIndex struct {
	store cache.Indexer
}

func newPersistentVolumeOrderedIndex() persistentVolumeOrderedIndex {
	return persistentVolumeOrderedIndex{cache.NewIndexer(cache.MetaNamespaceKeyFunc, cache.Indexers{"accessmodes": accessModesIndexFunc})}
}

func accessModesIndexFunc(obj interface{}) ([]string, error) {
	if pv, ok := obj.(*v1.PersistentVolume); ok {
		modes := v1helper.GetAccessModesAsString(pv.Spec.AccessModes)
		return []string{modes}, nil
	}
	return []string{""}, fmt.Errorf("object is not a persistent volume: %v", obj)
}

func (pvIndex *persistentVolumeOrderedIndex) listByAccessModes(modes []v1.PersistentVolumeAccessMode) ([]*v1.PersistentVolume, error) {
	pv := &v1.PersistentVolume{Spec: v1.PersistentVolumeSpec{AccessModes: modes}}
	objs, err := pvIndex.store.Index("accessmodes", pv)
	if err != nil {
		return nil, err
	}
	volumes := make([]*v1.PersistentVolume, len(objs))
	for i, obj := range objs {
		volumes[i] = obj.(*v1.PersistentVolume)
	}
	return volumes, nil
}

func (pvIndex *persistentVolumeOrderedIndex) findByClaim(claim *v1.PersistentVolumeClaim, delayBinding bool) (*v1.PersistentVolume, error) {
	allPossibleModes := pvIndex.allPossibleMatchingAccessModes(claim.Spec.AccessModes)
	for _, modes := range allPossibleModes {
		volumes, err := pvIndex.listByAccessModes(modes)
		if err != nil {
			return nil, err
		}
		bestVol, err := volume.FindMatchingVolume(claim, volumes, nil, nil, delayBinding, utilfeature.DefaultFeatureGate.Enabled(features.VolumeAttributesClass))
		if err != nil {
			return nil, err
		}
		if bestVol != nil {
			return bestVol, nil
		}
	}
	return nil, nil
}

func (pvIndex *persistentVolumeOrderedIndex) allPossibleMatchingAccessModes(requestedModes []v1.PersistentVolumeAccessMode) [][]v1.PersistentVolumeAccessMode {
	matchedModes := [][]v1.PersistentVolumeAccessMode{}
	keys := pvIndex.store.ListIndexFuncValues("accessmodes")
	for _, key := range keys {
		indexedModes := v1helper.GetAccessModesFromString(key)
		if util.ContainsAllAccessModes(indexedModes, requestedModes) {
			matchedModes = append(matchedModes, indexedModes)
		}
	}
	sort.Sort(byAccessModes{matchedModes})
	return matchedModes
}

type byAccessModes struct {
	modes [][]v1.PersistentVolumeAccessMode
}

func (c byAccessModes) Less(i, j int) bool { return len(c.modes[i]) < len(c.modes[j]) }
func (c byAccessModes) Swap(i, j int)      { c.modes[i], c.modes[j] = c.modes[j], c.modes[i] }
func (c byAccessModes) Len() int           { return len(c.modes) }

// --- the benchmark ---

func heapMB() float64 {
	runtime.GC()
	var m runtime.MemStats
	runtime.ReadMemStats(&m)
	return float64(m.HeapAlloc) / (1 << 20)
}

func main() {
	if len(os.Args) != 2 {
		fmt.Fprintln(os.Stderr, "usage: matcher <dataset.json>")
		os.Exit(2)
	}
	raw, err := os.ReadFile(os.Args[1])
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	var data dataset
	if err := json.Unmarshal(raw, &data); err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	raw = nil

	before := heapMB()
	start := time.Now()
	index := newPersistentVolumeOrderedIndex()
	for _, pv := range data.Volumes {
		if err := index.store.Add(pv); err != nil {
			fmt.Fprintln(os.Stderr, err)
			os.Exit(1)
		}
	}
	build := time.Since(start)
	// The PVs themselves are counted on both sides: the indexer holds pointers to them.
	data.Volumes = nil
	heap := heapMB() - before

	lookups := min(data.Lookups, len(data.Claims))
	for i := 0; i < data.Warmup && i < len(data.Claims); i++ {
		if _, err := index.findBestMatchForClaim(data.Claims[i]); err != nil {
			fmt.Fprintln(os.Stderr, err)
			os.Exit(1)
		}
	}
	rep := report{GoVersion: runtime.Version(), BuildMs: float64(build.Microseconds()) / 1000, HeapMB: heap, Lookups: lookups}
	rep.Micros = make([]float64, lookups)
	rep.Results = make([]string, lookups)
	total := time.Now()
	for i := 0; i < lookups; i++ {
		t := time.Now()
		pv, err := index.findBestMatchForClaim(data.Claims[i])
		rep.Micros[i] = float64(time.Since(t).Nanoseconds()) / 1000
		if err != nil {
			fmt.Fprintln(os.Stderr, err)
			os.Exit(1)
		}
		if pv != nil {
			rep.Results[i] = pv.Name
		}
	}
	rep.TotalMs = float64(time.Since(total).Microseconds()) / 1000
	if err := json.NewEncoder(os.Stdout).Encode(rep); err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
}

// findBestMatchForClaim is the controller's entry point (delayBinding is false on its path).
func (pvIndex *persistentVolumeOrderedIndex) findBestMatchForClaim(claim *v1.PersistentVolumeClaim) (*v1.PersistentVolume, error) {
	return pvIndex.findByClaim(claim, false)
}
