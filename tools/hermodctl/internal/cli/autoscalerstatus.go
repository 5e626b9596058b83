package cli

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	eventsv1 "github.com/hermod/hermod/libs/api/hermod/events/v1"
	"github.com/hermod/hermod/libs/bus"
	"github.com/hermod/hermod/libs/coord"
)

func autoscalerStatus(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	c := newSubcommand(ctx, "hermodctl autoscaler status", stderr, withEtcd|withNATS)
	fs, t := c.fs, &c.t
	last := fs.Int("last", 10, "show this many of the latest decisions")
	follow := fs.Bool("follow", false, "then follow new decisions until Ctrl-C")
	output := c.output(formatTable, readFormats, tableAliases,
		"output `format`: table (lines of text; text is the same), json or yaml")
	c.usage("Usage: hermodctl autoscaler status [--pool P] [--etcd-endpoints E] [--nats-url U] [--last N] [--follow] [-o table|json|yaml]\n\n"+
		"Shows which hermod-autoscaler replica leads the pool (holds the etcd election\n"+
		"%s), then the pool's latest scaling decisions from the stream\n"+
		"%s (hermod.scaling.<pool>), newest last: time, model, trigger,\n"+
		"analyzer/optimizer, each variant's replicas current->desired and whether the\n"+
		"actuator applied them, and the first reason. With --follow, goes on printing\n"+
		"new decisions as they are taken; Ctrl-C stops.\n\n"+
		"-o json and -o yaml print one document: pool, leader (\"\" when none), election\n"+
		"(its key prefix), subject, and decisions (the events in full, proto field names,\n"+
		"newest last). With --follow, that document is the first of a stream: one JSON\n"+
		"document a line (or YAML documents after --- lines), then each new decision.\n\n",
		coord.ElectionPrefix("autoscaler-<pool>"), bus.ScalingStream)
	if ok, code := c.parse(args, func(n int) bool { return n == 0 && *last >= 0 }); !ok {
		return code
	}
	if !c.validPool() {
		return ExitUsage
	}
	subject, err := bus.ScalingSubject(t.pool)
	if err != nil {
		fmt.Fprintf(stderr, "hermodctl autoscaler status: %v\n", err)
		return ExitUsage
	}
	leader, err := readLeader(ctx, t)
	if err != nil {
		return c.fail(err)
	}
	leader.Subject = subject
	var out scalingOutput = &scalingText{w: stdout, status: leader, last: *last}
	if output.structured() {
		out = &scalingStructured{w: stdout, format: output.format, status: leader, stream: *follow}
	}
	if err := out.start(); err != nil {
		return c.fail(err)
	}
	if *last == 0 && !*follow {
		err = out.stored(nil)
	} else {
		err = showDecisions(ctx, t, subject, *last, *follow, out)
	}
	if err != nil {
		return c.fail(err)
	}
	return ExitOK
}

// scalingStatus is autoscaler status's JSON and YAML.
type scalingStatus struct {
	Pool string `json:"pool"`
	// Leader is the autoscaler replica that holds the election, "" when
	// none does; Election is the election's key prefix.
	Leader   string `json:"leader"`
	Election string `json:"election"`
	// Subject is the pool's subject in the scaling stream.
	Subject string `json:"subject"`
	// Decisions are the latest decisions, newest last.
	Decisions []json.RawMessage `json:"decisions"`
}

// scalingOutput prints autoscaler status: start once the leader is known,
// stored with the latest decisions once read, then live with each new
// one.
type scalingOutput interface {
	start() error
	stored(kept []*eventsv1.ScalingDecision) error
	live(d *eventsv1.ScalingDecision) error
}

// scalingText prints the status as lines of text.
type scalingText struct {
	w      io.Writer
	status scalingStatus
	last   int
}

func (s *scalingText) start() error {
	var err error
	if s.status.Leader == "" {
		_, err = fmt.Fprintf(s.w, "leader: none (no hermod-autoscaler of pool %s holds %s)\n", s.status.Pool, s.status.Election)
	} else {
		_, err = fmt.Fprintf(s.w, "leader: %s (%s)\n", s.status.Leader, s.status.Election)
	}
	return err
}

func (s *scalingText) stored(kept []*eventsv1.ScalingDecision) error {
	var b strings.Builder
	if s.last > 0 {
		if len(kept) == 0 {
			fmt.Fprintf(&b, "no scaling decisions of pool %s in %s\n", s.status.Pool, bus.ScalingStream)
		} else {
			fmt.Fprintf(&b, "last %d scaling decisions (%s), newest last:\n", len(kept), s.status.Subject)
		}
	}
	for _, d := range kept {
		b.WriteString(scalingLine(d) + "\n")
	}
	_, err := io.WriteString(s.w, b.String())
	return err
}

func (s *scalingText) live(d *eventsv1.ScalingDecision) error {
	_, err := fmt.Fprintln(s.w, scalingLine(d))
	return err
}

// scalingStructured prints the status as one JSON or YAML document; with
// stream (--follow), as the first of a stream, then each new decision.
type scalingStructured struct {
	w      io.Writer
	format string
	status scalingStatus
	stream bool
}

func (s *scalingStructured) start() error { return nil }

func (s *scalingStructured) stored(kept []*eventsv1.ScalingDecision) error {
	s.status.Decisions = make([]json.RawMessage, 0, len(kept))
	for _, d := range kept {
		b, err := protoJSON(d)
		if err != nil {
			return fmt.Errorf("decision %s: %w", d.GetDecisionId(), err)
		}
		s.status.Decisions = append(s.status.Decisions, b)
	}
	return writeStructured(s.w, s.format, s.status, s.stream)
}

func (s *scalingStructured) live(d *eventsv1.ScalingDecision) error {
	b, err := protoJSON(d)
	if err != nil {
		return fmt.Errorf("decision %s: %w", d.GetDecisionId(), err)
	}
	return writeStructured(s.w, s.format, b, true)
}

// showDecisions reads the pool's last scaling decisions and hands them to
// out, newest last, then with follow each new one until ctx ends.
func showDecisions(ctx context.Context, t *target, subject string, last int, follow bool, out scalingOutput) error {
	nc, js, err := t.natsConn(ctx)
	if err != nil {
		return err
	}
	defer nc.Close()
	o := bus.ConsumeOptions{Stream: bus.ScalingStream, FilterSubject: subject, DeliverNew: last == 0}
	if last > 0 {
		if o.StartSequence, err = lastStart(ctx, js, bus.ScalingStream, subject, last); err != nil {
			return err
		}
	}
	// Until the stored decisions are in, the handler keeps the latest
	// last; then it prints each decision as it comes.
	var mu sync.Mutex
	var kept []*eventsv1.ScalingDecision
	var failed error
	live := false
	c, err := bus.Consume(ctx, js, o, func(d *eventsv1.ScalingDecision, _ bus.Meta) {
		mu.Lock()
		defer mu.Unlock()
		if live {
			if err := out.live(d); err != nil && failed == nil {
				failed = err
			}
			return
		}
		kept = append(kept, d)
		if len(kept) > last {
			kept = slices.Delete(kept, 0, 1)
		}
	})
	if err != nil {
		return err
	}
	defer c.Close()
	select {
	case <-c.CaughtUp():
	case <-ctx.Done():
		return nil
	}
	mu.Lock()
	err = out.stored(kept)
	kept, live = nil, true
	mu.Unlock()
	if err != nil || !follow {
		return err
	}
	select {
	case <-ctx.Done():
	case <-c.Done():
		return errors.New("the stream subscription ended")
	}
	mu.Lock()
	defer mu.Unlock()
	return failed
}

// readLeader reads the holder of the pool's autoscaler election.
func readLeader(ctx context.Context, t *target) (scalingStatus, error) {
	service := "autoscaler-" + t.pool
	st := scalingStatus{Pool: t.pool, Election: coord.ElectionPrefix(service)}
	cli, err := t.etcdClient(ctx)
	if err != nil {
		return st, err
	}
	defer func() { _ = cli.Close() }()
	rctx, cancel := context.WithTimeout(ctx, requestTimeout)
	defer cancel()
	leader, err := coord.Leader(rctx, cli, service)
	switch {
	case errors.Is(err, coord.ErrNoLeader):
	case err != nil:
		return st, fmt.Errorf("read the leader of %s: %w", st.Election, err)
	default:
		st.Leader = leader
	}
	return st, nil
}

// lastStart returns a stream sequence from which stream holds at least the
// last n messages on subject, 0 when it holds fewer (read them all). It
// looks back from the subject's last message in steps growing fourfold,
// counting the messages on subject from each start with a short-lived
// consumer, so it reads none of them.
func lastStart(ctx context.Context, js jetstream.JetStream, stream, subject string, n int) (uint64, error) {
	ctx, cancel := context.WithTimeout(ctx, requestTimeout)
	defer cancel()
	s, err := js.Stream(ctx, stream)
	if err != nil {
		return 0, fmt.Errorf("stream %s: %w", stream, err)
	}
	lastMsg, err := s.GetLastMsgForSubject(ctx, subject)
	if errors.Is(err, jetstream.ErrMsgNotFound) {
		return 0, nil
	}
	if err != nil {
		return 0, fmt.Errorf("last message of %s on %s: %w", stream, subject, err)
	}
	last := lastMsg.Sequence
	for step := uint64(n); step < last; step = min(step, last/4+1) * 4 {
		start := last - step + 1
		c, err := s.CreateConsumer(ctx, jetstream.ConsumerConfig{
			FilterSubject: subject, DeliverPolicy: jetstream.DeliverByStartSequencePolicy, OptStartSeq: start,
			AckPolicy: jetstream.AckNonePolicy, MemoryStorage: true, InactiveThreshold: requestTimeout,
		})
		if err != nil {
			return 0, fmt.Errorf("count the messages of %s on %s: %w", stream, subject, err)
		}
		info := c.CachedInfo()
		// The consumer also goes by itself once inactive.
		_ = s.DeleteConsumer(ctx, info.Name)
		if info.NumPending >= uint64(n) {
			return start, nil
		}
	}
	return 0, nil
}

// scalingLine formats a decision on one line: when, which model, what
// triggered it, which analyzer and optimizer, each variant's change and
// its actuation, and the first reason.
func scalingLine(d *eventsv1.ScalingDecision) string {
	reason := ""
	if rs := d.GetReasons(); len(rs) > 0 {
		reason = rs[0]
	}
	variants := make([]string, 0, len(d.GetVariants()))
	for _, v := range d.GetVariants() {
		outcome := "not applied"
		switch {
		case v.GetError() != "":
			outcome = "error: " + v.GetError()
		case v.GetApplied():
			outcome = "applied"
		}
		variants = append(variants, fmt.Sprintf("%s %d->%d %s", v.GetVariant(), v.GetCurrent(), v.GetDesired(), outcome))
		if reason == "" {
			reason = v.GetReason()
		}
	}
	line := fmt.Sprintf("%s  %s  %s  %s/%s  %s", d.GetTime().AsTime().Local().Format(time.DateTime), orDash(d.GetModelId()), orDash(d.GetTrigger()),
		orDash(d.GetAnalyzer()), orDash(d.GetOptimizer()), orDash(strings.Join(variants, ", ")))
	if reason != "" {
		line += "  | " + reason
	}
	return line
}

func orDash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}
