package bench

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"math"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/hermod/hermod/tools/devstack/stackstate"
)

// lagMetric is the pickers' histogram of how long another replica's
// decision took to reach them.
const lagMetric = "hermod_picker_projection_decision_lag_seconds"

// DecisionLag summarises lagMetric over every picker of a run: while a
// decision travels, the other pickers do not count its request (wall-clock
// seconds, quantiles interpolated within the histogram's buckets).
type DecisionLag struct {
	Count int64   `json:"count"`
	P50   float64 `json:"p50_s"`
	P90   float64 `json:"p90_s"`
	P99   float64 `json:"p99_s"`
}

// bucket is one cumulative histogram bucket.
type bucket struct {
	le    float64
	count float64
}

// scrapeDecisionLag reads lagMetric from every picker's ops endpoint and
// merges it; nil when no picker folded another's decision.
func scrapeDecisionLag(ctx context.Context, pickers []stackstate.Service) (*DecisionLag, error) {
	merged := map[float64]float64{}
	for _, p := range pickers {
		bs, err := scrapeBuckets(ctx, "http://"+p.Ops+"/metrics", lagMetric, "")
		if err != nil {
			return nil, fmt.Errorf("decision lag of %s: %w", p.Name, err)
		}
		for _, b := range bs {
			merged[b.le] += b.count
		}
	}
	bs := make([]bucket, 0, len(merged))
	for le, c := range merged {
		bs = append(bs, bucket{le, c})
	}
	sortBuckets(bs)
	if len(bs) == 0 || bs[len(bs)-1].count == 0 {
		return nil, nil
	}
	return &DecisionLag{Count: int64(bs[len(bs)-1].count), P50: quantile(bs, 0.5), P90: quantile(bs, 0.9), P99: quantile(bs, 0.99)}, nil
}

// sortBuckets sorts buckets by their bound.
func sortBuckets(bs []bucket) {
	slices.SortFunc(bs, func(a, b bucket) int { return compareFloat(a.le, b.le) })
}

func compareFloat(a, b float64) int {
	switch {
	case a < b:
		return -1
	case a > b:
		return 1
	}
	return 0
}

// scrapeBuckets returns the cumulative buckets of histogram name in the
// Prometheus text exposition at url, of the series with the label pair
// label (`kind="ttft"`; empty: a histogram without labels).
func scrapeBuckets(ctx context.Context, url, name, label string) ([]bucket, error) {
	ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return nil, err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		_, _ = io.Copy(io.Discard, resp.Body)
		return nil, fmt.Errorf("GET %s: %s", url, resp.Status)
	}
	return parseBuckets(resp.Body, name, label)
}

// parseBuckets reads the `<name>_bucket{le="..."} <count>` lines of a text
// exposition, or with label set, the `<name>_bucket{<label>,le="..."}
// <count>` lines (the Go client writes labels sorted, le last).
func parseBuckets(r io.Reader, name, label string) ([]bucket, error) {
	prefix := name + `_bucket{le="`
	if label != "" {
		prefix = name + `_bucket{` + label + `,le="`
	}
	var out []bucket
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	for sc.Scan() {
		line, ok := strings.CutPrefix(sc.Text(), prefix)
		if !ok {
			continue
		}
		le, rest, ok := strings.Cut(line, `"} `)
		if !ok {
			return nil, fmt.Errorf("malformed bucket line %q", sc.Text())
		}
		bound := math.Inf(1)
		if le != "+Inf" {
			v, err := strconv.ParseFloat(le, 64)
			if err != nil {
				return nil, fmt.Errorf("bucket bound %q: %w", le, err)
			}
			bound = v
		}
		count, err := strconv.ParseFloat(strings.Fields(rest)[0], 64)
		if err != nil {
			return nil, fmt.Errorf("bucket count in %q: %w", sc.Text(), err)
		}
		out = append(out, bucket{bound, count})
	}
	return out, sc.Err()
}

// quantile interpolates the q-quantile linearly within the cumulative
// buckets bs (sorted by bound, the last one +Inf); a quantile in the +Inf
// bucket is the largest finite bound.
func quantile(bs []bucket, q float64) float64 {
	total := bs[len(bs)-1].count
	rank := q * total
	lower, below := 0.0, 0.0
	for _, b := range bs {
		if b.count >= rank {
			if math.IsInf(b.le, 1) {
				return lower
			}
			if b.count == below {
				return b.le
			}
			return lower + (b.le-lower)*(rank-below)/(b.count-below)
		}
		lower, below = b.le, b.count
	}
	return lower
}
