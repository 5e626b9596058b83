// Package etcddial holds how every etcd client of Hermod dials, so that
// the services' clients (coord.NewClient) and the tests' (coordtest) come
// back from an etcd outage alike.
package etcddial

import (
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/backoff"
)

// MaxReconnectDelay caps the wait between two connection attempts to a
// member that went away. gRPC's default grows to 120 s, so that after an
// outage of half a minute a client stays disconnected for up to another
// 20 s once etcd is back: leases are lost and registrations wait for
// nothing.
const MaxReconnectDelay = 2 * time.Second

// Options are the gRPC dial options of an etcd client
// (clientv3.Config.DialOptions).
func Options() []grpc.DialOption {
	return []grpc.DialOption{grpc.WithConnectParams(grpc.ConnectParams{
		Backoff: backoff.Config{
			BaseDelay:  100 * time.Millisecond,
			Multiplier: 1.6,
			Jitter:     0.2,
			MaxDelay:   MaxReconnectDelay,
		},
		MinConnectTimeout: 5 * time.Second,
	})}
}
