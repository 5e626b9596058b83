package ingest

import (
	"context"
	"log/slog"
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// Why a pod this replica owns is silent: its live events stopped
// SilentAfter ago or more, and
const (
	// its replay socket has not answered for SilentAfter either (the pod
	// or the way to it is gone);
	silentUnreachable = "unreachable"
	// its replay socket delivers batches the live socket never did (the
	// pod publishes, but its live connection is cut or hung: the stream
	// is kept whole through replay only);
	silentLiveLost = "live_lost"
	// it offers no replay socket to tell an idle pod from a cut-off one.
	silentUnverified = "unverified"
)

// silentReasons are the reasons, in the order the metric lists them.
var silentReasons = []string{silentUnreachable, silentLiveLost, silentUnverified}

// status returns how long ago the pod's events were last heard live
// (off this replica's socket, or on the stream through another replica;
// since its ingest started if never) and, if it is silent, why. A pod
// whose live events stopped is not silent while its replay socket answers
// and delivers nothing the live socket missed: it is idle, and the stream
// is whole.
func (p *pod) status(now time.Time) (time.Duration, string) {
	heard := max(p.since.UnixNano(), p.liveAt.Load(), p.elsewhereAt.Load())
	age := time.Duration(now.UnixNano() - heard)
	silentAfter := p.mg.cfg.SilentAfter
	switch {
	case age < silentAfter:
		return age, ""
	case p.t.Replay == "":
		return age, silentUnverified
	case now.UnixNano()-p.checkedAt.Load() >= int64(silentAfter):
		return age, silentUnreachable
	case p.recoveredAt.Load()-heard >= int64(silentAfter):
		return age, silentLiveLost
	}
	return age, ""
}

// watch checks the pods for silence until ctx ends.
func (mg *Manager) watch(ctx context.Context) {
	defer close(mg.watched)
	t := time.NewTicker(max(min(time.Second, mg.cfg.SilentAfter/4), time.Millisecond))
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case now := <-t.C:
			mg.checkSilence(ctx, now)
		}
	}
}

// checkSilence warns about every silent pod this replica owns (each at
// most once per SilentLogInterval, with the count of checks held back),
// and says so once when its events arrive again.
func (mg *Manager) checkSilence(ctx context.Context, now time.Time) {
	for _, p := range mg.owned() {
		age, why := p.status(now)
		attrs := []slog.Attr{slog.String("reason", why), slog.Duration("silent_for", age.Round(time.Millisecond)), slog.String("replay", p.t.Replay)}
		switch why {
		case "":
			p.silenceLog.Succeeded(ctx, "the pod's KV events arrive again")
		case silentUnreachable:
			p.silenceLog.Failed(ctx, "no KV events from the pod, and its replay socket does not answer: the pod or the way to it is gone", attrs...)
		case silentLiveLost:
			p.silenceLog.Failed(ctx, "the pod's KV events no longer arrive live; they are caught up from its replay socket only", attrs...)
		case silentUnverified:
			p.silenceLog.Failed(ctx, "no KV events from the pod, and it offers no replay socket to tell an idle pod from a cut-off one", attrs...)
		}
	}
}

// healthCollector exposes, at each scrape, the age of every owned pod's
// last live event and the count of silent pods by reason. A pod's series
// goes when the pod does.
type healthCollector struct {
	mg          *Manager
	age, silent *prometheus.Desc
}

func newHealthCollector(mg *Manager) *healthCollector {
	return &healthCollector{
		mg: mg,
		age: prometheus.NewDesc("hermod_indexer_pod_last_event_age_seconds",
			"Seconds since a pod's last KV event batch arrived live (at this replica or, on the stream, at another), or since this replica began to ingest it; pods this replica owns.",
			[]string{"pod"}, nil),
		silent: prometheus.NewDesc("hermod_indexer_silent_pods",
			"Pods this replica owns whose live KV events stopped, by reason: unreachable (nor does the replay socket answer), live_lost (replay delivers what the live socket does not), unverified (no replay socket to tell idle from cut off).",
			[]string{"reason"}, nil),
	}
}

func (c *healthCollector) Describe(ch chan<- *prometheus.Desc) {
	ch <- c.age
	ch <- c.silent
}

func (c *healthCollector) Collect(ch chan<- prometheus.Metric) {
	now := time.Now()
	silent := make(map[string]int, len(silentReasons))
	for _, p := range c.mg.owned() {
		age, why := p.status(now)
		ch <- prometheus.MustNewConstMetric(c.age, prometheus.GaugeValue, age.Seconds(), p.t.Pod)
		if why != "" {
			silent[why]++
		}
	}
	for _, why := range silentReasons {
		ch <- prometheus.MustNewConstMetric(c.silent, prometheus.GaugeValue, float64(silent[why]), why)
	}
}
