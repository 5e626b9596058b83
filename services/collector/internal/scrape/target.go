package scrape

import (
	"context"
	"errors"
	"fmt"
	"net"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	registryv1 "github.com/hermod/hermod/libs/api/hermod/registry/v1"
	"github.com/hermod/hermod/libs/scheduling"
)

// target is one endpoint being scraped: its identity, what its two loops
// share, and how to stop them.
type target struct {
	key        string // pool/name
	pool, name string
	address    string // host:port
	// endpoint is what the models data source fetches from.
	endpoint *scheduling.Endpoint
	started  time.Time

	// lastGood is the time of the latest good scrape (unix nanoseconds, 0
	// before the first).
	lastGood atomic.Int64
	// models holds the served model names of the latest good poll.
	models atomic.Pointer[[]string]
	// attributes holds the attributes of the attribute polls' latest good
	// fetches (nil: none).
	attributes atomic.Pointer[map[string]float64]

	cancel context.CancelFunc
	wg     sync.WaitGroup
}

var (
	errNoName    = errors.New("no name")
	errNoPool    = errors.New("no pool")
	errNoAddress = errors.New("no address")
)

// newTarget checks an endpoint and returns a target for it, not started.
func newTarget(ep *registryv1.Endpoint) (*target, error) {
	switch {
	case ep.GetName() == "" || strings.Contains(ep.GetName(), "/"):
		return nil, errNoName
	case ep.GetPool() == "" || strings.Contains(ep.GetPool(), "/"):
		return nil, errNoPool
	case ep.GetAddress() == "":
		return nil, errNoAddress
	case ep.GetPort() <= 0 || ep.GetPort() > 65535:
		return nil, fmt.Errorf("port %d out of range", ep.GetPort())
	}
	address := net.JoinHostPort(ep.GetAddress(), strconv.Itoa(int(ep.GetPort())))
	return &target{
		key:      ep.GetPool() + "/" + ep.GetName(),
		pool:     ep.GetPool(),
		name:     ep.GetName(),
		address:  address,
		endpoint: endpointOf(ep),
		started:  time.Now(),
	}, nil
}

// endpointOf is the endpoint the data sources fetch from.
func endpointOf(ep *registryv1.Endpoint) *scheduling.Endpoint {
	e := scheduling.NewEndpoint(ep.GetName(), ep.GetAddress(), int(ep.GetPort()), ep.GetLabels())
	e.NodeAddress = ep.GetNodeAddress()
	return e
}

// freshSince returns the time of the latest good scrape, or the start of
// the target if there was none.
func (t *target) freshSince() time.Time {
	if ns := t.lastGood.Load(); ns != 0 {
		return time.Unix(0, ns)
	}
	return t.started
}

// servedModels returns a copy of the latest served model names, nil before
// the first good poll.
func (t *target) servedModels() []string {
	p := t.models.Load()
	if p == nil {
		return nil
	}
	return append([]string(nil), (*p)...)
}

// attributesNow returns the latest attributes, nil when there are none.
// The map is never written once stored.
func (t *target) attributesNow() map[string]float64 {
	if p := t.attributes.Load(); p != nil {
		return *p
	}
	return nil
}
