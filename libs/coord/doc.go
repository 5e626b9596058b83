// Package coord is Hermod's coordination layer on etcd. It holds:
//
//   - The endpoint registry. Model-server endpoints register themselves under
//     /hermod/pools/<pool>/endpoints/<name> with a value bound to a lease
//     (Register), so that an endpoint whose process dies disappears once the
//     lease expires, and the services that route to them list
//     (ListEndpoints, LoadSnapshot) and watch (WatchEndpoints) a pool's
//     endpoints as consistent snapshots. Values are
//     hermod.registry.v1.Endpoint messages encoded with protojson, so
//     `etcdctl get --prefix /hermod/pools/` shows them as JSON. A value that
//     does not decode is reported per key and skipped; it never stops a
//     reader.
//   - The config store. /hermod/pools/<pool>/config holds a pool's
//     EndpointPickerConfig YAML as raw bytes: GetConfig, PutConfig (with an
//     optional compare-and-swap, IfRevision), DeleteConfig, and WatchConfig
//     for hot reload. A reader that cannot reach etcd keeps the last version
//     it was given.
//   - Leader election. Campaign elects one leader per service among its
//     candidates under /hermod/election/<service>/ (etcd's concurrency
//     Session and Election); the Leadership it returns says when it ends,
//     which happens before its lease can expire when etcd is unreachable.
//     Leader reads the current leader.
//   - Membership. Join keeps /hermod/members/<service>/<id> alive on a lease;
//     WatchMembers delivers a service's sorted member list on every change;
//     Owner and Owns split keys between the members by rendezvous hashing,
//     moving only about 1/N of them when a member joins or leaves.
//
// Two mechanisms carry all of it. A key kept alive on a lease and written
// again under a new lease when the lease is lost serves Register and Join. A
// key or prefix listed, then watched from the revision after the list, and
// listed again after a compaction or a broken watch, with backoff, serves
// WatchEndpoints, WatchConfig, WatchMembers and the Leadership's check of its
// own key.
//
// Every call takes a context; every goroutine the package starts belongs to a
// Registration, Membership, Leadership or watcher, whose Close stops it and
// waits for it. The subpackage etcdembed runs an etcd server in-process (the
// embedded default of devstack); coordtest wraps it for tests.
package coord
