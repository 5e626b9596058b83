package cli

import (
	"context"
	"fmt"
	"io"
	"sort"
	"strings"
	"sync"
	"time"

	eventsv1 "github.com/hermod/hermod/libs/api/hermod/events/v1"
	"github.com/hermod/hermod/libs/bus"
)

// auditOutputHelp is the -o flag's help of audit tail and replay.
const auditOutputHelp = "output `format`: table (one line per decision; text is the same), json (one event a line)\n" +
	"or yaml (a document per event, each after a --- line); json and yaml show every field, with\n" +
	"the proto field names"

func auditTail(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	c := newSubcommand(ctx, "hermodctl audit tail", stderr, withNATS)
	t := &c.t
	output := c.output(formatTable, readFormats, tableAliases, auditOutputHelp)
	c.usage("Usage: hermodctl audit tail [--pool P] [--nats-url U] [-o table|json|yaml]\n\n" +
		"Follows the pool's routing decisions (hermod.decisions.<pool>) as they are taken:\n" +
		"time, request id, chosen endpoint, and the scores that chose it. Ctrl-C stops.\n\n")
	if ok, code := c.parse(args, nil); !ok {
		return code
	}
	return follow(ctx, t, bus.ConsumeOptions{DeliverNew: true}, false, output.format, stdout, stderr)
}

func auditReplay(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	c := newSubcommand(ctx, "hermodctl audit replay", stderr, withNATS)
	fs, t := c.fs, &c.t
	since := fs.String("since", "1h", "replay decisions from this long ago (a duration such as 15m) or this time (RFC 3339)")
	output := c.output(formatTable, readFormats, tableAliases, auditOutputHelp)
	c.usage("Usage: hermodctl audit replay --since 15m|2026-11-21T10:00:00Z [--pool P] [--nats-url U] [-o table|json|yaml]\n\n" +
		"Prints the pool's routing decisions stored since a time (the decision stream keeps\n" +
		"them for its retention, 24h by default), then exits.\n\n")
	if ok, code := c.parse(args, nil); !ok {
		return code
	}
	start, err := parseSince(*since, time.Now())
	if err != nil {
		fmt.Fprintf(stderr, "hermodctl audit replay: --since: %v\n", err)
		return ExitUsage
	}
	return follow(ctx, t, bus.ConsumeOptions{Start: start}, true, output.format, stdout, stderr)
}

// parseSince reads a duration before now or an RFC 3339 time.
func parseSince(s string, now time.Time) (time.Time, error) {
	if d, err := time.ParseDuration(s); err == nil {
		if d < 0 {
			return time.Time{}, fmt.Errorf("%q: a duration must not be negative", s)
		}
		return now.Add(-d), nil
	}
	t, err := time.Parse(time.RFC3339Nano, s)
	if err != nil {
		return time.Time{}, fmt.Errorf("%q: want a duration (15m) or an RFC 3339 time (2026-11-21T10:00:00Z)", s)
	}
	return t, nil
}

// follow prints the pool's decisions from where o says; with untilCaughtUp
// it stops once it has printed what the stream held.
func follow(ctx context.Context, t *target, o bus.ConsumeOptions, untilCaughtUp bool, output string, stdout, stderr io.Writer) int {
	nc, js, err := t.natsConn(ctx)
	if err != nil {
		fmt.Fprintf(stderr, "hermodctl audit: %v\n", err)
		return ExitFailure
	}
	defer nc.Close()
	subject, err := bus.DecisionsSubject(t.pool)
	if err != nil {
		fmt.Fprintf(stderr, "hermodctl audit: %v\n", err)
		return ExitUsage
	}
	o.Stream, o.FilterSubject = bus.DecisionsStream, subject
	var mu sync.Mutex
	n := 0
	c, err := bus.Consume(ctx, js, o, func(d *eventsv1.RoutingDecision, _ bus.Meta) {
		mu.Lock()
		defer mu.Unlock()
		n++
		if output != formatTable {
			b, err := protoJSON(d)
			if err == nil {
				err = writeStructured(stdout, output, b, true)
			}
			if err != nil {
				fmt.Fprintf(stderr, "hermodctl audit: decision %s: %v\n", d.GetDecisionId(), err)
			}
			return
		}
		fmt.Fprintln(stdout, decisionLine(d))
	})
	if err != nil {
		fmt.Fprintf(stderr, "hermodctl audit: %v\n", err)
		return ExitFailure
	}
	defer c.Close()
	if untilCaughtUp {
		select {
		case <-c.CaughtUp():
		case <-ctx.Done():
		}
		mu.Lock()
		if n == 0 {
			fmt.Fprintf(stderr, "no decisions of pool %s in that time\n", t.pool)
		}
		mu.Unlock()
		return ExitOK
	}
	select {
	case <-ctx.Done():
	case <-c.Done():
		fmt.Fprintln(stderr, "hermodctl audit: the stream subscription ended")
		return ExitFailure
	}
	return ExitOK
}

// decisionLine formats a decision on one line: when, which request, where
// it went, and the chosen endpoint's scores (then the runner-up's total).
func decisionLine(d *eventsv1.RoutingDecision) string {
	var b strings.Builder
	fmt.Fprintf(&b, "%s  %-20s -> %s (%s)", d.GetTime().AsTime().Local().Format("15:04:05.000"), shorten(d.GetRequestId(), 20), d.GetPrimaryName(), d.GetPrimaryEndpoint())
	if d.GetPrefillEndpoint() != "" {
		fmt.Fprintf(&b, " prefill %s", d.GetPrefillEndpoint())
	}
	for _, p := range d.GetProfiles() {
		if p.GetRole() != eventsv1.ProfileRole_PROFILE_ROLE_PRIMARY {
			continue
		}
		eps := append([]*eventsv1.EndpointScores(nil), p.GetEndpoints()...)
		sort.SliceStable(eps, func(i, j int) bool { return eps[i].GetTotal() > eps[j].GetTotal() })
		for _, e := range eps {
			if e.GetName() != d.GetPrimaryName() {
				continue
			}
			fmt.Fprintf(&b, "  total %.2f:", e.GetTotal())
			for i, s := range p.GetScorers() {
				fmt.Fprintf(&b, " %s=%.2f", s.GetName(), e.GetScores()[i])
			}
			writePrediction(&b, e.GetPrediction())
		}
		for _, e := range eps {
			if e.GetName() != d.GetPrimaryName() {
				fmt.Fprintf(&b, "  | next %s %.2f", e.GetName(), e.GetTotal())
				writePrediction(&b, e.GetPrediction())
				break
			}
		}
	}
	return b.String()
}

// writePrediction adds a latency predictor's forecast: predicted TTFT and
// TPOT, and the SLO headroom when the request set one.
func writePrediction(b *strings.Builder, p *eventsv1.LatencyPrediction) {
	if p == nil {
		return
	}
	fmt.Fprintf(b, " [ttft %s tpot %s", ms(p.GetTtftSeconds()), ms(p.GetTpotSeconds()))
	if h := p.GetTtftHeadroomSeconds(); h != 0 {
		fmt.Fprintf(b, " ttft-headroom %s", ms(h))
	}
	if h := p.GetTpotHeadroomSeconds(); h != 0 {
		fmt.Fprintf(b, " tpot-headroom %s", ms(h))
	}
	if !p.GetMeetsSlo() {
		b.WriteString(" misses SLO")
	}
	b.WriteByte(']')
}

// ms formats seconds as milliseconds.
func ms(s float64) string { return fmt.Sprintf("%.1fms", 1e3*s) }

func shorten(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[:n-1] + "…"
}
