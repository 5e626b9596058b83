package coord

import (
	"context"
	"errors"
	"fmt"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/timestamppb"

	registryv1 "github.com/hermod/hermod/libs/api/hermod/registry/v1"
)

// PutEndpoint writes ep into the registry once, for an endpoint no Hermod
// process keeps registered (a pod on a VM, registered by an operator or a
// script): with ttl > 0 bound to a lease of that TTL that nothing renews
// (the entry expires unless written again in time), with ttl 0 permanent
// (until DeleteEndpoint). It returns the revision written.
func PutEndpoint(ctx context.Context, cli *clientv3.Client, ep *registryv1.Endpoint, ttl time.Duration) (int64, error) {
	if cli == nil {
		return 0, errors.New("put endpoint: nil etcd client")
	}
	if err := validateEndpoint(ep); err != nil {
		return 0, fmt.Errorf("put endpoint: %w", err)
	}
	key := EndpointKey(ep.GetPool(), ep.GetName())
	ep = proto.CloneOf(ep)
	if ep.RegisteredAt == nil {
		ep.RegisteredAt = timestamppb.Now()
	}
	value, err := EncodeEndpoint(ep)
	if err != nil {
		return 0, fmt.Errorf("put endpoint %s: %w", key, err)
	}
	var opts []clientv3.OpOption
	if ttl > 0 {
		if ttl < time.Second {
			return 0, fmt.Errorf("put endpoint %s: ttl %s is shorter than 1s", key, ttl)
		}
		lease, err := cli.Grant(ctx, leaseSeconds(ttl))
		if err != nil {
			return 0, fmt.Errorf("put endpoint %s: grant a lease: %w", key, err)
		}
		opts = append(opts, clientv3.WithLease(lease.ID))
	}
	resp, err := cli.Put(ctx, key, string(value), opts...)
	if err != nil {
		return 0, fmt.Errorf("put endpoint %s: %w", key, err)
	}
	return resp.Header.GetRevision(), nil
}

// DeleteEndpoint removes an endpoint from the registry; false when it was
// not registered.
func DeleteEndpoint(ctx context.Context, cli *clientv3.Client, pool, name string) (bool, error) {
	if cli == nil {
		return false, errors.New("delete endpoint: nil etcd client")
	}
	if err := ValidatePoolName(pool); err != nil {
		return false, fmt.Errorf("delete endpoint: %w", err)
	}
	if err := ValidateEndpointName(name); err != nil {
		return false, fmt.Errorf("delete endpoint: %w", err)
	}
	resp, err := cli.Delete(ctx, EndpointKey(pool, name))
	if err != nil {
		return false, fmt.Errorf("delete endpoint %s: %w", EndpointKey(pool, name), err)
	}
	return resp.Deleted > 0, nil
}
