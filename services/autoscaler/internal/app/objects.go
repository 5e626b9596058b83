package app

import (
	"errors"
	"fmt"
	"log/slog"
	"sort"
	"strings"
	"sync"

	"github.com/hermod/hermod/services/autoscaler/internal/config"
	"github.com/hermod/hermod/services/autoscaler/internal/store"
)

// objects merges the autoscaler objects of every source and hands the
// engine each valid set: the --config file's, the stored ones (a stored
// object wins over the file's of the same kind and name), and with
// --va-source kubernetes or both the API's VariantAutoscaling objects (one
// of the API wins over a stored one of the same namespace and name; with
// kubernetes, the stored VariantAutoscaling objects are left out, their
// ConfigMaps kept). Invalid stored objects are logged and the last valid
// set kept; the API's objects are checked one by one (kubeva.Source).
// Writes to the other keys under the prefix (statuses, state, replica
// targets) are ignored.
type objects struct {
	file   []config.Object
	pool   string
	stored bool // VariantAutoscaling objects of etcd and the file count
	kube   bool // the API's count
	apply  func(*config.Set)
	log    *slog.Logger

	mu       sync.Mutex
	last     string // the stored objects' keys and values last seen
	etcd     map[string][]byte
	rev      int64
	kubeVAs  []*config.VariantAutoscaling
	overlaps map[string]bool // API objects that override stored ones, warned about
}

// newObjects returns the merger of cfg's sources, which hands each valid
// set to apply (the engine's SetConfig).
func newObjects(cfg Config, file []config.Object, apply func(*config.Set), log *slog.Logger) *objects {
	return &objects{file: file, pool: cfg.Pool, stored: cfg.storedVAs(), kube: cfg.kubeVAs(), apply: apply, log: log, overlaps: map[string]bool{}}
}

// update takes the pool's keys in etcd.
func (o *objects) update(kvs map[string][]byte, rev int64) {
	var keys []string
	for k := range kvs {
		if strings.HasPrefix(k, store.VariantsPrefix(o.pool)) || strings.HasPrefix(k, store.ConfigMapsPrefix(o.pool)) {
			keys = append(keys, k)
		}
	}
	sort.Strings(keys)
	var digest strings.Builder
	for _, k := range keys {
		fmt.Fprintf(&digest, "%s\x00%s\x00", k, kvs[k])
	}
	o.mu.Lock()
	defer o.mu.Unlock()
	if digest.String() == o.last && o.last != "" {
		return
	}
	o.last = digest.String()
	o.etcd = make(map[string][]byte, len(keys))
	for _, k := range keys {
		o.etcd[k] = kvs[k]
	}
	o.rev = rev
	o.rebuild("etcd")
}

// setKube takes the API's valid VariantAutoscaling objects.
func (o *objects) setKube(vas []*config.VariantAutoscaling) {
	o.mu.Lock()
	defer o.mu.Unlock()
	o.kubeVAs = vas
	o.rebuild("kubernetes")
}

// rebuild merges the sources and hands the engine the set. o.mu is held.
func (o *objects) rebuild(cause string) {
	byName := map[string]config.Object{}
	skipped := 0
	add := func(obj config.Object) {
		if _, isVA := obj.(*config.VariantAutoscaling); isVA && !o.stored {
			skipped++
			return
		}
		byName[obj.ObjectKind()+"/"+obj.ObjectName()] = obj
	}
	for _, obj := range o.file {
		add(obj)
	}
	var errs []error
	keys := make([]string, 0, len(o.etcd))
	for k := range o.etcd {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		objs, err := config.Parse(o.etcd[k])
		if err != nil {
			errs = append(errs, fmt.Errorf("%s: %w", k, err))
			continue
		}
		for _, obj := range objs {
			add(obj)
		}
	}
	if o.kube {
		for _, va := range o.kubeVAs {
			id := va.Metadata.Namespace + "/" + va.Metadata.Name
			for k, obj := range byName {
				if v, ok := obj.(*config.VariantAutoscaling); ok && v.Metadata.Namespace == va.Metadata.Namespace && v.Metadata.Name == va.Metadata.Name {
					delete(byName, k)
					if !o.overlaps[id] {
						o.overlaps[id] = true
						o.log.Warn("a VariantAutoscaling of the Kubernetes API overrides the stored one of the same name", "variant", id)
					}
				}
			}
			byName[config.VariantAutoscalingKind+"/"+id] = va
		}
	}
	all := make([]config.Object, 0, len(byName))
	for _, obj := range byName {
		all = append(all, obj)
	}
	set, err := config.NewSet(all...)
	if err = errors.Join(append(errs, err)...); err != nil {
		o.log.Error("the autoscaler objects are invalid; keeping the last valid ones", "revision", o.rev, "cause", cause, "error", err)
		return
	}
	args := []any{"revision", o.rev, "cause", cause, "variants", len(set.Variants()), "groups", len(set.Groups())}
	if o.kube {
		args = append(args, "kubernetes_variants", len(o.kubeVAs))
	}
	if skipped > 0 {
		args = append(args, "stored_variants_ignored", skipped)
	}
	o.log.Info("autoscaler objects loaded", args...)
	o.apply(set)
}
