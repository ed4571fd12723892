// Command featuregates prints, as JSON, every feature gate kube-controller-manager (at the pinned
// release) accepts in --feature-gates, with its stage, default and lock at the binary's version:
// the catalogue src/app/kcm-feature-gates.ts is generated from (npm run kcm:flags).
//
//	go run ./featuregates
package main

import (
	"encoding/json"
	"os"
	"sort"

	utilfeature "k8s.io/apiserver/pkg/util/feature"
	// The binary's package: its init adds the logging and metrics gates.
	_ "k8s.io/kubernetes/cmd/kube-controller-manager/app"
	"k8s.io/kubernetes/cmd/kube-controller-manager/app/options"
)

type gate struct {
	Name          string `json:"name"`
	Stage         string `json:"stage"`
	Default       bool   `json:"default"`
	LockToDefault bool   `json:"lockToDefault,omitempty"`
}

func main() {
	// Registers the gates with the component registry as the binary does.
	if _, err := options.NewKubeControllerManagerOptions(); err != nil {
		panic(err)
	}
	var gates []gate
	for name, spec := range utilfeature.DefaultMutableFeatureGate.GetAll() {
		gates = append(gates, gate{string(name), string(spec.PreRelease), spec.Default, spec.LockToDefault})
	}
	sort.Slice(gates, func(i, j int) bool { return gates[i].Name < gates[j].Name })
	out := json.NewEncoder(os.Stdout)
	out.SetIndent("", "  ")
	if err := out.Encode(gates); err != nil {
		panic(err)
	}
}
