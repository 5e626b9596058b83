package stack

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"net/http"
	"strconv"
	"time"

	"github.com/hermod/hermod/libs/bus"
	"github.com/hermod/hermod/testkit/etcdembed"
	"github.com/hermod/hermod/testkit/natsembed"
)

// The control endpoint (--control-listen) is how a chaos test breaks the
// servers that live inside devstack's own process: the embedded NATS
// servers and etcd members. It listens on loopback only and serves
//
//	GET  /backends                       every server, running or not, and the leaders
//	POST /backends/nats/{i}/stop         stop NATS server i (its clients see it vanish)
//	POST /backends/nats/{i}/start        start it again on its port and store
//	POST /backends/etcd/{i}/kill         stop etcd member i as a crash would
//	POST /backends/etcd/{i}/stop         stop it gracefully (a leader hands over)
//	POST /backends/etcd/{i}/start        start it again; it rejoins and catches up
//
// The child processes are broken with signals, their pids being in the
// state file.

// controlRestartTimeout bounds a start through the control endpoint.
const controlRestartTimeout = 30 * time.Second

// Backends is what GET /backends answers.
type Backends struct {
	NATS []Backend `json:"nats"`
	Etcd []Backend `json:"etcd"`
	// StreamLeaders are the NATS servers leading Hermod's streams (-1
	// during an election); EtcdLeader the etcd member leading raft.
	StreamLeaders map[string]int `json:"stream_leaders"`
	EtcdLeader    int            `json:"etcd_leader"`
}

// Backend is one embedded server.
type Backend struct {
	Index   int    `json:"index"`
	Name    string `json:"name"`
	Running bool   `json:"running"`
}

// natsServers are the embedded NATS servers (none with an external NATS).
func (s *stack) natsServers() []*natsembed.Server {
	switch {
	case s.natsCluster != nil:
		return s.natsCluster.Nodes()
	case s.nats != nil:
		return []*natsembed.Server{s.nats}
	}
	return nil
}

// etcdMembers are the embedded etcd members (none with an external etcd).
func (s *stack) etcdMembers() []*etcdembed.Server {
	switch {
	case s.etcdCluster != nil:
		return s.etcdCluster.Members()
	case s.etcd != nil:
		return []*etcdembed.Server{s.etcd}
	}
	return nil
}

func (s *stack) backends() Backends {
	b := Backends{StreamLeaders: map[string]int{}, EtcdLeader: -1}
	for i, n := range s.natsServers() {
		b.NATS = append(b.NATS, Backend{Index: i, Name: n.Name(), Running: n.Running()})
	}
	for _, stream := range []string{bus.DecisionsStream, bus.CompletionsStream} {
		b.StreamLeaders[stream] = s.streamLeader(stream)
	}
	for i, m := range s.etcdMembers() {
		b.Etcd = append(b.Etcd, Backend{Index: i, Name: m.Name(), Running: m.Running()})
		if m.IsLeader() {
			b.EtcdLeader = i
		}
	}
	return b
}

// streamLeader is the NATS server leading stream (0 for a lone server).
func (s *stack) streamLeader(stream string) int {
	if s.natsCluster != nil {
		return s.natsCluster.StreamLeader(stream)
	}
	if s.nats != nil && s.nats.Running() {
		return 0
	}
	return -1
}

// serveControl starts the control endpoint on addr; it stops when ctx
// ends. It returns the address it listens on.
func (s *stack) serveControl(ctx context.Context, addr string) (string, error) {
	if host, _, err := net.SplitHostPort(addr); err != nil || !isLoopback(host) {
		return "", fmt.Errorf("--control-listen %q: a loopback host:port", addr)
	}
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return "", fmt.Errorf("--control-listen: %w", err)
	}
	mux := http.NewServeMux()
	mux.HandleFunc("GET /backends", func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		_ = json.NewEncoder(w).Encode(s.backends())
	})
	mux.HandleFunc("POST /backends/{kind}/{index}/{action}", s.controlAction)
	srv := &http.Server{Handler: mux, ReadHeaderTimeout: 5 * time.Second, BaseContext: func(net.Listener) context.Context { return ctx }}
	go func() { _ = srv.Serve(ln) }()
	go func() {
		<-ctx.Done()
		sctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		_ = srv.Shutdown(sctx)
	}()
	return ln.Addr().String(), nil
}

func isLoopback(host string) bool {
	if host == "localhost" {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}

// controlAction stops, kills or starts one embedded server.
func (s *stack) controlAction(w http.ResponseWriter, r *http.Request) {
	i, err := strconv.Atoi(r.PathValue("index"))
	if err != nil {
		http.Error(w, "index: "+err.Error(), http.StatusBadRequest)
		return
	}
	ctx, cancel := context.WithTimeout(r.Context(), controlRestartTimeout)
	defer cancel()
	kind, action := r.PathValue("kind"), r.PathValue("action")
	if err := s.breakBackend(ctx, kind, i, action); err != nil {
		status := http.StatusInternalServerError
		if errors.Is(err, errBadControl) {
			status = http.StatusBadRequest
		}
		http.Error(w, err.Error(), status)
		return
	}
	s.log.Warn("control: "+action, "backend", kind, "index", i)
	w.WriteHeader(http.StatusNoContent)
}

var errBadControl = errors.New("bad control request")

func (s *stack) breakBackend(ctx context.Context, kind string, i int, action string) error {
	switch kind {
	case "nats":
		servers := s.natsServers()
		if i < 0 || i >= len(servers) {
			return fmt.Errorf("%w: no NATS server %d (%d embedded)", errBadControl, i, len(servers))
		}
		switch action {
		case "stop", "kill":
			servers[i].Stop()
			return nil
		case "start":
			return servers[i].Restart()
		}
	case "etcd":
		members := s.etcdMembers()
		if i < 0 || i >= len(members) {
			return fmt.Errorf("%w: no etcd member %d (%d embedded)", errBadControl, i, len(members))
		}
		switch action {
		case "kill":
			members[i].Kill()
			return nil
		case "stop":
			members[i].Stop()
			return nil
		case "start":
			return members[i].Restart(ctx)
		}
	default:
		return fmt.Errorf("%w: backend %q (nats or etcd)", errBadControl, kind)
	}
	return fmt.Errorf("%w: action %q (stop, kill or start)", errBadControl, action)
}

// startControl serves the control endpoint when --control-listen is set.
func (s *stack) startControl(ctx context.Context) error {
	if s.o.ControlListen == "" {
		return nil
	}
	addr, err := s.serveControl(ctx, s.o.ControlListen)
	if err != nil {
		return err
	}
	s.state.Control = addr
	return nil
}
