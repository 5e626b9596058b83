package cli

import (
	"context"
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
	c.usage("Usage: hermodctl autoscaler status [--pool P] [--etcd-endpoints E] [--nats-url U] [--last N] [--follow]\n\n"+
		"Shows which hermod-autoscaler replica leads the pool (holds the etcd election\n"+
		"%s), then the pool's latest scaling decisions from the stream\n"+
		"%s (hermod.scaling.<pool>), newest last: time, model, trigger,\n"+
		"analyzer/optimizer, each variant's replicas current->desired and whether the\n"+
		"actuator applied them, and the first reason. With --follow, goes on printing\n"+
		"new decisions as they are taken; Ctrl-C stops.\n\n",
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
	if err := printLeader(ctx, t, stdout); err != nil {
		return c.fail(err)
	}
	if *last == 0 && !*follow {
		return ExitOK
	}

	if err := showDecisions(ctx, t, subject, *last, *follow, stdout); err != nil {
		return c.fail(err)
	}
	return ExitOK
}

// showDecisions prints the pool's last scaling decisions, newest last,
// then with follow each new one until ctx ends.
func showDecisions(ctx context.Context, t *target, subject string, last int, follow bool, stdout io.Writer) error {
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
	live := false
	c, err := bus.Consume(ctx, js, o, func(d *eventsv1.ScalingDecision, _ bus.Meta) {
		mu.Lock()
		defer mu.Unlock()
		if live {
			fmt.Fprintln(stdout, scalingLine(d))
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
	if last > 0 {
		if len(kept) == 0 {
			fmt.Fprintf(stdout, "no scaling decisions of pool %s in %s\n", t.pool, bus.ScalingStream)
		} else {
			fmt.Fprintf(stdout, "last %d scaling decisions (%s), newest last:\n", len(kept), subject)
		}
	}
	for _, d := range kept {
		fmt.Fprintln(stdout, scalingLine(d))
	}
	kept, live = nil, true
	mu.Unlock()
	if !follow {
		return nil
	}
	select {
	case <-ctx.Done():
		return nil
	case <-c.Done():
		return errors.New("the stream subscription ended")
	}
}

// printLeader prints the holder of the pool's autoscaler election.
func printLeader(ctx context.Context, t *target, stdout io.Writer) error {
	cli, err := t.etcdClient(ctx)
	if err != nil {
		return err
	}
	defer func() { _ = cli.Close() }()
	service := "autoscaler-" + t.pool
	rctx, cancel := context.WithTimeout(ctx, requestTimeout)
	defer cancel()
	leader, err := coord.Leader(rctx, cli, service)
	switch {
	case errors.Is(err, coord.ErrNoLeader):
		fmt.Fprintf(stdout, "leader: none (no hermod-autoscaler of pool %s holds %s)\n", t.pool, coord.ElectionPrefix(service))
	case err != nil:
		return err
	default:
		fmt.Fprintf(stdout, "leader: %s (%s)\n", leader, coord.ElectionPrefix(service))
	}
	return nil
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
