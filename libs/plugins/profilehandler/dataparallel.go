package profilehandler

import (
	"context"
	"encoding/json"

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
	Single
	params DataParallelParams
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
	return &DataParallel{Single: Single{Named: scheduling.Named{Type: DataParallelType, Name: name}}, params: p}, nil
}

// Parameters implements scheduling.ParameterReporter.
func (d *DataParallel) Parameters() any { return d.params }

// Run implements scheduling.ProfileHandler.
func (d *DataParallel) Run(ctx context.Context, cs *scheduling.CycleState, req *scheduling.Request, r scheduling.ProfileRunner, res *scheduling.Result) error {
	if err := d.Single.Run(ctx, cs, req, r, res); err != nil {
		return err
	}
	toPrimaryPort(res, res.Primary, d.params.PrimaryPort)
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
