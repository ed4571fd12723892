// Command ceiling is the apiserver's ceiling for binding: the PV binder's five writes per pre-created
// PV/PVC pair (PV status Available, PV claimRef, PV status Bound, PVC volumeName, PVC status Bound —
// what kube-controller-manager and kvc each send per pair), sent by client-go as KCM sends them
// (protobuf, HTTP/2, updates carrying the resourceVersion) but with no controller in between: the
// objects are listed once, then `-concurrency` goroutines each bind one pair after another, its five
// writes in order, with no client-side rate limit. bench/throughput.ts runs it against the same
// fresh control plane the controllers get and reports the best concurrency. Prints a JSON report.
//
//	go run ./bench/ceiling -kubeconfig=<file> -concurrency=16
package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"strings"
	"sync"
	"syscall"
	"time"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"
)

type report struct {
	Pairs       int     `json:"pairs"`
	Concurrency int     `json:"concurrency"`
	Seconds     float64 `json:"seconds"`
	Writes      int64   `json:"writes"`
	CPUSeconds  float64 `json:"cpuSeconds"`
}

type pair struct {
	pv  *v1.PersistentVolume
	pvc *v1.PersistentVolumeClaim
}

func main() {
	kubeconfig := flag.String("kubeconfig", "", "kubeconfig of the apiserver")
	namespace := flag.String("namespace", "default", "namespace of the claims")
	concurrency := flag.Int("concurrency", 16, "pairs bound at once")
	asJSON := flag.Bool("json", false, "send and accept JSON, as kvc does, instead of protobuf")
	flag.Parse()
	if err := run(*kubeconfig, *namespace, *concurrency, *asJSON); err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
}

func run(kubeconfig, namespace string, concurrency int, asJSON bool) error {
	cfg, err := clientcmd.BuildConfigFromFlags("", kubeconfig)
	if err != nil {
		return err
	}
	if !asJSON {
		cfg.ContentType = "application/vnd.kubernetes.protobuf"
		cfg.AcceptContentTypes = "application/vnd.kubernetes.protobuf,application/json"
	}
	cfg.QPS = -1 // no client-side limiter
	client, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return err
	}
	ctx := context.Background()
	pvs, err := client.CoreV1().PersistentVolumes().List(ctx, metav1.ListOptions{})
	if err != nil {
		return err
	}
	pvcs, err := client.CoreV1().PersistentVolumeClaims(namespace).List(ctx, metav1.ListOptions{})
	if err != nil {
		return err
	}
	// pv-<id> pairs with pvc-<id>, as bench/throughput.ts names them.
	claims := map[string]*v1.PersistentVolumeClaim{}
	for i := range pvcs.Items {
		claims[strings.TrimPrefix(pvcs.Items[i].Name, "pvc-")] = &pvcs.Items[i]
	}
	var pairs []pair
	for i := range pvs.Items {
		if pvc, ok := claims[strings.TrimPrefix(pvs.Items[i].Name, "pv-")]; ok {
			pairs = append(pairs, pair{&pvs.Items[i], pvc})
		}
	}

	jobs := make(chan pair)
	errs := make(chan error, concurrency)
	var writes int64
	var mu sync.Mutex
	var wg sync.WaitGroup
	start := time.Now()
	for range concurrency {
		wg.Go(func() {
			for p := range jobs {
				n, err := bind(ctx, client, p)
				mu.Lock()
				writes += int64(n)
				mu.Unlock()
				if err != nil {
					errs <- err
					return
				}
			}
		})
	}
	for _, p := range pairs {
		select {
		case jobs <- p:
		case err := <-errs:
			return err
		}
	}
	close(jobs)
	wg.Wait()
	seconds := time.Since(start).Seconds()
	select {
	case err := <-errs:
		return err
	default:
	}
	var usage syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &usage); err != nil {
		return err
	}
	cpu := time.Duration(usage.Utime.Nano() + usage.Stime.Nano()).Seconds()
	return json.NewEncoder(os.Stdout).Encode(report{len(pairs), concurrency, seconds, writes, cpu})
}

// bind makes the binder's writes for one pair, in its order; returns how many it made.
func bind(ctx context.Context, client kubernetes.Interface, p pair) (int, error) {
	pvs := client.CoreV1().PersistentVolumes()
	pvcs := client.CoreV1().PersistentVolumeClaims(p.pvc.Namespace)
	pv, pvc := p.pv, p.pvc
	pv.Status.Phase = v1.VolumeAvailable
	pv, err := pvs.UpdateStatus(ctx, pv, metav1.UpdateOptions{})
	if err != nil {
		return 0, err
	}
	pv.Spec.ClaimRef = &v1.ObjectReference{
		Kind: "PersistentVolumeClaim", APIVersion: "v1",
		Namespace: pvc.Namespace, Name: pvc.Name, UID: pvc.UID, ResourceVersion: pvc.ResourceVersion,
	}
	metav1.SetMetaDataAnnotation(&pv.ObjectMeta, "pv.kubernetes.io/bound-by-controller", "yes")
	if pv, err = pvs.Update(ctx, pv, metav1.UpdateOptions{}); err != nil {
		return 1, err
	}
	pv.Status.Phase = v1.VolumeBound
	if pv, err = pvs.UpdateStatus(ctx, pv, metav1.UpdateOptions{}); err != nil {
		return 2, err
	}
	pvc.Spec.VolumeName = pv.Name
	metav1.SetMetaDataAnnotation(&pvc.ObjectMeta, "pv.kubernetes.io/bind-completed", "yes")
	metav1.SetMetaDataAnnotation(&pvc.ObjectMeta, "pv.kubernetes.io/bound-by-controller", "yes")
	if pvc, err = pvcs.Update(ctx, pvc, metav1.UpdateOptions{}); err != nil {
		return 3, err
	}
	pvc.Status.Phase = v1.ClaimBound
	pvc.Status.AccessModes = pv.Spec.AccessModes
	pvc.Status.Capacity = pv.Spec.Capacity
	if _, err = pvcs.UpdateStatus(ctx, pvc, metav1.UpdateOptions{}); err != nil {
		return 4, err
	}
	return 5, nil
}
