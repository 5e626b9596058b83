package datalayer

import (
	"encoding/json"

	"github.com/hermod/hermod/libs/scheduling"
)

// FileDiscoveryType is the llm-d router's file-discovery: the pool's
// endpoints are the ones an endpoints file lists, for pools without
// Kubernetes (bare metal, Slurm, VMs). A config selects it with
// dataLayer.discovery.pluginRef.
const FileDiscoveryType = "file-discovery"

func init() {
	scheduling.Register(scheduling.Registration{Type: FileDiscoveryType, New: newFileDiscovery})
}

// FileDiscoveryParams are file-discovery's parameters, upstream's two.
type FileDiscoveryParams struct {
	// Path is the endpoints file, absolute or relative to the collector's
	// working directory. Required. Upstream's file format (name,
	// namespace, address, port, labels) and Hermod's (the fields of
	// `hermodctl endpoints register`) are both read.
	Path string `json:"path"`
	// WatchFile makes the collector read the file again every
	// --endpoints-file-interval and apply what changed. False (the
	// default, as upstream): the file is read once, when the collector
	// starts following it, and later edits wait for its restart.
	WatchFile bool `json:"watchFile"`
}

// FileDiscovery is the file-discovery plugin. Pickers only check and keep
// it (they do not read the file, which need not exist where they run);
// the collector, which keeps the pool's endpoint registry, follows the
// file it names.
type FileDiscovery struct {
	scheduling.Named
	params FileDiscoveryParams
}

var _ scheduling.EndpointDiscovery = (*FileDiscovery)(nil)

func newFileDiscovery(name string, raw json.RawMessage, h scheduling.Handle) (scheduling.Plugin, error) {
	var p FileDiscoveryParams
	if err := scheduling.DecodeParameters(raw, &p, h); err != nil {
		return nil, err
	}
	return NewFileDiscovery(name, p)
}

// NewFileDiscovery returns a file-discovery named name (its type when
// empty) with parameters p, checked as in a config: the path is required,
// as upstream checks it when the config loads. Whether the file exists and
// is valid is checked where it is read, by the collector.
func NewFileDiscovery(name string, p FileDiscoveryParams) (*FileDiscovery, error) {
	if p.Path == "" {
		return nil, scheduling.ParamErrorf("path", "required: the endpoints file the collector follows")
	}
	if name == "" {
		name = FileDiscoveryType
	}
	return &FileDiscovery{Named: scheduling.Named{Type: FileDiscoveryType, Name: name}, params: p}, nil
}

// EndpointsFile implements scheduling.EndpointDiscovery: the path.
func (d *FileDiscovery) EndpointsFile() string { return d.params.Path }

// WatchFile implements scheduling.EndpointDiscovery.
func (d *FileDiscovery) WatchFile() bool { return d.params.WatchFile }

// Params returns the plugin's parameters.
func (d *FileDiscovery) Params() FileDiscoveryParams { return d.params }

// Parameters implements scheduling.ParameterReporter.
func (d *FileDiscovery) Parameters() any { return d.params }
