// Command hermod-loadgen sends reference/000's JSQ-favourable workload to
// an OpenAI endpoint: heavy seeds first, then a burst of short and medium
// requests with heavy ones inlined. Its knobs, their defaults and their
// environment variables are the reference generator's, and for the same
// knobs it sends exactly the same requests at the same times. It records
// every request's latency, TTFT (with --stream), status and serving pod,
// samples the pods' queues (--pods), prints the reference's summary and
// saves everything as JSON (--save-json).
package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"net/http"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/hermod/hermod/libs/cmdline"
	"github.com/hermod/hermod/tools/loadgen/runner"
	"github.com/hermod/hermod/tools/loadgen/workload"
)

func main() { cmdline.Main("hermod-loadgen", run) }

// envDefault returns the reference's environment variable's value, or def.
func envDefault(name, def string) string {
	if v, ok := os.LookupEnv(name); ok {
		return v
	}
	return def
}

func run() error {
	fs := flag.NewFlagSet("hermod-loadgen", flag.ContinueOnError)
	o := workload.DefaultReference()
	var (
		apiBase, apiKey, model, saveJSON, pods string
		timeout, speed                         float64
		stream, printOutput, verbose, progress bool
		sampleInterval, sendGap                time.Duration
	)
	envErr := referenceFlags(fs, &o)
	fs.StringVar(&apiBase, "api-base", envDefault("API_BASE", "http://127.0.0.1:8080"), "base URL of the OpenAI API (the devstack's gateway by default)")
	fs.StringVar(&apiKey, "api-key", envDefault("API_KEY", ""), "bearer token, if the gateway requires one")
	fs.StringVar(&model, "model", os.Getenv("MODEL"), "model name served by the endpoint (default: the first the gateway's /v1/models lists)")
	fs.Float64Var(&timeout, "timeout", 600, "per-request timeout (seconds)")
	fs.BoolVar(&printOutput, "print-output", false, "print each answer's text")
	fs.StringVar(&saveJSON, "save-json", "", "save per-request results, queue samples and the summary to this JSON file")
	// Hermod's additions
	fs.Int64Var(&o.Seed, "seed", o.Seed, "the workload's seed (42, the reference's fixed seed, reproduces its workload)")
	fs.BoolVar(&stream, "stream", false, "send streaming requests (records TTFT)")
	fs.Float64Var(&speed, "speed", 1, "the simulator's --speed: the schedule runs this much faster and times are reported in simulated seconds")
	fs.StringVar(&pods, "pods", "", "pods whose queues to sample, comma-separated [name=]host:port (their /metrics)")
	fs.DurationVar(&sampleInterval, "sample-interval", time.Second, "how often to sample the pods' queues (simulated)")
	fs.DurationVar(&sendGap, "send-gap", 0, "least simulated time between two sends (requests due at once leave in order, this far apart)")
	fs.BoolVar(&verbose, "verbose", false, "print a line per request sent and finished, as the reference does")
	fs.BoolVar(&progress, "progress", true, "draw a progress bar on standard error")
	if err := cmdline.Parse(fs, os.Args[1:]); err != nil {
		return err
	}
	if err := errors.Join(*envErr...); err != nil {
		return err
	}
	if fs.NArg() > 0 {
		return fmt.Errorf("unexpected arguments: %s", strings.Join(fs.Args(), " "))
	}
	if timeout <= 0 {
		return fmt.Errorf("--timeout: must be positive (got %v)", timeout)
	}
	podList, err := parsePods(pods)
	if err != nil {
		return err
	}
	if model == "" {
		if model, err = servedModel(apiBase, apiKey); err != nil {
			return fmt.Errorf("--model not given and %w", err)
		}
	}
	w, err := workload.Reference(o)
	if err != nil {
		return err
	}
	for _, line := range w.Summary {
		fmt.Println(line)
	}
	opts := runner.Options{
		BaseURL: apiBase, APIKey: apiKey, Model: model, Stream: stream, Speed: speed,
		Timeout: time.Duration(timeout * float64(time.Second)), Pods: podList, SampleInterval: sampleInterval,
		SendGap: sendGap, KeepText: printOutput,
	}
	if progress {
		opts.Progress = os.Stderr
	}
	if verbose {
		opts.Log = os.Stdout
	}
	ctx, stop := cmdline.SignalContext(context.Background())
	defer stop()
	res, runErr := runner.Run(ctx, w, opts)
	if res == nil {
		return runErr
	}
	if err := report(res, printOutput, saveJSON); err != nil {
		return err
	}
	if runErr == nil && res.Summary.Failed > 0 {
		runErr = fmt.Errorf("%d of %d requests failed", res.Summary.Failed, len(res.Requests))
		if causes := res.FailureCauses(1); len(causes) > 0 {
			runErr = fmt.Errorf("%w, most of them (%d) with %s", runErr, causes[0].Count, causes[0].Cause)
		}
	}
	return runErr
}

// servedModel asks the OpenAI API at base for its models and returns the
// first.
func servedModel(base, apiKey string) (string, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, strings.TrimSuffix(base, "/")+"/v1/models", nil)
	if err != nil {
		return "", err
	}
	if apiKey != "" {
		req.Header.Set("Authorization", "Bearer "+apiKey)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return "", fmt.Errorf("the models of %s are unknown: %w", base, err)
	}
	defer func() { _ = resp.Body.Close() }()
	var list struct {
		Data []struct {
			ID string `json:"id"`
		} `json:"data"`
	}
	if resp.StatusCode != http.StatusOK {
		return "", fmt.Errorf("GET %s answered %s", req.URL, resp.Status)
	}
	if err := json.NewDecoder(io.LimitReader(resp.Body, 1<<20)).Decode(&list); err != nil {
		return "", fmt.Errorf("GET %s: %w", req.URL, err)
	}
	if len(list.Data) == 0 || list.Data[0].ID == "" {
		return "", fmt.Errorf("%s serves no model yet", base)
	}
	return list.Data[0].ID, nil
}

// referenceFlags declares the reference's knobs on o, with its defaults
// and environment variables; the returned errors are the environment's
// that did not parse.
func referenceFlags(fs *flag.FlagSet, o *workload.ReferenceOptions) *[]error {
	envErr := &[]error{}
	intEnv := func(name string, def int) int {
		v, err := strconv.Atoi(envDefault(name, strconv.Itoa(def)))
		if err != nil {
			*envErr = append(*envErr, fmt.Errorf("$%s: %w", name, err))
			return def
		}
		return v
	}
	floatEnv := func(name string, def float64) float64 {
		v, err := strconv.ParseFloat(envDefault(name, strconv.FormatFloat(def, 'g', -1, 64)), 64)
		if err != nil {
			*envErr = append(*envErr, fmt.Errorf("$%s: %w", name, err))
			return def
		}
		return v
	}
	fs.IntVar(&o.Workers, "workers", intEnv("WORKERS", o.Workers), "pods behind the router (for the summary only)")
	fs.IntVar(&o.Total, "total", intEnv("TOTAL", o.Total), "total requests, seeds and inline heavies included")
	fs.IntVar(&o.HeavySeeds, "heavy-seeds", intEnv("HEAVY_SEEDS", o.HeavySeeds), "heavy requests sent first to pin some pods")
	fs.IntVar(&o.InlineEvery, "inline-every", intEnv("INLINE_EVERY", o.InlineEvery), "one inline heavy after every N burst requests (unless --inline-heavy-count)")
	fs.IntVar(&o.InlineHeavyCount, "inline-heavy-count", intEnv("INLINE_HEAVY_COUNT", o.InlineHeavyCount), "explicit number of inline heavies (0: from --inline-every)")
	fs.Float64Var(&o.SeedInterval, "seed-interval", floatEnv("SEED_INTERVAL", o.SeedInterval), "seconds between heavy seeds")
	fs.Float64Var(&o.BurstStart, "burst-start", floatEnv("BURST_START", o.BurstStart), "when the burst begins (seconds after the start)")
	fs.Float64Var(&o.BurstInterval, "burst-interval", floatEnv("BURST_INTERVAL", o.BurstInterval), "base spacing of burst requests (seconds)")
	fs.Float64Var(&o.Jitter, "jitter", floatEnv("JITTER", o.Jitter), "uniform ± jitter on each burst spacing (seconds)")
	fs.Float64Var(&o.InlineExtraGap, "inline-extra-gap", floatEnv("INLINE_EXTRA_GAP", o.InlineExtraGap), "extra gap after each inline heavy (seconds)")
	return envErr
}

// report prints the answers (with --print-output) and the summary, and
// saves the results (with --save-json).
func report(res *runner.Results, printOutput bool, saveJSON string) error {
	if printOutput {
		for _, r := range res.Requests {
			fmt.Printf("\n=== %s ===\nStatus: %d Latency: %.3fs\n%s\n%s\n", r.ID, r.Status, r.Latency, strings.Repeat("=", 60), r.Text)
		}
	}
	res.PrintSummary(os.Stdout)
	if saveJSON != "" {
		if err := res.WriteFile(saveJSON); err != nil {
			fmt.Printf("\nFailed to save JSON: %v\n", err)
			return err
		}
		fmt.Printf("\nSaved results to %s\n", saveJSON)
	}
	return nil
}

// parsePods parses [name=]host:port,...
func parsePods(s string) ([]runner.Pod, error) {
	if s == "" {
		return nil, nil
	}
	var out []runner.Pod
	for _, item := range strings.Split(s, ",") {
		item = strings.TrimSpace(item)
		name, addr, named := strings.Cut(item, "=")
		if !named {
			addr = name
		}
		if _, port, ok := strings.Cut(addr, ":"); !ok || port == "" || name == "" {
			return nil, fmt.Errorf("--pods: %q is not [name=]host:port", item)
		}
		out = append(out, runner.Pod{Name: name, Address: addr})
	}
	return out, nil
}
