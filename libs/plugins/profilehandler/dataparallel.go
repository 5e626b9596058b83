package profilehandler

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"

	"github.com/hermod/hermod/libs/scheduling"
)

// DataParallelType is llm-d's data-parallel-profile-handler.
const DataParallelType = "data-parallel-profile-handler"

// DefaultPrimaryPort is data-parallel-profile-handler's primaryPort when
// the config gives none: vLLM's serving port.
const DefaultPrimaryPort = 8000

func init() {
	scheduling.Register(scheduling.Registration{Type: DataParallelType, New: newDataParallel})
}

// DataParallelParams are data-parallel-profile-handler's parameters.
type DataParallelParams struct {
	PrimaryPort int `json:"primaryPort"`
}

// DataParallel runs the one configured profile, like single-profile-handler,
// then sends the request to the chosen pod's primaryPort, telling the rank
// behind it the pod's own address in x-data-parallel-host-port (a pod
// serving several data-parallel ranks on consecutive ports).
type DataParallel struct {
	scheduling.Named
	params  DataParallelParams
	profile string
}

func newDataParallel(name string, raw json.RawMessage, h scheduling.Handle) (scheduling.Plugin, error) {
	p := DataParallelParams{PrimaryPort: DefaultPrimaryPort}
	if err := scheduling.DecodeParameters(raw, &p, h); err != nil {
		return nil, err
	}
	if p.PrimaryPort < 1 || p.PrimaryPort > 65535 {
		return nil, scheduling.ParamErrorf("primaryPort", "must be between 1 and 65535 (got %d)", p.PrimaryPort)
	}
	h.Warn(DataParallelType + " is deprecated upstream in favour of single-profile-handler (with Istio 1.28.1 or later); it still works here")
	return &DataParallel{Named: scheduling.Named{Type: DataParallelType, Name: name}, params: p}, nil
}

// Parameters implements scheduling.ParameterReporter.
func (d *DataParallel) Parameters() any { return d.params }

// CheckProfiles implements scheduling.ProfileHandler.
func (d *DataParallel) CheckProfiles(profiles []string) error {
	if len(profiles) != 1 {
		return fmt.Errorf("%s runs exactly one profile, but %d are configured (%s)", DataParallelType, len(profiles), strings.Join(profiles, ", "))
	}
	d.profile = profiles[0]
	return nil
}

// Run implements scheduling.ProfileHandler.
func (d *DataParallel) Run(ctx context.Context, _ *scheduling.CycleState, _ *scheduling.Request, r scheduling.ProfileRunner, res *scheduling.Result) error {
	pr, err := r.RunProfile(ctx, d.profile)
	if err != nil {
		return err
	}
	res.Primary = pr
	toPrimaryPort(res, pr, d.params.PrimaryPort)
	return nil
}

// toPrimaryPort sends pr's targets to port, the chosen endpoint's own
// address going in x-data-parallel-host-port.
func toPrimaryPort(res *scheduling.Result, pr *scheduling.ProfileResult, port int) {
	target, ok := pr.Target()
	if !ok {
		return
	}
	res.SetHeader(HeaderDataParallelHostPort, target.HostPort())
	for i := range pr.Targets {
		pr.Targets[i].Port = port
	}
}
