// Package registrysync keeps the entries a discovery source owns in a pool's
// endpoint registry equal to the source's desired state, from one replica
// at a time. The collector's discovery sources (kubediscovery: Ready pods;
// filediscovery: an endpoints file) each compute their desired state and
// hand it to a Writer, which does the rest.
//
// Election: the Writers of all collector replicas of a source campaign for
// the leadership /hermod/election/<service> (the service names the source
// and the pool), and the leader makes the registry equal to the desired
// state, first as a whole (entries it owns that are not desired are
// deleted) and then after every change, and again as a whole every resync
// period.
//
// Ownership: every entry a Writer writes carries the label
// hermod.io/discovered-by=<owner> (LabelDiscoveredBy; the owner names the
// source), and a Writer only ever updates or deletes entries with its own
// owner value. Entries that pods register themselves, or that another
// source owns, are left alone, also when one has the name of a desired entry
// (the other entry wins; a warning is logged once per term).
//
// Leases and fencing: the leader writes its entries bound to a lease of its
// own, kept alive while it leads, with twice the election's TTL, so that
// they disappear about two TTLs after the leader dies unless the next
// leader, elected about one TTL after the death and rewriting every entry
// under its lease on taking over, has done so by then (it has: a pod that
// stays ready never leaves the registry during a handover). When a leader closes, it
// resigns but leaves its entries to the next leader rather than revoking
// them, so that a rolling update of the collectors does not empty the
// registry. Every write is a transaction conditioned on the leader's election
// key being the one it won with (a fencing token): a former leader cannot
// write. Each write is also conditioned on the entry's mod revision being the
// one the leader knows, so that an entry someone else wrote in between is
// never overwritten or deleted.
//
// Failures: every etcd call has a deadline; a failed sync is retried with
// backoff while the source keeps its desired state, so the registry
// converges once etcd is back. A leader that loses its lease or leadership
// campaigns again.
package registrysync
