// Package report delivers the gateway's events. Each completion is
// published on the completion stream (deduplicated there by decision id)
// and sent to the picker replica that took the decision, which drops its
// in-flight count at once. Each decision a picker handed over
// (PickRequest.caller_publishes_decision) is published on the decision
// stream ahead of its completion, so that a picker dying right after it
// answered loses no decision. Nothing waits on the request path.
package report

import (
	"context"
	"log/slog"
	"sync"

	"github.com/prometheus/client_golang/prometheus"
	"google.golang.org/protobuf/proto"

	eventsv1 "github.com/hermod/hermod/libs/api/hermod/events/v1"
	"github.com/hermod/hermod/libs/telemetry"
	"github.com/hermod/hermod/services/gateway/internal/pickerclient"
)

// DefaultQueue is the default bound of completions waiting for their
// Complete RPC.
const DefaultQueue = 8192

// Publisher publishes events without blocking, in the order given
// (bus.Publisher).
type Publisher interface {
	Publish(subject, msgID string, msg proto.Message) bool
	PublishEncoded(subject, msgID string, data []byte) bool
}

// Completer sends a completion to the picker (pickerclient.Client).
type Completer interface {
	Complete(ctx context.Context, d pickerclient.Decision, ev *eventsv1.RequestCompleted) error
}

// Options configure a Reporter.
type Options struct {
	// Publisher and Subject: where completion events go; a nil Publisher
	// publishes nothing (the pickers then rely on Complete alone).
	Publisher Publisher
	Subject   string
	// DecisionSubject, when set with a Publisher, is where the decisions
	// the pickers hand over go (PublishesDecisions is then true).
	DecisionSubject string
	Completer       Completer
	// Queue bounds the completions waiting for their Complete RPC
	// (default DefaultQueue); Workers send them (default 4).
	Queue, Workers int
	Logger         *slog.Logger
	Metrics        prometheus.Registerer
}

// Reporter delivers completions. Report is safe for concurrent use.
type Reporter struct {
	o     Options
	queue chan item
	stop  chan struct{}
	wg    sync.WaitGroup
	once  sync.Once
	// drainCtx bounds the Complete calls; Close's context ends it.
	drainCtx         context.Context
	cancelDrain      context.CancelFunc
	dropped          *prometheus.CounterVec
	decisionsDropped prometheus.Counter
	failed           prometheus.Counter
}

type item struct {
	d  pickerclient.Decision
	ev *eventsv1.RequestCompleted
}

// New starts a Reporter's workers.
func New(o Options) *Reporter {
	if o.Queue <= 0 {
		o.Queue = DefaultQueue
	}
	if o.Workers <= 0 {
		o.Workers = 4
	}
	if o.Logger == nil {
		o.Logger = slog.Default()
	}
	r := &Reporter{
		o:                o,
		queue:            make(chan item, o.Queue),
		stop:             make(chan struct{}),
		dropped:          telemetry.NewCounterVec("hermod_gateway_completion_reports_dropped_total", "Completion reports dropped because a queue was full, by path (stream: the completion stream; rpc: the Complete call).", "path"),
		decisionsDropped: telemetry.NewCounter("hermod_gateway_decision_events_dropped_total", "Decision events pickers handed over that could not be queued for the decision stream (the publisher's queue was full, or it was closed)."),
		failed:           telemetry.NewCounter("hermod_gateway_complete_rpc_errors_total", "Complete calls that failed on every picker replica (the completion stream still carries them)."),
	}
	if o.Metrics != nil {
		o.Metrics.MustRegister(r.dropped, r.decisionsDropped, r.failed)
	}
	r.drainCtx, r.cancelDrain = context.WithCancel(context.Background())
	for range o.Workers {
		r.wg.Add(1)
		go r.work()
	}
	return r
}

// PublishesDecisions says whether Decided publishes decisions: only then
// may a Pick ask the picker to hand its decision over.
func (r *Reporter) PublishesDecisions() bool {
	return r.o.Publisher != nil && r.o.DecisionSubject != ""
}

// Decided publishes the decision event the picker handed over in d (none
// when it published the event itself). Called as soon as the Pick
// answered, it puts the decision on its stream ahead of the completion.
// It never blocks.
func (r *Reporter) Decided(d pickerclient.Decision) {
	data := d.GetDecisionEvent()
	if len(data) == 0 || !r.PublishesDecisions() {
		return
	}
	if !r.o.Publisher.PublishEncoded(r.o.DecisionSubject, d.GetDecisionId(), data) {
		r.decisionsDropped.Inc()
	}
}

// Report delivers one completion. It never blocks.
func (r *Reporter) Report(d pickerclient.Decision, ev *eventsv1.RequestCompleted) {
	if r.o.Publisher != nil && !r.o.Publisher.Publish(r.o.Subject, ev.GetDecisionId(), ev) {
		r.dropped.WithLabelValues("stream").Inc()
	}
	select {
	case r.queue <- item{d, ev}:
	default:
		r.dropped.WithLabelValues("rpc").Inc()
	}
}

func (r *Reporter) work() {
	defer r.wg.Done()
	for {
		select {
		case it := <-r.queue:
			r.send(it)
		case <-r.stop:
			// Deliver what is queued until the deadline, then stop.
			for {
				select {
				case it := <-r.queue:
					if r.drainCtx.Err() != nil {
						r.dropped.WithLabelValues("rpc").Inc()
						continue
					}
					r.send(it)
				default:
					return
				}
			}
		}
	}
}

func (r *Reporter) send(it item) {
	if err := r.o.Completer.Complete(r.drainCtx, it.d, it.ev); err != nil {
		r.failed.Inc()
		r.o.Logger.Debug("complete call failed; the completion stream carries it", "decision_id", it.ev.GetDecisionId(), "error", err)
	}
}

// Close delivers the queued completions until ctx ends (the rest are
// dropped and counted: the completion stream still carries them) and stops
// the workers. Reports made after Close are published but not sent by RPC.
func (r *Reporter) Close(ctx context.Context) {
	r.once.Do(func() {
		stop := context.AfterFunc(ctx, r.cancelDrain)
		defer stop()
		close(r.stop)
		r.wg.Wait()
		r.cancelDrain()
	})
}
