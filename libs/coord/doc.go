// Package coord is Hermod's coordination layer on etcd. This file set holds
// the endpoint registry: model-server endpoints register themselves under
//
//	/hermod/pools/<pool>/endpoints/<name>
//
// with a value bound to a lease (Register), so that an endpoint whose process
// dies disappears once the lease expires, and the services that route to them
// list (ListEndpoints, LoadSnapshot) and watch (WatchEndpoints) a pool's
// endpoints as consistent snapshots.
//
// Values are hermod.registry.v1.Endpoint messages encoded with protojson, so
// `etcdctl get --prefix /hermod/pools/` shows them as JSON. A value that does
// not decode is reported per key and skipped; it never stops a reader.
//
// Every call takes a context; every goroutine the package starts belongs to a
// Registration or a Watcher, whose Close stops it and waits for it.
package coord
