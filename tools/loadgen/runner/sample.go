package runner

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"time"
)

// Queue metrics of vLLM (and the simulator).
const (
	metricWaiting = "vllm:num_requests_waiting"
	metricRunning = "vllm:num_requests_running"
)

// sample reads every pod's queue lengths every SampleInterval until ctx
// ends, then once more.
func (r *run) sample(ctx context.Context) []QueueSeries {
	if len(r.o.Pods) == 0 {
		return nil
	}
	series := make([]QueueSeries, len(r.o.Pods))
	for i, p := range r.o.Pods {
		series[i] = QueueSeries{Pod: p.Name, Address: p.Address}
	}
	readAll := func() {
		t := r.sim(time.Since(r.start))
		var wg sync.WaitGroup
		for i := range series {
			wg.Add(1)
			go func() {
				defer wg.Done()
				rctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
				defer cancel()
				w, run, err := readQueues(rctx, r.o.Client, series[i].Address)
				if err != nil {
					series[i].Errors++
					return
				}
				series[i].Samples = append(series[i].Samples, QueueSample{T: t, Waiting: w, Running: run})
			}()
		}
		wg.Wait()
	}
	tick := time.NewTicker(r.wall(r.o.SampleInterval))
	defer tick.Stop()
	readAll()
	for {
		select {
		case <-ctx.Done():
			readAll()
			return series
		case <-tick.C:
			readAll()
		}
	}
}

// readQueues scrapes a pod's /metrics for its waiting and running
// requests (summed over the series of each metric).
func readQueues(ctx context.Context, c *http.Client, address string) (waiting, running float64, err error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, "http://"+address+"/metrics", nil)
	if err != nil {
		return 0, 0, err
	}
	resp, err := c.Do(req)
	if err != nil {
		return 0, 0, err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		_, _ = io.Copy(io.Discard, resp.Body)
		return 0, 0, fmt.Errorf("metrics of %s: HTTP %d", address, resp.StatusCode)
	}
	return parseQueues(resp.Body)
}

// parseQueues sums the samples of the waiting and running gauges in a
// Prometheus text exposition.
func parseQueues(body io.Reader) (waiting, running float64, err error) {
	sc := bufio.NewScanner(body)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	found := false
	for sc.Scan() {
		line := sc.Text()
		var dst *float64
		switch {
		case strings.HasPrefix(line, metricWaiting):
			dst = &waiting
			line = line[len(metricWaiting):]
		case strings.HasPrefix(line, metricRunning):
			dst = &running
			line = line[len(metricRunning):]
		default:
			continue
		}
		// the name must end here: labels or a space follow
		if line == "" || (line[0] != '{' && line[0] != ' ') {
			continue
		}
		if i := strings.LastIndexByte(line, '}'); i >= 0 {
			line = line[i+1:]
		}
		fields := strings.Fields(line)
		if len(fields) == 0 {
			continue
		}
		v, perr := strconv.ParseFloat(fields[0], 64)
		if perr != nil {
			return 0, 0, fmt.Errorf("metrics: %q: %w", sc.Text(), perr)
		}
		*dst += v
		found = true
	}
	if err := sc.Err(); err != nil {
		return 0, 0, err
	}
	if !found {
		return 0, 0, fmt.Errorf("metrics: neither %s nor %s exposed", metricWaiting, metricRunning)
	}
	return waiting, running, nil
}
