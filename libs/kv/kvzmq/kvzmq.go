// Package kvzmq carries vLLM KV-cache events over ZeroMQ (libzmq through
// cgo), as vLLM's ZmqEventPublisher does: a PUB socket sending three-frame
// messages [topic, seq (8 bytes big-endian), payload] and a ROUTER socket
// replaying buffered batches on request. It is the only Hermod package that
// uses cgo; binaries that do not import it build with CGO_ENABLED=0.
package kvzmq

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"net"
	"strings"
	"sync"
	"syscall"
	"time"

	zmq "github.com/pebbe/zmq4"
)

// Defaults of vLLM's KVEventsConfig.
const (
	DefaultHWM         = 100_000
	DefaultBufferSteps = 10_000
	// EndOfReplay is the sequence number that ends a replay (-1 as a signed
	// 64-bit integer).
	EndOfReplay = ^uint64(0)
)

// ReplayFraming selects how replayed batches are framed.
type ReplayFraming uint8

const (
	// FramingTopic is newer vLLM's: ["", topic, seq, payload], ending with
	// ["", "", END, ""].
	FramingTopic ReplayFraming = iota
	// FramingLegacy is older vLLM's: ["", seq, payload], ending with
	// ["", END, ""].
	FramingLegacy
)

// ShouldBind reports whether a publisher binds endpoint (vLLM binds when it
// contains a wildcard or is ipc:// or inproc://, and connects otherwise).
func ShouldBind(endpoint string) bool {
	return strings.Contains(endpoint, "*") || strings.Contains(endpoint, "::") ||
		strings.HasPrefix(endpoint, "ipc://") || strings.HasPrefix(endpoint, "inproc://")
}

// PublisherConfig configures a Publisher.
type PublisherConfig struct {
	// Endpoint is where the PUB socket binds or connects (see ShouldBind).
	Endpoint string
	// ReplayEndpoint is where the ROUTER replay socket binds ("" for none).
	ReplayEndpoint string
	// Topic is the first frame of every message (vLLM: "kv@<pod>@<model>").
	Topic string
	// HWM is the PUB send high-water mark (messages); past it a slow
	// subscriber loses messages. Default DefaultHWM.
	HWM int
	// BufferSteps is how many recent batches replay can send. Default
	// DefaultBufferSteps.
	BufferSteps int
	// Framing selects the replay framing.
	Framing ReplayFraming
	// BindHost, when set, replaces the wildcard host (*, 0.0.0.0, ::) of
	// the endpoints the sockets bind, so that they listen there only (a
	// server that serves on one address binds its event sockets there
	// too); the endpoints still bind, as their wildcard says.
	BindHost string
}

// bindAt returns a tcp:// endpoint with its wildcard host replaced by
// host (nothing to replace, or no host: ep as it is).
func bindAt(ep, host string) string {
	rest, ok := strings.CutPrefix(ep, "tcp://")
	if !ok || host == "" {
		return ep
	}
	h, port, err := net.SplitHostPort(rest)
	if err != nil || (h != "*" && h != "" && h != "0.0.0.0" && h != "::") {
		return ep
	}
	return "tcp://" + net.JoinHostPort(host, port)
}

// Publisher publishes encoded batches with consecutive sequence numbers
// from 0 and serves replays of the most recent ones. It is safe for
// concurrent use.
type Publisher struct {
	cfg PublisherConfig

	mu     sync.Mutex
	pub    *zmq.Socket
	seq    uint64
	buffer []buffered // ring of the last BufferSteps batches
	next   int        // ring write position
	count  int

	stop chan struct{}
	done chan struct{}
}

type buffered struct {
	seq     uint64
	payload []byte
}

// NewPublisher opens the sockets.
func NewPublisher(cfg PublisherConfig) (*Publisher, error) {
	if cfg.HWM <= 0 {
		cfg.HWM = DefaultHWM
	}
	if cfg.BufferSteps <= 0 {
		cfg.BufferSteps = DefaultBufferSteps
	}
	pub, err := zmq.NewSocket(zmq.PUB)
	if err != nil {
		return nil, fmt.Errorf("kv events: PUB socket: %w", err)
	}
	if err := setup(pub, cfg.HWM); err != nil {
		pub.Close()
		return nil, err
	}
	if ShouldBind(cfg.Endpoint) {
		err = pub.Bind(bindAt(cfg.Endpoint, cfg.BindHost))
	} else {
		err = pub.Connect(cfg.Endpoint)
	}
	if err != nil {
		pub.Close()
		return nil, fmt.Errorf("kv events: PUB %s: %w", cfg.Endpoint, err)
	}
	p := &Publisher{cfg: cfg, pub: pub, buffer: make([]buffered, cfg.BufferSteps), stop: make(chan struct{}), done: make(chan struct{})}
	if cfg.ReplayEndpoint == "" {
		close(p.done)
		return p, nil
	}
	router, err := zmq.NewSocket(zmq.ROUTER)
	if err == nil {
		// Replies must not be dropped (a ROUTER silently drops past its
		// high-water mark); the replay buffer bounds what is queued.
		err = setup(router, 0)
		if err == nil {
			err = router.Bind(bindAt(cfg.ReplayEndpoint, cfg.BindHost))
		}
		if err != nil {
			router.Close()
		}
	}
	if err != nil {
		pub.Close()
		return nil, fmt.Errorf("kv events: replay ROUTER %s: %w", cfg.ReplayEndpoint, err)
	}
	go p.serveReplay(router)
	return p, nil
}

// MaxMessageBytes is the largest message a subscriber or a replay takes
// (ZMQ_MAXMSGSIZE): a peer sending a larger one is disconnected by ZMQ
// before the message is held.
const MaxMessageBytes = 16 << 20

// MaxReplayBytes bounds the payload bytes one replay holds: a replay
// endpoint that keeps answering (vLLM buffers 10,000 batches by default)
// cannot grow the caller's memory past it. A replay that reaches it ends
// with the batches so far and ErrReplayTooLarge; the caller asks again
// from the next sequence number.
const MaxReplayBytes = 256 << 20

// maxReplayBytes is MaxReplayBytes, lowered by tests.
var maxReplayBytes int64 = MaxReplayBytes

// ErrReplayTooLarge ends a replay that reached MaxReplayBytes.
var ErrReplayTooLarge = errors.New("kv events: the replay reached its byte bound")

func setup(s *zmq.Socket, hwm int) error {
	if err := s.SetLinger(0); err != nil {
		return fmt.Errorf("kv events: set linger: %w", err)
	}
	if err := s.SetSndhwm(hwm); err != nil {
		return fmt.Errorf("kv events: set send high-water mark: %w", err)
	}
	if err := s.SetRcvhwm(hwm); err != nil {
		return fmt.Errorf("kv events: set receive high-water mark: %w", err)
	}
	return nil
}

// Publish sends one encoded batch and keeps it for replay; it returns the
// sequence number the batch was sent with.
func (p *Publisher) Publish(payload []byte) (uint64, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	seq := p.seq
	p.seq++
	b := p.buffer[p.next]
	b.seq = seq
	b.payload = append(b.payload[:0], payload...)
	p.buffer[p.next] = b
	p.next = (p.next + 1) % len(p.buffer)
	p.count = min(p.count+1, len(p.buffer))
	var seqb [8]byte
	binary.BigEndian.PutUint64(seqb[:], seq)
	// A PUB socket past its high-water mark drops the message (the replay
	// buffer still has it); only real failures are errors.
	if _, err := p.pub.SendMessageDontwait(p.cfg.Topic, seqb[:], payload); err != nil && !isAgain(err) {
		return seq, fmt.Errorf("kv events: publish seq %d: %w", seq, err)
	}
	return seq, nil
}

// Reset starts the sequence again at 0 and forgets the buffered batches,
// as an engine restart does, keeping the sockets bound.
func (p *Publisher) Reset() {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.seq, p.next, p.count = 0, 0, 0
}

// Close stops the replay server and closes the sockets.
func (p *Publisher) Close() error {
	close(p.stop)
	<-p.done
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.pub.Close()
}

// serveReplay answers replay requests ["", start_seq] until stopped.
func (p *Publisher) serveReplay(router *zmq.Socket) {
	defer close(p.done)
	defer router.Close()
	poller := zmq.NewPoller()
	poller.Add(router, zmq.POLLIN)
	for {
		select {
		case <-p.stop:
			return
		default:
		}
		polled, err := poller.Poll(100 * time.Millisecond)
		if err != nil || len(polled) == 0 {
			continue
		}
		frames, err := router.RecvMessageBytes(zmq.DONTWAIT)
		if err != nil || len(frames) != 3 || len(frames[1]) != 0 || len(frames[2]) != 8 {
			continue // not a replay request: ignore, as vLLM does
		}
		identity, start := frames[0], binary.BigEndian.Uint64(frames[2])
		for _, b := range p.since(start) {
			var seqb [8]byte
			binary.BigEndian.PutUint64(seqb[:], b.seq)
			if p.cfg.Framing == FramingLegacy {
				_, err = router.SendMessage(identity, "", seqb[:], b.payload)
			} else {
				_, err = router.SendMessage(identity, "", p.cfg.Topic, seqb[:], b.payload)
			}
			if err != nil {
				break
			}
		}
		var end [8]byte
		binary.BigEndian.PutUint64(end[:], EndOfReplay)
		if p.cfg.Framing == FramingLegacy {
			_, _ = router.SendMessage(identity, "", end[:], "")
		} else {
			_, _ = router.SendMessage(identity, "", "", end[:], "")
		}
	}
}

// since copies the buffered batches with seq >= start, oldest first.
func (p *Publisher) since(start uint64) []buffered {
	p.mu.Lock()
	defer p.mu.Unlock()
	var out []buffered
	first := (p.next - p.count + len(p.buffer)) % len(p.buffer)
	for i := range p.count {
		b := p.buffer[(first+i)%len(p.buffer)]
		if b.seq >= start {
			out = append(out, buffered{seq: b.seq, payload: append([]byte(nil), b.payload...)})
		}
	}
	return out
}

// Message is one received KV-event message.
type Message struct {
	Topic   string
	Seq     uint64
	Payload []byte
}

// Subscriber receives published batches. It is not safe for concurrent use.
type Subscriber struct {
	sub *zmq.Socket
}

// Subscribe connects (or, with bind, binds) a SUB socket to endpoint and
// subscribes to topics starting with prefix (vLLM pods: "kv@").
func Subscribe(endpoint string, bind bool, prefix string, hwm int) (*Subscriber, error) {
	if hwm <= 0 {
		hwm = DefaultHWM
	}
	sub, err := zmq.NewSocket(zmq.SUB)
	if err != nil {
		return nil, fmt.Errorf("kv events: SUB socket: %w", err)
	}
	err = setup(sub, hwm)
	if err == nil {
		err = sub.SetMaxmsgsize(MaxMessageBytes)
	}
	if err == nil {
		err = sub.SetSubscribe(prefix)
	}
	if err == nil {
		if bind {
			err = sub.Bind(endpoint)
		} else {
			err = sub.Connect(endpoint)
		}
	}
	if err != nil {
		sub.Close()
		return nil, fmt.Errorf("kv events: SUB %s: %w", endpoint, err)
	}
	return &Subscriber{sub: sub}, nil
}

// ErrTimeout is returned by Recv when nothing arrived in time.
var ErrTimeout = errors.New("kv events: receive timed out")

// Recv waits up to timeout for the next message.
func (s *Subscriber) Recv(timeout time.Duration) (Message, error) {
	if err := s.sub.SetRcvtimeo(timeout); err != nil {
		return Message{}, fmt.Errorf("kv events: set receive timeout: %w", err)
	}
	frames, err := s.sub.RecvMessageBytes(0)
	if err != nil {
		if isAgain(err) {
			return Message{}, ErrTimeout
		}
		return Message{}, fmt.Errorf("kv events: receive: %w", err)
	}
	if len(frames) != 3 || len(frames[1]) != 8 {
		return Message{}, fmt.Errorf("kv events: malformed message of %d frames", len(frames))
	}
	return Message{Topic: string(frames[0]), Seq: binary.BigEndian.Uint64(frames[1]), Payload: frames[2]}, nil
}

// Close closes the socket.
func (s *Subscriber) Close() error { return s.sub.Close() }

// Replay asks a replay endpoint for every buffered batch from start and
// returns them in order. It accepts both framings. A first sequence number
// above start means the publisher no longer had the older batches.
// timeout bounds the wait for each message.
func Replay(endpoint string, start uint64, timeout time.Duration) ([]Message, error) {
	return ReplayContext(context.Background(), endpoint, start, timeout)
}

// replayPollSlice is how long ReplayContext waits on its socket before it
// looks at its context again.
const replayPollSlice = 20 * time.Millisecond

// ReplayContext is Replay that also ends, with the batches received so far
// and ctx's error, within a few milliseconds of ctx ending (a replay
// endpoint that is gone otherwise holds the caller for timeout). It holds
// at most MaxReplayBytes of payloads.
func ReplayContext(ctx context.Context, endpoint string, start uint64, timeout time.Duration) ([]Message, error) {
	if err := ctx.Err(); err != nil {
		return nil, fmt.Errorf("kv events: replay from %s: %w", endpoint, err)
	}
	d, err := zmq.NewSocket(zmq.DEALER)
	if err != nil {
		return nil, fmt.Errorf("kv events: DEALER socket: %w", err)
	}
	defer d.Close()
	if err := d.SetLinger(0); err != nil {
		return nil, fmt.Errorf("kv events: set linger: %w", err)
	}
	if err := d.SetMaxmsgsize(MaxMessageBytes); err != nil {
		return nil, fmt.Errorf("kv events: set the largest message: %w", err)
	}
	if err := d.Connect(endpoint); err != nil {
		return nil, fmt.Errorf("kv events: replay %s: %w", endpoint, err)
	}
	var startb [8]byte
	binary.BigEndian.PutUint64(startb[:], start)
	if _, err := d.SendMessage("", startb[:]); err != nil {
		return nil, fmt.Errorf("kv events: replay request: %w", err)
	}
	poller := zmq.NewPoller()
	poller.Add(d, zmq.POLLIN)
	var out []Message
	var held int64
	deadline := time.Now().Add(timeout)
	for {
		if err := ctx.Err(); err != nil {
			return out, fmt.Errorf("kv events: replay from %s: %w", endpoint, err)
		}
		wait := min(time.Until(deadline), replayPollSlice)
		if wait <= 0 {
			return out, fmt.Errorf("kv events: replay from %s: %w", endpoint, ErrTimeout)
		}
		polled, err := poller.Poll(wait)
		if err != nil {
			return out, fmt.Errorf("kv events: replay poll: %w", err)
		}
		if len(polled) == 0 {
			continue
		}
		frames, err := d.RecvMessageBytes(zmq.DONTWAIT)
		if err != nil {
			if isAgain(err) {
				continue
			}
			return out, fmt.Errorf("kv events: replay receive: %w", err)
		}
		deadline = time.Now().Add(timeout)
		var m Message
		switch len(frames) {
		case 3: // "", seq, payload
			if len(frames[1]) != 8 {
				return out, fmt.Errorf("kv events: malformed replay message")
			}
			m = Message{Seq: binary.BigEndian.Uint64(frames[1]), Payload: frames[2]}
		case 4: // "", topic, seq, payload
			if len(frames[2]) != 8 {
				return out, fmt.Errorf("kv events: malformed replay message")
			}
			m = Message{Topic: string(frames[1]), Seq: binary.BigEndian.Uint64(frames[2]), Payload: frames[3]}
		default:
			return out, fmt.Errorf("kv events: replay message of %d frames", len(frames))
		}
		if m.Seq == EndOfReplay {
			return out, nil
		}
		if held += int64(len(m.Payload)); held > maxReplayBytes {
			return out, fmt.Errorf("kv events: replay from %s after %d batches: %w", endpoint, len(out), ErrReplayTooLarge)
		}
		out = append(out, m)
	}
}

func isAgain(err error) bool { return zmq.AsErrno(err) == zmq.Errno(syscall.EAGAIN) }
