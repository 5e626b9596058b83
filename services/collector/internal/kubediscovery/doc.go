// Package kubediscovery keeps a pool's endpoint registry in etcd equal to the
// Ready pods a Kubernetes label selector picks in one namespace, on a target
// port; or, following an InferencePool (inference.networking.k8s.io/v1) as
// GIE's endpoint picker does, the pods its spec.selector picks on its
// spec.targetPorts, re-applied whenever the InferencePool changes (several
// ports: one endpoint per pod and port, <pod>-rank<i> on the i-th; a pod
// annotated inference.networking.k8s.io/active-ports stands only for the
// ports it lists). While the InferencePool does not exist no pod counts.
// With an InferencePool the pod informer holds every pod of the namespace
// (slimmed), so that a new selector applies without a new watch.
//
// A shared informer watches the pods; its event handlers turn each pod into
// the registry entries it stands for (see the Annotation constants) or into
// none, so that the informer's view is the desired state at every moment.
// One replica per pool writes it: the sources of all collector replicas
// campaign for the leadership /hermod/election/discovery-<pool>, and the
// leader makes the registry equal to the desired state, first as a whole
// (entries it owns that no pod stands for are deleted) and then after every
// change, and again as a whole every resync period.
//
// Ownership: every entry the source writes carries the label
// hermod.io/discovered-by=kubernetes, and the source only ever updates or
// deletes entries with that label. Entries that pods register themselves are
// left alone, also when one has the name of a discovered pod (the pod's own
// entry wins).
//
// Leases and fencing: the leader writes its entries bound to a lease of its
// own, kept alive while it leads, so that they disappear about one TTL after
// the leader dies unless the next leader, which rewrites every entry under
// its lease on taking over, has done so by then. When a leader closes, it
// resigns but leaves its entries to the next leader rather than revoking
// them, so that a rolling update of the collectors does not empty the
// registry. Every write is a transaction conditioned on the leader's election
// key being the one it won with (a fencing token): a former leader cannot
// write. Each write is also conditioned on the entry's mod revision being the
// one the leader knows, so that an entry a pod wrote in between is never
// overwritten or deleted.
//
// Failures: every etcd call has a deadline; a failed sync is retried with
// backoff while the informer keeps its view, so the registry converges once
// etcd is back. A leader that loses its lease or leadership campaigns again.
//
// The election, leases, fencing and writes are registrysync's, which the
// endpoints file source (filediscovery) shares.
package kubediscovery
